"""Per-step frames shared by the diagnosis and the findings (pure, over an Analysis).

:func:`step_context` gathers, for the device and process that :class:`Steps` describe:
the steady-state steps, their kernels (with names and launch configuration), their
CUDA API calls, and the cause of each GPU idle gap (``gap_causes``).

Gap causes (DOMAIN.md, "Host-wait"): every idle gap between busy intervals of the
process's stepped activity belongs to the step of the activity that ends it (so a step
owns its inner gaps and the gap before it). A host-wait gap (the submitting call ended
after the gap began) is

- ``sync`` when a synchronizing call (:data:`~launchprof.analysis.callkinds.SYNC_CALLS`
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

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from launchprof.analysis.callkinds import api_classes, classify
from launchprof.analysis.core import Analysis, DeviceAnalysis
from launchprof.analysis.intervals import union
from launchprof.analysis.steps import Steps
from launchprof.analysis.timeline import call_index, last_call_rows
from launchprof.trace.model import text

HOST_GAP_NS = 100_000
SYNC_TOLERANCE_NS = 1_000


@dataclass(frozen=True)
class StepContext:
    """What the diagnosis needs about the steps of one device and process.

    Attributes:
        steps: the :class:`Steps`.
        device: the device analysed (None: no GPU activity).
        pid: the process whose steps these are.
        table: ``steps.table`` with, per step, ``sync_wait_ns``, ``host_work_wait_ns``,
            ``launch_wait_ns`` (host-wait idle by cause, ns) and ``wait_ns`` (their sum);
            when no step was found, one pseudo-step covering the whole device.
        steady: the steady rows of ``table`` (all rows for the pseudo-step).
        kernels: kernels of steady steps: ``step``, ``start``, ``end``, ``stream_id``,
            ``name_id``, ``grid_x``..``block_z``, ``graph_node_id``, ``correlation_id``.
        calls: CUDA API calls of ``pid`` inside steady steps (by CPU time): ``step``,
            ``call``, ``start``, ``end``, ``tid``, ``correlation_id`` plus the class
            columns of :func:`~launchprof.analysis.callkinds.classify`.
        memops: memops of steady steps: ``step``, ``kind``, ``copy_kind``, ``bytes``.
        pseudo: True when ``table`` is the whole-device pseudo-step.
    """

    steps: Steps
    device: DeviceAnalysis | None
    pid: int | None
    table: pd.DataFrame
    steady: pd.DataFrame
    kernels: pd.DataFrame = field(repr=False)
    calls: pd.DataFrame = field(repr=False)
    memops: pd.DataFrame = field(repr=False)
    pseudo: bool = False


def _device(analysis: Analysis, steps: Steps) -> DeviceAnalysis | None:
    for d in analysis.devices:
        if d.device_id == steps.device_id:
            return d
    if analysis.devices:
        return max(analysis.devices, key=lambda d: (d.figures.kernels, -d.device_id))
    return None


def classes(calls: pd.Series) -> pd.DataFrame:
    """:func:`~launchprof.analysis.callkinds.classify` computed once per distinct call name
    (the ``call`` column is categorical: a few dozen names for millions of calls)."""
    if isinstance(calls.dtype, pd.CategoricalDtype):
        table = classify(pd.Series(calls.cat.categories.astype(str)))
        codes = calls.cat.codes.to_numpy()
        if table.empty:
            return classify(calls.astype(str))
        values = table.to_numpy(dtype=bool)[np.clip(codes, 0, None)] & (codes >= 0)[:, None]
        return pd.DataFrame(values, index=calls.index, columns=table.columns)
    return classify(calls)


def _pseudo_table(device: DeviceAnalysis, pid: int, api: pd.DataFrame) -> pd.DataFrame:
    act = device.activity.loc[device.activity["pid"] == pid]
    cls = classes(api.loc[api["pid"] == pid, "call"])
    kind = text(act["kind"])
    u = union(act["start"].to_numpy(), act["end"].to_numpy())
    span = int(u.ends[-1] - u.starts[0]) if u.starts.size else 0
    return pd.DataFrame(
        {
            "step": [0],
            "gpu_start": [int(u.starts[0]) if u.starts.size else 0],
            "gpu_end": [int(u.ends[-1]) if u.starts.size else 0],
            "cpu_start": [int(act["start"].min()) if len(act) else 0],
            "cpu_end": [int(act["end"].max()) if len(act) else 0],
            "kernels": [int((kind == "kernel").sum())],
            "memops": [int(kind.isin(["memcpy", "memset"]).sum())],
            "busy_ns": [u.busy_ns],
            "period_ns": [float(span)],
            "launch_calls": [int(cls["launch"].sum())],
            "graph_launches": [int(cls["graph_launch"].sum())],
            "warmup": [False],
        }
    )


def _prev_end_on_thread(api: pd.DataFrame) -> np.ndarray:
    """Per api row: the latest end (float ns) of the calls before it on its thread (NaN for
    a thread's first call). Calls are ordered by (tid, start), ties in row order; calls
    sharing (tid, start) all get the value of the first of them."""
    tid = api["tid"].to_numpy()
    start = api["start"].to_numpy()
    order = np.lexsort((start, tid))
    t, st = tid[order], start[order]
    new_tid = np.ones(t.size, bool)
    new_tid[1:] = t[1:] != t[:-1]
    running = pd.Series(api["end"].to_numpy()[order]).groupby(t).cummax().to_numpy(dtype=np.float64)
    prev = np.empty(t.size, dtype=np.float64)
    prev[0:1] = np.nan
    prev[1:] = running[:-1]
    prev[new_tid] = np.nan
    first_of_pair = new_tid.copy()
    first_of_pair[1:] |= st[1:] != st[:-1]
    first_pos = np.maximum.accumulate(np.where(first_of_pair, np.arange(t.size), 0))
    out = np.empty(t.size, dtype=np.float64)
    out[order] = prev[first_pos]
    return out


def _gap_causes(
    analysis: Analysis, act: pd.DataFrame, step_of: np.ndarray, n_steps: int, host_gap_ns: int
) -> pd.DataFrame:
    """Host-wait idle per step split by cause (module docstring)."""
    columns = ["sync_wait_ns", "host_work_wait_ns", "launch_wait_ns"]
    sums = np.zeros((n_steps, len(columns)), dtype=np.int64)
    keep = step_of >= 0
    act = act.loc[keep]
    step_of = step_of[keep]
    u = union(act["start"].to_numpy(), act["end"].to_numpy())
    api = analysis.trace.api
    if u.starts.size >= 2 and len(api):
        nxt = u.order[u.first_row[1:]]
        gap_start, gap_end = u.gap_starts, u.gap_ends
        gap_pid = act["pid"].to_numpy()[nxt]
        index = analysis.trace.cached("call_index", lambda: call_index(api))
        call = last_call_rows(api, gap_pid, act["correlation_id"].to_numpy()[nxt], index)
        call_start = api["start"].to_numpy()[np.maximum(call, 0)]
        call_end = api["end"].to_numpy()[np.maximum(call, 0)]
        host_wait = (call >= 0) & (call_end > gap_start)
        # Gaps are in time order (a union's gaps are), as the merge_asof below needs.
        gap_start, gap_end, gap_pid = gap_start[host_wait], gap_end[host_wait], gap_pid[host_wait]
        call, call_start = call[host_wait], call_start[host_wait]
        gap_step = step_of[nxt][host_wait]
        # Sync: a synchronizing call of the process blocked across the gap's start.
        cls = api_classes(analysis.trace)
        sync = api.loc[cls["sync"].to_numpy(), ["pid", "start", "end"]].sort_values("start", kind="stable")
        if len(sync) and gap_start.size:
            m = pd.merge_asof(
                pd.DataFrame({"start": gap_start, "pid": gap_pid}),
                sync.rename(columns={"start": "s_start", "end": "s_end"}),
                left_on="start",
                right_on="s_start",
                by="pid",
                direction="backward",
            )
            is_sync = (m["s_end"] >= m["start"] - SYNC_TOLERANCE_NS).fillna(False).to_numpy(dtype=bool)
        else:
            is_sync = np.zeros(gap_start.size, dtype=bool)
        # Host work: CPU time outside CUDA calls on the submitting thread before the call.
        idle_before = np.nan_to_num(call_start - _prev_end_on_thread(api)[call], nan=0.0)
        is_host = ~is_sync & (idle_before > host_gap_ns)
        cause = np.where(is_sync, 0, np.where(is_host, 1, 2))
        np.add.at(sums, (gap_step, cause), gap_end - gap_start)
    return pd.DataFrame(sums, index=pd.RangeIndex(n_steps), columns=columns)


def _step_of_time(times: np.ndarray, table: pd.DataFrame) -> np.ndarray:
    start = table["cpu_start"].to_numpy(dtype=np.int64)
    end = table["cpu_end"].to_numpy(dtype=np.int64)
    order = np.argsort(start, kind="stable")
    i = np.searchsorted(start[order], times, side="right") - 1
    ok = i >= 0
    idx = np.where(ok, order[np.clip(i, 0, None)], -1)
    inside = ok & (times < end[np.clip(idx, 0, None)])
    return np.where(inside, table["step"].to_numpy()[np.clip(idx, 0, None)], -1)


def _steady_kernels(
    analysis: Analysis, device: DeviceAnalysis, is_kernel: np.ndarray, step_of: np.ndarray
) -> pd.DataFrame | None:
    """The rows of ``analysis.trace.kernels`` behind the activity rows flagged in
    ``is_kernel``, in kernel-table order, with their ``step``. The kernel rows of a
    device's activity are its kernels in stable (start, end) order
    (:meth:`~launchprof.trace.Trace.gpu_activity`), so they are found by position; None
    when the counts disagree."""
    kern = analysis.trace.kernels
    act = device.activity
    mine = np.flatnonzero((kern["device_id"] == device.device_id).to_numpy())
    all_kernels = (act["kind"] == "kernel").to_numpy()
    if mine.size != int(all_kernels.sum()):
        return None
    by_time = mine[np.lexsort((kern["end"].to_numpy()[mine], kern["start"].to_numpy()[mine]))]
    wanted = is_kernel[all_kernels]
    rows, steps = by_time[wanted], step_of[all_kernels][wanted]
    order = np.argsort(rows, kind="stable")
    return kern.iloc[rows[order]].assign(step=steps[order])


def step_context(analysis: Analysis, steps: Steps, host_gap_ns: int = HOST_GAP_NS) -> StepContext:
    """Gather the per-step frames of ``steps`` (see :class:`StepContext`).

    Args:
        analysis: from :func:`launchprof.analyze`.
        steps: from :func:`~launchprof.analysis.steps.find_steps`.
        host_gap_ns: CPU time outside CUDA calls above which a gap is host work.
    """
    device = _device(analysis, steps)
    empty = pd.DataFrame()
    if device is None or device.activity.empty:
        return StepContext(steps, None, steps.pid, empty, empty, empty, empty, empty)
    pid = steps.pid if steps.pid is not None else int(device.activity["pid"].value_counts().index[0])
    act = device.activity
    no_period = steps.table.empty or not steps.steady["period_ns"].notna().any()
    if steps.source == "none" or no_period:  # nothing, or one step: judge the whole trace
        pseudo = True
        table = _pseudo_table(device, pid, analysis.trace.api)
        step_of = np.where(act["pid"].to_numpy() == pid, 0, -1)
    else:
        pseudo = False
        table = steps.table
        step_of = steps.activity_step.to_numpy()
    causes = _gap_causes(analysis, act, step_of, len(table), host_gap_ns)
    table = table.join(causes, on="step")
    table["wait_ns"] = table[["sync_wait_ns", "host_work_wait_ns", "launch_wait_ns"]].sum(axis=1)
    steady = table if pseudo else table.loc[table["step"].isin(steps.steady["step"])]
    steady_steps = steady["step"].to_numpy()
    in_steady = np.isin(step_of, steady_steps) & (step_of >= 0)
    # Kernels: the kernel rows of steady steps (activity rows matched on their keys).
    keys = ["device_id", "pid", "correlation_id", "stream_id", "start", "end"]
    kind = text(act["kind"]).to_numpy()
    is_kernel = in_steady & (kind == "kernel")
    is_memop = in_steady & np.isin(kind, ["memcpy", "memset"])
    kernels = _steady_kernels(analysis, device, is_kernel, step_of)
    if kernels is None:  # the activity does not line up with the kernel table: match on keys
        kact = act.loc[is_kernel, keys].assign(step=step_of[is_kernel])
        kernels = analysis.trace.kernels.merge(kact.drop_duplicates(keys), on=keys, how="inner")
    kernels = kernels.sort_values(["step", "start"], kind="stable").reset_index(drop=True)
    mact = act.loc[is_memop, keys].assign(step=step_of[is_memop])
    memops = analysis.trace.memops.merge(mact.drop_duplicates(keys), on=keys, how="inner")
    api = analysis.trace.api
    of_pid = (api["pid"] == pid).to_numpy()
    mine = api if of_pid.all() else api.loc[of_pid]  # one process: no copy
    call_step = _step_of_time(mine["start"].to_numpy(dtype=np.int64), table)
    keep = np.isin(call_step, steady_steps) & (call_step >= 0)
    calls = mine.loc[keep].assign(step=call_step[keep])
    calls = pd.concat([calls, classes(calls["call"])], axis=1)
    calls["call"] = text(calls["call"])
    return StepContext(steps, device, pid, table, steady, kernels, calls, memops, pseudo)
