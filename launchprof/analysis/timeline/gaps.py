"""Timeline figures: span, busy, idle, bubbles and host-wait idle (docs/metrics.md).

Definitions (all ns, on one device, over the activity rows given):

- span = last activity end - first activity start;
- busy = length of the union of activity intervals; idle = span - busy;
  utilization = busy / span (0 when span is 0);
- a gap is an idle interval between two busy intervals; a bubble is a gap of at least
  ``bubble_threshold_ns`` (default 1 us: shorter gaps are the sub-us dispatch gaps that
  remain between graph nodes, docs/metrics.md, "Bubble");
- a gap is host-wait when the activity that ends it was submitted by an API call
  (joined on (pid, correlation id)) that ended after the gap began: the GPU had nothing
  queued and waited for the CPU. host_wait = sum of those gaps (any length);
  cpu_bound_ratio = host_wait / span.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import kind_in
from launchprof.analysis.timeline.intervals import sorted_union, union
from launchprof.defaults import DEFAULT_BUBBLE_THRESHOLD_NS  # also imported from here by core and api

# Histogram edges (ns): a 1-2-5 series from 1 us to 1 s, then everything longer.
_EDGES = [m * 10**e for e in range(3, 9) for m in (1, 2, 5)] + [10**9]


@dataclass(frozen=True)
class BubbleStats:
    """Bubbles (gaps >= threshold): count, total, percentiles (numpy linear), histogram.

    ``histogram`` is a list of ``(low_ns, high_ns, count)``; ``high_ns`` is None for the
    last, open bin.
    """

    threshold_ns: int
    count: int
    total_ns: int
    p50_ns: float | None
    p90_ns: float | None
    max_ns: int | None
    histogram: list[tuple[int, int | None, int]]


class GapRows:
    """The idle gaps of a :class:`TimelineFigures`, kept as arrays; :meth:`frame` makes
    the ``gaps`` DataFrame when first asked (only the report's device figures use it).

    ``rows``: the position in ``pid``/``correlation_id`` of the activity that ends each
    gap (those two arrays may be the whole device's columns, shared by its groups)."""

    __slots__ = ("starts", "ends", "host_wait", "rows", "pid", "correlation_id")

    def __init__(
        self,
        starts: np.ndarray,
        ends: np.ndarray,
        host_wait: np.ndarray,
        rows: np.ndarray,
        pid: np.ndarray,
        correlation_id: np.ndarray,
    ) -> None:
        self.starts, self.ends, self.host_wait = starts, ends, host_wait
        self.rows, self.pid, self.correlation_id = rows, pid, correlation_id

    def frame(self) -> pd.DataFrame:
        """Columns ``start``, ``end``, ``gap_ns``, ``host_wait`` (bool), ``next_pid``,
        ``next_correlation_id``; one row per gap."""
        return pd.DataFrame(
            {
                "start": self.starts,
                "end": self.ends,
                "gap_ns": self.ends - self.starts,
                "host_wait": self.host_wait,
                "next_pid": self.pid[self.rows],
                "next_correlation_id": self.correlation_id[self.rows],
            }
        )


@dataclass(frozen=True)
class TimelineFigures:
    """Figures for one set of GPU activity (a device, a process on it, or a stream).

    ``gaps`` (a property, made on first use) has one row per idle gap: see
    :func:`timeline_figures`."""

    kernels: int
    memops: int
    start_ns: int
    end_ns: int
    span_ns: int
    busy_ns: int
    idle_ns: int
    utilization: float
    bubbles: BubbleStats
    host_wait_ns: int
    cpu_bound_ratio: float
    gap_rows: GapRows | pd.DataFrame = field(repr=False, compare=False)

    @cached_property
    def gaps(self) -> pd.DataFrame:
        """The idle gaps (see :func:`timeline_figures`), made once."""
        g = self.gap_rows
        return g.frame() if isinstance(g, GapRows) else g


def bubble_stats(gap_ns: np.ndarray, threshold_ns: int) -> BubbleStats:
    """Bubble statistics of the gaps ``gap_ns`` (ns) at ``threshold_ns``."""
    is_bubble = gap_ns >= threshold_ns
    bubbles = gap_ns if is_bubble.all() else gap_ns[is_bubble]
    edges = [threshold_ns] + [e for e in _EDGES if e > threshold_ns]
    counts, _ = np.histogram(bubbles, bins=edges + [np.iinfo(np.int64).max])
    hist = [
        (int(lo), (int(edges[i + 1]) if i + 1 < len(edges) else None), int(c))
        for i, (lo, c) in enumerate(zip(edges, counts, strict=False))
    ]
    if bubbles.size == 0:
        return BubbleStats(threshold_ns, 0, 0, None, None, None, hist)
    # Both percentiles from one partition (each is the same linear interpolation as alone).
    p50, p90 = np.percentile(bubbles, [50, 90])
    return BubbleStats(
        threshold_ns=threshold_ns,
        count=int(bubbles.size),
        total_ns=int(bubbles.sum()),
        p50_ns=float(p50),
        p90_ns=float(p90),
        max_ns=int(bubbles.max()),
        histogram=hist,
    )


def corr_key(pid: np.ndarray, correlation_id: np.ndarray) -> np.ndarray:
    """One int64 key per (pid, correlation id): ``pid << 32 | correlation_id``.

    pid is 24 bits (nsys globalTid layout) and CUPTI correlation ids are 32 bits, so the
    key is unique per pair."""
    key = np.array(pid, dtype=np.int64)  # a copy: shifted in place
    key <<= 32
    key |= np.asarray(correlation_id, dtype=np.int64) & 0xFFFFFFFF
    return key


def key_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of :func:`corr_key` keys, without the sort in
    the usual cases: keys already increasing, or increasing within each of a few
    processes (calls in time order, each process's correlation ids counting up) - then
    the rows of each process in turn, checked to be increasing, are the sorted order."""
    if keys.size < 2 or (keys[1:] > keys[:-1]).all():
        return np.arange(keys.size)
    pid = keys >> 32
    lo, hi = int(pid.min()), int(pid.max())
    if lo != hi:
        # The processes present (a count per pid when their ids are close, no hashing).
        distinct = np.flatnonzero(np.bincount(pid - lo)) + lo if hi - lo < 1 << 16 else np.unique(pid)
        if distinct.size <= 16:
            order = np.concatenate([np.flatnonzero(pid == p) for p in distinct.tolist()])
            ordered = keys[order]
            if (ordered[1:] > ordered[:-1]).all():  # unique and sorted: the only sorting order
                return order
    return np.argsort(keys, kind="stable")


def call_index(api: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique :func:`corr_key` keys, row position in ``api`` of the last call with
    each key) over the calls with a correlation id > 0. The positions are int32 when
    ``api`` has fewer than 2**31 rows (the index is kept for the whole analysis: 63 MiB
    less on 8M calls); users that hand them out widen them (:func:`last_call_rows`)."""
    mask = (api["correlation_id"] > 0).to_numpy()
    rows = np.flatnonzero(mask)
    if len(api) < 2**31:
        rows = rows.astype(np.int32)
    keys = corr_key(api["pid"].to_numpy()[mask], api["correlation_id"].to_numpy()[mask])
    if keys.size < 2 or (keys[1:] > keys[:-1]).all():  # the usual case: one process, ids in call order
        return keys, rows
    order = key_order(keys)
    keys, rows = keys[order], rows[order]
    last = np.ones(keys.size, bool)
    last[:-1] = keys[1:] != keys[:-1]
    return keys[last], rows[last]


def last_call_rows(
    api: pd.DataFrame,
    pid: np.ndarray,
    correlation_id: np.ndarray,
    index: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Row position in ``api`` of the call that submitted each (pid, correlation id): the
    last call with that pair and a correlation id > 0 (-1 where none). One int64 key per
    pair (:func:`corr_key`) and a binary search in ``index`` (:func:`call_index` of
    ``api``, computed when not given)."""
    keys, rows = index if index is not None else call_index(api)
    wanted = corr_key(pid, correlation_id)
    if keys.size == 0:
        return np.full(wanted.size, -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    found = (keys[pos] == wanted) & (np.asarray(correlation_id) > 0)
    return np.where(found, rows[pos], np.int64(-1))  # int64, whatever the index's rows


def api_end_lookup(api: pd.DataFrame) -> pd.Series:
    """API call end (ns) indexed by (pid, correlation_id), for calls with a correlation id.

    Args:
        api: the trace's ``api`` frame (columns ``pid``, ``correlation_id``, ``end``).

    For large traces prefer :func:`api_end_keyed` (same data, int64 keys, binary search);
    :func:`timeline_figures` accepts either.
    """
    calls = api.loc[api["correlation_id"] > 0, ["pid", "correlation_id", "end"]]
    calls = calls.drop_duplicates(["pid", "correlation_id"], keep="last")
    return calls.set_index(["pid", "correlation_id"])["end"]


def api_end_keyed(api: pd.DataFrame, index: tuple[np.ndarray, np.ndarray] | None = None) -> pd.Series:
    """API call end (ns) by (pid, correlation id), for calls with a correlation id > 0.

    Args:
        api: the trace's ``api`` frame (columns ``pid``, ``correlation_id``, ``end``).
        index: :func:`call_index` of ``api`` when already made (computed otherwise).

    Returns:
        Series of call ends indexed by :func:`corr_key` (int64, sorted ascending, unique;
        for a repeated pair the last call wins, as in :func:`api_end_lookup`).
    """
    keys, rows = index if index is not None else call_index(api)
    # copy=False: the index shares call_index's keys (pandas 3 copies arrays by default).
    return pd.Series(
        api["end"].to_numpy()[rows], index=pd.Index(keys, dtype="int64", copy=False), name="end", copy=False
    )


def _keyed(api_end: pd.Series) -> pd.Series:
    """``api_end`` as from :func:`api_end_keyed` (converted when from :func:`api_end_lookup`)."""
    if not isinstance(api_end.index, pd.MultiIndex):
        return api_end
    frame = pd.DataFrame(
        {
            "pid": api_end.index.get_level_values(0).to_numpy(),
            "correlation_id": api_end.index.get_level_values(1).to_numpy(),
            "end": api_end.to_numpy(),
        }
    )
    return api_end_keyed(frame)


NO_CALL = np.iinfo(np.int64).min  # the end of "no submitting call": earlier than any time


def lookup_end(api_end: pd.Series, keys: np.ndarray) -> np.ndarray:
    """Call ends (int64 ns, exact at any clock value: nsys clocks are int64 ns, absolute
    ones above 2**53) for :func:`corr_key` ``keys``; :data:`NO_CALL` where no call matches
    (so ``end > t`` is False for it, as NaN was)."""
    index = api_end.index.to_numpy()
    if index.size == 0:
        return np.full(len(keys), NO_CALL, dtype=np.int64)
    ends = api_end.to_numpy().astype(np.int64, copy=False)
    keys = np.asarray(keys, dtype=np.int64)
    lo, span = int(index[0]), int(index[-1]) - int(index[0]) + 1
    if span <= 4 * index.size + 1024 and 8 * keys.size >= index.size:
        # Dense keys (one process: its correlation ids run 1, 2, 3...): a table of ends
        # indexed by key, NO_CALL where no call has that key - no binary search.
        table = np.full(span, NO_CALL, dtype=np.int64)
        table[index - lo] = ends
        offset = keys - lo
        if not offset.size or (offset.min() >= 0 and offset.max() < span):
            return table[offset]
        inside = (offset >= 0) & (offset < span)
        return np.where(inside, table[np.where(inside, offset, 0)], NO_CALL)
    pos = np.minimum(np.searchsorted(index, keys), index.size - 1)
    found = index[pos] == keys
    return np.where(found, ends[pos], NO_CALL)


def timeline_figures(
    activity: pd.DataFrame,
    api_end: pd.Series,
    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS,
) -> TimelineFigures:
    """Compute the timeline figures of ``activity``.

    Args:
        activity: GPU activity rows (columns ``start``, ``end``, ``pid``,
            ``correlation_id``, ``kind``), as from ``Trace.gpu_activity()`` filtered
            to one device (or process, or stream). Not modified.
        api_end: from :func:`api_end_keyed` (or :func:`api_end_lookup`).
        bubble_threshold_ns: minimum gap counted as a bubble.

    Returns:
        :class:`TimelineFigures`; ``gaps`` has one row per idle gap with columns
        ``start``, ``end``, ``gap_ns``, ``host_wait`` (bool), ``next_pid``,
        ``next_correlation_id``.
    """
    kernels, memops = kind_counts(activity["kind"])
    pid = activity["pid"].to_numpy()
    corr = activity["correlation_id"].to_numpy()
    keyed = _keyed(api_end)
    return figures_of_arrays(
        activity["start"].to_numpy(),
        activity["end"].to_numpy(),
        kernels,
        memops,
        lambda rows: submit_ends(keyed, pid[rows], corr[rows]),
        pid,
        corr,
        bubble_threshold_ns,
    )


def kind_counts(kind: pd.Series) -> tuple[int, int]:
    """(kernels, memory operations) among the ``kind`` values (``gpu_activity()["kind"]``)."""
    if isinstance(kind.dtype, pd.CategoricalDtype):
        cats = [str(c) for c in kind.cat.categories]
        counts = np.bincount(kind.cat.codes.to_numpy() + 1, minlength=len(cats) + 1)[1:]
        per = dict(zip(cats, counts.tolist(), strict=True))
        return per.get("kernel", 0), per.get("memcpy", 0) + per.get("memset", 0)
    return int(kind_in(kind, ("kernel",)).sum()), int(kind_in(kind, ("memcpy", "memset")).sum())


def submit_ends(api_end: pd.Series, pid: np.ndarray, correlation_id: np.ndarray) -> np.ndarray:
    """End (int64 ns) of the call that submitted each activity (``api_end`` as from
    :func:`api_end_keyed`); :data:`NO_CALL` where none matches or the correlation id is <= 0."""
    out = lookup_end(api_end, corr_key(pid, correlation_id))
    out[np.asarray(correlation_id) <= 0] = NO_CALL
    return out


# params: numpy columns of one table, passed apart so callers hand over views without building a
# frame
def figures_of_arrays(
    start: np.ndarray,
    end: np.ndarray,
    kernels: int,
    memops: int,
    submit_end: Callable[[np.ndarray], np.ndarray],
    pid: np.ndarray,
    correlation_id: np.ndarray,
    bubble_threshold_ns: int,
    presorted: bool = False,
    rows: np.ndarray | None = None,
) -> TimelineFigures:
    """:func:`timeline_figures` of activity given as arrays (ns): ``start``, ``end`` of its
    rows, its kernel and memory-operation counts. ``rows``: where those rows lie in
    ``pid`` and ``correlation_id`` (None: at the same positions), which may then be a
    larger frame's columns (a device's, for one of its streams). ``submit_end(positions)``:
    the :func:`submit_ends` of the rows at those positions of ``pid``/``correlation_id``.
    ``presorted``: the rows are sorted by (start, end) (see
    :func:`~launchprof.analysis.timeline.intervals.union`)."""
    order: np.ndarray | None = None  # None: the identity (presorted rows)
    if presorted and len(start):
        starts, ends, first = sorted_union(np.asarray(start, np.int64), np.asarray(end, np.int64))
    else:
        u = union(start, end, presorted=presorted)
        starts, ends, first, order = u.starts, u.ends, u.first_row, u.order
    if starts.size == 0:
        empty = pd.DataFrame(
            {c: pd.Series(dtype="int64") for c in ("start", "end", "gap_ns")} | {"host_wait": pd.Series(dtype=bool)}
        )
        return TimelineFigures(
            kernels, memops, 0, 0, 0, 0, 0, 0.0, bubble_stats(np.empty(0, np.int64), bubble_threshold_ns), 0, 0.0, empty
        )
    # The activity that ends each gap opens the next busy interval.
    next_rows = first[1:] if order is None else order[first[1:]]
    if rows is not None:
        next_rows = rows[next_rows]
    host_wait = submit_end(next_rows) > ends[:-1]  # NO_CALL (no submitting call) compares False
    return figures_of_intervals(
        kernels, memops, starts, ends, next_rows, host_wait, pid, correlation_id, bubble_threshold_ns
    )


# params: numpy columns of one table, passed apart so callers hand over views without building a
# frame
def figures_of_intervals(
    kernels: int,
    memops: int,
    starts: np.ndarray,
    ends: np.ndarray,
    openers: np.ndarray,
    host_wait: np.ndarray,
    pid: np.ndarray,
    correlation_id: np.ndarray,
    bubble_threshold_ns: int,
) -> TimelineFigures:
    """:class:`TimelineFigures` of a (non-empty) union of busy intervals ``starts``,
    ``ends`` (ns, sorted): ``openers``, the position in ``pid``/``correlation_id`` of the
    activity opening each interval after the first; ``host_wait``, whether each gap
    (before each of those intervals) is a host-wait gap."""
    start_ns, end_ns = int(starts[0]), int(ends[-1])
    span = end_ns - start_ns
    busy = int((ends - starts).sum())
    gap_starts, gap_ends = ends[:-1], starts[1:]
    gap_ns = gap_ends - gap_starts
    host_wait_ns = int(gap_ns[host_wait].sum())
    gap_rows = GapRows(gap_starts, gap_ends, host_wait, openers, pid, correlation_id)
    return TimelineFigures(
        kernels=kernels,
        memops=memops,
        start_ns=start_ns,
        end_ns=end_ns,
        span_ns=span,
        busy_ns=busy,
        idle_ns=span - busy,
        utilization=busy / span if span else 0.0,
        bubbles=bubble_stats(gap_ns, bubble_threshold_ns),
        host_wait_ns=host_wait_ns,
        cpu_bound_ratio=host_wait_ns / span if span else 0.0,
        gap_rows=gap_rows,
    )
