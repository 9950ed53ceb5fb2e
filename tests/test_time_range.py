"""``launchprof analyze TRACE --time-range START:END``: only the rows starting in a window of
the trace's clock are read and analysed.

Ground truth from outside the loader: the report of a window is held against the report
of a copy of the trace from which plain sqlite3 deleted every row of the activity, CUDA
API and NVTX range tables that starts outside it (the NVTX domain-create events are
kept: they name the ranges of their domain wherever those lie), and row counts against
sqlite3 queries.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import DATA, TRACES
from test_per_process import _without_source
from typer.testing import CliRunner

from launchprof.cli import app
from launchprof.text import window_text
from launchprof.trace.columns import Rows, window_ns
from launchprof.trace.loader import load_trace

runner = CliRunner()
# The tables cut by the window, named here as nsys's schema names them (not from launchprof).
CUT = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
)
CASES = [(TRACES, "mlp_eager"), (DATA / "gpu", "two_procs"), (DATA / "gpu", "small_kernels_graph"),
         (DATA / "gpu", "torch_mlp_graph")]  # fmt: skip


def _window_us(path: Path) -> tuple[int, int]:
    """The middle half of the trace's NVTX ranges' span, in whole microseconds."""
    con = sqlite3.connect(path)
    lo, hi = con.execute("SELECT min(start), max(start) FROM NVTX_EVENTS WHERE eventType IN (59, 60)").fetchone()
    con.close()
    return (lo + (hi - lo) // 4) // 1000, (lo + 3 * (hi - lo) // 4) // 1000


def _cut(src: Path, begin_ns: int, end_ns: int, target: Path) -> Path:
    """A copy of ``src`` holding only the rows that start in [begin_ns, end_ns)."""
    shutil.copyfile(src, target)
    con = sqlite3.connect(target)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    outside = "(start < ? OR start >= ?)"
    for table in (t for t in CUT if t in tables):
        con.execute(f"DELETE FROM {table} WHERE {outside}", (begin_ns, end_ns))
    con.execute(f"DELETE FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND {outside}", (begin_ns, end_ns))
    con.commit()
    con.close()
    return target


def _ranges_across(path: Path, at_ns: int) -> int:
    """NVTX ranges that began before ``at_ns`` and end after it (sqlite3)."""
    con = sqlite3.connect(path)
    sql = "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND start < ? AND end > ?"
    n = int(con.execute(sql, (at_ns, at_ns)).fetchone()[0])
    con.close()
    return n


def _seconds(us: int) -> str:
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


@pytest.mark.parametrize(("where", "name"), CASES, ids=[c[1] for c in CASES])
def test_a_window_report_is_the_report_of_that_window_alone(real_trace, tmp_path: Path, where: Path, name: str) -> None:
    whole = real_trace(name, where)
    begin_us, end_us = _window_us(whole)
    out = tmp_path / "win"
    result = runner.invoke(
        app, ["analyze", str(whole), "--time-range", f"{_seconds(begin_us)}:{_seconds(end_us)}", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    alone = _cut(whole, begin_us * 1000, end_us * 1000, tmp_path / "alone.sqlite")
    ref = tmp_path / "ref"
    assert runner.invoke(app, ["analyze", str(alone), "-o", str(ref)]).exit_code == 0
    mine = json.loads((out / "summary.json").read_text())
    theirs = json.loads((ref / "summary.json").read_text())
    begin, end = (_seconds(t).rstrip("0").rstrip(".") for t in (begin_us, end_us))
    note = f"only the rows starting in {begin}-{end} s of the trace's clock were read (--time-range)"
    cut = _ranges_across(whole, begin_us * 1000)
    cut_note = [f"{cut} NVTX range(s) began before the time range and end in or after its start: left out"] * (cut > 0)
    window_notes = [n for n in mine["notes"] if "--time-range" in n]
    assert [n.split(", as a step")[0] for n in window_notes[:-1]] == cut_note
    assert window_notes[-1] == note
    assert not mine["nvtx_ranges_lost"]
    mine["notes"] = [n for n in mine["notes"] if "--time-range" not in n]
    assert mine["trace"]["time_range_ns"] == [begin_us * 1000, end_us * 1000]
    assert "time_range_ns" not in theirs["trace"]  # a whole trace's summary as before
    assert _without_source(mine) == _without_source(theirs)
    assert mine["steps"]["count"] > 0
    page = (out / "report.html").read_text()
    assert f"GPU time, time range {begin}-{end} s" in page and "whole trace (incl. start-up)" not in page
    assert f"(only the rows starting in its\ntime range {begin}-{end} s)" in page
    assert f"time range {begin}-{end} s: " in result.output and "whole trace" not in result.output
    for name_ in ("steps.csv", "step_kernels.csv", "step_timeline.csv"):
        assert (out / name_).read_bytes() == (ref / name_).read_bytes(), name_


def test_a_window_load_holds_the_rows_starting_in_it_and_the_domain_names(real_trace) -> None:
    whole = real_trace("two_procs", DATA / "gpu")
    begin_us, end_us = _window_us(whole)
    lo, hi = begin_us * 1000, end_us * 1000
    trace = load_trace(whole, rows=Rows(window=(lo, hi)))
    con = sqlite3.connect(whole)

    def count(sql: str) -> int:
        return int(con.execute(sql, (lo, hi)).fetchone()[0])

    inside = "start >= ? AND start < ?"
    assert len(trace.kernels) == count(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE {inside}") > 0
    assert len(trace.api) == count(f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE {inside}") > 0
    assert len(trace.nvtx) == count(f"SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND {inside}") > 0
    # the domain was created before the window: its name still labels the ranges
    assert con.execute("SELECT max(start) FROM NVTX_EVENTS WHERE eventType = 75").fetchone()[0] < lo
    con.close()
    assert set(trace.nvtx["domain"]) == {"launchprof"}
    assert trace.kernels["start"].between(lo, hi - 1).all() and trace.api["start"].between(lo, hi - 1).all()


def test_seconds_are_read_to_the_nanosecond() -> None:
    assert window_ns((5.8, 6.000000001)) == (5_800_000_000, 6_000_000_001)
    assert window_ns((0, 86_400.123456789)) == (0, 86_400_123_456_789)
    for empty in ((1e-10, 2e-10), (1e300, 1e301), (0, 1e10)):  # no ns between, or past int64 ns
        with pytest.raises(ValueError):
            window_ns(empty)


BAD = ["6:5", "5:5", "abc", "5", "-1:2", "nan:3", "5:inf", ":", "1:2:3", "", "1e300:1e301", "1e-10:2e-10"]


@pytest.mark.parametrize("bad", BAD)
def test_a_bad_time_range_is_one_line(real_trace, tmp_path: Path, bad: str) -> None:
    result = runner.invoke(
        app, ["analyze", str(real_trace("mlp_eager")), f"--time-range={bad}", "-o", str(tmp_path / "x")]
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "launchprof: error: --time-range takes START:END in seconds of the trace's clock, 0 <= START < END "
        f"(e.g. 5:6.5), not {bad!r}"
    ]
    assert not (tmp_path / "x").exists()


def test_per_process_in_a_window_reads_the_processes_working_in_it(real_trace, tmp_path: Path) -> None:
    whole = real_trace("two_procs", DATA / "gpu")
    begin_us, end_us = _window_us(whole)
    window = f"{_seconds(begin_us)}:{_seconds(end_us)}"
    out = tmp_path / "pp"
    result = runner.invoke(app, ["analyze", str(whole), "--per-process", "--time-range", window, "-o", str(out)])
    assert result.exit_code == 0, result.output
    for folder in ("pid2482", "pid2483"):
        notes = json.loads((out / folder / "summary.json").read_text())["notes"]
        assert any("--per-process" in n for n in notes) and any("--time-range" in n for n in notes)
    empty = runner.invoke(app, ["analyze", str(whole), "--per-process", "--time-range", "0:1", "-o", str(out / "e")])
    assert empty.exit_code == 2
    assert "no process with GPU work (no kernel, memcpy or memset rows starting in 0-1 s (--time-range))" in (
        empty.output
    )


def test_a_window_inside_one_step_says_its_step_was_cut_not_that_nsys_lost_the_ranges(real_trace, tmp_path) -> None:
    whole = real_trace("torch_mlp_graph", DATA / "gpu")  # its NVTX domain is created before the steps
    con = sqlite3.connect(whole)
    start, end = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE eventType = 59 LIMIT 1 OFFSET 50").fetchone()
    con.close()
    begin_us, end_us = (start + 1000) // 1000, (end - 1000) // 1000  # inside step 50 (~45 us)
    out = tmp_path / "in"
    result = runner.invoke(
        app, ["analyze", str(whole), "--time-range", f"{_seconds(begin_us)}:{_seconds(end_us)}", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["nvtx_ranges_lost"]
    assert any(n.startswith("1 NVTX range(s) began before the time range") for n in summary["notes"])


def test_the_default_folder_names_the_window_and_an_empty_window_says_so(real_trace, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    trace = real_trace("mlp_eager")
    assert runner.invoke(app, ["analyze", str(trace), "-q"]).exit_code == 0
    whole = (tmp_path / "reports" / "mlp_eager" / "summary.json").read_bytes()
    assert runner.invoke(app, ["analyze", str(trace), "-q", "--time-range", "5.9:6.05"]).exit_code == 0
    assert (tmp_path / "reports" / "mlp_eager-5.9-6.05s" / "summary.json").is_file()
    assert (tmp_path / "reports" / "mlp_eager" / "summary.json").read_bytes() == whole  # not replaced
    empty = runner.invoke(app, ["analyze", str(trace), "--time-range", "100:200"])
    assert empty.exit_code == 2
    assert empty.output.strip().splitlines()[-1] == (
        "launchprof: error: no CUDA activity in this trace (no kernel, memcpy or memset rows starting in 100-200 s "
        "(--time-range)); wrote what it holds to reports/mlp_eager-100-200s"
    )
    # Where the GPU work is instead: the first and last start of its kernels (sqlite3, the trace's own rows).
    con = sqlite3.connect(trace)
    first, last = con.execute("SELECT min(start), max(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        if con.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]:
            lo, hi = con.execute(f"SELECT min(start), max(start) FROM {table}").fetchone()
            if lo is not None:
                first, last = min(first, lo), max(last, hi)
    con.close()
    where = f"the trace's starts in {window_text((first, last + 1))} s of its clock"
    assert "no GPU work in the time range 100-200 s (see the notes)" in empty.output
    assert where in empty.output
    assert where in json.loads((tmp_path / "reports" / "mlp_eager-100-200s" / "summary.json").read_text())["notes"][-1]
    page = (tmp_path / "reports" / "mlp_eager-100-200s" / "report.html").read_text()
    assert "The time range 100-200 s holds no kernel, copy or memset" in page and "mark the loop" not in page


def test_a_window_in_a_gap_names_the_gpu_work_around_it(real_trace) -> None:
    """A window between two starts of GPU work: the last start before it and the first
    after it, as sqlite3 finds them; of one process, that process's (and for a process
    without GPU work, that it has none)."""
    from launchprof.text import seconds_text
    from launchprof.trace.columns import Rows
    from launchprof.trace.loader import gpu_work_outside

    trace = real_trace("mlp_eager")
    con = sqlite3.connect(trace)
    tables = [
        t
        for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
    ]
    starts = " UNION ALL ".join(f"SELECT start FROM {t}" for t in tables)
    before, after = con.execute(  # the longest gap between two starts of GPU work
        f"SELECT s, n FROM (SELECT start AS s, lead(start) OVER (ORDER BY start) AS n FROM ({starts})) "
        "WHERE n IS NOT NULL ORDER BY n - s DESC LIMIT 1"
    ).fetchone()
    pid = con.execute("SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    con.close()
    window = (before + 1, after)
    note = gpu_work_outside(trace, Rows(window=window))
    assert note.startswith("no GPU work starts in the time range; the trace's starts in "), note
    assert note.endswith(
        f"the last before it at {seconds_text(before)} s and the first after it at {seconds_text(after)} s"
    )
    mine = gpu_work_outside(trace, Rows(pid=pid, window=window))
    assert mine.startswith(f"no GPU work starts in the time range; process {pid & 0xFFFFFF}'s starts in "), mine
    assert gpu_work_outside(trace, Rows(pid=pid + 1, window=window)) == (
        f"process {(pid + 1) & 0xFFFFFF} holds no GPU work at all (no kernel, memcpy, memset or graph launch)"
    )
