"""The top kernels and CUDA API calls of the steady steps (summary.json's
``diagnosis.top_kernels`` / ``top_calls``, the page's table): their whole-trace figures
against plain sqlite3 on real traces, their per-step figures against the steady steps."""

from __future__ import annotations

import html
import re
import sqlite3

import pytest
from conftest import DATA

import launchprof
from launchprof.analysis.timeline.toptables import TOP_ROWS


def _sql(path, table: str, key: str) -> dict[str, tuple[int, int]]:
    con = sqlite3.connect(path)
    rows = con.execute(
        f"SELECT s.value, count(*), sum(t.end - t.start) FROM {table} t JOIN StringIds s ON s.id = t.{key} "
        "GROUP BY s.value"
    ).fetchall()
    con.close()
    out: dict[str, tuple[int, int]] = {}
    for name, count, total in rows:
        name = re.sub(r"_v\d+$", "", name) if table.endswith("RUNTIME") else name
        c, t = out.get(name, (0, 0))
        out[name] = (c + int(count), t + int(total))
    return out


@pytest.mark.parametrize(("name", "folder"), [("gpt2_b1_eager", "frameworks"), ("mlp_eager", "traces")])
def test_top_tables_hold_the_traces_figures(real_trace, tmp_path, name: str, folder: str) -> None:
    path = real_trace(name, DATA / folder)
    result = launchprof.analyze(path)
    d = result.summary.diagnosis
    steady = result.summary.steps.steady
    kernels_sql = _sql(path, "CUPTI_ACTIVITY_KIND_KERNEL", "shortName")
    calls_sql = _sql(path, "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId")
    assert 0 < len(d.top_kernels) <= TOP_ROWS and 0 < len(d.top_calls) <= TOP_ROWS
    for row in d.top_kernels:
        assert (row.trace_count, row.trace_time_ns) == kernels_sql[row.name]
        assert row.per_step * steady == pytest.approx(round(row.per_step * steady))  # whole kernels in S steps
        assert row.per_step * steady <= row.trace_count
    for row in d.top_calls:
        assert (row.trace_count, row.trace_time_ns) == calls_sql[row.call]
        assert row.per_step * steady <= row.trace_count
    times = [r.time_per_step_ns for r in d.top_kernels]
    assert times == sorted(times, reverse=True)
    if len(kernels_sql) <= TOP_ROWS:  # every name listed: the shares add up
        assert sum(r.share for r in d.top_kernels) == pytest.approx(1.0)
    from launchprof.report.write import write_report

    write_report(result, tmp_path / "out")
    page = html.unescape((tmp_path / "out" / "report.html").read_text())
    assert "Top kernels and CUDA API calls, per steady step" in page
    assert f"<code>{d.top_kernels[0].name}</code>" in page and f"<code>{d.top_calls[0].call}</code>" in page


def test_call_sums_of_text_are_the_groupby_of_text() -> None:
    """A text ``call`` column (StepContext.calls) is summed by its names' codes; the same
    rows, order and figures as the groupby of its ``astype(str)`` text."""
    import numpy as np
    import pandas as pd

    from launchprof.analysis.timeline.toptables import _call_sums

    rng = np.random.default_rng(3)
    names = np.array(["cudaLaunchKernel", "cudaMemcpyAsync", "B", "a", "nan", "é"], dtype=object)
    calls = pd.Series(names[rng.integers(0, names.size, 5_000)], dtype=object)
    durations = rng.integers(0, 10_000, calls.size).astype(float)
    expected = (
        pd.DataFrame({"key": calls.astype(str).to_numpy(), "ns": durations}).groupby("key")["ns"].agg(["size", "sum"])
    )
    got = _call_sums(calls, durations)
    assert got.index.tolist() == expected.index.tolist()
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())
    assert list(got.dtypes) == list(expected.dtypes)


def test_durations_are_the_int64_differences_as_float() -> None:
    """Times within 2**53 of 0 are subtracted as float; beyond, as int64: the same floats."""
    import numpy as np
    import pandas as pd

    from launchprof.analysis.timeline.toptables import _durations

    rng = np.random.default_rng(5)
    for top in (10**12, 2**53 - 1, 2**62):
        start = rng.integers(-top, top, 2_000, dtype=np.int64)
        end = start // 2 + rng.integers(0, top // 2, start.size, dtype=np.int64)
        frame = pd.DataFrame({"start": start, "end": end})
        np.testing.assert_array_equal(_durations(frame), (end - start).astype(float))
