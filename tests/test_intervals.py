"""Properties of the interval arithmetic (launchprof.analysis.timeline.intervals and timeline).

The reference for the union is a brute-force coverage count on a small integer grid:
cell t (the unit interval [t, t+1)) is busy when some input interval covers it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchprof.analysis import utilization_series
from launchprof.analysis.timeline.gaps import api_end_lookup, timeline_figures
from launchprof.analysis.timeline.intervals import union

GRID = 60
# No per-example deadline: shared CI machines are slow at times; the properties are what count.
no_deadline = settings(deadline=None)


@st.composite
def intervals(draw, min_len: int = 0, max_size: int = 25) -> tuple[list[int], list[int]]:
    """Intervals [start, end) on a small integer grid, ``end - start >= min_len``."""
    pairs = draw(
        st.lists(
            st.tuples(st.integers(0, GRID - 1), st.integers(min_len, 15)),
            min_size=0,
            max_size=max_size,
        )
    )
    return [s for s, _ in pairs], [s + n for s, n in pairs]


def _coverage(starts: list[int], ends: list[int]) -> np.ndarray:
    """Number of intervals covering each unit cell of the grid."""
    count = np.zeros(GRID + 16, dtype=int)
    for s, e in zip(starts, ends, strict=True):
        count[s:e] += 1
    return count


def _runs(covered: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of covered cells as [start, end) pairs."""
    runs: list[tuple[int, int]] = []
    for t in np.flatnonzero(covered):
        if runs and runs[-1][1] == t:
            runs[-1] = (runs[-1][0], int(t) + 1)
        else:
            runs.append((int(t), int(t) + 1))
    return runs


@no_deadline
@given(intervals())
def test_union_is_idempotent(iv) -> None:
    u = union(*iv)
    again = union(u.starts, u.ends)
    assert again.starts.tolist() == u.starts.tolist()
    assert again.ends.tolist() == u.ends.tolist()


@no_deadline
@given(intervals())
def test_union_is_sorted_and_disjoint(iv) -> None:
    u = union(*iv)
    assert (u.ends >= u.starts).all()
    # Strictly apart: touching intervals are merged, so a gap is never 0 ns long.
    assert (u.starts[1:] > u.ends[:-1]).all()


@no_deadline
@given(intervals())
def test_busy_at_most_sum_of_lengths_and_span(iv) -> None:
    starts, ends = iv
    u = union(starts, ends)
    assert u.busy_ns <= sum(e - s for s, e in zip(starts, ends, strict=True))
    if starts:
        assert u.busy_ns <= max(ends) - min(starts)
        assert (u.starts[0], u.ends[-1]) == (min(starts), max(ends))
    else:
        assert u.busy_ns == 0 and u.starts.size == 0


@no_deadline
@given(intervals())
def test_busy_equals_brute_force_coverage(iv) -> None:
    """Zero-length intervals allowed: they cover no cell and add no busy time."""
    assert union(*iv).busy_ns == int((_coverage(*iv) > 0).sum())


@no_deadline
@given(intervals(min_len=1))
def test_union_equals_brute_force_runs(iv) -> None:
    u = union(*iv)
    assert list(zip(u.starts.tolist(), u.ends.tolist(), strict=True)) == _runs(_coverage(*iv) > 0)


@no_deadline
@given(intervals(min_len=1))
def test_first_row_opens_each_busy_interval(iv) -> None:
    starts, _ = iv
    u = union(*iv)
    opener_starts = np.asarray(starts, dtype=np.int64)[u.order[u.first_row]] if starts else u.starts
    assert opener_starts.tolist() == u.starts.tolist()


@no_deadline
@given(intervals())
def test_union_does_not_modify_its_input(iv) -> None:
    starts = np.asarray(iv[0], dtype=np.int64)
    ends = np.asarray(iv[1], dtype=np.int64)
    before = (starts.copy(), ends.copy())
    union(starts, ends)
    assert (starts == before[0]).all() and (ends == before[1]).all()


@st.composite
def activity(draw) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Random GPU activity of 1..30 rows over two processes, each row with a submitting
    API call (correlation ids restart per process), and a bubble threshold."""
    n = draw(st.integers(1, 30))
    start = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n))
    length = draw(st.lists(st.integers(0, 2_000), min_size=n, max_size=n))
    pid = draw(st.lists(st.sampled_from([10, 20]), min_size=n, max_size=n))
    call_end = draw(st.lists(st.integers(-1_000, 12_000), min_size=n, max_size=n))
    kind = draw(st.lists(st.sampled_from(["kernel", "memcpy", "memset", "graph"]), min_size=n, max_size=n))
    corr = pd.Series(pid).groupby(pid).cumcount() + 1
    act = pd.DataFrame(
        {
            "start": start,
            "end": [s + d for s, d in zip(start, length, strict=True)],
            "pid": pid,
            "correlation_id": corr,
            "kind": pd.Categorical(kind),
        }
    )
    api = pd.DataFrame({"pid": pid, "correlation_id": corr, "start": [e - 1 for e in call_end], "end": call_end})
    return act, api, draw(st.integers(0, 3_000))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(activity())
def test_timeline_figures_invariants(data) -> None:
    act, api, threshold = data
    before = act.copy()
    f = timeline_figures(act, api_end_lookup(api), threshold)
    pd.testing.assert_frame_equal(act, before)
    assert f.busy_ns + f.idle_ns == f.span_ns
    assert 0.0 <= f.utilization <= 1.0
    assert 0.0 <= f.cpu_bound_ratio <= 1.0
    assert 0 <= f.host_wait_ns <= f.idle_ns
    assert 0 <= f.bubbles.total_ns <= f.idle_ns
    assert f.gaps["gap_ns"].sum() == f.idle_ns
    assert f.bubbles.count == int((f.gaps["gap_ns"] >= threshold).sum())
    assert sum(c for _, _, c in f.bubbles.histogram) == f.bubbles.count
    assert f.kernels + f.memops + int((act["kind"] == "graph").sum()) == len(act)
    assert f.span_ns == act["end"].max() - act["start"].min()


@pytest.mark.slow
@no_deadline
@given(activity(), st.integers(1, 50))
def test_utilization_series_is_a_ratio_and_adds_up_to_busy(data, bins) -> None:
    act, api, _ = data
    series = utilization_series(act, bins=bins)
    f = timeline_figures(act, api_end_lookup(api), 0)
    if f.span_ns == 0:
        return
    assert len(series) == bins
    assert series["utilization"].between(0.0, 1.0).all()
    widths = series["end_ns"] - series["start_ns"]
    assert abs(float((series["utilization"] * widths).sum()) - f.busy_ns) <= 1e-6 * max(f.span_ns, 1)
