"""The analysis of one trace: figures per device, process and stream, and launch figures.

:func:`analyze_trace` is pure: a :class:`~launchprof.trace.Trace` in, an
:class:`Analysis` out. The later stages (steps, cross-rank view, diagnosis, graph
recommendation) take it and return their own results, which
:class:`~launchprof.analysis.result.AnalysisResult` holds beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.timeline.gaps import (
    DEFAULT_BUBBLE_THRESHOLD_NS,
    TimelineFigures,
    api_end_keyed,
    call_index,
    figures_of_arrays,
    figures_of_intervals,
    submit_ends,
)
from launchprof.analysis.timeline.intervals import sorted_union, union
from launchprof.analysis.timeline.launches import LaunchFigures, launch_figures
from launchprof.trace import Trace

# A bubble threshold beyond this (1000 s, the command line's bound) is no threshold: every idle gap
# of a real trace is shorter.
MAX_BUBBLE_THRESHOLD_NS = 1_000_000_000_000


@dataclass(frozen=True)
class StreamFigures:
    """Figures of one stream (identified by pid and stream id) on one device."""

    pid: int
    stream_id: int
    figures: TimelineFigures


@dataclass(frozen=True)
class ProcessFigures:
    """Figures of one process's activity on one device."""

    pid: int
    name: str | None
    figures: TimelineFigures


@dataclass(frozen=True)
class DeviceAnalysis:
    """Everything measured on one device."""

    device_id: int
    name: str | None
    figures: TimelineFigures
    processes: list[ProcessFigures]
    streams: list[StreamFigures]
    activity: pd.DataFrame = field(repr=False)


@dataclass(frozen=True)
class Analysis:
    """The result of analysing one trace.

    Attributes:
        trace: the loaded trace (its frames are the underlying data).
        bubble_threshold_ns: gaps of at least this length count as bubbles.
        devices: one :class:`DeviceAnalysis` per device with GPU activity, by device id.
        launches: :class:`LaunchFigures` over the whole trace.
        processes_without_gpu: pids that made CUDA API calls but have no GPU activity.
        nvtx_ranges_lost: the trace has NVTX domain-creation events but no ranges
            (typically an nsys too old for the installed ``nvtx`` package).
        notes: what was skipped or degraded while loading or analysing.
    """

    trace: Trace
    bubble_threshold_ns: int
    devices: list[DeviceAnalysis]
    launches: LaunchFigures
    processes_without_gpu: list[int]
    nvtx_ranges_lost: bool
    notes: list[str]
    # Results computed once per analysis (see cached); a replace()d Analysis starts empty,
    # an AnalysisResult.of() it shares them.
    _derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once per ``key`` for this analysis (e.g. the steps of a
        device and process, found for the cross-rank view and again for the report).
        The value is shared: read it, do not modify it."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

    def forget(self, drop: Callable[[Any, Any], bool]) -> None:
        """Drop the results computed once (:meth:`cached`) for which ``drop(key, value)``
        holds, so that their memory can go: computed again if asked for again."""
        for key in [k for k, v in self._derived.items() if drop(k, v)]:
            del self._derived[key]


def _process_names(trace: Trace) -> dict[int, str]:
    procs = trace.processes.dropna(subset=["pid"])
    return {int(p): str(n) for p, n in zip(procs["pid"], procs["name"], strict=False) if n is not None}


def _distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)``, without its hashing when every value is the same."""
    if values.size and values.min() == values.max():
        return values[:1]
    return np.unique(values)


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sorted distinct values, each row's position among them, rows per value) of an int
    column. Values within a small range (stream ids, pids) are coded by offset, no sort."""
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 1 << 16:
        offset = (values - lo).astype(np.intp, copy=False)
        counts = np.bincount(offset, minlength=hi - lo + 1)
        present = np.flatnonzero(counts)
        if present.size == counts.size:  # every value in the range occurs
            return present + lo, offset, counts
        position = np.zeros(counts.size, np.intp)
        position[present] = np.arange(present.size)
        return present + lo, position[offset], counts[present]
    distinct, code, counts = np.unique(values, return_inverse=True, return_counts=True)
    return distinct, code, counts


def row_groups(columns: list[np.ndarray]) -> list[tuple[tuple[int, ...], np.ndarray | None]]:
    """(key, rows) per distinct value of the key ``columns`` (equal-length int arrays), in
    key order (as a sorted groupby); ``rows`` are ascending positions, None when the
    group holds every row."""
    n = len(columns[0])
    if not n:
        return []
    varying = [c.min() != c.max() for c in columns]
    if not any(varying):
        return [(tuple(int(c[0]) for c in columns), None)]
    # Each row's group number, in key order, from the columns that vary: a column's
    # value position, or for several columns the position among the combinations.
    coded = [_codes(c) if v else (c[:1], None, None) for c, v in zip(columns, varying, strict=True)]
    values = [d for d, _, _ in coded]
    sizes = [d.size for d in values]
    varied = [(i, code, counts) for i, (_, code, counts) in enumerate(coded) if code is not None]
    if len(varied) == 1:
        i, code, counts = varied[0]
        assert code is not None and counts is not None
        keys = [tuple(int(v[j]) if k == i else int(v[0]) for k, v in enumerate(values)) for j in range(sizes[i])]
    else:
        code = np.zeros(n, np.int64)
        for i, c, _ in varied:
            code *= sizes[i]
            code += c
        combos = int(np.prod(sizes))
        if combos <= max(1 << 20, n):
            counts = np.bincount(code, minlength=combos)
            present = np.flatnonzero(counts)
            counts = counts[present]
            if present.size < combos:  # number the combinations that occur, in order
                position = np.zeros(combos, np.int64)
                position[present] = np.arange(present.size)
                code = position[code]
        else:  # too many combinations for a table
            present, code, counts = np.unique(code, return_inverse=True, return_counts=True)
        keys = []
        for g in present.tolist():  # one per group (stream)
            index = []
            for size in reversed(sizes):
                g, j = divmod(g, size)
                index.append(j)
            keys.append(tuple(int(v[j]) for v, j in zip(values, reversed(index), strict=True)))
    # A stable sort keeps each group's rows ascending; small codes sort by radix.
    order = np.argsort(code.astype(np.uint16) if len(keys) <= 1 << 16 else code, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()
    return [
        (key, None if hi - lo == n else order[lo:hi]) for key, lo, hi in zip(keys, bounds[:-1], bounds[1:], strict=True)
    ]


class _SubmitEnds:
    """:func:`~launchprof.analysis.timeline.gaps.submit_ends` of a device's activity rows,
    looked up once per row for the device and its processes and streams."""

    def __init__(self, api_end: pd.Series, pid: np.ndarray, correlation_id: np.ndarray) -> None:
        self.api_end, self.pid, self.correlation_id = api_end, pid, correlation_id
        self.values = np.empty(len(pid), np.int64)
        self.known = np.zeros(len(pid), bool)
        self.looked_up = False

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        if not self.looked_up:  # the first group (the device itself): no row is known yet
            self.looked_up = True
            self.values[rows] = ends = submit_ends(self.api_end, self.pid[rows], self.correlation_id[rows])
            self.known[rows] = True
            return ends
        missing = rows[~self.known[rows]]
        if missing.size:
            self.values[missing] = submit_ends(self.api_end, self.pid[missing], self.correlation_id[missing])
            self.known[missing] = True
        return self.values[rows]


def _device_figures(
    dev: pd.DataFrame, api_end: pd.Series, threshold: int, names: dict[int, str]
) -> tuple[TimelineFigures, list[ProcessFigures], list[StreamFigures]]:
    """The figures of one device's activity ``dev`` (sorted by (start, end), as
    ``Trace.gpu_activity()`` is) and of each of its processes and streams."""
    start, end = dev["start"].to_numpy(), dev["end"].to_numpy()
    pid, corr = dev["pid"].to_numpy(), dev["correlation_id"].to_numpy()
    kind = dev["kind"]
    cats = [str(c) for c in kind.cat.categories]
    codes = kind.cat.codes.to_numpy()
    ends = _SubmitEnds(api_end, pid, corr)

    def counts(rows: np.ndarray | None) -> tuple[int, int]:
        per = np.bincount((codes if rows is None else codes[rows]) + 1, minlength=len(cats) + 1)[1:]
        found = dict(zip(cats, per.tolist(), strict=True))
        return found.get("kernel", 0), found.get("memcpy", 0) + found.get("memset", 0)

    # The device's busy intervals: ``first`` holds the row opening each one.
    starts, stops, first = sorted_union(np.asarray(start, np.int64), np.asarray(end, np.int64))
    host_wait = ends(first[1:]) > stops[:-1]  # NaN (no submitting call) compares False
    k, m = counts(None)
    whole = figures_of_intervals(k, m, starts, stops, first[1:], host_wait, pid, corr, threshold)

    def figures(rows: np.ndarray) -> TimelineFigures:
        k, m = counts(rows)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        if hi - lo == rows.size:  # a run of consecutive rows (e.g. all but the first memsets)
            # When its first row opens a busy interval of the device, and the row after it
            # opens another (or there is none), its intervals are the device's from the
            # one to the other: the rows before it end before it starts, those after
            # start after it ends. Its gaps and their host-wait flags are the device's.
            i = int(np.searchsorted(first, lo))
            j = int(np.searchsorted(first, hi)) if hi < len(start) else first.size
            opens_next = hi == len(start) or (j < first.size and first[j] == hi)
            if i < first.size and first[i] == lo and opens_next:
                return figures_of_intervals(
                    k, m, starts[i:j], stops[i:j], first[i + 1 : j], host_wait[i : j - 1], pid, corr, threshold
                )
        return figures_of_arrays(start[rows], end[rows], k, m, ends, pid, corr, threshold, presorted=True, rows=rows)

    processes = [
        ProcessFigures(key[0], names.get(key[0]), whole if rows is None else figures(rows))
        for key, rows in row_groups([pid])
    ]
    streams = [
        StreamFigures(key[0], key[1], whole if rows is None else figures(rows))
        for key, rows in row_groups([pid, dev["stream_id"].to_numpy()])
    ]
    return whole, processes, streams


def analyze_trace(trace: Trace, bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS) -> Analysis:
    """Analyse a loaded trace.

    Args:
        trace: from :func:`launchprof.trace.load_trace`.
        bubble_threshold_ns: minimum idle gap counted as a bubble (default 1 us,
            docs/metrics.md, "Bubble"). Must be >= 0.

    Returns:
        :class:`Analysis`.

    Raises:
        ValueError: ``bubble_threshold_ns`` is not a number of ns from 0 to
            :data:`MAX_BUBBLE_THRESHOLD_NS` (NaN, infinite or 1e30 broke the histograms).
    """
    if not 0 <= bubble_threshold_ns <= MAX_BUBBLE_THRESHOLD_NS:  # False for NaN too
        raise ValueError(
            f"bubble threshold must be from 0 to {MAX_BUBBLE_THRESHOLD_NS:.0f} ns, not {bubble_threshold_ns!r}"
        )
    # The launch figures first: their temporary arrays are freed before the activity's.
    launches = launch_figures(trace.api, trace.kernels, trace.graph_execs)
    index = trace.cached("call_index", lambda: call_index(trace.api))
    api_end = trace.cached("api_end_keyed", lambda: api_end_keyed(trace.api, index))
    names = _process_names(trace)
    gpu_names = {
        int(d): str(n)
        for d, n in zip(trace.gpus["device_id"], trace.gpus["name"], strict=False)
        if pd.notna(d) and n is not None
    }
    sources = [f for f in (trace.kernels, trace.memops, trace.graph_execs) if len(f)]
    gpu_pids = set(int(p) for f in sources for p in _distinct(f["pid"].to_numpy()))
    device_ids = np.unique(
        np.concatenate([_distinct(f["device_id"].to_numpy()) for f in sources] or [np.empty(0, np.int64)])
    )
    devices = []
    for device_id in device_ids.astype(np.int64).tolist():
        # Each device's activity made on its own (one device: the whole frame): never the
        # whole frame and the devices' copies of it at once.
        dev = trace.gpu_activity(None if len(device_ids) == 1 else device_id)
        figs, processes, streams = _device_figures(dev, api_end, bubble_threshold_ns, names)
        devices.append(DeviceAnalysis(device_id, gpu_names.get(device_id), figs, processes, streams, dev))
    api_pids = set(int(p) for p in _distinct(trace.api["pid"].to_numpy()))
    notes = list(trace.notes)
    lost = trace.nvtx_domain_events > 0 and len(trace.nvtx) == 0
    if lost:
        notes.append(
            "NVTX domains were created but no NVTX range was recorded: this nsys did not "
            "capture the ranges (nsys 2022.4 drops ranges from the nvtx package >= 0.2.12, not "
            "launchprof.step()'s: mark the loop with it, use nvtx 0.2.11 or a newer nsys), or the "
            "process was killed before nsys collected them"
        )
    if not trace.has_cuda:
        ranges = len(trace.nvtx)
        notes.append(
            "no CUDA activity in this trace (no CUDA tables): GPU figures are empty"
            + (f"; {ranges} NVTX range(s) recorded" if ranges else "")
        )
    elif gpu_pids and len(trace.api) == 0:
        notes.append(
            f"no CUDA API calls in this trace ({len(gpu_pids)} process(es) with GPU activity): "
            "launch figures are empty and host-wait idle cannot be attributed (reported as 0)"
        )
    else:
        notes.extend(_unattributed(trace))
    return Analysis(
        trace=trace,
        bubble_threshold_ns=bubble_threshold_ns,
        devices=devices,
        launches=launches,
        processes_without_gpu=sorted(api_pids - gpu_pids),
        nvtx_ranges_lost=lost,
        notes=notes,
    )


def utilization_series(activity: pd.DataFrame, bins: int = 200) -> pd.DataFrame:
    """GPU utilization over time: the busy share of each of ``bins`` equal time bins.

    Args:
        activity: GPU activity rows of one device (``start``, ``end``), ns.
        bins: number of equal-width bins over the span.

    Returns:
        DataFrame with ``bins`` rows: ``start_ns``, ``end_ns``, ``utilization`` (0..1).
        Empty when there is no activity.
    """
    u = union(activity["start"].to_numpy(), activity["end"].to_numpy())
    if u.starts.size == 0:
        return pd.DataFrame({"start_ns": [], "end_ns": [], "utilization": []})
    edges = np.linspace(u.starts[0], u.ends[-1], bins + 1)
    cum = np.concatenate([[0], np.cumsum(u.ends - u.starts)])

    def busy_before(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(u.starts, t, side="right")
        prev = np.maximum(k - 1, 0)
        inside = np.clip(t - u.starts[prev], 0, u.ends[prev] - u.starts[prev])
        return np.where(k > 0, cum[prev] + inside, 0.0)

    busy = np.diff(busy_before(edges))
    width = np.diff(edges)
    util = np.divide(busy, width, out=np.zeros_like(busy), where=width > 0)
    return pd.DataFrame({"start_ns": edges[:-1], "end_ns": edges[1:], "utilization": np.clip(util, 0.0, 1.0)})


def _unattributed(trace: Trace) -> list[str]:
    """Notes for rows whose idle gap cannot be put down to the host: GPU activities without
    a correlation id, CUDA API calls without a thread (a NULL ``globalTid``: process 0);
    a NULL reads as -1 (:mod:`launchprof.trace.model`)."""
    notes = []
    frames = (trace.kernels, trace.memops)
    uncorrelated = sum(int((f["correlation_id"].to_numpy() < 0).sum()) for f in frames if "correlation_id" in f)
    if uncorrelated:
        notes.append(
            f"{uncorrelated} GPU activit{'y has' if uncorrelated == 1 else 'ies have'} no correlation id: the idle "
            "gap before each cannot be attributed to the host (counted as not waiting for the CPU)"
        )
    threadless = int((trace.api["pid"].to_numpy() == 0).sum()) if "pid" in trace.api else 0
    if threadless:
        notes.append(
            f"{threadless} CUDA API call{' has' if threadless == 1 else 's have'} no thread (globalTid): they "
            "submit nothing a process's steps can claim, and the gaps after them are not host-wait"
        )
    return notes
