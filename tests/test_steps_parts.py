"""The numpy parts of the step finder, checked against plain references: ``merge_asof``
and ``merge`` (what they replace), and a per-step loop written out in Python for the
busy/bubble/host-wait figures. The shared array kernels are tests/test_arrays.py's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracebuilder import TraceBuilder

from launchprof.analysis import analyze_trace
from launchprof.analysis.steps.link import activity_from_api, call_rows, link_calls
from launchprof.analysis.steps.nvtx import outermost, project
from launchprof.analysis.steps.table import inner_figures
from launchprof.analysis.timeline.gaps import call_index, last_call_rows
from launchprof.trace import load_trace

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_call_rows_by_table_are_last_call_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    pids = rng.choice([[7], [7, 9], list(range(12))][seed % 3], n)  # 12 processes: the binary search
    top = [n + 5, 10**9][int(rng.random() < 0.2)]  # sometimes sparse ids: the binary search
    api = pd.DataFrame({"pid": pids, "correlation_id": rng.integers(-1, top, n)})  # repeats, ids <= 0
    index = call_index(api)
    m = int(rng.integers(1, 300))
    corr = rng.integers(-2, n + 8, m)
    if seed % 5 == 0:
        corr[0] = 2**32 + 3  # does not fit 32 bits: the binary search (which masks it)
    for pid in (rng.choice(np.unique(pids), m), np.full(m, pids[0]), rng.choice([7, 8, 9], m)):
        assert np.array_equal(call_rows(api, pid, corr, index), last_call_rows(api, pid, corr, index))


def _ranges(rng: np.random.Generator, n: int) -> pd.DataFrame:
    start = rng.integers(0, 1000, n)
    return pd.DataFrame(
        {"start": start, "end": start + rng.integers(0, 80, n), "tid": rng.choice([1, 2, 3], n), "pid": 7}
    )


def _outermost_pandas(ranges: pd.DataFrame) -> pd.DataFrame:
    """Ranges not contained in an earlier one of their thread (overlapping start/end ranges
    are kept); the longer first of ranges sharing a start."""
    r = ranges.sort_values(["tid", "start", "end"], ascending=[True, True, False], kind="stable")
    prev_end = r.groupby("tid")["end"].cummax().groupby(r["tid"]).shift(1)
    return r.loc[~(prev_end >= r["end"])].sort_values("start", kind="stable")


def _project_merge_asof(api: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    left = pd.DataFrame({"start": api["start"], "tid": api["tid"], "row": np.arange(len(api))})
    left = left.sort_values("start", kind="stable")
    right = pd.DataFrame(
        {"r_start": ranges["start"], "r_end": ranges["end"], "tid": ranges["tid"], "idx": np.arange(len(ranges))}
    ).sort_values("r_start", kind="stable")
    m = pd.merge_asof(left, right, left_on="start", right_on="r_start", by="tid", direction="backward")
    inside = m["idx"].notna() & (m["start"] < m["r_end"])
    out = np.full(len(api), -1, dtype=np.int64)
    out[m.loc[inside, "row"].to_numpy()] = m.loc[inside, "idx"].to_numpy(dtype=np.int64)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_outermost_and_projection_match_the_pandas_formulation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ranges = _ranges(rng, int(rng.integers(1, 40)))
    outer = outermost(ranges)
    ref = _outermost_pandas(ranges)
    pd.testing.assert_frame_equal(outer, ref)
    n = int(rng.integers(0, 300))
    # Calls in time order (as the trace holds them), then shuffled: both ways of searching.
    api = pd.DataFrame({"start": np.sort(rng.integers(0, 1100, n)), "tid": rng.choice([1, 2, 4], n)})
    for calls in (api, api.sample(frac=1.0, random_state=seed).reset_index(drop=True)):
        assert np.array_equal(project(calls, outer), _project_merge_asof(calls, outer))
    # One thread only, every call on it.
    one = outer.loc[outer["tid"] == 1]
    calls = api.assign(tid=1)
    assert np.array_equal(project(calls, one), _project_merge_asof(calls, one))


@pytest.mark.parametrize("threads", [3, 16, 17, 40])
def test_projection_over_many_threads(threads: int) -> None:
    """Ranges on up to 16 threads: each thread's calls found by a pass over the calls;
    more: by a sort of the calls by thread. The same result either way."""
    rng = np.random.default_rng(threads)
    start = rng.integers(0, 5000, 400)
    ranges = pd.DataFrame(
        {"start": start, "end": start + rng.integers(0, 300, 400), "tid": rng.integers(0, threads, 400)}
    )
    outer = outermost(ranges)
    api = pd.DataFrame({"start": np.sort(rng.integers(0, 5400, 3000)), "tid": rng.integers(0, threads + 2, 3000)})
    assert np.array_equal(project(api, outer), _project_merge_asof(api, outer))


def _inner_by_hand(step, start, end, submit_end, threshold, n_steps):  # type: ignore[no-untyped-def]
    """Per step, in plain Python: union of the intervals, gaps between its busy intervals,
    bubbles (>= threshold), host-wait (the call submitting the row after the gap ended
    after the gap began); first row by (start, row order)."""
    out = {k: [0] * n_steps for k in ("busy", "bubbles", "bubble_ns", "wait")}
    first, gpu_start, gpu_end = {}, {}, {}
    for s in range(n_steps):
        rows = [i for i in range(len(step)) if step[i] == s]
        if not rows:
            continue
        first[s] = min(rows, key=lambda i: (start[i], i))
        gpu_start[s], gpu_end[s] = min(start[i] for i in rows), max(end[i] for i in rows)
        segs = []  # [start, end, row that opens it]
        for i in sorted(rows, key=lambda i: (start[i], end[i], i)):
            if segs and start[i] <= segs[-1][1]:
                segs[-1][1] = max(segs[-1][1], end[i])
            else:
                segs.append([start[i], end[i], i])
        out["busy"][s] = sum(e - b for b, e, _ in segs)
        for (_, e0, _), (b1, _, i1) in zip(segs, segs[1:], strict=False):
            gap = b1 - e0
            if gap >= threshold:
                out["bubbles"][s] += 1
                out["bubble_ns"][s] += gap
            if not np.isnan(submit_end[i1]) and submit_end[i1] > e0:
                out["wait"][s] += gap
    return out, first, gpu_start, gpu_end


@pytest.mark.parametrize("seed", SEEDS)
def test_inner_figures_match_a_per_step_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_steps = int(rng.integers(0, 60)), int(rng.integers(1, 8))
    start = np.sort(rng.integers(0, 400, n))  # activity arrives by start; steps may interleave
    end = start + rng.integers(0, 30, n)
    step = np.sort(rng.integers(0, n_steps, n)) if seed % 2 else rng.integers(0, n_steps, n)
    call_end = rng.integers(0, 450, 20)
    call_row = rng.integers(-1, 20, n)
    threshold = int(rng.choice([0, 5, 1000]))
    got = inner_figures(step, start, end, call_row, call_end, threshold, n_steps)
    submit_end = np.where(call_row >= 0, call_end[np.maximum(call_row, 0)], np.nan)
    ref, first, gpu_start, gpu_end = _inner_by_hand(step, start, end, submit_end, threshold, n_steps)
    assert got.busy_ns.tolist() == ref["busy"]
    assert got.bubbles.tolist() == ref["bubbles"]
    assert got.bubble_ns.tolist() == ref["bubble_ns"]
    assert got.wait_ns.tolist() == ref["wait"]
    assert dict(zip(got.first_steps.tolist(), got.first_rows.tolist(), strict=True)) == first
    present = sorted(gpu_start)
    assert got.gpu_start.dtype == (np.int64 if len(present) == n_steps else np.float64)
    assert [got.gpu_start[s] for s in present] == [gpu_start[s] for s in present]
    assert [got.gpu_end[s] for s in present] == [gpu_end[s] for s in present]
    assert np.isnan(np.asarray(got.gpu_start, dtype=float)[[s for s in range(n_steps) if s not in gpu_start]]).all()


def test_activity_steps_with_repeated_correlation_ids_match_a_pandas_merge(tmp_path: Path) -> None:
    b = TraceBuilder()
    # Two launch calls share correlation id 1 (the later one wins); kernel 3 has no call.
    for i, corr in enumerate([1, 1, 2, 4, 5]):
        b.call("cudaLaunchKernel_v7000", 1000 + 100 * i, 1050 + 100 * i, corr=corr)
    for i, corr in enumerate([1, 2, 3, 4, 5]):
        b.kernel(2000 + 100 * i, 2050 + 100 * i, corr)
    trace = load_trace(b.write(tmp_path / "t.sqlite"))
    analysis = analyze_trace(trace)
    act = analysis.devices[0].activity
    link = link_calls(analysis, act)
    assert not link.unique
    for api_step in (np.array([0, 1, 2, 3, -1]), np.array([5, -1, 7, 8, 9]), np.full(5, -1)):
        keyed = pd.DataFrame({"pid": trace.api["pid"], "correlation_id": trace.api["correlation_id"], "step": api_step})
        keyed = keyed.loc[keyed["step"] >= 0].drop_duplicates(["pid", "correlation_id"], keep="last")
        ref = act[["pid", "correlation_id"]].merge(keyed, on=["pid", "correlation_id"], how="left")
        expected = ref["step"].fillna(-1).to_numpy(dtype=np.int64)
        assert np.array_equal(activity_from_api(link, act, trace.api, api_step), expected)
    # By hand for the first: kernel corr 1 <- the second call (step 1), 2 <- 2, 3 <- none, 4 <- 3, 5 <- none.
    assert activity_from_api(link, act, trace.api, np.array([0, 1, 2, 3, -1])).tolist() == [1, 2, -1, 3, -1]
