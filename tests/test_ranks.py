"""Ranks and the cross-rank view: hand-counted tiny traces with NCCL kernels, and the real
two-process H200 trace checked against plain sqlite3."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA
from tracebuilder import TraceBuilder

import launchprof
from launchprof.analysis.ranks import (
    STRAGGLER_FACTOR,
    busy_by_group,
    comm_kernel_ids,
    cross_rank,
    find_ranks,
    rank_view,
)
from launchprof.analysis.steps import find_steps
from launchprof.report.write import write_report

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
PERIOD = 10_000


def _rank(b: TraceBuilder, pid: int, device: int, compute: dict[int, int], overlap_step: int | None = None) -> None:
    """Five steps of PERIOD ns: a compute kernel from t+1000 (length compute.get(k, 2000))
    then an NCCL kernel on stream 8 until the step's collective ends (t+4000, or t+8000 in
    step 2, when the slowest rank arrives). Launch calls [t, t+500] and [t+600, t+900]."""
    for k in range(5):
        t = k * PERIOD
        b.range("step", t, t + 9000, pid=pid, domain="launchprof")
        c_end = t + 1000 + compute.get(k, 2000)
        b.launch(t, t + 500, t + 1000, c_end, pid=pid, device=device, name="compute")
        coll_end = t + (8000 if k == 2 else 4000)
        b.launch(t + 600, t + 900, c_end, coll_end, pid=pid, device=device, stream=8, name=NCCL)
        if k == overlap_step:
            # a kernel on a third stream overlapping the first 500 ns of the collective
            b.launch(t + 950, t + 990, c_end, c_end + 500, pid=pid, device=device, stream=9, name="side")


def _three_ranks(tmp_path: Path) -> Path:
    b = TraceBuilder()
    b.gpus = [(0, "GPU A"), (1, "GPU B"), (2, "GPU C")]
    _rank(b, 100, 0, {}, overlap_step=3)
    _rank(b, 200, 1, {2: 6000})  # rank 1 computes 6000 ns in step 2: the others wait in NCCL
    _rank(b, 300, 2, {})
    return b.write(tmp_path / "three.sqlite")


@pytest.mark.parametrize(
    "name, comm",
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", True),  # NCCL >= 2.19
        ("ncclKernel_AllReduce_RING_LL_Sum_float", True),  # NCCL < 2.19
        ("ncclDevKernel_Generic", True),
        ("ncclDevKernel_SendRecv", True),
        ("void at::native::vectorized_elementwise_kernel", False),
        ("my_nccl_like_kernel", False),
        ("NCCLish", False),
    ],
)
def test_comm_kernels_are_named_nccl(tmp_path: Path, name: str, comm: bool) -> None:
    b = TraceBuilder()
    b.launch(0, 100, 200, 300, name=name)
    b.launch(400, 500, 600, 700, name="other")
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    ids = comm_kernel_ids(a)
    assert [a.trace.string(int(i)) for i in ids] == ([name] if comm else [])


def test_exposed_communication_and_straggler_by_hand(tmp_path: Path) -> None:
    a = launchprof.analyze(_three_ranks(tmp_path))
    ranks = find_ranks(a)
    assert [(r.device_id, r.pid) for r in ranks] == [(0, 100), (1, 200), (2, 300)]
    r0, r1, r2 = ranks
    # rank 0: collectives 4 x 1000 + 5000 (step 2) = 9000 ns; 500 of them overlap the side kernel
    assert r0.figures["comm_kernels"] == 5
    assert r0.figures["comm_busy_ns"] == 9000
    assert r0.figures["comm_exposed_ns"] == 8500
    assert r0.figures["span_ns"] == 43_000  # 1000 .. 44000
    assert r0.figures["comm_ratio"] == 9000 / 43_000
    assert r1.figures["comm_busy_ns"] == 5000 and r1.figures["comm_exposed_ns"] == 5000
    # per step: period 10000 everywhere; work = period - exposed communication
    assert list(r0.per_step["work_ns"].iloc[:4]) == [9000, 9000, 5000, 9500]
    assert list(r1.per_step["work_ns"].iloc[:4]) == [9000, 9000, 9000, 9000]
    assert list(r2.per_step["work_ns"].iloc[:4]) == [9000, 9000, 5000, 9000]
    assert np.isnan(r0.per_step["work_ns"].iloc[4])  # last step: no period
    view = cross_rank(ranks)
    assert list(view.per_step["step"]) == [0, 1, 2, 3]
    assert list(view.per_step["median_work_ns"]) == [9000, 9000, 5000, 9000]
    # step 2: rank 1 works 9000 vs median 5000 (1.8x > 1.25x); ties go to the lowest rank
    assert list(view.per_step["slowest_rank"]) == [0, 0, 1, 0]
    assert view.stragglers[["step", "rank"]].values.tolist() == [[2, 1]]
    assert view.stragglers["ratio"].iloc[0] == 9000 / 5000
    assert list(view.rows["straggler_steps"]) == [0, 1, 0]
    assert list(view.rows["slowest_steps"]) == [3, 1, 0]


def test_launch_bound_rank_from_steady_host_wait(tmp_path: Path) -> None:
    view = cross_rank(find_ranks(launchprof.analyze(_three_ranks(tmp_path))))
    # rank 1 (pid 200): the GPU waits for the next step's launch after each steady step:
    # 7000 + 7000 + 3000 + 7000 ns over the four periods of 10000 ns that span those gaps
    # (its step 2 ends at 28000, step 3 starts at 31000; the gap before step 0,
    # none, was counted and the one after step 3 was not: 17000).
    assert view.rows.loc[1, "steady_host_wait_ratio"] == 24_000 / 40_000
    assert bool(view.rows.loc[1, "launch_bound"])
    # rank 0 waits the same 7000 + 7000 + 3000 + 7000 ns (its collective of step 2 also ends at 28000)
    assert view.rows.loc[0, "steady_host_wait_ratio"] == 24_000 / 40_000
    assert view.most_launch_bound == 0  # equal ratios: the lowest rank


def test_single_rank_trace_has_no_ranks_section(tmp_path: Path, real_trace) -> None:
    a = launchprof.analyze(real_trace("mlp_eager"))
    assert rank_view(a) is None and a.ranks is None
    summary = json.loads(write_report(a, tmp_path / "r").to_json())
    assert "ranks" not in summary


def test_nccl_kernels_make_a_ranks_section_even_for_one_rank(tmp_path: Path) -> None:
    b = TraceBuilder()
    _rank(b, 100, 0, {})
    a = launchprof.analyze(b.write(tmp_path / "one.sqlite"))
    assert a.ranks.to_dict()["count"] == 1
    assert a.ranks.to_dict()["aligned_steps"] == 0  # nothing to compare against


@pytest.fixture(scope="module")
def two_procs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import lzma
    import shutil

    target = tmp_path_factory.mktemp("two") / "two_procs.sqlite"
    with lzma.open(DATA / "gpu" / "two_procs.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def sql_step_starts(path: Path) -> dict[int, list[int]]:
    """Per pid, the first kernel start of each NVTX step range (plain sqlite3): a kernel
    belongs to the range on its launch call's thread that contains the call's start."""
    con = sqlite3.connect(path)
    rows = con.execute(
        """
        SELECT (n.globalTid >> 24) & 16777215 AS pid, n.start AS r, MIN(k.start)
        FROM NVTX_EVENTS n
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME c
          ON c.globalTid = n.globalTid AND c.start >= n.start AND c.start < n.end
        JOIN CUPTI_ACTIVITY_KIND_KERNEL k
          ON k.correlationId = c.correlationId
         AND ((k.globalPid >> 24) & 16777215) = ((c.globalTid >> 24) & 16777215)
        WHERE n.eventType = 59
        GROUP BY pid, r ORDER BY pid, r
        """
    ).fetchall()
    con.close()
    out: dict[int, list[int]] = {}
    for pid, _, first in rows:
        out.setdefault(int(pid), []).append(int(first))
    return out


def test_two_procs_ranks_match_sqlite(two_procs: Path) -> None:
    a = launchprof.analyze(two_procs)
    view = a.ranks
    starts = sql_step_starts(two_procs)
    assert sorted(starts) == [2482, 2483]
    assert [(r.device_id, r.pid) for r in view.ranks] == [(0, 2482), (0, 2483)]
    periods = {}
    for r in view.ranks:
        assert r.steps == 100 and r.step_source == "nvtx"
        assert r.figures["kernels"] == 1605 and r.figures["comm_kernels"] == 0
        expected = np.diff(starts[r.pid])
        assert len(expected) == 99
        np.testing.assert_array_equal(r.per_step["period_ns"].to_numpy()[:99], expected)
        np.testing.assert_array_equal(r.per_step["work_ns"].to_numpy()[:99], expected)  # no NCCL
        periods[r.pid] = expected
    # Stragglers, independently: period > 1.25 x the median of the two (their mean).
    steps = view.per_step["step"].to_numpy()
    warm = max(r.warmup for r in view.ranks)
    assert list(steps) == list(range(warm, 99))
    p0, p1 = periods[2482][steps], periods[2483][steps]
    median = (p0 + p1) / 2
    expect = sorted(
        [(int(s), 0) for s in steps[p0 > STRAGGLER_FACTOR * median]]
        + [(int(s), 1) for s in steps[p1 > STRAGGLER_FACTOR * median]]
    )
    got = sorted(map(tuple, view.stragglers[["step", "rank"]].values.tolist()))
    assert got == expect and len(expect) > 0
    np.testing.assert_array_equal(view.per_step["slowest_rank"].to_numpy(), np.where(p1 > p0, 1, 0))


def test_find_steps_of_one_process(two_procs: Path) -> None:
    a = launchprof.analyze(two_procs)
    con = sqlite3.connect(two_procs)
    for pid in (2482, 2483):
        s = find_steps(a, pid=pid)
        assert s.pid == pid and s.device_id == 0 and s.count == 100
        # 16 kernels a step (MANIFEST.md: 16 tiny ops a step)
        assert set(s.table["kernels"]) == {16}
        first = con.execute(
            "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE ((globalPid >> 24) & 16777215) = ? "
            "AND correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME c JOIN NVTX_EVENTS n "
            "ON c.globalTid = n.globalTid AND c.start >= n.start AND c.start < n.end WHERE n.eventType = 59 "
            "AND ((c.globalTid >> 24) & 16777215) = ?)",
            (pid, pid),
        ).fetchone()[0]
        assert s.table["gpu_start"].iloc[0] == first
    con.close()


def test_two_procs_report_shows_ranks(two_procs: Path, tmp_path: Path) -> None:
    a = launchprof.analyze(two_procs)
    summary = write_report(a, tmp_path / "r", trace_path="two_procs.sqlite")
    doc = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert doc["ranks"]["count"] == 2
    assert [r["pid"] for r in doc["ranks"]["ranks"]] == [2482, 2483]
    assert doc["ranks"]["straggler_count"] == sum(r["straggler_steps"] for r in doc["ranks"]["ranks"])
    assert summary.ranks is not None
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<h2>Ranks</h2>" in page and "GPU 0 pid 2483" in page


def _busy_by_group_reference(start: np.ndarray, end: np.ndarray, group: np.ndarray) -> pd.Series:
    """The pandas formulation busy_by_group replaced: sort, grouped cummax and shift, sums."""
    f = pd.DataFrame({"g": group, "s": start, "e": end}).sort_values(["g", "s", "e"], kind="stable")
    run_end = f.groupby("g")["e"].cummax()
    prev = run_end.groupby(f["g"]).shift(1)
    seg = (prev.isna() | (f["s"] > prev)).cumsum()
    per_seg = pd.DataFrame({"g": f["g"], "s": f["s"], "e": run_end, "seg": seg}).groupby("seg")
    lengths = per_seg["e"].max() - per_seg["s"].min()
    return lengths.groupby(per_seg["g"].first()).sum().astype("int64")


@pytest.mark.parametrize("seed", range(6))
def test_busy_by_group_is_the_pandas_sweep(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3_000))
    start = rng.integers(0, 5_000, n).astype(np.int64)  # overlapping, nested and touching intervals
    end = start + rng.integers(0, 60 if seed % 2 else 3, n)
    group = rng.integers(0, 1 + seed * 7, n).astype(np.int64)
    got = busy_by_group(start, end, group)
    expected = _busy_by_group_reference(start, end, group)
    assert got.index.tolist() == expected.index.tolist()
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy())
    assert got.dtype == expected.dtype == np.int64
