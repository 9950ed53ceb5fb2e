"""Numpy kernels shared by the analysis: sortedness checks, running maxima within
segments, row codes, category membership, the rows of a mask, and sums over runs of
sorted labels.

Each is exact (integer arithmetic where a float would round) and equal to the plain
numpy/pandas formulation named in its docstring, which tests/test_arrays.py checks it
against; the fast paths only skip work (a sort, a hash, a copy) when the input allows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def ascending(values: np.ndarray, strict: bool = False) -> bool:
    """Whether ``values`` never decrease (``strict``: always increase); compared in place,
    without the array ``np.diff`` would make."""
    if strict:
        return bool((values[1:] > values[:-1]).all())
    return bool((values[1:] >= values[:-1]).all())


def sorted_by(*keys: np.ndarray) -> bool:
    """Whether the rows are sorted by ``keys`` (the first the primary key), as
    ``np.lexsort(keys[::-1])`` would leave them. Cheap where the first two keys decide: a
    first key that decreases somewhere is False; one that rises strictly, or never
    decreases while the second rises strictly, is True."""
    first = keys[0]
    if not ascending(first):
        return False
    if len(keys) == 1 or ascending(first, strict=True) or ascending(keys[1], strict=True):
        return True
    # Each pair of rows in order: the first key that differs rises (the last may be equal).
    ok = keys[-1][1:] >= keys[-1][:-1]
    for key in reversed(keys[:-1]):
        a, b = key[:-1], key[1:]
        ok = (b > a) | ((b == a) & ok)
    return bool(ok.all())


def segment_cummax(values: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` within each run of equal ``segment`` (``segment``
    non-decreasing, >= 0), as pandas' ``Series(values).groupby(segment).cummax()``.

    ``values`` themselves when they never decrease. Integers: one
    ``np.maximum.accumulate`` over ``segment * span + values``, whose runs are disjoint and
    ascending; pandas' grouped ``cummax`` where that key could overflow int64 or the values
    are not integers."""
    if values.size == 0:
        return values.copy()
    if ascending(values):  # already non-decreasing: its own running maximum
        return values
    if np.issubdtype(values.dtype, np.integer) and np.issubdtype(segment.dtype, np.integer):
        lo = int(values.min())
        span = int(values.max()) - lo + 1
        if int(segment[0]) >= 0 and int(segment[-1]) + 1 <= (2**62) // span:
            base = segment.astype(np.int64) * span
            return np.maximum.accumulate(base + (values.astype(np.int64) - lo)) - base + lo
    return pd.Series(values).groupby(segment, sort=False).cummax().to_numpy()


def stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of an integer column with at most 65,536
    distinct values (threads, processes, streams, their codes): each value replaced by its
    offset from the smallest (values within 65,536 of each other) or else by its rank among
    them (a hash, no sort of the rows), and those sorted by radix. Calls of several threads
    interleave in time order, and numpy's comparison sort of their int64 values took 2-5x
    as long on 8M rows of 4 threads (benchmarks/README.md, "Time"). Sorted input: no sort;
    more distinct values: the plain sort."""
    if values.size < 2 or ascending(values):
        return np.arange(values.size)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 1 << 16:  # codes already: their offsets are the ranks' order
        return np.argsort((values - lo).astype(np.uint16), kind="stable")
    codes, uniques = pd.factorize(values, sort=True)
    if uniques.size > 1 << 16:
        return np.argsort(values, kind="stable")
    return np.argsort(codes.astype(np.uint16), kind="stable")


def row_codes(columns: Sequence[np.ndarray]) -> np.ndarray:
    """One int64 code per row, equal for rows equal in every column, numbered in order of
    first appearance (0, 1, ...), as pandas' ``groupby(sort=False, dropna=False).ngroup()``.

    Integer columns are packed into one int64 key (each column's offset from its minimum
    times the product of the ranges before it; constant columns drop out) and the key
    factorized once; otherwise, or when the ranges do not fit in 62 bits, the columns are
    factorized one at a time (a missing value is a value) and combined pairwise."""
    if not columns or columns[0].size == 0:
        return np.zeros(0, dtype=np.int64)
    n = columns[0].size
    if all(isinstance(v, np.ndarray) and v.dtype.kind in "iu" for v in columns):
        key = np.zeros(n, dtype=np.int64)
        scale = 1
        for v in columns:
            low = int(v.min())
            width = int(v.max()) - low + 1
            if width == 1:
                continue
            if scale > (2**62) // width:
                break
            key += (v.astype(np.int64) - low) * scale
            scale *= width
        else:
            return pd.factorize(key)[0].astype(np.int64)
    codes = np.zeros(n, dtype=np.int64)
    for v in columns:
        col_codes, uniques = pd.factorize(v, use_na_sentinel=False)
        codes = pd.factorize(codes * len(uniques) + col_codes)[0].astype(np.int64)
    return codes


def kind_in(kind: pd.Series, names: tuple[str, ...]) -> np.ndarray:
    """Boolean array: ``kind`` is one of ``names``, as ``kind.isin(names)`` (by category
    code when categorical)."""
    if isinstance(kind.dtype, pd.CategoricalDtype):
        wanted = np.array([c in names for c in kind.cat.categories.astype(str)] + [False])
        return wanted[kind.cat.codes.to_numpy()]  # code -1 (missing) reads the last entry
    return kind.isin(list(names)).to_numpy()


def last_at_or_before(bounds: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the last of ``bounds`` (sorted ascending) that is <= each of ``t`` (-1: none):
    ``np.searchsorted(bounds, t, side="right") - 1``. Many ``t`` in ascending order (calls
    by start): count the bounds at or before each ``t`` instead, from where each bound falls
    among ``t`` (one binary search per bound, not per ``t``)."""
    if t.size > 4 * bounds.size and ascending(t) and ascending(bounds):
        at = np.searchsorted(t, bounds, side="left")  # the first t >= each bound
        return np.cumsum(np.bincount(at, minlength=t.size + 1)[: t.size]) - 1
    return np.searchsorted(bounds, t, side="right") - 1


def rows_where(mask: np.ndarray) -> np.ndarray | slice | None:
    """The rows where ``mask`` holds, for :func:`take`: None for all of them, a slice
    when they lie end to end (a view, no copy), else their positions."""
    if mask.all():
        return None
    first = int(mask.argmax())
    stop = mask.size - int(mask[::-1].argmax())
    if mask[first] and mask[first:stop].all():
        return slice(first, stop)
    return np.flatnonzero(mask)


def selection(mask: np.ndarray) -> slice | np.ndarray:
    """The positions where ``mask`` is True: a slice when they are consecutive (steps'
    rows usually are; a slice takes views instead of copies), else an index array."""
    n = int(np.count_nonzero(mask))
    first = int(mask.argmax()) if n else 0
    if mask[first : first + n].all():
        return slice(first, first + n)
    return np.flatnonzero(mask)


def take(values: np.ndarray, rows: np.ndarray | slice | None) -> np.ndarray:
    """``values[rows]``; ``values`` itself where ``rows`` is None (all rows, in order):
    ``take(values, rows_where(mask))`` is ``values[mask]``."""
    return values if rows is None else values[rows]


def run_bounds(label: np.ndarray, n: int) -> np.ndarray:
    """For ``label`` sorted ascending: where each label 0..n-1 begins, and the end of the
    last (``n + 1`` positions; rows of other labels fall outside)."""
    return np.searchsorted(label, np.arange(n + 1), side="left")


def run_sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """int64 sum of ``values`` over each run ``bounds[i]:bounds[i + 1]`` (see
    :func:`run_bounds`), exact, as ``np.add.at`` into int64: one ``np.add.reduceat`` over
    the non-empty runs, which lie end to end."""
    out = np.zeros(bounds.size - 1, dtype=np.int64)
    if values.dtype == bool and not values.any():
        return out
    lo, hi = bounds[:-1], bounds[1:]
    runs = hi > lo
    if runs.any():
        out[runs] = np.add.reduceat(values[: bounds[-1]], lo[runs], dtype=np.int64)
    return out


def label_sums(label: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """int64 sum of ``values`` per label 0..n-1 (labels outside that range dropped), in
    any order of ``label``: a count for boolean ``values``, else exact integer sums
    (``np.bincount`` while float64 is exact, below 2**53; ``np.add.at`` beyond)."""
    inside = (label >= 0) & (label < n)
    values = np.asarray(values)[inside]
    label = label[inside]
    if values.dtype == bool:  # a count: exact
        return np.bincount(label[values], minlength=n)[:n].astype(np.int64)
    values = values.astype(np.int64)
    if int(np.abs(values).sum()) < 2**53:  # float64 sums are exact below 2**53
        return np.rint(np.bincount(label, weights=values, minlength=n)[:n]).astype(np.int64)
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, label, values)
    return out
