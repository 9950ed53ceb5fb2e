"""The cause of each GPU idle gap of the steps: the host-wait idle of every step split into
waits after a synchronizing call, waits behind host work and waits for the launch path
(:func:`gap_causes`, which :func:`launchprof.analysis.stepdata.step_context` adds to the
step table), with the per-call kernels it runs on (a thread's previous call end, the sync
call blocked at a time).

Gap causes (docs/metrics.md, "Gap causes"): every idle gap between busy intervals of the
process's stepped activity belongs to the step of the busy interval before it (so a step
owns its inner gaps and the gap after it: the window of its period, first activity to the
next step's first activity). A host-wait gap (the submitting call ended
after the gap began) is

- ``sync`` when a synchronizing call (:data:`~launchprof.analysis.timeline.callkinds.SYNC_CALLS`
  or a synchronous copy) of the process was blocked across the gap's start: the CPU
  waited for the GPU to drain, then had to refill it;
- ``host`` when the submitting thread spent more than ``host_gap_ns`` (default
  :data:`HOST_GAP_NS`) outside CUDA API calls just before the submitting call: host work
  that is not launch overhead;
- ``launch`` otherwise: the GPU waited for the launch path itself.

:data:`HOST_GAP_NS` = 100 us: in the bundled PyTorch trace (mlp_eager) the CPU time
between consecutive CUDA calls of a thread has p99 40 us and p99.9 91 us (framework
dispatch plus driver entry, i.e. launch overhead); a longer stretch without any CUDA call
is host work.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import ascending, segment_cummax, selection, stable_order
from launchprof.analysis.timeline.callkinds import api_classes
from launchprof.analysis.timeline.core import Analysis
from launchprof.analysis.timeline.intervals import union

HOST_GAP_NS = 100_000
SYNC_TOLERANCE_NS = 1_000
# prev_end_at: at most this many threads are read one at a time (each a pass over the calls).
PER_THREAD_MAX = 16


def prev_end_on_thread(api: pd.DataFrame) -> np.ndarray:
    """Per api row: the latest end (float ns) of the calls before it on its thread (NaN for
    a thread's first call). Calls are ordered by (tid, start), ties in row order; calls
    sharing (tid, start) all get the value of the first of them. ``api``: the trace's
    calls (columns ``tid``, ``start``, ``end``; ns).

    Returns:
        float64 array, one value per row of ``api``.
    """
    tid = api["tid"].to_numpy()
    start = api["start"].to_numpy()
    if tid.size == 0:
        return np.empty(0, dtype=np.float64)
    # The loader sorts calls by start: then the (tid, start) order is a stable sort by tid
    # (and no sort at all for one thread).
    if ascending(start):
        order = None if (tid == tid[0]).all() else stable_order(tid)
    else:
        order = np.lexsort((start, tid))
    t = tid if order is None else tid[order]
    st = start if order is None else start[order]
    new_tid = np.ones(t.size, bool)
    new_tid[1:] = t[1:] != t[:-1]
    ends = api["end"].to_numpy()
    running = segment_cummax(ends if order is None else ends[order], np.cumsum(new_tid) - 1).astype(np.float64)
    prev = np.empty(t.size, dtype=np.float64)
    prev[0:1] = np.nan
    prev[1:] = running[:-1]
    prev[new_tid] = np.nan
    first_of_pair = new_tid.copy()
    first_of_pair[1:] |= st[1:] != st[:-1]
    if first_of_pair.all():
        value = prev
    else:
        value = prev[np.maximum.accumulate(np.where(first_of_pair, np.arange(t.size), 0))]
    if order is None:
        return value
    out = np.empty(t.size, dtype=np.float64)
    out[order] = value
    return out


def prev_end_at(api: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """:func:`prev_end_on_thread` ``(api)[rows]`` (``rows``: positions, >= 0). When the calls
    are in start order (the loader sorts by start), from the running maximum of the ends
    of each thread of ``rows`` (a few threads) alone: the calls before row r on its thread
    are its thread's calls before the first of them sharing r's start. Not the whole
    table sorted by thread: on 8M calls of 4 threads that held ~0.4 GiB of int64
    temporaries at the peak of ``analyze`` (benchmarks/README.md)."""
    tid = api["tid"].to_numpy()
    start = api["start"].to_numpy()
    if not (tid.size and ascending(start)):
        return prev_end_on_thread(api)[rows]
    ends = api["end"].to_numpy()
    # The first call sharing each row's start: the row itself when no two calls share one.
    first = rows if ascending(start, strict=True) else np.searchsorted(start, start[rows], side="left")
    if (tid == tid[0]).all():
        return _running_end_before(ends)[first]
    row_tid = tid[rows]
    threads = np.unique(row_tid)
    if threads.size > PER_THREAD_MAX:  # one pass over the calls per thread: too many
        return prev_end_on_thread(api)[rows]
    out = np.empty(rows.size, dtype=np.float64)
    for t in threads.tolist():
        mine = np.flatnonzero(tid == t)  # the thread's calls, in start order
        at = np.flatnonzero(row_tid == t)
        # The first call of the thread at or after the first call sharing r's start
        # (which is at or before r): the thread's first call sharing that start.
        out[at] = _running_end_before(ends[mine])[np.searchsorted(mine, first[at], side="left")]
    return out


def _running_end_before(ends: np.ndarray) -> np.ndarray:
    """``before[i]``: the latest of ``ends[:i]`` as float (NaN for i = 0), ``ends.size + 1``
    values; float like :func:`prev_end_on_thread` (the max of rounded values is the
    rounded max: the same floats)."""
    before = np.empty(ends.size + 1, dtype=np.float64)
    before[0] = np.nan
    np.maximum.accumulate(ends, dtype=np.float64, out=before[1:])
    return before


def sync_blocked_at(
    sync_pid: np.ndarray, sync_start: np.ndarray, sync_end: np.ndarray, pid: np.ndarray, at: np.ndarray
) -> np.ndarray:
    """For each (``pid``, ``at``), ``at`` ascending: whether the last synchronizing call of
    that process starting at or before ``at`` (of calls sharing a start, the last in row
    order) ended at or after ``at - SYNC_TOLERANCE_NS``. As ``pd.merge_asof(direction=
    "backward", by="pid")`` over the calls sorted stably by start, compared in int64.

    Sync call k (in start order) is the last one for the times in [start_k, start_k+1);
    it blocked those up to end_k + tolerance: one range of the sorted times per call,
    found by binary search and marked (a loop for a few calls, a running count else)."""
    out = np.zeros(at.size, dtype=bool)
    one = bool(pid.size) and bool((pid == pid[0]).all())
    for p in np.unique(sync_pid):  # a handful of processes
        if one and p != pid[0]:
            continue  # no time of this process
        mine = sync_pid == p
        order = np.argsort(sync_start[mine], kind="stable")
        starts, ends = sync_start[mine][order], sync_end[mine][order]
        rows = None if one else np.flatnonzero(pid == p)
        times = at if rows is None else at[rows]
        upto = np.minimum(np.append(starts[1:], np.iinfo(np.int64).max), ends + SYNC_TOLERANCE_NS + 1)
        lo = np.searchsorted(times, starts, side="left")
        hi = np.maximum(np.searchsorted(times, upto, side="left"), lo)
        if lo.size <= 64:
            blocked = np.zeros(times.size, dtype=bool)
            for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
                blocked[a:b] = True
        else:
            count = np.zeros(times.size + 1, dtype=np.int64)
            np.add.at(count, lo, 1)
            np.add.at(count, hi, -1)
            blocked = np.cumsum(count[:-1]) > 0
        if rows is None:
            out = blocked
        else:
            out[rows] = blocked
    return out


def gap_causes(
    analysis: Analysis, act: pd.DataFrame, step_of: np.ndarray, n_steps: int, host_gap_ns: int, act_call: np.ndarray
) -> pd.DataFrame:
    """Host-wait idle per step split by cause (module docstring); ``act_call``: the api
    position of each activity row's submitting call (-1: none)."""
    columns = ["sync_wait_ns", "host_work_wait_ns", "launch_wait_ns"]
    kept = selection(step_of >= 0)
    u = union(act["start"].to_numpy()[kept], act["end"].to_numpy()[kept])
    api = analysis.trace.api
    if u.starts.size < 2 or not len(api):
        empty = np.zeros((n_steps, len(columns)), dtype=np.int64)
        return pd.DataFrame(empty, index=pd.RangeIndex(n_steps), columns=columns)
    nxt = u.order[u.first_row[1:]]  # the activity row that ends each gap
    nxt = nxt + kept.start if isinstance(kept, slice) else kept[nxt]
    # A gap counts for the step whose period spans it: the step of the busy interval
    # before it (the gap after a step's last activity is that step's: its period runs to
    # the next step's start; docs/metrics.md, "Per-step figures").
    before = u.order[u.first_row[:-1]]
    before = before + kept.start if isinstance(kept, slice) else kept[before]
    gap_start, gap_end = u.gap_starts, u.gap_ends
    call = act_call[nxt]
    api_start, api_end = api["start"].to_numpy(), api["end"].to_numpy()
    has_call = call >= 0
    host_wait = has_call & (api_end[call if has_call.all() else np.maximum(call, 0)] > gap_start)
    if not host_wait.all():  # gaps stay in time order
        gap_start, gap_end, call, nxt = gap_start[host_wait], gap_end[host_wait], call[host_wait], nxt[host_wait]
        before = before[host_wait]
    gap_pid = act["pid"].to_numpy()[nxt]
    # Sync: a synchronizing call of the process blocked across the gap's start.
    is_sync_call = api_classes(analysis.trace)["sync"].to_numpy()
    if is_sync_call.any() and gap_start.size:
        is_sync = sync_blocked_at(
            api["pid"].to_numpy()[is_sync_call], api_start[is_sync_call], api_end[is_sync_call], gap_pid, gap_start
        )
    else:
        is_sync = np.zeros(gap_start.size, dtype=bool)
    # Host work: CPU time outside CUDA calls on the submitting thread before the call
    # (none known, NaN, counts as 0).
    idle_before = prev_end_at(api, call)  # a new array: the difference is written into it
    np.subtract(api_start[call], idle_before, out=idle_before)
    is_host = idle_before > host_gap_ns
    if host_gap_ns < 0:
        is_host |= np.isnan(idle_before)
    # cause: 0 sync, 1 host work, 2 launch path.
    cause = np.full(nxt.size, 2, dtype=np.int8)
    cause[is_host] = 1
    cause[is_sync] = 0
    # Sum per (step, cause). Float sums of int ns are exact below 2**53 ns (104 days):
    # the gaps are disjoint, so no sum exceeds the trace's span.
    flat, length = step_of[before], gap_end - gap_start
    flat *= len(columns)  # a new array (a gather): scaled in place
    flat += cause
    if int(length.sum()) < 2**53:
        sums = np.bincount(flat, weights=length, minlength=n_steps * len(columns)).astype(np.int64)
    else:
        sums = np.zeros(n_steps * len(columns), dtype=np.int64)
        np.add.at(sums, flat, length)
    return pd.DataFrame(sums.reshape(n_steps, len(columns)), index=pd.RangeIndex(n_steps), columns=columns)
