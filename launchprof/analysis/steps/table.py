"""The step table: per-step GPU, CPU and API figures of the activity and calls assigned
to each step, and the warm-up steps (docs/metrics.md, "Step", "Warm-up")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import (
    kind_in,
    label_sums,
    last_at_or_before,
    rows_where,
    run_bounds,
    run_sums,
    segment_cummax,
    sorted_by,
    take,
)
from launchprof.analysis.steps.link import Link
from launchprof.analysis.timeline.callkinds import api_classes
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis

WARMUP_FACTOR = 1.5


# params: the steps found, as arrays: each activity row's, each call's, host bounds
def step_table(
    analysis: Analysis,
    device: DeviceAnalysis,
    link: Link,
    pid: int,
    activity_step: np.ndarray,
    n_steps: int,
    api_step: np.ndarray | None,
    cpu_start: np.ndarray | None,
    cpu_end: np.ndarray | None,
) -> pd.DataFrame:
    """One row per step 0..``n_steps``-1 of ``device``'s activity assigned to the steps.

    ``activity_step``: a step per activity row, -1 outside; ``link``: the call that
    submitted each row; ``api_step``: the step of each call of the trace (-1: none), or
    None: by ``cpu_start``; ``cpu_start``/``cpu_end``: each step's host bounds when NVTX
    gives them, else None (from the calls); the calls counted are process ``pid``'s.

    Columns (ns in the trace's clock; docs/metrics.md, "Step"): ``step``, ``gpu_start``,
    ``gpu_end``, ``kernels``, ``memops``, ``busy_ns``, ``bubbles``, ``bubble_ns``,
    ``lead_gap_ns``, ``host_wait_ns``, ``period_ns`` (float, NaN for the last),
    ``cpu_start``, ``cpu_end``, the call figures (:func:`_call_figures`) and ``cpu_ns``;
    the warm-up flag is added by :func:`mark_warmup`.
    """
    act = device.activity
    api = analysis.trace.api
    rows = rows_where(activity_step >= 0)  # the activity of the steps
    step = take(activity_step, rows)
    call_row = take(link.call_row, rows)
    inner = inner_figures(
        step,
        take(act["start"].to_numpy(), rows),
        take(act["end"].to_numpy(), rows),
        call_row,
        api["end"].to_numpy(),
        analysis.bubble_threshold_ns,
        n_steps,
    )
    gpu_start, gpu_end = inner.gpu_start, inner.gpu_end
    # Kernels and memops per step, summed in (step, start, end) order.
    kernels = run_sums(take(take(kind_in(act["kind"], ("kernel",)), rows), inner.order), inner.bounds)
    memops = run_sums(take(take(kind_in(act["kind"], ("memcpy", "memset")), rows), inner.order), inner.bounds)
    edges = _edges(inner, call_row, api["end"].to_numpy(), n_steps)
    cpu_start, cpu_end = _cpu_bounds(api, edges, cpu_start, cpu_end, n_steps)
    cpu_ns = cpu_end - cpu_start
    table = {
        "step": np.arange(n_steps, dtype=np.int64),
        "gpu_start": gpu_start,
        "gpu_end": gpu_end,
        "kernels": kernels,
        "memops": memops,
        "busy_ns": inner.busy_ns,
        "bubbles": inner.bubbles,
        "bubble_ns": inner.bubble_ns,
        "lead_gap_ns": _to_int(edges.lead_gap),
        "host_wait_ns": _to_int(edges.host_wait),
        "period_ns": edges.period,
        "cpu_start": cpu_start,
        "cpu_end": cpu_end,
    }
    table.update(_call_figures(analysis, pid, api_step, cpu_start, n_steps))
    table["cpu_ns"] = _to_int(cpu_ns)
    return pd.DataFrame(table)


@dataclass(frozen=True)
class Edges:
    """Per-step figures at the steps' edges (arrays over 0..n_steps-1): ``has`` (the step
    has activity), ``start``/``end`` (its first start and last end, exact int64, 0 without
    activity), ``first_row`` (the call that submitted its earliest activity, -1: none),
    ``lead_gap`` (the gap before it, from the previous step's last activity; 0 where either
    lacks activity), ``host_wait`` (host-wait ns of its gaps inside and of the gap after
    it) and ``period`` (float64 ns to the next step's start; NaN where either lacks
    activity)."""

    has: np.ndarray
    start: np.ndarray
    end: np.ndarray
    first_row: np.ndarray
    lead_gap: np.ndarray
    host_wait: np.ndarray
    period: np.ndarray


def _edges(inner: Inner, call_row: np.ndarray, call_end: np.ndarray, n_steps: int) -> Edges:
    """:class:`Edges` from the steps' :class:`Inner` figures (``call_row``: the submitting
    call of each activity row, -1: none; ``call_end``: the ends of the API calls)."""
    # The gap before each step (from the previous step's last activity) and whether it
    # was host-wait; int64 throughout (absolute clocks exceed 2**53, where float64 rounds).
    has = np.zeros(n_steps, dtype=bool)
    has[inner.first_steps[inner.first_steps < n_steps]] = True
    start_i, end_i = _exact(inner.gpu_start, inner.first_start, has), _exact(inner.gpu_end, inner.last_end, has)
    prev_has = np.r_[False, has[:-1]]
    prev_end = np.r_[np.int64(0), end_i[:-1]]
    lead_gap = np.where(has & prev_has, np.maximum(start_i - prev_end, 0), 0)
    first_row = np.full(n_steps, -1, dtype=np.int64)
    keep = inner.first_steps < n_steps
    first_row[inner.first_steps[keep]] = call_row[inner.first_rows[keep]]
    lead_wait = np.where(_ended_after(call_end, first_row, prev_end) & prev_has, lead_gap, 0)
    # The gap after the step (before the next one's first activity) is the step's, as its
    # period spans it (docs/metrics.md, "Per-step figures").
    host_wait = inner.wait_ns + np.r_[lead_wait[1:], 0]
    next_has = np.r_[has[1:], False]
    period = np.where(has & next_has, (np.r_[start_i[1:], np.int64(0)] - start_i).astype(np.float64), np.nan)
    return Edges(has, start_i, end_i, first_row, lead_gap, host_wait, period)


def _cpu_bounds(
    api: pd.DataFrame, edges: Edges, cpu_start: np.ndarray | None, cpu_end: np.ndarray | None, n_steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """The CPU side of each step: ``cpu_start`` and ``cpu_end`` as given, else from the
    calls (``api``: the trace's) that submitted the steps' activity."""
    if cpu_start is None:
        # The start of the call that submitted each step's earliest activity; without it
        # (an export without the API table), the GPU start; gaps filled from neighbours.
        first_row, start_i = edges.first_row, edges.start
        api_start = api["start"].to_numpy()
        call_start = np.where(first_row >= 0, api_start[np.maximum(first_row, 0)] if api_start.size else 0, start_i)
        filled = pd.Series(call_start, dtype="Int64").where(edges.has | (first_row >= 0))
        cpu_start = filled.ffill().bfill().fillna(0).to_numpy(dtype=np.int64)
    if cpu_end is None:
        cpu_end = np.r_[cpu_start[1:], edges.end[-1] if n_steps else 0]
    return cpu_start, cpu_end


def _call_figures(
    analysis: Analysis, pid: int, api_step: np.ndarray | None, cpu_start: np.ndarray, n_steps: int
) -> dict[str, np.ndarray]:
    """The API call columns of the step table (``launch_calls`` .. ``api_ns``), summed per
    step over the calls of process ``pid`` (``api_step``: the step of each call of the
    trace, -1: none; default: the step whose ``cpu_start`` is the last at or before the
    call's start); calls outside every step are left out."""
    api = analysis.trace.api
    if api_step is None:
        api_step = last_at_or_before(np.asarray(cpu_start), api["start"].to_numpy())
    calls = rows_where((api["pid"].to_numpy() == pid) & (api_step >= 0) & (api_step < n_steps))
    call_step = take(api_step, calls)
    dur = take(api["end"].to_numpy(), calls) - take(api["start"].to_numpy(), calls)
    cls = api_classes(analysis.trace)
    launch = take(cls["launch"].to_numpy(), calls)
    per_call = {
        "launch_calls": launch,
        "launch_call_ns": dur if launch.all() else np.where(launch, dur, 0),
        "graph_launches": "graph_launch",
        "sync_calls": "sync",
        "alloc_calls": "alloc",
        "instantiations": "instantiate",
        "exec_updates": "exec_update",
        "captures": "capture",
        "api_ns": dur,
    }
    out: dict[str, np.ndarray] = {}
    # Calls are in time order, so their steps usually ascend: sums by running totals then.
    bounds = run_bounds(call_step, n_steps) if (call_step[1:] >= call_step[:-1]).all() else None
    for col, values in per_call.items():
        if isinstance(values, str):  # a class of calls: most traces have none of most classes
            of_class = cls[values].to_numpy()
            values = take(of_class, calls) if of_class.any() else np.zeros(call_step.size, bool)
        if bounds is not None:
            out[col] = run_sums(values, bounds)
        else:
            out[col] = label_sums(call_step, values, n_steps)
    return out


def _at_call(values: np.ndarray, call_row: np.ndarray) -> np.ndarray:
    """``values`` (a column of ``trace.api``) at each call row, float64; NaN where the row is -1."""
    if values.size == 0:
        return np.full(call_row.size, np.nan)
    return np.where(call_row >= 0, values[np.maximum(call_row, 0)].astype(np.float64), np.nan)


def _ended_after(call_end: np.ndarray, call_row: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether the call at each row (-1: none) ended after ``t``: ``_at_call(call_end,
    call_row) > t`` (False without a call), compared as integers (exact at any clock
    value) when both are."""
    if call_end.size == 0:
        return np.zeros(call_row.size, dtype=bool)
    if np.issubdtype(call_end.dtype, np.integer) and np.issubdtype(np.asarray(t).dtype, np.integer):
        if call_row.size == 0 or int(call_row.min()) >= 0:  # every row has its call
            return call_end[call_row] > t
        return (call_row >= 0) & (call_end[np.maximum(call_row, 0)] > t)
    return np.nan_to_num(_at_call(call_end, call_row), nan=-np.inf) > t


def _exact(values: np.ndarray, present_values: np.ndarray, has: np.ndarray) -> np.ndarray:
    """``values`` (:func:`_per_step`: float64 with NaN when a step lacks activity) as exact
    int64, 0 where ``has`` is False, from ``present_values`` (the int64 values of the
    steps with activity, in step order)."""
    if values.dtype.kind in "iu":
        return values.astype(np.int64, copy=False)
    out = np.zeros(has.size, dtype=np.int64)
    out[has] = present_values[: int(has.sum())]
    return out


def _to_int(values: np.ndarray) -> np.ndarray:
    """int64 of ``values``: NaN reads 0, floats truncate (pandas' ``fillna(0).astype``)."""
    if values.dtype.kind == "f":
        values = np.where(np.isnan(values), 0.0, values)
    return values.astype(np.int64)


@dataclass(frozen=True)
class Inner:
    """Per-step figures from the activity of the steps (arrays over 0..n_steps-1).

    ``gpu_start``/``gpu_end``: first start, last end (int64; float64 with NaN when a step
    has no activity); ``busy_ns`` (union), ``bubbles``/``bubble_ns`` (gaps inside >=
    threshold), ``wait_ns`` (host-wait ns of the gaps inside); ``first_steps``/``first_rows``:
    each step with activity (ascending) and the row of its earliest activity (by start,
    ties in row order); ``order``: the rows sorted by (step, start, end) (None: already
    so); ``bounds``: :func:`~launchprof.analysis.arrays.run_bounds` of the sorted steps; ``first_start``/``last_end``:
    the first start and last end of each step of ``first_steps`` (int64, exact)."""

    gpu_start: np.ndarray
    gpu_end: np.ndarray
    busy_ns: np.ndarray
    bubbles: np.ndarray
    bubble_ns: np.ndarray
    wait_ns: np.ndarray
    first_steps: np.ndarray
    first_rows: np.ndarray
    order: np.ndarray | None
    bounds: np.ndarray
    first_start: np.ndarray
    last_end: np.ndarray


# ~70 lines: the sorted rows, run ends and segment bounds are shared by every figure.
# params: numpy columns of one table, passed apart so callers hand over views without building a
# frame
def inner_figures(
    step: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    call_row: np.ndarray,
    call_end: np.ndarray,
    threshold: int,
    n_steps: int,
) -> Inner:
    """:class:`Inner` of activity rows (``step`` >= 0; ``call_row``: the submitting call
    of each, -1: none; ``call_end``: the ends of the API calls)."""
    # Sort by (step, start, end); activity arrives sorted by (start, end), so when the
    # steps do not interleave the rows are already in that order.
    order: np.ndarray | None = None
    if not sorted_by(step, start, end):
        order = np.lexsort((end, start, step))
        step, start, end = step[order], start[order], end[order]
    new_step = np.ones(step.size, bool)
    new_step[1:] = step[1:] != step[:-1]
    heads = np.flatnonzero(new_step)
    run_end = segment_cummax(end, step)
    # Steps with activity: first start and last end (the running end at the step's last row).
    present = step[heads]
    last = np.r_[heads[1:] - 1, step.size - 1] if heads.size else heads
    gpu_start = _per_step(present, start[heads], n_steps)
    gpu_end = _per_step(present, run_end[last], n_steps)
    # Earliest activity of each step: the head; where other rows tie on its start (they
    # follow it), the first in row order among them.
    first_rows = order[heads] if order is not None else heads
    if heads.size:
        ends = np.r_[heads[1:], step.size]  # one past each step's last row
        after = np.minimum(heads + 1, step.size - 1)
        if ((heads + 1 < ends) & (start[after] == start[heads])).any():
            group = np.cumsum(new_step) - 1
            ties = np.flatnonzero(start == start[heads][group])  # contiguous from each head
            tie_heads = np.flatnonzero(np.r_[True, group[ties][1:] != group[ties][:-1]])
            first_rows = np.minimum.reduceat(ties if order is None else order[ties], tie_heads)
    # A segment (busy interval of the step) opens where the activity starts after all earlier ones ended.
    opens = new_step.copy()
    opens[1:] |= start[1:] > run_end[:-1]
    first = None if opens.all() else np.flatnonzero(opens)  # None: every row opens one
    seg_step, seg_start = take(step, first), take(start, first)
    # The running end is a step's maximum so far: a segment ends at its last row's.
    seg_end = run_end if first is None else run_end[np.r_[first[1:] - 1, step.size - 1]]
    seg_bounds = run_bounds(seg_step, n_steps)
    busy = run_sums(seg_end - seg_start, seg_bounds)
    # The gap after each segment to the next (those after a step's last segment lead out of
    # the step and count for nothing); host-wait where the call that submitted the activity
    # after the gap ended after the gap began (float ns, as timeline/gaps.lookup_end gives it).
    gap = np.zeros(seg_step.size, dtype=np.int64)
    np.subtract(seg_start[1:], seg_end[:-1], out=gap[:-1])
    step_last = (seg_bounds[1:] - 1)[seg_bounds[1:] > seg_bounds[:-1]]  # its gap leads out of the step
    is_bubble = gap >= threshold
    is_bubble[step_last] = False
    after_gap = slice(1, None) if first is None else first[1:]  # rows (sorted) that end a gap
    wait = np.zeros(seg_step.size, dtype=bool)
    wait[:-1] = _ended_after(call_end, take(take(call_row, order), after_gap), seg_end[:-1])
    wait[step_last] = False
    return Inner(
        gpu_start,
        gpu_end,
        busy,
        run_sums(is_bubble, seg_bounds),
        run_sums(np.where(is_bubble, gap, 0), seg_bounds),
        run_sums(np.where(wait, gap, 0), seg_bounds),
        present,
        first_rows,
        order,
        run_bounds(step, n_steps),
        start[heads],
        run_end[last],
    )


def _per_step(present: np.ndarray, values: np.ndarray, n_steps: int) -> np.ndarray:
    """``values`` of the steps ``present`` spread over 0..n_steps-1: the values as they are
    when every step is present, else float64 with NaN (as pandas reindexes)."""
    inside = present < n_steps
    if inside.sum() == n_steps:
        return values[inside]
    out = np.full(n_steps, np.nan)
    out[present[inside]] = values[inside]
    return out


def mark_warmup(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    n = len(table)
    table = table.assign(warmup=False)
    if n < 4:
        return table, 0
    ref = table.iloc[n // 2 :]
    period_ref = ref["period_ns"].median()
    dur_ref = (ref["gpu_end"] - ref["gpu_start"]).median()
    mode = table["kernels"].mode().iloc[0]
    cpu_ref = ref["cpu_ns"].median()
    # Start-up work on the CPU before a step's first launch (module loading inside the
    # first range) does not lengthen its GPU period: the step's CPU time shows it.
    slow = (
        (table["period_ns"] > WARMUP_FACTOR * period_ref)
        | ((table["gpu_end"] - table["gpu_start"]) > WARMUP_FACTOR * dur_ref)
        | (table["cpu_ns"] > WARMUP_FACTOR * cpu_ref)
    )
    odd = slow | (table["kernels"] != mode)
    # Capture and instantiation mark warm-up only when the steady steps do not repeat them
    # (a loop that re-captures every step is churn, not warm-up).
    for col in ("instantiations", "captures"):
        if (ref[col] == 0).all():
            odd |= table[col] > 0
    limit = n // 4
    warm = 0
    while warm < limit and bool(odd.iloc[warm]):
        warm += 1
    table.loc[: warm - 1, "warmup"] = True if warm else False
    return table, warm
