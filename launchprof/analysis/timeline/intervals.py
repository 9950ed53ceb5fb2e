"""Interval arithmetic over GPU activity: the busy-interval union and the gaps between.

Pure numpy. The union is the classic sweep: sort by start, keep the running maximum of
ends (``np.maximum.accumulate``), and open a new busy interval at each start that lies
beyond the running maximum of the rows before it. Touching intervals (next start ==
running end) merge. Complexity O(n log n) for the sort, O(n) after.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from launchprof.analysis.arrays import sorted_by

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Union:
    """The union of a set of intervals.

    Attributes:
        starts, ends: int64 arrays (ns), one entry per disjoint busy interval, sorted.
        first_row: for each busy interval, the index (into the sorted input order
            ``order``) of the activity that opens it: the earliest-starting one.
        order: the permutation that sorts the input by (start, end).
    """

    starts: IntArray
    ends: IntArray
    first_row: IntArray
    order: IntArray

    @property
    def busy_ns(self) -> int:
        """Total length of the union (overlaps counted once), ns."""
        return int((self.ends - self.starts).sum())

    @property
    def gap_starts(self) -> IntArray:
        """Start of each idle gap between consecutive busy intervals (ns)."""
        return self.ends[:-1]

    @property
    def gap_ends(self) -> IntArray:
        """End of each idle gap between consecutive busy intervals (ns)."""
        return self.starts[1:]


def union(start: npt.ArrayLike, end: npt.ArrayLike, *, presorted: bool = False) -> Union:
    """Union of intervals ``[start[i], end[i])``.

    Args:
        start, end: equal-length integer arrays (ns) with ``end >= start``.
        presorted: the caller guarantees the input is sorted by (start, end) (rows of
            ``Trace.gpu_activity()`` or a subset of them): the check is skipped.

    Returns:
        A :class:`Union`; for empty input, empty arrays.
    """
    s = np.asarray(start, dtype=np.int64)
    e = np.asarray(end, dtype=np.int64)
    if s.shape != e.shape:
        raise ValueError("start and end differ in length")
    if s.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return Union(empty, empty, empty, empty)
    # Activity frames arrive sorted by (start, end) (Trace.gpu_activity); skip the sort then.
    if presorted or sorted_by(s, e):
        order = np.arange(s.size, dtype=np.int64)
        s_sorted, e_sorted = s, e
    else:
        order = np.lexsort((e, s))
        s_sorted, e_sorted = s[order], e[order]
    starts, ends, first = sorted_union(s_sorted, e_sorted)
    return Union(starts, ends, first, order)


def sorted_union(start: IntArray, end: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """(starts, ends, first_row) of :func:`union` for non-empty int64 input already sorted
    by (start, end) (its ``order`` is then the identity, not made here)."""
    running_end = np.maximum.accumulate(end)
    opens = np.empty(start.size, dtype=bool)
    opens[0] = True
    np.greater(start[1:], running_end[:-1], out=opens[1:])
    first = np.flatnonzero(opens)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = start.size - 1
    return start[first], running_end[last], first.astype(np.int64, copy=False)
