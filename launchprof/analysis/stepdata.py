"""Per-step frames shared by the diagnosis and the findings (pure, over an Analysis).

:func:`step_context` gathers, for the device and process that :class:`Steps` describe:
the steady-state steps, their kernels (with names and launch configuration), their
CUDA API calls, and the cause of each GPU idle gap
(:func:`~launchprof.analysis.diagnosis.gapcauses.gap_causes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import ascending, kind_in, selection, sorted_by
from launchprof.analysis.diagnosis.gapcauses import HOST_GAP_NS, gap_causes
from launchprof.analysis.steps import Steps
from launchprof.analysis.timeline.callkinds import api_classes, classify
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis
from launchprof.analysis.timeline.gaps import call_index, corr_key, last_call_rows
from launchprof.analysis.timeline.intervals import union
from launchprof.trace.model import text


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
        kernels: kernels of steady steps, sorted stably by (``step``, ``start``): ``step``,
            ``start``, ``end``, ``stream_id``, ``name_id``, ``grid_x``..``block_z``,
            ``graph_node_id``, ``correlation_id`` (and the other kernel-table columns).
        memops: memops of steady steps: ``step``, ``kind``, ``copy_kind``, ``bytes``.
        pseudo: True when ``table`` is the whole-device pseudo-step.
        api: the trace's ``api`` frame.
        call_mask: per ``api`` row, whether it is a call of ``pid`` inside a steady step
            (by CPU time: the step with the latest ``cpu_start`` at or before the call's
            start, when the call starts before that step's ``cpu_end``).
        call_classes: :func:`~launchprof.analysis.timeline.callkinds.classify` of ``api["call"]``
            (None when there is no device).
        kernel_calls: per ``kernels`` row, the ``api`` position of its submitting call
            (the last call with its pid and correlation id > 0; -1: none).
        calls: (property, built on first use) the calls of ``call_mask``: the columns of
            ``api`` plus ``step`` and the class columns, ``call`` as text; index: their
            ``api`` labels. :meth:`calls_where` gives one class's rows without building
            the whole frame.
    """

    steps: Steps
    device: DeviceAnalysis | None
    pid: int | None
    table: pd.DataFrame
    steady: pd.DataFrame
    kernels: pd.DataFrame = field(repr=False)
    memops: pd.DataFrame = field(repr=False)
    pseudo: bool = False
    api: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    call_mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool), repr=False)
    call_classes: pd.DataFrame | None = field(default=None, repr=False)
    kernel_calls: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    # Values derived from the frames for the findings, computed once (see cached).
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once per ``key`` for this context (shared by the
        findings: read it, do not modify it)."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    @property
    def calls(self) -> pd.DataFrame:
        """The calls of ``pid`` inside steady steps (see the class docstring); built once."""
        return self.cached("calls", lambda: self.calls_where(None))  # type: ignore[no-any-return]

    def calls_where(self, kind: str | None) -> pd.DataFrame:
        """``calls.loc[calls[kind]]`` (the rows of one class column, e.g. ``"sync"``), or
        all of ``calls`` for None; only the chosen rows are taken from ``api``."""
        if self.call_classes is None:
            return pd.DataFrame()
        mask = self.call_mask if kind is None else self.call_mask & self.call_classes[kind].to_numpy()
        rows = np.flatnonzero(mask)
        extra = {"step": _step_of_time(self.api["start"].to_numpy(dtype=np.int64)[rows], self.table)}
        extra.update({name: flags.to_numpy()[rows] for name, flags in self.call_classes.items()})
        calls = take_rows(self.api, rows, index=self.api.index[rows], extra=extra)
        calls["call"] = text(calls["call"])
        return calls


def _device(analysis: Analysis, steps: Steps) -> DeviceAnalysis | None:
    for d in analysis.devices:
        if d.device_id == steps.device_id:
            return d
    if analysis.devices:
        return max(analysis.devices, key=lambda d: (d.figures.kernels, -d.device_id))
    return None


def classes(calls: pd.Series) -> pd.DataFrame:
    """:func:`~launchprof.analysis.timeline.callkinds.classify` computed once per distinct call name
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
            "kernels": [int(kind_in(kind, ("kernel",)).sum())],
            "memops": [int(kind_in(kind, ("memcpy", "memset")).sum())],
            "busy_ns": [u.busy_ns],
            "period_ns": [float(span)],
            "launch_calls": [int(cls["launch"].sum())],
            "graph_launches": [int(cls["graph_launch"].sum())],
            "warmup": [False],
        }
    )


def submitting_calls(
    api: pd.DataFrame, index: tuple[np.ndarray, np.ndarray], pid: np.ndarray, corr: np.ndarray
) -> np.ndarray:
    """:func:`~launchprof.analysis.timeline.gaps.last_call_rows` with ``index``: the api
    position of the last call with each (pid, correlation id > 0), -1 where none. When
    the keys are dense (one process: its correlation ids run 1, 2, 3...), a table of rows
    indexed by key instead of a binary search."""
    keys, rows = index
    if keys.size == 0:
        return np.full(len(pid), -1, dtype=np.int64)
    low, span = int(keys[0]), int(keys[-1]) - int(keys[0]) + 1
    if span > 4 * keys.size + 1024:
        return last_call_rows(api, pid, corr, index)
    table = np.full(span, -1, dtype=np.int64)
    table[keys - low] = rows
    offset = corr_key(pid, corr) - low
    inside = (offset >= 0) & (offset < span)
    out = table[offset] if inside.all() else np.where(inside, table[np.where(inside, offset, 0)], -1)
    out[np.asarray(corr) <= 0] = -1
    return out


def _step_of_time(times: np.ndarray, table: pd.DataFrame) -> np.ndarray:
    """The step of each CPU time: the step with the latest ``cpu_start`` at or before it
    (of steps sharing a start, the last), when the time is before that step's
    ``cpu_end``; -1 otherwise."""
    start = table["cpu_start"].to_numpy(dtype=np.int64)
    end = table["cpu_end"].to_numpy(dtype=np.int64)
    step = table["step"].to_numpy()
    if not ascending(start):  # steps in CPU start order (stable)
        order = np.argsort(start, kind="stable")
        start, end, step = start[order], end[order], step[order]
    i = np.searchsorted(start, times, side="right") - 1
    at = np.maximum(i, 0)
    inside = (i >= 0) & (times < end[at])
    return np.where(inside, step[at], -1)


def steady_calls(api: pd.DataFrame, table: pd.DataFrame, steady_steps: np.ndarray, pid: int) -> np.ndarray:
    """Per ``api`` row (columns ``start``, ``pid``; ns): whether it is a call of ``pid``
    that starts inside a steady step (``steady_steps``), the step whose [``cpu_start``,
    ``cpu_end``) of ``table`` (the step table) holds its start.

    When the steps lie in CPU start order without overlapping and the calls are in start
    order (the loader sorts them), the step a call starts in is the only one whose
    [cpu_start, cpu_end) holds it, and each step's calls are one slice of rows: two binary
    searches per step and a running count, instead of one search per call."""
    start = api["start"].to_numpy()
    t_start = table["cpu_start"].to_numpy(dtype=np.int64)
    t_end = table["cpu_end"].to_numpy(dtype=np.int64)
    of_pid = api["pid"].to_numpy() == pid
    ordered = ascending(t_start) and bool((t_end[:-1] <= t_start[1:]).all()) and ascending(start)
    if not ordered:
        return of_pid & step_member(_step_of_time(start.astype(np.int64, copy=False), table), steady_steps)
    steady = step_member(table["step"].to_numpy(), steady_steps)
    lo = np.searchsorted(start, t_start[steady], side="left")
    hi = np.maximum(np.searchsorted(start, t_end[steady], side="left"), lo)
    # +1 where a steady step's rows begin, -1 where they end; the steps do not overlap, so
    # the running count is 0 or 1 (int8 is enough).
    count = np.zeros(start.size + 1, dtype=np.int8)
    np.add.at(count, lo, 1)
    np.add.at(count, hi, -1)
    inside = np.cumsum(count[:-1], dtype=np.int8) > 0
    return inside if of_pid.all() else of_pid & inside


def _kind_is(kind: pd.Series, names: tuple[str, ...]) -> np.ndarray:
    """Whether each row of an activity ``kind`` column is one of ``names``; compared by
    category code when the column is categorical (no text per row)."""
    if not isinstance(kind.dtype, pd.CategoricalDtype):
        return text(kind).isin(names).to_numpy()
    codes = kind.cat.codes.to_numpy()
    out = np.zeros(codes.size, dtype=bool)
    for i, c in enumerate(kind.cat.categories):  # a handful of kinds
        if str(c) in names:
            out |= codes == i
    return out


def step_member(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``np.isin(values, wanted) & (values >= 0)`` for step indices (small non-negative
    ints; -1 for none), by a lookup table instead of a sort."""
    values = np.asarray(values)
    wanted = np.asarray(wanted)
    wanted = wanted[wanted >= 0]
    if values.size == 0 or wanted.size == 0:
        return np.zeros(values.size, dtype=bool)
    low, top = int(values.min()), int(max(values.max(), wanted.max()))
    if top > 4 * (values.size + wanted.size) + 1024:  # sparse indices: sort-based isin
        return np.isin(values, wanted) & (values >= 0)
    table = np.zeros(top + 2, dtype=bool)  # slot 0 stands for every negative value
    table[wanted.astype(np.int64) + 1] = True
    return table[(values if low >= -1 else np.maximum(values, -1)) + 1]


def take_rows(
    frame: pd.DataFrame, rows: np.ndarray, index: pd.Index | None = None, extra: dict[str, Any] | None = None
) -> pd.DataFrame:
    """``frame.iloc[rows]`` (every column, dtypes kept; ``rows``: int positions) with ``index`` (default a fresh
    RangeIndex) and the ``extra`` columns after them, taken column by column with numpy
    (cheaper than pandas' take on wide frames of many rows); ascending consecutive
    ``rows`` are a slice (no copy)."""
    if rows.size and int(rows[-1]) - int(rows[0]) + 1 == rows.size and ascending(rows, strict=True):
        pick: Any = slice(int(rows[0]), int(rows[-1]) + 1)
    else:
        pick = rows
    cols: dict[str, Any] = {}
    for c in frame.columns:
        col = frame[c]
        if isinstance(col.dtype, np.dtype):
            cols[c] = col.to_numpy()[pick]
        else:  # extension arrays (nullable Int64 graph ids, categorical call names)
            cols[c] = col.array[pick] if isinstance(pick, slice) else col.array.take(pick)
    cols.update(extra or {})
    return pd.DataFrame(cols, index=index if index is not None else pd.RangeIndex(len(rows)), copy=False)


def _steady_kernels(
    analysis: Analysis, device: DeviceAnalysis, is_kernel: np.ndarray, step_of: np.ndarray, all_kernels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The kernels behind the activity rows flagged in ``is_kernel`` (``all_kernels``:
    the activity's kernel rows), sorted stably by (step, start): their positions in
    ``analysis.trace.kernels``, their steps and their activity rows. The kernel rows of a
    device's activity are its kernels in stable (start, end) order
    (:meth:`~launchprof.trace.Trace.gpu_activity`), so they are found by position; None
    when the counts disagree."""
    kern = analysis.trace.kernels
    device_ids = kern["device_id"].to_numpy()
    every = bool(device_ids.size) and bool((device_ids == device.device_id).all())  # one device
    mine = np.arange(device_ids.size) if every else np.flatnonzero(device_ids == device.device_id)
    only_kernels = bool(all_kernels.all())
    if mine.size != (all_kernels.size if only_kernels else int(all_kernels.sum())):
        return None
    start, end = kern["start"].to_numpy(), kern["end"].to_numpy()
    if not every:
        start, end = start[mine], end[mine]
    in_order = sorted_by(start, end)  # the loader sorts by start
    by_time = mine if in_order else mine[np.lexsort((end, start))]
    act_rows = np.arange(all_kernels.size) if only_kernels else np.flatnonzero(all_kernels)
    wanted = selection(is_kernel if only_kernels else is_kernel[all_kernels])
    rows, act_rows = by_time[wanted], act_rows[wanted]
    steps = step_of[act_rows]
    if not in_order:  # back to kernel-table order
        order = np.argsort(rows, kind="stable")
        rows, steps, act_rows = rows[order], steps[order], act_rows[order]
    # Then stably by (step, start). Kernel-table order is start order when the table is
    # sorted by start: only the steps need checking then.
    k_start = kern["start"].to_numpy()
    if not (ascending(steps) and (in_order or (np.diff(k_start[rows])[np.diff(steps) == 0] >= 0).all())):
        order = np.lexsort((k_start[rows], steps))  # stable, as sort_values(kind="stable")
        rows, steps, act_rows = rows[order], steps[order], act_rows[order]
    return rows, steps, act_rows


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
        return StepContext(steps, None, steps.pid, empty, empty, empty, empty)
    pid = steps.pid if steps.pid is not None else int(device.activity["pid"].value_counts().index[0])
    act = device.activity
    api = analysis.trace.api
    no_period = steps.table.empty or not steps.steady["period_ns"].notna().any()
    if steps.source == "none" or no_period:  # nothing, or one step: judge the whole trace
        pseudo = True
        table = _pseudo_table(device, pid, api)
        step_of = np.where(act["pid"].to_numpy() == pid, 0, -1)
    else:
        pseudo = False
        table = steps.table
        step_of = steps.activity_step.to_numpy()
    # The submitting call of every activity row (gaps and kernel durations use them).
    index = None
    if len(api):
        index = analysis.trace.cached("call_index", lambda: call_index(api))
        act_call = submitting_calls(api, index, act["pid"].to_numpy(), act["correlation_id"].to_numpy())
    else:
        act_call = np.full(len(act), -1, dtype=np.int64)
    causes = gap_causes(analysis, act, step_of, len(table), host_gap_ns, act_call)
    table = table.join(causes, on="step")
    table["wait_ns"] = table[["sync_wait_ns", "host_work_wait_ns", "launch_wait_ns"]].sum(axis=1)
    steady = table if pseudo else table.loc[table["step"].isin(steps.steady["step"])]
    steady_steps = steady["step"].to_numpy()
    in_steady = step_member(step_of, steady_steps)
    # Kernels: the kernel rows of steady steps, sorted stably by (step, start).
    keys = ["device_id", "pid", "correlation_id", "stream_id", "start", "end"]
    all_kernels = _kind_is(act["kind"], ("kernel",))
    is_kernel = in_steady & all_kernels
    is_memop = in_steady & _kind_is(act["kind"], ("memcpy", "memset"))
    found = _steady_kernels(analysis, device, is_kernel, step_of, all_kernels)
    if found is not None:
        rows, kernel_step, act_rows = found
        kernels = take_rows(analysis.trace.kernels, rows, extra={"step": kernel_step})
        kernel_calls = act_call[act_rows]
    else:  # the activity does not line up with the kernel table: match on keys
        kact = act.loc[is_kernel, keys].assign(step=step_of[is_kernel])
        kernels = analysis.trace.kernels.merge(kact.drop_duplicates(keys), on=keys, how="inner")
        kernels = kernels.sort_values(["step", "start"], kind="stable").reset_index(drop=True)
        kernel_calls = (
            last_call_rows(api, kernels["pid"].to_numpy(), kernels["correlation_id"].to_numpy(), index)
            if index is not None
            else np.full(len(kernels), -1, dtype=np.int64)
        )
    mact = act.loc[is_memop, keys].assign(step=step_of[is_memop])
    memops = analysis.trace.memops.merge(mact.drop_duplicates(keys), on=keys, how="inner")
    # Calls: the process's API calls that start inside a steady step (CPU time).
    calls = steady_calls(api, table, steady_steps, pid)
    cls = api_classes(analysis.trace)
    return StepContext(steps, device, pid, table, steady, kernels, memops, pseudo, api, calls, cls, kernel_calls)
