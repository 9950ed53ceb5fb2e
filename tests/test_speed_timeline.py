"""The shortcuts that make loading and the timeline analysis fast, each checked against
the plain computation it replaces (a pandas groupby, merge or sort; a binary search; the
loader's np.unique coding): the same rows, in the same order, with the same values."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracebuilder import TraceBuilder

from launchprof.analysis.timeline.core import row_groups
from launchprof.analysis.timeline.gaps import NO_CALL, corr_key, key_order, lookup_end
from launchprof.analysis.timeline.launches import shorter_ratio_arrays
from launchprof.trace import Trace, load_trace
from launchprof.trace.activity import call_names

no_deadline = settings(deadline=None, max_examples=150)


@no_deadline
@given(st.lists(st.tuples(st.sampled_from([0, 5, 77, 2**20]), st.sampled_from([-1, 0, 7, 13, 14, 70_000, 2**31 - 1]))))
def test_row_groups_are_a_sorted_groupby(rows: list[tuple[int, int]]) -> None:
    pid = np.array([p for p, _ in rows], dtype=np.int32)
    stream = np.array([s for _, s in rows], dtype=np.int32)
    frame = pd.DataFrame({"pid": pid, "stream_id": stream})
    for keys, cols in ((["pid"], [pid]), (["pid", "stream_id"], [pid, stream])):
        expected = frame.groupby(keys, sort=True).indices
        got = row_groups(cols)
        assert [k for k, _ in got] == [tuple(int(v) for v in (k if isinstance(k, tuple) else (k,))) for k in expected]
        for (_, rows_got), rows_expected in zip(got, expected.values(), strict=True):
            whole = np.arange(len(frame))
            assert (whole if rows_got is None else rows_got).tolist() == rows_expected.tolist()
            assert rows_got is not None or len(rows_expected) == len(frame)


@no_deadline
@given(
    st.lists(st.integers(1, 3000), unique=True, max_size=60),
    st.lists(st.integers(-5, 3100), max_size=60),
    st.sampled_from([0, 1, 2**23]),
)
def test_lookup_end_table_matches_a_dict_lookup(corrs: list[int], wanted: list[int], pid: int) -> None:
    # Dense keys of one process (the table path) and, with a second process, sparse ones.
    for pids in ([pid] * len(corrs), [pid if i % 2 else pid + 1 for i in range(len(corrs))]):
        keys = corr_key(np.array(pids, dtype=np.int64), np.array(corrs, dtype=np.int64))
        ends = np.arange(len(corrs), dtype=np.int64) * 1000 + 10**12
        order = np.argsort(keys)
        api_end = pd.Series(ends[order], index=pd.Index(keys[order], dtype="int64"))
        asked = wanted + corrs[::2]  # some keys that are there, some that are not
        queries = corr_key(np.full(len(asked), pid, np.int64), np.array(asked, dtype=np.int64))
        reference = dict(zip(keys.tolist(), ends.tolist(), strict=True))
        expected = [reference[q] if q in reference else NO_CALL for q in queries.tolist()]
        got = lookup_end(api_end, queries)
        assert got.dtype == np.int64  # exact at any clock value
        np.testing.assert_array_equal(got, np.array(expected, dtype=np.int64))


def _reference_activity(trace) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    cols = ["start", "end", "device_id", "stream_id", "pid", "correlation_id"]
    parts = [trace.kernels[cols].assign(kind="kernel")]
    if len(trace.memops):
        parts.append(trace.memops[cols].assign(kind=trace.memops["kind"].astype(str)))
    if len(trace.graph_execs):
        parts.append(trace.graph_execs[cols].assign(kind="graph"))
    both = pd.concat(parts, ignore_index=True)
    return both.sort_values(["start", "end"], kind="stable").reset_index(drop=True)


@no_deadline
@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 30)), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 30), st.booleans()), max_size=6),
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 30)), max_size=3),
    st.booleans(),
)
@pytest.mark.slow
def test_gpu_activity_is_the_sorted_concatenation(tmp_path_factory, kernels, memops, graphs, sort_kernels) -> None:  # type: ignore[no-untyped-def]
    # Memory operations before, among and after the kernels, equal starts across kinds,
    # kernels in or out of order.
    if sort_kernels:
        kernels = sorted(kernels)
    b = TraceBuilder()
    for i, (start, length) in enumerate(kernels):
        b.kernel(1000 + start, 1000 + start + length, corr=i + 1, stream=7 + i % 2)
    for j, (start, length, is_set) in enumerate(sorted(memops)):
        (b.memset if is_set else b.memcpy)(1000 + start * 3 - 600, 1000 + start * 3 - 600 + length, corr=100 + j)
    for k, (start, length) in enumerate(sorted(graphs)):
        b.graph_exec(1000 + start + 500, 1000 + start + 500 + length, corr=200 + k)
    trace = load_trace(b.write(tmp_path_factory.mktemp("t") / "t.sqlite"))
    got = trace.gpu_activity()
    expected = _reference_activity(trace)
    assert list(got["kind"].cat.categories) == sorted(set(expected["kind"]))
    pd.testing.assert_frame_equal(
        got.assign(kind=got["kind"].astype(str)), expected, check_dtype=False, check_index_type=False
    )


@pytest.mark.parametrize(
    "memsets",
    [
        [(100, 105)],  # before the kernels
        [(100, 105), (1000, 1001)],  # one before, one starting with the first kernel, ending first
        [(1000, 1020)],  # starting with the first kernel, ending after it
        [(5000, 5001)],  # after the kernels
        [(1003, 1004)],  # among them
        [(1010, 1015)],  # starting with the last kernel, ending first
        [(990, 1000)],  # ending as the first kernel starts
    ],
)
def test_gpu_activity_ties_between_kinds(tmp_path: Path, memsets: list[tuple[int, int]]) -> None:
    b = TraceBuilder()
    for i, start in enumerate([1000, 1002, 1010]):
        b.kernel(start, start + 10, corr=i + 1)
    for j, (start, end) in enumerate(memsets):
        b.memset(start, end, corr=100 + j)
    trace = load_trace(b.write(tmp_path / "t.sqlite"))
    got = trace.gpu_activity()
    pd.testing.assert_frame_equal(
        got.assign(kind=got["kind"].astype(str)), _reference_activity(trace), check_dtype=False
    )


def test_call_names_coded_by_table_as_by_unique() -> None:
    strings = pd.Series(
        ["cudaLaunchKernel_v7000", "cudaMemsetAsync_v3020", "cuLaunchKernel", "cudaLaunchKernel_v7000"],
        index=np.array([3, 4, 9, 70_000], dtype=np.int64),
        dtype=object,
    )
    rng = np.random.default_rng(7)
    for ids in (
        rng.choice([3, 4, 9, 70_000], 500),  # spread ids: np.unique
        rng.choice([3, 4, 9, 11], 500),  # small ids, one unknown: the table
        np.array([4], dtype=np.int64),
        np.array([], dtype=np.int64),
    ):
        ids = ids.astype(np.int64)
        got = call_names(ids, strings)
        # The loader's earlier coding: np.unique of the ids, then of their names.
        uniq, inverse = np.unique(ids, return_inverse=True)
        names = [
            str(strings.get(int(i))).rsplit("_v", 1)[0] if int(i) in strings.index else f"<unknown #{int(i)}>"
            for i in uniq
        ]
        cats, name_code = np.unique(np.asarray(names, dtype=object), return_inverse=True)
        assert list(got.categories) == list(cats)
        assert got.codes.tolist() == (name_code[inverse] if len(uniq) else np.empty(0, np.int64)).tolist()


@no_deadline
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 12), st.integers(0, 50), st.integers(0, 50)), max_size=12),
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 12), st.integers(0, 50)), max_size=12),
    st.booleans(),
)
@pytest.mark.slow
def test_shorter_ratio_matches_an_inner_merge(calls, kernels, same) -> None:  # type: ignore[no-untyped-def]
    if same:  # one kernel per call, in call order: the position shortcut
        calls = sorted({(p, c): (p, c, s, d) for p, c, s, d in calls}.values())
        kernels = [(p, c, max(d + c % 3 - 1, 0)) for p, c, _, d in calls]  # shorter, as long, longer
    launches = pd.DataFrame(
        {
            "pid": np.array([c[0] for c in calls], np.int32),
            "correlation_id": np.array([c[1] for c in calls], np.int64),
            "start": np.array([c[2] for c in calls], np.int64),
            "end": np.array([c[2] + c[3] for c in calls], np.int64),
        }
    )
    per_launch = pd.DataFrame(
        {
            "pid": np.array([k[0] for k in kernels], np.int32),
            "correlation_id": np.array([k[1] for k in kernels], np.int64),
            "start": np.zeros(len(kernels), np.int64),
            "end": np.array([k[2] for k in kernels], np.int64),
        }
    )
    joined = per_launch.merge(launches, on=["pid", "correlation_id"], suffixes=("", "_call"))
    expected = (
        None
        if not len(joined)
        else float(((joined["end"] - joined["start"]) < (joined["end_call"] - joined["start_call"])).mean())
    )
    got = shorter_ratio_arrays(
        *(launches[c].to_numpy() for c in launches), *(per_launch[c].to_numpy() for c in per_launch)
    )
    assert got == expected


def test_nvtx_text_ids_resolve_through_string_ids(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 10, 20, 30)
    b.range("inline", 0, 100)
    b.range("x", 5, 50)
    b.range("y", 6, 60)
    path = b.write(tmp_path / "t.sqlite")
    import sqlite3

    con = sqlite3.connect(path)
    sid = con.execute("SELECT max(id) FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds VALUES (?, ?)", (sid + 1, "registered"))
    con.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = ? WHERE start = 5", (sid + 1,))
    con.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = ? WHERE start = 6", (sid + 99,))
    con.commit()
    con.close()
    nvtx = load_trace(path).nvtx
    assert nvtx.sort_values("start")["text"].tolist() == ["inline", "registered", f"<unknown #{sid + 99}>"]


def test_row_groups_with_more_key_combinations_than_a_table_holds() -> None:
    rng = np.random.default_rng(3)
    pid = rng.integers(0, 2**24, 3000).astype(np.int64)  # ~3000 distinct: coded by np.unique
    stream = rng.integers(0, 2**20, 3000).astype(np.int64)
    frame = pd.DataFrame({"pid": pid, "stream_id": stream})
    expected = frame.groupby(["pid", "stream_id"], sort=True).indices
    got = row_groups([pid, stream])
    assert [k for k, _ in got] == [tuple(int(v) for v in k) for k in expected]
    assert all(r.tolist() == e.tolist() for (_, r), e in zip(got, expected.values(), strict=True))


def test_nvtx_rows_read_ahead_are_the_rows_read_now(tmp_path: Path) -> None:
    from launchprof.trace import columns, loader, readahead

    b = TraceBuilder()
    b.launch(0, 10, 20, 30)
    for i in range(20):
        b.range(f"step {i}" if i % 3 else "", 100 * i, 100 * i + 90, domain="d" if i % 2 else None)
    path = b.write(tmp_path / "t.sqlite")
    con = sqlite3.connect(columns.ro_uri(path), uri=True)
    con.text_factory = columns.decode_text
    taken: list[bool] = []

    def read_ahead(sql: str) -> list[tuple[Any, ...]] | None:
        rows = readahead.take_prefetched_rows(path, sql)  # waits for the prefetch's thread
        taken.append(rows is not None)
        return rows

    def load(nvtx_read_ahead: Callable[[str], list[tuple[Any, ...]] | None] | None) -> Trace:
        reader = columns.Reader(path, con, lambda _msg: None)
        try:
            return loader.load_tables(path, con, reader, lambda _msg: None, nvtx_read_ahead)
        finally:
            reader.close()

    try:
        now = load(None)  # nothing read ahead: read here
        readahead.prefetch(path)
        ahead = load(read_ahead)
        assert taken == [True]  # the rows came from the prefetch's thread
        sql = columns.nvtx_select(now.schema.tables)
        assert sql is not None and readahead.take_prefetched_rows(path, sql) is None  # the loader took them
    finally:
        readahead.forget_prefetch(path)
        con.close()
    pd.testing.assert_frame_equal(ahead.nvtx, now.nvtx)
    assert (ahead.nvtx_domain_events, len(now.nvtx)) == (now.nvtx_domain_events, 20)
    assert set(now.nvtx["domain"]) == {"", "d"}


@no_deadline
@given(
    st.lists(st.tuples(st.sampled_from([0, 3, 4, 9, 2**23]), st.integers(-2, 40)), max_size=40),
    st.booleans(),
)
def test_key_order_is_a_stable_argsort(pairs: list[tuple[int, int]], per_process_increasing: bool) -> None:
    if per_process_increasing:  # each process's ids counting up, processes interleaved: the shortcut
        seen: dict[int, int] = {}
        pairs = [(p, seen.setdefault(p, 0) + i) for i, (p, _) in enumerate(pairs)]
    keys = corr_key(np.array([p for p, _ in pairs], np.int64), np.array([c for _, c in pairs], np.int64))
    assert key_order(keys).tolist() == np.argsort(keys, kind="stable").tolist()


def _fields(f) -> tuple:  # type: ignore[no-untyped-def]
    return (f.kernels, f.memops, f.start_ns, f.end_ns, f.busy_ns, f.idle_ns, f.utilization, f.bubbles,
            f.host_wait_ns, f.cpu_bound_ratio)  # fmt: skip


@settings(deadline=None, max_examples=60)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30), st.integers(0, 40), st.booleans()), max_size=14),
    st.integers(0, 3),
)
@pytest.mark.slow
def test_stream_and_process_figures_as_computed_alone(tmp_path_factory, rows, first_on_other) -> None:  # type: ignore[no-untyped-def]
    # Streams and processes whose rows are a run of the device's (the first rows on
    # another stream, say) or interleaved with other streams' rows, touching or not.
    b = TraceBuilder()
    t = 0
    for i, (gap, length, call_len, other) in enumerate(rows):
        t += gap
        stream = 8 if (i < first_on_other or other) else 7
        b.launch(t - call_len, t - call_len + 5, t, t + length, stream=stream, pid=100 if i % 5 else 200)
    if not rows:
        return
    path = b.write(tmp_path_factory.mktemp("t") / "t.sqlite")
    import launchprof
    from launchprof.analysis.timeline.gaps import api_end_keyed, timeline_figures

    a = launchprof.analyze(path)
    (device,) = a.devices
    api_end = api_end_keyed(a.trace.api)
    act = device.activity
    for s in device.streams:
        alone = act.loc[((act["pid"] == s.pid) & (act["stream_id"] == s.stream_id)).to_numpy()]
        expected = timeline_figures(alone.reset_index(drop=True), api_end, a.bubble_threshold_ns)
        assert _fields(s.figures) == _fields(expected)
        pd.testing.assert_frame_equal(s.figures.gaps, expected.gaps)
    for p in device.processes:
        alone = act.loc[(act["pid"] == p.pid).to_numpy()]
        expected = timeline_figures(alone.reset_index(drop=True), api_end, a.bubble_threshold_ns)
        assert _fields(p.figures) == _fields(expected)
        pd.testing.assert_frame_equal(p.figures.gaps, expected.gaps)


def test_one_devices_activity_is_its_rows_of_the_whole(tmp_path: Path) -> None:
    """``gpu_activity(device)`` (made without the whole frame, as the timeline analysis
    does for each device of a several-GPU trace) holds the rows, order, dtypes and ``kind``
    categories of selecting that device from the whole frame; device 1 has no memset, yet
    its categories are the trace's."""
    b = TraceBuilder()
    rng = np.random.default_rng(3)
    for i, start in enumerate(rng.integers(0, 5000, 300).tolist()):
        b.kernel(1000 + start, 1000 + start + 7, corr=i + 1, device=i % 2, stream=7 + i % 3)
    for j, start in enumerate(rng.integers(0, 5000, 40).tolist()):
        b.memset(1000 + start, 1000 + start + 3, corr=1000 + j, device=0)
        b.memcpy(1000 + start, 1000 + start + 5, corr=2000 + j, device=j % 2)
    trace = load_trace(b.write(tmp_path / "t.sqlite"))
    whole = trace.gpu_activity()
    for device in (0, 1):
        got = trace.gpu_activity(device)
        expected = whole.loc[whole["device_id"].to_numpy() == device].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected)
    assert set(trace.gpu_activity(1)["kind"].astype(str)) == {"kernel", "memcpy"}
    assert list(trace.gpu_activity(1)["kind"].cat.categories) == ["kernel", "memcpy", "memset"]
