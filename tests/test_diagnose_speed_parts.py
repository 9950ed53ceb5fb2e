"""The numpy parts that make the diagnosis fast, checked against the pandas code they
replace (reference implementations written out here: groupby, merge_asof, merge,
drop_duplicates, iloc) on random data with ties and on real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import launchprof
from launchprof.analysis import stepdata
from launchprof.analysis.comparison import side
from launchprof.analysis.comparison.side import KERNEL_KEY, kernel_info
from launchprof.analysis.diagnosis import gapcauses
from launchprof.analysis.stepdata import step_context
from launchprof.analysis.timeline.callkinds import classify
from launchprof.analysis.timeline.durations import launch_durations
from launchprof.analysis.timeline.gaps import call_index, last_call_rows
from launchprof.trace.model import text

HERE = Path(__file__).resolve().parent
GPU = HERE / "data" / "gpu"


def _api(rng: np.random.Generator, n: int, threads: int, sorted_start: bool) -> pd.DataFrame:
    start = rng.integers(0, n // 2, n)  # about two calls a start: many ties
    if sorted_start:
        start = np.sort(start)
    return pd.DataFrame(
        {
            "start": start.astype(np.int64),
            "end": (start + rng.integers(0, 40, n)).astype(np.int64),
            "tid": rng.integers(0, threads, n).astype(np.int64),
        }
    )


def _prev_end_reference(api: pd.DataFrame) -> np.ndarray:
    """The latest end of the calls before each call on its thread, by (tid, start) with
    ties in row order; calls sharing (tid, start) take the first one's value."""
    frame = api.assign(row=np.arange(len(api))).sort_values(["tid", "start"], kind="stable")
    running = frame.groupby("tid")["end"].cummax()
    prev = running.groupby(frame["tid"]).shift(1).astype(float)
    prev = prev.groupby([frame["tid"], frame["start"]]).transform(lambda g: g.iloc[0])  # NaN included
    return prev.to_numpy()[np.argsort(frame["row"].to_numpy())]


# 5 threads in start order: one running maximum per thread; 40: more threads than
# gapcauses.PER_THREAD_MAX, the whole table sorted by thread.
@pytest.mark.parametrize(("threads", "sorted_start"), [(1, True), (1, False), (5, True), (5, False), (40, True)])
def test_previous_end_on_the_thread_matches_groupby(threads: int, sorted_start: bool) -> None:
    rng = np.random.default_rng(threads * 2 + sorted_start)
    api = _api(rng, 3_000, threads, sorted_start)
    expected = _prev_end_reference(api)
    got = gapcauses.prev_end_on_thread(api)
    np.testing.assert_array_equal(got, expected)
    rows = rng.integers(0, len(api), 500)
    np.testing.assert_array_equal(gapcauses.prev_end_at(api, rows), expected[rows])


def test_previous_end_without_ties_and_over_a_huge_range() -> None:
    api = pd.DataFrame({"start": np.arange(0, 50, 5), "end": np.arange(0, 50, 5) + 3, "tid": 1})
    np.testing.assert_array_equal(gapcauses.prev_end_at(api, np.arange(10)), _prev_end_reference(api))
    # Ends spread over 2**62: the lifted single accumulate would overflow; per thread then.
    huge = pd.DataFrame({"start": [0, 1, 2, 3], "end": [0, 2**62, 5, 2**61], "tid": [1, 2, 1, 2]})
    np.testing.assert_array_equal(gapcauses.prev_end_on_thread(huge), [np.nan, np.nan, 0.0, float(2**62)])


def _blocked_reference(sync: pd.DataFrame, pid: np.ndarray, at: np.ndarray) -> np.ndarray:
    m = pd.merge_asof(
        pd.DataFrame({"start": at, "pid": pid}),
        sync.sort_values("start", kind="stable").rename(columns={"start": "s_start", "end": "s_end"}),
        left_on="start",
        right_on="s_start",
        by="pid",
        direction="backward",
    )
    return (m["s_end"] >= m["start"] - gapcauses.SYNC_TOLERANCE_NS).fillna(False).to_numpy(dtype=bool)


@pytest.mark.parametrize(("n_sync", "pids"), [(5, 1), (5, 3), (300, 1), (300, 3)])
def test_sync_blocked_gaps_match_merge_asof(n_sync: int, pids: int) -> None:
    rng = np.random.default_rng(n_sync + pids)
    s_start = rng.integers(0, 100_000, n_sync).astype(np.int64)
    s_start[::7] = s_start[0]  # calls sharing a start: the last in row order counts
    sync = pd.DataFrame(
        {
            "pid": rng.integers(0, pids, n_sync).astype(np.int32),
            "start": s_start,
            "end": (s_start + rng.integers(0, 3_000, n_sync)).astype(np.int64),
        }
    )
    at = np.sort(rng.integers(0, 110_000, 5_000)).astype(np.int64)
    pid = rng.integers(0, pids, at.size).astype(np.int32)
    got = gapcauses.sync_blocked_at(sync["pid"].to_numpy(), sync["start"].to_numpy(), sync["end"].to_numpy(), pid, at)
    expected = _blocked_reference(sync, pid, at)
    assert expected.any() and not expected.all()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("overlap", [False, True])
def test_steady_calls_match_the_step_of_each_call(overlap: bool) -> None:
    rng = np.random.default_rng(7 + overlap)
    n_steps = 200
    cpu_start = np.cumsum(rng.integers(0, 50, n_steps)).astype(np.int64)  # zero-length steps too
    cpu_end = cpu_start + rng.integers(0, 80 if overlap else 1, n_steps)
    if not overlap:  # each step ends where the next begins, or earlier
        cpu_end = np.minimum(np.r_[cpu_start[1:], cpu_start[-1] + 30], cpu_start + rng.integers(0, 60, n_steps))
    table = pd.DataFrame({"step": np.arange(n_steps), "cpu_start": cpu_start, "cpu_end": cpu_end})
    start = np.sort(rng.integers(-20, int(cpu_end.max()) + 20, 20_000)).astype(np.int64)
    api = pd.DataFrame({"start": start, "pid": rng.integers(0, 2, start.size).astype(np.int32)})
    steady = np.arange(3, n_steps - 5, 2)
    got = stepdata.steady_calls(api, table, steady, 1)
    # Reference: the step with the latest start at or before each call, if the call is before its end.
    order = np.argsort(cpu_start, kind="stable")
    i = np.searchsorted(cpu_start[order], start, side="right") - 1
    j = order[np.clip(i, 0, None)]
    step = np.where((i >= 0) & (start < cpu_end[j]), j, -1)
    expected = (api["pid"].to_numpy() == 1) & np.isin(step, steady)
    assert expected.any()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("pids", [[5], [5, 9]])
def test_submitting_calls_match_the_binary_search(pids: list[int]) -> None:
    rng = np.random.default_rng(len(pids))
    n = 4_000
    corr = rng.permutation(np.arange(-3, n - 3))  # ids <= 0 have no call; a few repeat below
    corr[:50] = corr[50:100]
    api = pd.DataFrame({"pid": rng.choice(pids, n).astype(np.int32), "correlation_id": corr.astype(np.int64)})
    index = call_index(api)
    pid = rng.choice(pids, 6_000).astype(np.int32)
    wanted = rng.integers(-5, n + 10, 6_000).astype(np.int64)  # some beyond every call
    expected = last_call_rows(api, pid, wanted, index)
    assert (expected >= 0).any() and (expected < 0).any()
    np.testing.assert_array_equal(stepdata.submitting_calls(api, index, pid, wanted), expected)


def test_member_is_isin_of_step_indices() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(-1, 500, 10_000)
    wanted = rng.choice(500, 120, replace=False)
    np.testing.assert_array_equal(stepdata.step_member(values, wanted), np.isin(values, wanted) & (values >= 0))
    sparse = np.array([-1, 5, 10**12, 7])  # far apart: the sort-based path
    np.testing.assert_array_equal(stepdata.step_member(sparse, np.array([10**12, 7])), [False, False, True, True])
    assert not stepdata.step_member(values, np.array([], dtype=np.int64)).any()


def test_take_is_iloc_with_a_fresh_index() -> None:
    frame = pd.DataFrame(
        {
            "a": np.arange(10, dtype=np.int32),
            "g": pd.array([1, None, 3, 4, None, 6, 7, 8, 9, 10], dtype="Int64"),
            "c": pd.Categorical(list("xyzxyzxyzx")),
        }
    )
    for rows in (np.array([7, 2, 2, 9]), np.arange(3, 8), np.array([], dtype=np.int64)):
        got = stepdata.take_rows(frame, rows, extra={"s": np.arange(rows.size)})
        expected = frame.iloc[rows].reset_index(drop=True).assign(s=np.arange(rows.size))
        pd.testing.assert_frame_equal(got, expected)


def _analysis(real_trace, name: str):  # type: ignore[no-untyped-def]
    return launchprof.analyze(real_trace(name, GPU) if (GPU / f"{name}.sqlite.xz").exists() else real_trace(name))


TRACES = ["torch_mlp_dynamic", "small_kernels_graph", "torch_mlp_item", "two_procs", "mlp_eager"]


@pytest.mark.parametrize("name", TRACES)
def test_step_context_frames_match_the_pandas_ones(real_trace, name: str) -> None:  # type: ignore[no-untyped-def]
    a = _analysis(real_trace, name)
    steps = a.found_steps
    ctx = step_context(a, steps)
    assert ctx.device is not None and len(ctx.kernels)
    act = ctx.device.activity
    step_of = steps.activity_step.to_numpy() if not ctx.pseudo else np.where(act["pid"] == ctx.pid, 0, -1)
    steady = ctx.steady["step"].to_numpy()
    # Kernels: the kernel rows of steady steps matched on their keys, sorted by (step, start).
    keys = ["device_id", "pid", "correlation_id", "stream_id", "start", "end"]
    in_steady = np.isin(step_of, steady) & (text(act["kind"]) == "kernel").to_numpy()
    kact = act.loc[in_steady, keys].assign(step=step_of[in_steady])
    kernels = a.trace.kernels.merge(kact.drop_duplicates(keys), on=keys, how="inner")
    kernels = kernels.sort_values(["step", "start"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(ctx.kernels, kernels)
    # Calls: the process's calls whose CPU step is steady, with their classes and names.
    api = a.trace.api
    table = ctx.table
    order = np.argsort(table["cpu_start"].to_numpy(), kind="stable")
    cpu_start = table["cpu_start"].to_numpy()[order]
    i = np.searchsorted(cpu_start, api["start"].to_numpy(), side="right") - 1
    j = order[np.clip(i, 0, None)]
    inside = (i >= 0) & (api["start"].to_numpy() < table["cpu_end"].to_numpy()[j])
    call_step = np.where(inside, table["step"].to_numpy()[j], -1)
    keep = (api["pid"] == ctx.pid).to_numpy() & np.isin(call_step, steady)
    calls = api.loc[keep].assign(step=call_step[keep])
    calls = pd.concat([calls, classify(calls["call"])], axis=1)
    calls["call"] = text(calls["call"])
    pd.testing.assert_frame_equal(ctx.calls, calls, check_index_type=False)
    for kind in ("sync", "alloc", "launch"):
        pd.testing.assert_frame_equal(ctx.calls_where(kind), calls.loc[calls[kind]], check_index_type=False)
    # Durations: per-launch kernels joined to their launch calls by a merge.
    per_launch = kernels.loc[kernels["graph_node_id"].isna(), ["pid", "correlation_id", "start", "end"]]
    launch = api.loc[classify(api["call"])["launch"], ["pid", "correlation_id", "start", "end"]]
    j2 = per_launch.merge(launch, on=["pid", "correlation_id"], suffixes=("", "_call"))
    durations = pd.DataFrame(
        {
            "kernel_ns": (j2["end"] - j2["start"]).to_numpy(dtype=np.int64),
            "launch_call_ns": (j2["end_call"] - j2["start_call"]).to_numpy(dtype=np.int64),
        }
    )
    pd.testing.assert_frame_equal(launch_durations(ctx, a), durations)


@pytest.mark.parametrize("name", TRACES)
def test_kernels_per_step_match_a_groupby_of_the_names(real_trace, name: str) -> None:  # type: ignore[no-untyped-def]
    a = _analysis(real_trace, name)
    steps = a.found_steps
    device = next(d for d in a.devices if d.device_id == steps.device_id)
    info = kernel_info(a, device)
    steady = steps.steady["step"].to_numpy()
    act_step = steps.activity_step.to_numpy()
    rows = info.loc[np.isin(act_step, steady) & info["name"].notna().to_numpy()]
    dur = (device.activity["end"] - device.activity["start"]).loc[rows.index]
    grouped = rows.assign(dur=dur.to_numpy(dtype=float)).groupby(list(KERNEL_KEY), sort=True)
    expected = pd.DataFrame(
        {
            "per_step": grouped.size() / max(len(steady), 1),
            "gpu_ns_per_step": grouped["dur"].sum() / max(len(steady), 1),
        }
    )
    got = side.step_kernels(a, side.kernel_rows_of(a, device), act_step, steady)
    pd.testing.assert_frame_equal(got, expected.reset_index(), check_dtype=False)
