"""Steps: NVTX projection, range choice, graph-launch and inferred steps, warm-up.

Built traces are counted by hand; real-trace figures come from sqlite3 queries written
here (independent of launchprof) or from the construction facts in the traces' READMEs.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from steploop import launch_loop
from tracebuilder import TraceBuilder

import launchprof
from launchprof.analysis.steps import StepError, step_stats


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Predictions here use the documented defaults, whatever the machine's cache holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _analyze(b: TraceBuilder, tmp_path: Path, **kw):  # type: ignore[no-untyped-def]
    return launchprof.analyze(b.write(tmp_path / "t.sqlite"), **kw)


def test_nvtx_steps_project_kernels_through_their_launch_call(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=6, kernels=4)
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "nvtx" and s.name == "launchprof:step"
    assert s.count == 6
    assert s.table["kernels"].tolist() == [4] * 6
    # period: 4 calls of 5 us + 0.5 + 1 + 0.1 + 0.1 us = 21.7 us per step, by construction.
    assert s.table["period_ns"].dropna().tolist() == [21_700] * 5
    assert s.table["launch_calls"].tolist() == [4] * 6


def test_ranges_on_another_thread_are_not_projected(tmp_path: Path) -> None:
    b = TraceBuilder()
    # The ranges are recorded on thread 999; the launches on the main thread (tid = pid).
    launch_loop(b, steps=6, kernels=4, range_tid=999)
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "inferred"  # fell through: the ranges hold no GPU work
    assert "hold no GPU work" in s.reason
    with pytest.raises(StepError, match="hold no GPU work"):
        launchprof.analyze(tmp_path / "t.sqlite", step="step")


def test_nested_ranges_of_the_same_text_use_the_outer_range(tmp_path: Path) -> None:
    b = TraceBuilder()
    end = launch_loop(b, steps=4, kernels=4, name="step", domain=None)
    # An inner "step" range inside step 1 that ends before its last launches.
    b.range("step", 1_000_000 + 21_700 + 10, 1_000_000 + 21_700 + 6_000)
    s = _analyze(b, tmp_path).found_steps
    assert end > 0 and s.count == 4
    assert s.table["kernels"].tolist() == [4, 4, 4, 4]


def test_step_name_picks_ranges_and_unknown_name_is_an_error(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=5, kernels=3, name="iter", domain=None)
    a = _analyze(b, tmp_path, step="iter")
    assert a.found_steps.source == "nvtx" and a.found_steps.count == 5
    with pytest.raises(StepError, match="no NVTX range named 'nope'"):
        launchprof.analyze(tmp_path / "t.sqlite", step="nope")


def test_auto_pick_prefers_the_repeating_range_around_the_work(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = launch_loop(b, steps=6, kernels=3, name="train_step", domain=None)
    # An "epoch" range x3 covering the same work, and a "log" range x5 covering none.
    third = (t - 1_000_000) // 3
    for i in range(3):
        b.range("epoch", 1_000_000 + i * third, 1_000_000 + (i + 1) * third)
    for i in range(5):
        b.range("log", t + i * 1000, t + i * 1000 + 500)
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "nvtx" and s.name == "train_step" and s.count == 6


def test_graph_launches_are_steps_without_nvtx(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(5):
        corr = b.call("cudaGraphLaunch_v10000", t, t + 3_000)
        for n in range(3):
            b.kernel(t + 4_000 + n * 1_100, t + 5_000 + n * 1_100, corr, graph_node=n + 1)
        t += 10_000
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "graph-launch" and s.count == 5
    assert s.table["kernels"].tolist() == [3] * 5
    assert s.table["graph_launches"].tolist() == [1] * 5
    assert s.table["period_ns"].dropna().tolist() == [10_000] * 4


def test_inferred_steps_from_the_repeating_sequence(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(20):
        for name in ("a", "b", "c", "d"):
            b.launch(t, t + 5_000, t + 5_500, t + 6_000, name=name)
            t += 5_000
        t += 20_000  # a longer pause between repetitions sets the phase
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "inferred" and "inferred" in s.reason
    assert s.table["kernels"].tolist()[:-1] == [4] * 19
    assert int(s.table["period_ns"].dropna().median()) == 40_000


def test_inferred_steps_of_a_decode_whose_launch_configurations_grow(tmp_path: Path) -> None:
    """A decode step of 10 kernels whose attention and cache copy grow their grid with the
    sequence (2 of 10 change every step: no period at 90 % on name and configuration):
    the names repeat, and the steps are cut by them (a plain GPT-2 generate() trace had
    'no steps found')."""
    b = TraceBuilder()
    t = 1_000_000
    for token in range(40):
        for k in range(10):
            grid = 8 + token if k in (3, 7) else 4
            b.launch(t, t + 5_000, t + 5_500, t + 6_000, name=f"k{k}", grid=(grid, 1, 1))
            t += 5_000
        t += 20_000
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "inferred" and "kernel names" in s.reason and s.count == 40
    assert s.table["kernels"].tolist()[:-1] == [10] * 39


def test_slow_first_step_is_warmup(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=12, kernels=4, first_extra_ns=5_000_000)
    s = _analyze(b, tmp_path).found_steps
    assert s.warmup == 1
    assert s.table["warmup"].tolist() == [True] + [False] * 11
    assert 0 not in s.steady["step"].tolist()
    stats = step_stats(s)
    assert stats["period_p50_ns"] == 21_700 and stats["warmup"] == 1


# Real traces ---------------------------------------------------------------------------


def _sql(path: Path, query: str) -> list[tuple]:  # type: ignore[type-arg]
    with sqlite3.connect(path) as con:
        return con.execute(query).fetchall()


def test_mlp_eager_has_300_nvtx_steps_of_36_kernels(real_trace) -> None:  # type: ignore[no-untyped-def]
    path = real_trace("mlp_eager")
    s = launchprof.analyze(path).found_steps
    n_ranges = _sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE text = 'step' AND eventType = 59")[0][0]
    assert s.source == "nvtx" and s.count == n_ranges == 300
    stats = step_stats(s)
    assert stats["kernels_per_step_p50"] == 36  # by construction (tests/data/traces/README.md)
    # Step period: first kernel start per range, from SQL (kernel -> its launch call -> the range).
    rows = _sql(
        path,
        """SELECT r.start, min(k.start) FROM NVTX_EVENTS r
           JOIN CUPTI_ACTIVITY_KIND_RUNTIME c ON c.globalTid = r.globalTid AND c.start >= r.start AND c.start < r.end
           JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = c.correlationId
           WHERE r.text = 'step' GROUP BY r.start ORDER BY r.start""",
    )
    first = np.array([r[1] for r in rows], dtype=np.int64)
    periods = np.diff(first)[s.warmup :]
    assert stats["period_p50_ns"] == pytest.approx(float(np.median(periods)), rel=1e-9)
    assert 0.75e6 < stats["period_p50_ns"] < 0.83e6  # tests/data/traces/README.md: 788 us


def test_mlp_graph_steps_are_one_replay_of_about_103_us(real_trace) -> None:  # type: ignore[no-untyped-def]
    stats = step_stats(launchprof.analyze(real_trace("mlp_graph")).found_steps)
    assert stats["count"] == 300 and stats["graph_launches_p50"] == 1 and stats["kernels_per_step_p50"] == 36
    assert stats["period_p50_ns"] == pytest.approx(103_000, rel=0.02)


@pytest.mark.slow
def test_demo_a_steps_are_inferred(real_trace) -> None:  # type: ignore[no-untyped-def]
    path = real_trace("demo_A_4096")
    s = launchprof.analyze(path).found_steps
    assert s.source == "inferred"
    # The demo repeats (scale, addc, relu) 25 times a step with nothing marking the step:
    # the shortest repeat, 3 kernels, is what the kernel sequence shows.
    kernels = _sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert step_stats(s)["kernels_per_step_p50"] == 3
    assert s.table["kernels"].sum() == kernels == 150_000


@pytest.mark.slow
def test_demo_b_has_2000_graph_launch_steps_of_75_kernels(real_trace) -> None:  # type: ignore[no-untyped-def]
    path = real_trace("demo_B_4096")
    s = launchprof.analyze(path).found_steps
    launches = _sql(
        path,
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaGraphLaunch%'",
    )[0][0]
    assert s.source == "graph-launch" and s.count == launches == 2000
    assert set(s.table["kernels"]) == {75}


def test_cli_step_option_names_a_missing_range_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from launchprof.cli import app

    b = TraceBuilder()
    launch_loop(b, steps=5, kernels=3)
    trace = b.write(tmp_path / "t.sqlite")
    bad = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(tmp_path / "r1"), "--step", "nope"])
    assert bad.exit_code != 0 and "launchprof: error: no NVTX range named 'nope'" in bad.output
    assert "Traceback" not in bad.output
    good = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(tmp_path / "r2"), "--step", "step"])
    assert good.exit_code == 0, good.output
    summary = json.loads((tmp_path / "r2" / "summary.json").read_text())
    assert summary["steps"]["source"] == "nvtx" and summary["steps"]["count"] == 5


def test_step_name_is_checked_on_a_trace_without_gpu_work(tmp_path: Path) -> None:
    """A CPU-only trace (NVTX ranges, no CUDA activity): --step NAME must still exist."""
    b = TraceBuilder()
    for i in range(3):
        b.range("step", 1_000 + i * 10_000, 9_000 + i * 10_000)
    b.write(tmp_path / "t.sqlite")
    with pytest.raises(StepError, match=r"no NVTX range named 'stepp' in this trace \(ranges: 'step'\)"):
        launchprof.analyze(tmp_path / "t.sqlite", step="stepp")
    a = launchprof.analyze(tmp_path / "t.sqlite", step="step")
    assert a.devices == [] and a.found_steps.source == "none"


def _decode_like(b: TraceBuilder, tokens: int = 24, calls: int = 4) -> int:
    """``calls`` generate() calls of ``tokens`` tokens, 3 kernels a token (a, b, c), each
    call starting with one CUB scan inside a ``CCCL`` range, as HF generate() records."""
    t = 1_000_000
    for _ in range(calls):
        b.range("cub::DeviceScan::InclusiveScan", t, t + 4_000, domain="CCCL")
        b.launch(t + 1_000, t + 3_000, t + 3_500, t + 4_500, name="scan")
        t += 10_000
        for _ in range(tokens):
            for name in ("a", "b", "c"):
                b.launch(t, t + 5_000, t + 5_500, t + 6_000, name=name)
                t += 5_000
            t += 30_000  # the decode loop's own Python between tokens
        t += 200_000
    return t


def test_library_range_is_never_the_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    _decode_like(b)
    s = _analyze(b, tmp_path).found_steps
    # One step per token: 3 kernels, period 3 x 5 us + 30 us = 45 us by construction.
    assert s.source == "inferred"
    assert int(s.table["period_ns"].dropna().median()) == 45_000
    assert s.table["kernels"].median() == 3
    assert s.rejected == (("CCCL:cub::DeviceScan::InclusiveScan", "a library's own range, not a loop step"),)
    assert "not taken as the step: 'CCCL:cub::DeviceScan::InclusiveScan'" in s.reason
    assert step_stats(s)["rejected_ranges"] == [
        {"range": "CCCL:cub::DeviceScan::InclusiveScan", "reason": "a library's own range, not a loop step"}
    ]


def test_range_holding_little_of_the_work_is_not_the_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(10):  # a "logits" range around 1 of 4 kernels of each iteration
        for k, name in enumerate(("a", "b", "c", "d")):
            if k == 3:
                b.range("logits", t, t + 5_500)
            b.launch(t, t + 5_000, t + 5_500, t + 6_000, name=name)
            t += 5_000
        t += 20_000
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "inferred" and s.table["kernels"].median() == 4
    assert s.rejected[0][0] == "logits"
    # 10 of the 40 kernels submitted between the first and last "logits" range start... the
    # window is from the first range's start to the last range's end: kernels 4..40 -> 10 of 37.
    assert s.rejected[0][1].startswith("holds 27% of the GPU work")


def test_per_operator_ranges_of_emit_nvtx_are_rejected(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for i in range(8):
        for name in ("a", "b"):
            b.range(f"aten::linear, seq = {i}", t, t + 5_200)
            b.launch(t, t + 5_000, t + 5_500, t + 6_000, name=name)
            t += 5_000
        t += 10_000
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "inferred" and s.table["kernels"].median() == 2
    # eight texts of one operator ("aten::linear, seq = 0".."7"): one entry, with their count
    assert s.rejected == (("aten::linear (8 range texts)", "a library's own range, not a loop step"),)


def test_rejected_ranges_are_listed_up_to_fifty(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(8):
        for name in ("a", "b"):
            b.launch(t, t + 5_000, t + 5_500, t + 6_000, name=name)
            t += 5_000
        t += 10_000
    for i in range(70):  # 70 different ranges of one call each: none repeats
        b.range(f"phase {i:02d}", 500_000 + i * 1_000, 500_000 + i * 1_000 + 500)
    s = _analyze(b, tmp_path).found_steps
    assert len(s.rejected) == 50
    assert [label for label, _ in s.rejected[:2]] == ["phase 00", "phase 01"]
    assert s.rejected[-1] == ("... and 21 more", "not listed")


def test_a_users_step_range_beside_library_ranges_wins(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=6, kernels=4, name="step", domain=None)
    b.range("nccl:all_reduce", 1_000_000, 1_010_000, domain="NCCL")
    s = _analyze(b, tmp_path).found_steps
    assert s.source == "nvtx" and s.name == "step" and s.count == 6
    assert s.rejected == (("NCCL:nccl:all_reduce", "a library's own range, not a loop step"),)


def test_a_step_name_names_the_same_ranges_for_the_gpu_and_the_host_steps() -> None:
    """One reading of ``--step NAME`` (steps.nvtx.named_ranges: the text, else
    ``domain:text``), for the GPU step finder (check_step_name) and the host steps of a
    trace without GPU work (nvtx_steps.nvtx_steps)."""
    from types import SimpleNamespace

    import pandas as pd

    from launchprof.analysis.nvtx_steps import nvtx_steps
    from launchprof.analysis.steps.nvtx import check_step_name

    nvtx = pd.DataFrame(
        {
            "start": [0, 10, 20, 30, 5, 15, 25],
            "end": [9, 19, 29, 39, 6, 16, 26],
            "pid": [1] * 7,
            "tid": [1, 1, 1, 1, 2, 2, 2],
            "text": ["iter"] * 4 + ["load"] * 3,
            "domain": ["app"] * 4 + ["data"] * 3,
        }
    )
    analysis = SimpleNamespace(trace=SimpleNamespace(nvtx=nvtx))
    for name, starts in (("iter", [0, 10, 20, 30]), ("data:load", [5, 15, 25])):
        gpu = check_step_name(analysis, name)  # type: ignore[arg-type]
        host = nvtx_steps(nvtx, name)
        assert host is not None and host.name == name
        assert sorted(gpu["start"]) == host.table["start"].tolist() == starts
    assert nvtx_steps(nvtx, "app:load") is None
    with pytest.raises(StepError, match="no NVTX range named 'app:load'"):
        check_step_name(analysis, "app:load")  # type: ignore[arg-type]
