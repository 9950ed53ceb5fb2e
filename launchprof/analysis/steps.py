"""Steps: one iteration of the user's loop, found in the trace and projected onto the GPU.

Three sources, in order of preference (DOMAIN.md, "Step"):

1. ``nvtx``: NVTX ranges. By default launchprof's own marker (range ``step`` in domain
   ``launchprof``, see :mod:`launchprof.marker`); ``step_name`` picks ranges by text;
   otherwise the one repeating range text that covers the most GPU work, among the
   ranges that can be the user's step (:func:`step_range_rejection`: not a library's
   own range, repeated at least 3 times, and holding at least half of the GPU work that
   the ranges' threads submit between the first range's start and the last one's end).
   A GPU activity
   belongs to the range, on the thread that submitted it, that contains the start of the
   submitting API call (joined on (pid, correlation id)). Calls on the process's other
   threads, which carry no step range (PyTorch's autograd threads launch the backward
   pass), go to the step range that contains their start in time.
2. ``graph-launch``: without NVTX, each ``cudaGraphLaunch`` of the busiest process is one
   step (a graph is the captured step).
3. ``inferred``: without either, the shortest period ``p`` of the busiest process's
   kernel sequence (kernel name and launch configuration) over a window in the middle
   of the trace, accepted when at least 90 % of kernels match the kernel ``p`` later.
   A ``template`` (kernel name ids of one step, e.g. from the graph of a converted run)
   fixes the period and phase instead.

Warm-up: the leading steps (at most a quarter of them) whose period, GPU duration or CPU
time exceeds 1.5x the median of the second half of the steps, whose kernel count differs
from the most common one, or that capture or instantiate a graph. The 1.5x factor is a heuristic: start-up costs (module
loading, library handles, allocator growth, capture, instantiation) are typically
several times a steady step.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.callkinds import api_classes
from launchprof.analysis.core import Analysis, DeviceAnalysis
from launchprof.analysis.timeline import call_index, last_call_rows
from launchprof.errors import LaunchprofError

STEP_DOMAIN = "launchprof"
STEP_NAME = "step"
MATCH_RATIO = 0.9
WARMUP_FACTOR = 1.5
MAX_PERIOD = 4096
WINDOW = 16384
MIN_REPEATS = 3
MIN_RANGE_COVER = 0.5

# NVTX domains and range texts that libraries emit for their own calls (CUB/Thrust in
# CCCL annotate their algorithms, NCCL its collectives, cuDNN/cuBLAS theirs, PyTorch's
# emit_nvtx one range per operator, "aten::add, seq = 12"). Not a user's loop step.
LIBRARY_DOMAINS = frozenset(
    d.lower()
    for d in (
        "CCCL",
        "CUB",
        "Thrust",
        "NCCL",
        "cuDNN",
        "cuBLAS",
        "cuBLASLt",
        "cuSPARSE",
        "cuFFT",
        "cuSOLVER",
        "cuRAND",
        "NVSHMEM",
        "TensorRT",
        "nvJPEG",
        "DALI",
    )
)
LIBRARY_TEXT = re.compile(
    r"^(?:cub::|thrust::|cuda::|cccl|nccl|cudnn|cublas|cusparse|cufft|cusolver|curand|nvshmem|aten::|c10d::|"
    r"autograd::|torch::|profilerstep#)|, seq = \d+|, op_id = \d+",
    re.IGNORECASE,
)


class StepError(LaunchprofError):
    """The steps asked for (``--step NAME``) are not in the trace."""


@dataclass(frozen=True)
class Steps:
    """Steps of one device.

    Attributes:
        source: ``"nvtx"``, ``"graph-launch"``, ``"inferred"`` or ``"none"``.
        name: the NVTX range text, or a description of the inferred step.
        reason: one sentence on how the steps were found (or why none were).
        device_id, pid: the device and the process whose steps these are.
        table: one row per step, in time order, columns (ns unless said):
            ``step`` (0..n-1), ``cpu_start``, ``cpu_end`` (the step on the CPU: NVTX
            range, or first launch call to next step's), ``gpu_start``, ``gpu_end``
            (first activity start, last activity end), ``kernels``, ``memops``,
            ``busy_ns`` (union inside the step), ``bubbles``, ``bubble_ns`` (gaps inside
            the step >= threshold), ``host_wait_ns`` (gaps inside the step, and the gap
            before it, whose next activity's submitting call ended after the gap began),
            ``lead_gap_ns`` (idle from the previous step's last activity to this step's
            first; 0 for the first step), ``period_ns`` (next step's gpu_start - this
            one's; NaN for the last), ``launch_calls``, ``launch_call_ns``,
            ``graph_launches``, ``sync_calls``, ``alloc_calls``, ``instantiations``,
            ``exec_updates``, ``captures``, ``api_ns`` (time in CUDA API calls),
            ``cpu_ns`` (cpu_end - cpu_start), ``warmup`` (bool).
        activity_step: step index of each row of the device's ``activity`` (-1: none).
        warmup: number of warm-up steps (the first ``warmup`` rows of ``table``).
        rejected: NVTX range labels (``domain:text``) that were not taken as the step,
            each with the reason (:func:`step_range_rejection`), in label order.
    """

    source: str
    name: str | None
    reason: str
    device_id: int | None
    pid: int | None
    table: pd.DataFrame
    activity_step: pd.Series = field(repr=False)
    warmup: int = 0
    rejected: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def steady(self) -> pd.DataFrame:
        """The steady-state steps: ``table`` without warm-up steps and without the last
        step (its period is unknown). Computed once (read it, do not modify it)."""
        t = self.table.loc[~self.table["warmup"]]
        return t.loc[t["period_ns"].notna()] if len(t) > 1 else t

    @property
    def count(self) -> int:
        return int(len(self.table))


def _busiest(device: DeviceAnalysis) -> int:
    act = device.activity
    pids = act["pid"].to_numpy()
    kernels = pids[_kind_in(act["kind"], ("kernel",))]
    values = kernels if kernels.size else pids
    if values.size and values.min() == values.max():  # one process: no counting needed
        return int(values[0])
    return int(pd.Series(values).value_counts().index[0])


def _kind_in(kind: pd.Series, names: tuple[str, ...]) -> np.ndarray:
    """Boolean array: ``kind`` is one of ``names`` (by category code when categorical)."""
    if isinstance(kind.dtype, pd.CategoricalDtype):
        wanted = np.array([c in names for c in kind.cat.categories.astype(str)] + [False])
        return wanted[kind.cat.codes.to_numpy()]  # code -1 (missing) reads the last entry
    return kind.isin(list(names)).to_numpy()


def _group_cummax(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Running maximum of ``values`` within each run of equal ``group`` (``group`` sorted
    ascending, >= 0). One ``np.maximum.accumulate`` over ``group * span + values``, whose
    runs are disjoint and ascending; pandas' grouped ``cummax`` where that key could overflow
    int64 or ``values`` are not integers."""
    if values.size == 0:
        return values.copy()
    if (values[1:] >= values[:-1]).all():  # already non-decreasing: its own running maximum
        return values
    if np.issubdtype(values.dtype, np.integer) and np.issubdtype(group.dtype, np.integer):
        lo = int(values.min())
        span = int(values.max()) - lo + 1
        if int(group[0]) >= 0 and (int(group[-1]) + 1) * span < 2**63:
            base = group.astype(np.int64) * span
            return np.maximum.accumulate(base + (values.astype(np.int64) - lo)) - base + lo
    return pd.Series(values).groupby(group, sort=False).cummax().to_numpy()


def _outermost(ranges: pd.DataFrame) -> pd.DataFrame:
    """``ranges`` without those nested inside an earlier range of the same thread (a
    recursive or re-entered range text would otherwise hide its outer range), sorted by
    start (stable)."""
    tid = ranges["tid"].to_numpy()
    start = ranges["start"].to_numpy()
    end = ranges["end"].to_numpy()
    order = np.lexsort((start, tid))  # by thread, then start (stable, as sort_values)
    tid_s = tid[order]
    thread = np.cumsum(np.r_[True, tid_s[1:] != tid_s[:-1]]) - 1 if tid_s.size else tid_s
    run_end = _group_cummax(thread, end[order])
    # Nested: an earlier range of the same thread ends after this one starts.
    nested = np.zeros(order.size, bool)
    same = thread[1:] == thread[:-1]
    nested[1:] = same & (run_end[:-1] > start[order][1:])
    kept = order[~nested]
    return ranges.iloc[kept[np.argsort(start[kept], kind="stable")]]


def _project(api: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """Index (into ``ranges``, sorted by start) of the range on the same thread that
    contains each API call's start; -1 where none does. ``ranges`` must not nest on a
    thread (see :func:`_outermost`). Of ranges with the same start, the last counts."""
    out = np.full(len(api), -1, dtype=np.int64)
    if ranges.empty or api.empty:
        return out
    r_start = ranges["start"].to_numpy()
    r_end = ranges["end"].to_numpy()
    r_tid = ranges["tid"].to_numpy()
    by_start = np.argsort(r_start, kind="stable")
    tids = np.unique(r_tid)
    call_start = api["start"].to_numpy()
    call_tid = api["tid"].to_numpy()
    # The calls on the ranges' threads, grouped by thread (a handful of threads).
    groups: list[tuple[int, np.ndarray | None]]
    if tids.size == 1:
        on_thread = call_tid == tids[0]
        groups = [(tids[0], None if on_thread.all() else np.flatnonzero(on_thread))]
    else:
        code = np.minimum(np.searchsorted(tids, call_tid), tids.size - 1)
        rows = np.flatnonzero(tids[code] == call_tid)
        rows = rows[np.argsort(code[rows], kind="stable")]
        bounds = np.searchsorted(code[rows], np.arange(tids.size + 1))
        groups = [(tid, rows[bounds[i] : bounds[i + 1]]) for i, tid in enumerate(tids)]
    for tid, calls in groups:
        mine = by_start[r_tid[by_start] == tid]  # this thread's ranges, by start
        on_range = _containing(r_start[mine], r_end[mine], _take(call_start, calls), mine)
        if calls is None:
            out = on_range
        else:
            out[calls] = on_range
    return out


def _containing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """For each of ``t``: the label of the last of ``starts`` (ascending) at or before it,
    where ``t`` is before that one's end; -1 otherwise (as ``merge_asof`` backward, then the
    end test). ``labels`` are >= 0. Many ``t`` in ascending order (calls by start): range
    ``k`` holds the calls from the first at or after its start, up to the first at or after
    the next range's start or its own end, whichever is first; those runs lie in order and
    apart, so a running sum of +(label + 1) at each run's start and -(label + 1) at its end
    labels them (one binary search per range, not per call)."""
    if t.size > 4 * starts.size and (t[1:] >= t[:-1]).all():
        lo = np.searchsorted(t, starts, side="left")
        hi = np.maximum(lo, np.minimum(np.r_[lo[1:], t.size], np.searchsorted(t, ends, side="left")))
        delta = np.zeros(t.size + 1, dtype=np.int64)
        np.add.at(delta, lo, labels + 1)
        np.subtract.at(delta, hi, labels + 1)
        return np.cumsum(delta[: t.size]) - 1
    k = np.searchsorted(starts, t, side="right") - 1
    inside = (k >= 0) & (t < ends[np.maximum(k, 0)])
    return np.where(inside, labels[np.maximum(k, 0)], -1)


def _with_helper_threads(api: pd.DataFrame, ranges: pd.DataFrame, api_step: np.ndarray, pid: int) -> np.ndarray:
    """Extend the same-thread projection to the process's helper threads.

    CUDA calls of process ``pid`` made on a thread that carries none of the step ranges
    (PyTorch runs the backward pass on autograd engine threads; DDP's reducer launches its
    all-reduces from them) belong to the step whose range, on any thread of the process,
    contains the call's start in time. Calls on a thread that has step ranges keep the
    same-thread rule of DOMAIN.md. ``ranges`` are the chosen process's step ranges, sorted
    by start and not nested.
    """
    rows = np.flatnonzero((api["pid"].to_numpy() == pid) & (api_step < 0))
    if rows.size:  # of those, the calls on threads without step ranges
        rows = rows[~np.isin(api["tid"].to_numpy()[rows], np.unique(ranges["tid"].to_numpy()))]
    if not rows.size or ranges.empty:
        return api_step
    starts = ranges["start"].to_numpy()
    ends = ranges["end"].to_numpy()
    t = api["start"].to_numpy()[rows]
    k = np.searchsorted(starts, t, side="right") - 1
    inside = (k >= 0) & (t < ends[np.clip(k, 0, None)])
    out = api_step.copy()
    out[rows[inside]] = k[inside]
    return out


@dataclass(frozen=True)
class _Link:
    """The submitting API call of each row of a device's activity.

    Attributes:
        call_row: row position in ``trace.api`` of the last call with the row's (pid,
            correlation id) and a correlation id > 0 (-1: none), as
            :func:`~launchprof.analysis.timeline.last_call_rows`.
        unique: no two calls share a (pid, correlation id) (correlation id > 0), and the
            ids and pids fit the 32 bits of :func:`~launchprof.analysis.timeline.corr_key`: then
            ``call_row`` is the only call of each row's pair.
    """

    call_row: np.ndarray
    unique: bool


def _link(analysis: Analysis, activity: pd.DataFrame) -> _Link:
    api = analysis.trace.api
    keys, rows = analysis.trace.cached("call_index", lambda: call_index(api))
    corr = activity["correlation_id"].to_numpy()
    call_row = _call_rows(api, activity["pid"].to_numpy(), corr, (keys, rows))
    api_corr = api["correlation_id"].to_numpy()
    fits = all(c.size == 0 or int(c.max()) < 2**32 for c in (corr, api_corr)) and all(
        p.size == 0 or (int(p.min()) >= -(2**31) and int(p.max()) < 2**31)
        for p in (activity["pid"].to_numpy(), api["pid"].to_numpy())
    )
    return _Link(call_row, fits and keys.size == int((api_corr > 0).sum()))


def _call_rows(
    api: pd.DataFrame, pid: np.ndarray, corr: np.ndarray, index: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """:func:`~launchprof.analysis.timeline.last_call_rows` (same result), by direct
    addressing where it can: per process (a handful), a table from correlation id to call
    row, when the ids are dense (they count up from 1 in a process) and every pid and
    correlation id fits the 32 bits of a :func:`~launchprof.analysis.timeline.corr_key`."""
    keys, rows = index
    fits = (
        keys.size > 0
        and corr.size > 0
        and int(corr.max()) < 2**32
        and int(pid.min()) >= -(2**31)
        and int(pid.max()) < 2**31
    )
    if not fits:
        return last_call_rows(api, pid, corr, index)
    if keys[0] >> 32 == keys[-1] >> 32:  # one process (keys are sorted by pid first)
        heads, key_pid = np.zeros(1, dtype=np.int64), keys[:1] >> 32
    else:
        key_pid = keys >> 32
        heads = np.flatnonzero(np.r_[True, key_pid[1:] != key_pid[:-1]])
    ends = np.r_[heads[1:], keys.size]
    if heads.size > 8:
        return last_call_rows(api, pid, corr, index)
    out = np.full(corr.size, -1, dtype=np.int64)
    for p, a, b in zip(key_pid[heads], heads, ends, strict=True):
        key_corr = keys[a:b] - (int(p) << 32)  # the correlation ids, ascending (all > 0)
        top = int(key_corr[-1])
        if top > 4 * (b - a) + 2**16:  # sparse ids: a table would be mostly empty
            return last_call_rows(api, pid, corr, index)
        table = np.full(top + 1, -1, dtype=np.int64)  # entry 0 stays -1: no call has id 0
        table[key_corr] = rows[a:b]
        if int(corr.min()) > 0 and int(corr.max()) <= top:
            found = table[corr]
        else:
            found = table[np.where((corr > 0) & (corr <= top), corr, 0)]
        if heads.size == 1 and int(pid.min()) == int(pid.max()) == int(p):
            return found
        out = np.where(pid == p, found, out)
    return out


def _activity_from_api(link: _Link, activity: pd.DataFrame, api: pd.DataFrame, api_step: np.ndarray) -> np.ndarray:
    """Step of each activity row: that of the last call with its (pid, correlation id)
    among the calls with a step and a correlation id > 0 (-1: none)."""
    if api_step.size == 0:
        return np.full(len(activity), -1, dtype=np.int64)
    if link.unique:  # each pair has one call: its step, or none
        return np.where(link.call_row >= 0, api_step[np.maximum(link.call_row, 0)], -1)
    keyed = pd.DataFrame(
        {"pid": api["pid"].to_numpy(), "correlation_id": api["correlation_id"].to_numpy(), "step": api_step}
    )
    keyed = keyed.loc[(keyed["step"] >= 0) & (keyed["correlation_id"] > 0)]
    keyed = keyed.drop_duplicates(["pid", "correlation_id"], keep="last")
    merged = activity[["pid", "correlation_id"]].merge(keyed, on=["pid", "correlation_id"], how="left")
    return merged["step"].fillna(-1).to_numpy(dtype=np.int64)


def _check_step_name(analysis: Analysis, step_name: str | None) -> pd.DataFrame:
    """The NVTX ranges named ``step_name`` (empty frame when no name is given).

    Raises:
        StepError: a name was given and no range has it.
    """
    nvtx = analysis.trace.nvtx
    if not step_name:
        return nvtx.iloc[:0]
    if nvtx.empty:
        raise StepError(f"no NVTX range named {step_name!r}: this trace has no NVTX ranges")
    chosen = nvtx.loc[nvtx["text"] == step_name]
    if chosen.empty:
        texts = ", ".join(sorted(map(repr, nvtx["text"].unique()))[:8])
        raise StepError(f"no NVTX range named {step_name!r} in this trace (ranges: {texts})")
    return chosen


def library_range(domain: str, text: str) -> bool:
    """Whether an NVTX range is a library's own annotation rather than a user's range:
    its domain is a library's (:data:`LIBRARY_DOMAINS`: CCCL/CUB, NCCL, cuDNN, ...) or its
    text names a library call or a PyTorch operator (:data:`LIBRARY_TEXT`: ``cub::``,
    ``nccl``, ``aten::``, ``emit_nvtx``'s ``", seq = N"``)."""
    return domain.lower() in LIBRARY_DOMAINS or bool(LIBRARY_TEXT.search(text))


def step_range_rejection(domain: str, text: str, count: int, cover: int, window: int) -> str | None:
    """Why NVTX ranges ``domain:text`` cannot be the user's step, or None when they can.

    Args:
        domain, text: the ranges' NVTX domain name (``""``: default) and text.
        count: how many outermost ranges of that text there are.
        cover: GPU activities whose submitting call starts inside one of the ranges, on
            the range's thread.
        window: GPU activities submitted from the ranges' threads between the first
            range's start and the last range's end.

    Rules: a library's range (:func:`library_range`); fewer than :data:`MIN_REPEATS`
    ranges (a step repeats); ranges holding less than :data:`MIN_RANGE_COVER` of the GPU
    work submitted between their occurrences (a step partitions the loop's work; a
    library call or a phase of the step does not); ranges holding no GPU work.
    """
    if library_range(domain, text):
        return "a library's own range, not a loop step"
    if count < MIN_REPEATS:
        return f"{count} range{'s' if count != 1 else ''}: a step repeats at least {MIN_REPEATS} times"
    if cover == 0:
        return "holds no GPU work (no CUDA call on its thread starts inside it)"
    if window and cover < MIN_RANGE_COVER * window:
        return (
            f"holds {cover / window:.0%} of the GPU work submitted between its first and last occurrence "
            f"(a step holds at least {MIN_RANGE_COVER:.0%})"
        )
    return None


def _window_activity(link: _Link, api: pd.DataFrame, ranges: pd.DataFrame) -> int:
    """GPU activities (of ``link``'s device) submitted by a call on one of ``ranges``'
    threads that starts between the first range's start and the last range's end."""
    call = link.call_row[link.call_row >= 0]
    if not call.size or ranges.empty:
        return 0
    start = api["start"].to_numpy()[call]
    inside = (start >= int(ranges["start"].min())) & (start < int(ranges["end"].max()))
    return int((inside & np.isin(api["tid"].to_numpy()[call], ranges["tid"].unique())).sum())


def _nvtx_candidates(
    analysis: Analysis, device: DeviceAnalysis, link: _Link, step_name: str | None
) -> tuple[pd.DataFrame | None, tuple[tuple[str, str], ...]]:
    """The step ranges (outermost, by start; None: none) and the range texts rejected as
    steps with the reason (:func:`step_range_rejection`). ``step_name`` or launchprof's
    own marker is taken as given."""
    nvtx = analysis.trace.nvtx
    if nvtx.empty:
        _check_step_name(analysis, step_name)
        return None, ()
    if step_name:
        chosen = _check_step_name(analysis, step_name)
        return _outermost(chosen), ()
    own = nvtx.loc[(nvtx["domain"] == STEP_DOMAIN) & (nvtx["text"] == STEP_NAME)]
    if len(own):
        return _outermost(own), ()
    api = analysis.trace.api
    best, best_cover = None, 0
    rejected = []
    for (domain, text), group in nvtx.groupby(["domain", "text"], sort=True):
        label = f"{domain}:{text}" if domain else str(text)
        if library_range(str(domain), str(text)):
            rejected.append((label, "a library's own range, not a loop step"))
            continue
        rows = _outermost(group)
        if len(rows) < MIN_REPEATS:
            why = step_range_rejection(str(domain), str(text), len(rows), 0, 0)
            rejected.append((label, str(why)))
            continue
        cover = int((_activity_from_api(link, device.activity, api, _project(api, rows)) >= 0).sum())
        why = step_range_rejection(str(domain), str(text), len(rows), cover, _window_activity(link, api, rows))
        if why is not None:
            rejected.append((label, why))
            continue
        # Equal cover: prefer the finer range (more ranges: one iteration, not an epoch).
        if cover > best_cover or (cover == best_cover and best is not None and len(rows) > len(best)):
            best, best_cover = rows, cover
    return (best if best_cover > 0 else None), tuple(rejected)


def _period(tokens: np.ndarray) -> int | None:
    """Shortest p with >= MATCH_RATIO of tokens equal to the token p later (middle window)."""
    n = tokens.size
    if n < 6:
        return None
    lo = max(0, n // 2 - WINDOW // 2)
    w = tokens[lo : lo + WINDOW]
    for p in range(1, min(MAX_PERIOD, w.size // 3) + 1):
        if np.mean(w[:-p] == w[p:]) >= MATCH_RATIO:
            return p
    return None


def _sequence_steps(
    start: np.ndarray, end: np.ndarray, tokens: np.ndarray, p: int, template: np.ndarray | None
) -> np.ndarray:
    """Step index for each kernel of a periodic sequence (kernels sorted by start)."""
    n = tokens.size
    if template is not None:
        windows = np.lib.stride_tricks.sliding_window_view(tokens, p) if n >= p else np.empty((0, p))
        hits = np.flatnonzero((windows == template).all(axis=1)) if len(windows) else np.empty(0, int)
        i0 = int(hits[0]) if hits.size else 0
    else:
        # Phase: the rotation whose first kernel follows the longest median idle gap.
        gap = np.r_[0, start[1:] - end[:-1]]
        lo = max(0, n // 2 - WINDOW // 2)
        scores = [
            np.median(gap[lo + r : lo + WINDOW : p]) if gap[lo + r : lo + WINDOW : p].size else 0 for r in range(p)
        ]
        r = int(np.argmax(scores))
        # Without a clearly longer pause (within 10 %), start where the trace starts.
        starts_first = [q for q in range(p) if tokens[lo + q] == tokens[0]]
        if starts_first and scores[starts_first[0]] >= 0.9 * scores[r]:
            r = starts_first[0]
        first_tokens = tokens[lo + r]
        i0 = int(np.flatnonzero(tokens == first_tokens)[0])
    idx = np.arange(n)
    return np.where(idx >= i0, (idx - i0) // p, -1)


def _inferred(
    analysis: Analysis, device: DeviceAnalysis, pid: int, template: Sequence[str] | None
) -> tuple[np.ndarray, str, str] | None:
    act = device.activity
    mask = (act["pid"].to_numpy() == pid) & _kind_in(act["kind"], ("kernel",))
    kernels = analysis.trace.kernels
    # The process's kernels on the device, sorted by (start, end) (stable).
    rows = np.flatnonzero((kernels["pid"].to_numpy() == pid) & (kernels["device_id"].to_numpy() == device.device_id))
    start, end = kernels["start"].to_numpy()[rows], kernels["end"].to_numpy()[rows]
    if not _sorted_by(np.zeros(rows.size, dtype=np.int64), start, end):
        order = np.lexsort((end, start))
        rows, start, end = rows[order], start[order], end[order]
    if rows.size != int(mask.sum()) or rows.size == 0:
        return None
    if template is not None:
        # Kernel names: each name id looked up once.
        ids, of_id = np.unique(kernels["name_id"].to_numpy()[rows], return_inverse=True)
        names = np.array([analysis.trace.string(i) for i in ids], dtype=object)[of_id]
        codes, uniques = pd.factorize(names)
        lookup = {str(u): i for i, u in enumerate(uniques)}
        wanted = np.array([lookup.get(str(t), -2) for t in template], dtype=np.int64)
        p = len(template)
        step_of_kernel = _sequence_steps(start, end, codes.astype(np.int64), p, wanted)
        how = f"kernel sequence cut into steps of {p} kernels by the given template"
    else:
        cols = ["name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        tokens = _first_seen_codes([kernels[c].to_numpy()[rows] for c in cols])
        found = _period(tokens)
        if found is None:
            return None
        p = found
        step_of_kernel = _sequence_steps(start, end, tokens, p, None)
        how = (
            f"no NVTX step ranges and no graph launches: steps inferred from the repeating "
            f"kernel sequence (period {p} kernels)"
        )
    # Map back to activity rows (same order: both sorted by (start, end) and stable).
    out = np.full(len(act), -1, dtype=np.int64)
    out[np.flatnonzero(mask)] = step_of_kernel
    return out, f"repeating sequence of {p} kernels", how


def _first_seen_codes(columns: list[np.ndarray]) -> np.ndarray:
    """One int64 code per row of ``columns`` (equal rows, equal codes), numbered in order of
    first appearance, as pandas' ``groupby(sort=False).ngroup()`` numbers them. Integer
    columns are packed into one int64 key where their ranges fit 62 bits."""
    if all(np.issubdtype(c.dtype, np.integer) for c in columns) and columns[0].size:
        key = np.zeros(columns[0].size, dtype=np.int64)
        shift = 0
        for c in columns:
            lo, span = int(c.min()), int(c.max()) - int(c.min()) + 1
            if shift > 62:
                break
            key |= (c.astype(np.int64) - lo) << shift
            shift += max(span - 1, 1).bit_length()
        if shift <= 62:
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            rank = np.empty(first.size, dtype=np.int64)
            rank[np.argsort(first, kind="stable")] = np.arange(first.size)
            return rank[inverse.reshape(-1)]
    frame = pd.DataFrame({str(i): c for i, c in enumerate(columns)})
    return frame.groupby(list(frame.columns), sort=False, dropna=False).ngroup().to_numpy(dtype=np.int64)


def _assign_by_time(starts: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Index of the last bound <= start (-1 before the first)."""
    return _last_at_or_before(bounds, starts)


def _last_at_or_before(bounds: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the last of ``bounds`` (sorted ascending) that is <= each of ``t`` (-1: none):
    ``np.searchsorted(bounds, t, side="right") - 1``. Many ``t`` in ascending order (calls
    by start): count the bounds at or before each ``t`` instead, from where each bound falls
    among ``t`` (one binary search per bound, not per ``t``)."""
    if t.size > 4 * bounds.size and (t[1:] >= t[:-1]).all() and (bounds[1:] >= bounds[:-1]).all():
        at = np.searchsorted(t, bounds, side="left")  # the first t >= each bound
        return np.cumsum(np.bincount(at, minlength=t.size + 1)[: t.size]) - 1
    return np.searchsorted(bounds, t, side="right") - 1


def find_steps(
    analysis: Analysis,
    step_name: str | None = None,
    template: Sequence[str] | None = None,
    device_id: int | None = None,
    pid: int | None = None,
) -> Steps:
    """Find the steps of the busiest device (or ``device_id``).

    Args:
        analysis: from :func:`launchprof.analyze`.
        step_name: NVTX range text to use as the step (``--step``).
        template: kernel names of one step, in order (e.g. the kernels of one graph
            launch of a converted run); forces inferred steps of that length aligned on
            the template's first occurrence.
        device_id: the device to analyse; default the one with the most kernels.
        pid: the process whose steps to find (one rank, :mod:`launchprof.analysis.ranks`);
            default the busiest process. Only that process's GPU activity is used.

    Returns:
        :class:`Steps` (``source == "none"`` with a reason when no step is found).
        Without ``template``, computed once per (step_name, device, process) for an
        analysis (shared: read it, do not modify it); when the busiest device runs a
        single process, its steps are that process's (the same result the cross-rank
        view finds for it).

    Raises:
        StepError: ``step_name`` was given and no such NVTX range exists.
    """
    if template is not None:
        return _find_steps(analysis, step_name, template, device_id, pid)
    if device_id is None and pid is None and analysis.devices:
        busiest = max(analysis.devices, key=lambda d: (d.figures.kernels, -d.device_id))
        if len(busiest.processes) == 1:  # the same device and process, so the same steps
            device_id, pid = busiest.device_id, busiest.processes[0].pid
    key = ("steps", step_name, device_id, pid)
    found: Steps = analysis.cached(key, lambda: _find_steps(analysis, step_name, None, device_id, pid))
    return found


def _find_steps(
    analysis: Analysis,
    step_name: str | None = None,
    template: Sequence[str] | None = None,
    device_id: int | None = None,
    pid: int | None = None,
) -> Steps:
    """:func:`find_steps`, computed."""
    devices = [d for d in analysis.devices if device_id is None or d.device_id == device_id]
    if pid is not None:
        devices = _only_pid(devices, pid)
    if not devices:
        if template is None:
            _check_step_name(analysis, step_name)  # a mistyped --step is an error with or without GPU work
        return _no_steps("no GPU activity in this trace", None, None)
    device = max(devices, key=lambda d: (d.figures.kernels, -d.device_id))
    pid = _busiest(device)
    api = analysis.trace.api
    act = device.activity
    link = _link(analysis, act)
    source, name, reason = "none", None, ""
    skipped = ""
    activity_step = None
    cpu_start = cpu_end = None
    api_step = np.full(len(api), -1, dtype=np.int64)
    ranges, rejected = (None, ()) if template is not None else _nvtx_candidates(analysis, device, link, step_name)
    if ranges is not None:
        projected = _project(api, ranges.sort_values("start", kind="stable"))
        cover = _activity_from_api(link, act, api, projected)
        covered = act["pid"].to_numpy()[cover >= 0]
        if covered.size and covered.min() == covered.max():  # one process: no counting needed
            pid = int(covered[0])
        elif covered.size:
            pid = int(pd.Series(covered).value_counts().index[0])
        text, domain = str(ranges["text"].iloc[0]), str(ranges["domain"].iloc[0])
        label = text if not domain else f"{domain}:{text}"
        if not (cover >= 0).any():
            # Ranges on another thread than the CUDA calls (or around no GPU work): they
            # cannot be projected onto the GPU (DOMAIN.md: same thread).
            if step_name:
                raise StepError(
                    f"NVTX ranges {label!r} hold no GPU work: no CUDA call on their thread starts inside them"
                )
            skipped = f"NVTX ranges {label!r} hold no GPU work (no CUDA call on their thread starts inside them); "
        else:
            of_pid = ranges.loc[ranges["pid"] == pid].sort_values("start", kind="stable").reset_index(drop=True)
            # All the ranges are the process's: the same ranges in the same order, projected above.
            same = projected if len(of_pid) == len(ranges) else _project(api, of_pid)
            ranges = of_pid
            api_step = _with_helper_threads(api, ranges, same, pid)
            # Unchanged by either (one process, no helper threads): the steps found above.
            activity_step = cover if api_step is projected else _activity_from_api(link, act, api, api_step)
            cpu_start, cpu_end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
            source = "nvtx"
            name = label
            reason = f"NVTX ranges {name!r} on pid {pid} ({len(ranges)} ranges)"
    if activity_step is None and template is None:
        graph = np.flatnonzero((api["pid"].to_numpy() == pid) & api_classes(analysis.trace)["graph_launch"].to_numpy())
        if len(graph):
            api_step = np.full(len(api), -1, dtype=np.int64)
            api_step[graph] = np.arange(len(graph))
            activity_step = _activity_from_api(link, act, api, api_step)
            source, name = "graph-launch", "cudaGraphLaunch"
            reason = f"{skipped}no NVTX step ranges: each of the {len(graph)} graph launches of pid {pid} is a step"
            cpu_start = api["start"].to_numpy()[graph]
    if activity_step is None:
        found = _inferred(analysis, device, pid, template)
        if found is None:
            return _no_steps(
                "no NVTX step ranges, no graph launches and no repeating kernel sequence",
                device.device_id,
                pid,
                len(act),
            )
        activity_step, name, reason = found
        reason = skipped + reason
        source = "inferred"
    assert activity_step is not None
    n_steps = int(activity_step.max()) + 1 if (activity_step >= 0).any() else 0
    if source == "nvtx" and cpu_start is not None:
        n_steps = len(cpu_start)
    if n_steps == 0:
        return _no_steps(f"{reason}, but none of them holds GPU work", device.device_id, pid, len(act))
    table = _step_table(
        analysis, device, link, pid, activity_step, n_steps, api_step if source == "nvtx" else None, cpu_start, cpu_end
    )
    table, warmup = _mark_warmup(table)
    return Steps(
        source,
        name,
        reason + (_rejected_text(rejected) if source != "nvtx" else ""),
        device.device_id,
        pid,
        table,
        pd.Series(activity_step, index=act.index, name="step"),
        warmup,
        rejected,
    )


def _rejected_text(rejected: tuple[tuple[str, str], ...], shown: int = 3) -> str:
    """``"; NVTX ranges not taken as the step: 'a' (why), ..."`` (empty when none)."""
    if not rejected:
        return ""
    items = [f"{label!r} ({why})" for label, why in rejected[:shown]]
    more = f" and {len(rejected) - shown} more" if len(rejected) > shown else ""
    return "; NVTX ranges not taken as the step: " + ", ".join(items) + more


def _only_pid(devices: list[DeviceAnalysis], pid: int) -> list[DeviceAnalysis]:
    """The devices where ``pid`` has GPU activity, reduced to that activity (index kept)
    and to that process's figures."""
    out = []
    for d in devices:
        figures = [p.figures for p in d.processes if p.pid == pid]
        if figures:
            out.append(dataclasses.replace(d, figures=figures[0], activity=d.activity.loc[d.activity["pid"] == pid]))
    return out


def _no_steps(reason: str, device_id: int | None, pid: int | None, n: int = 0) -> Steps:
    return Steps(
        "none",
        None,
        reason,
        device_id,
        pid,
        pd.DataFrame(columns=["step", "warmup", "period_ns"]),
        pd.Series(np.full(n, -1, dtype=np.int64), name="step"),
        0,
    )


def _step_table(
    analysis: Analysis,
    device: DeviceAnalysis,
    link: _Link,
    pid: int,
    activity_step: np.ndarray,
    n_steps: int,
    api_step: np.ndarray | None,
    cpu_start: np.ndarray | None,
    cpu_end: np.ndarray | None,
) -> pd.DataFrame:
    act = device.activity
    api = analysis.trace.api
    rows = _rows(activity_step >= 0)  # the activity of the steps
    step = _take(activity_step, rows)
    call_row = _take(link.call_row, rows)
    inner = _inner(
        step,
        _take(act["start"].to_numpy(), rows),
        _take(act["end"].to_numpy(), rows),
        call_row,
        api["end"].to_numpy(),
        analysis.bubble_threshold_ns,
        n_steps,
    )
    gpu_start, gpu_end = inner.gpu_start, inner.gpu_end
    # Kernels and memops per step, summed in (step, start, end) order.
    kernels = _sums(_take(_take(_kind_in(act["kind"], ("kernel",)), rows), inner.order), inner.bounds)
    memops = _sums(_take(_take(_kind_in(act["kind"], ("memcpy", "memset")), rows), inner.order), inner.bounds)
    # The gap before each step (from the previous step's last activity, float ns as
    # pandas' shift gives it) and whether it was host-wait.
    start_f, end_f = gpu_start.astype(np.float64), gpu_end.astype(np.float64)
    prev_end = np.r_[np.nan, end_f[:-1]]
    lead = start_f - prev_end
    lead_gap = np.where(np.isnan(lead), 0.0, np.where(lead < 0, 0.0, lead))
    first_submit = np.full(n_steps, np.nan)
    first_submit[inner.first_steps] = _at_call(api["end"].to_numpy(), call_row[inner.first_rows])
    lead_wait = np.where(first_submit > prev_end, lead_gap, 0.0)
    host_wait = inner.wait_ns + lead_wait  # float64, as int64 + float64 Series
    period = np.r_[start_f[1:], np.nan] - start_f
    # CPU side of each step.
    if cpu_start is None:
        # The start of the call that submitted each step's earliest activity; without it
        # (an export without the API table), the GPU start; gaps filled from neighbours.
        first_call = np.full(n_steps, np.nan)
        first_call[inner.first_steps] = _at_call(api["start"].to_numpy(), call_row[inner.first_rows])
        first_call = np.where(np.isnan(first_call), start_f, first_call)
        cpu_start = pd.Series(first_call).ffill().bfill().fillna(0).to_numpy(dtype=np.int64)
    if cpu_end is None:
        cpu_end = np.r_[cpu_start[1:], gpu_end[-1] if n_steps else 0]
    cpu_ns = cpu_end - cpu_start
    # The process's API calls per step (those outside every step left out).
    if api_step is None:
        api_step = _assign_by_time(api["start"].to_numpy(), np.asarray(cpu_start))
    calls = _rows((api["pid"].to_numpy() == pid) & (api_step >= 0) & (api_step < n_steps))
    call_step = _take(api_step, calls)
    dur = _take(api["end"].to_numpy(), calls) - _take(api["start"].to_numpy(), calls)
    cls = api_classes(analysis.trace)
    launch = _take(cls["launch"].to_numpy(), calls)
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
    table = {
        "step": np.arange(n_steps, dtype=np.int64),
        "gpu_start": gpu_start,
        "gpu_end": gpu_end,
        "kernels": kernels,
        "memops": memops,
        "busy_ns": inner.busy_ns,
        "bubbles": inner.bubbles,
        "bubble_ns": inner.bubble_ns,
        "lead_gap_ns": _to_int(lead_gap),
        "host_wait_ns": _to_int(host_wait),
        "period_ns": period,
        "cpu_start": cpu_start,
        "cpu_end": cpu_end,
    }
    # Calls are in time order, so their steps usually ascend: sums by running totals then.
    bounds = _bounds(call_step, n_steps) if (call_step[1:] >= call_step[:-1]).all() else None
    for col, values in per_call.items():
        if isinstance(values, str):  # a class of calls: most traces have none of most classes
            of_class = cls[values].to_numpy()
            values = _take(of_class, calls) if of_class.any() else np.zeros(call_step.size, bool)
        if bounds is not None:
            table[col] = _sums(values, bounds)
        else:
            table[col] = _sum_by_step(call_step, values, n_steps)
    table["cpu_ns"] = _to_int(cpu_ns)
    return pd.DataFrame(table)


def _rows(mask: np.ndarray) -> np.ndarray | slice | None:
    """The rows where ``mask`` holds, for :func:`_take`: None for all of them, a slice
    when they lie end to end (a view, no copy), else their positions."""
    if mask.all():
        return None
    first = int(mask.argmax())
    stop = mask.size - int(mask[::-1].argmax())
    if mask[first] and mask[first:stop].all():
        return slice(first, stop)
    return np.flatnonzero(mask)


def _take(values: np.ndarray, rows: np.ndarray | slice | None) -> np.ndarray:
    """``values[rows]``; ``values`` itself where ``rows`` is None (all rows, in order)."""
    return values if rows is None else values[rows]


def _at_call(values: np.ndarray, call_row: np.ndarray) -> np.ndarray:
    """``values`` (a column of ``trace.api``) at each call row, float64; NaN where the row is -1."""
    if values.size == 0:
        return np.full(call_row.size, np.nan)
    return np.where(call_row >= 0, values[np.maximum(call_row, 0)].astype(np.float64), np.nan)


def _ended_after(call_end: np.ndarray, call_row: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether the call at each row (-1: none) ended after ``t``: ``_at_call(call_end,
    call_row) > t`` (False without a call), compared as integers where float64 holds
    every value exactly."""
    if call_end.size == 0:
        return np.zeros(call_row.size, dtype=bool)
    exact = (
        t.size > 0
        and np.issubdtype(call_end.dtype, np.integer)
        and np.issubdtype(t.dtype, np.integer)
        and max(-int(call_end.min()), int(call_end.max()), -int(t.min()), int(t.max())) < 2**53
    )
    if exact:
        if call_row.size == 0 or int(call_row.min()) >= 0:  # every row has its call
            return call_end[call_row] > t
        return (call_row >= 0) & (call_end[np.maximum(call_row, 0)] > t)
    return np.nan_to_num(_at_call(call_end, call_row), nan=-np.inf) > t


def _to_int(values: np.ndarray) -> np.ndarray:
    """int64 of ``values``: NaN reads 0, floats truncate (pandas' ``fillna(0).astype``)."""
    if values.dtype.kind == "f":
        values = np.where(np.isnan(values), 0.0, values)
    return values.astype(np.int64)


def _sum_by_step(step: np.ndarray, values: np.ndarray, n_steps: int) -> np.ndarray:
    """int64 sum of ``values`` per step 0..n_steps-1 (steps outside that range dropped)."""
    inside = (step >= 0) & (step < n_steps)
    values = np.asarray(values)[inside]
    step = step[inside]
    if values.dtype == bool:  # a count: exact
        return np.bincount(step[values], minlength=n_steps)[:n_steps].astype(np.int64)
    values = values.astype(np.int64)
    if int(np.abs(values).sum()) < 2**53:  # float64 sums are exact below 2**53
        return np.rint(np.bincount(step, weights=values, minlength=n_steps)[:n_steps]).astype(np.int64)
    out = np.zeros(n_steps, dtype=np.int64)
    np.add.at(out, step, values)
    return out


def _bounds(step: np.ndarray, n_steps: int) -> np.ndarray:
    """For ``step`` sorted ascending: where each step 0..n_steps-1 begins, and the end of the
    last (``n_steps + 1`` positions; rows of other steps fall outside)."""
    return np.searchsorted(step, np.arange(n_steps + 1), side="left")


def _sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """int64 sum of ``values`` over each run ``bounds[i]:bounds[i + 1]`` (see :func:`_bounds`),
    exact (as :func:`_sum_by_step`): one ``np.add.reduceat`` over the non-empty runs, which
    lie end to end."""
    out = np.zeros(bounds.size - 1, dtype=np.int64)
    if values.dtype == bool and not values.any():
        return out
    lo, hi = bounds[:-1], bounds[1:]
    runs = hi > lo
    if runs.any():
        out[runs] = np.add.reduceat(values[: bounds[-1]], lo[runs], dtype=np.int64)
    return out


@dataclass(frozen=True)
class _Inner:
    """Per-step figures from the activity of the steps (arrays over 0..n_steps-1).

    ``gpu_start``/``gpu_end``: first start, last end (int64; float64 with NaN when a step
    has no activity); ``busy_ns`` (union), ``bubbles``/``bubble_ns`` (gaps inside >=
    threshold), ``wait_ns`` (host-wait ns of the gaps inside); ``first_steps``/``first_rows``:
    each step with activity (ascending) and the row of its earliest activity (by start,
    ties in row order); ``order``: the rows sorted by (step, start, end) (None: already
    so); ``bounds``: :func:`_bounds` of the sorted steps."""

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


def _inner(
    step: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    call_row: np.ndarray,
    call_end: np.ndarray,
    threshold: int,
    n_steps: int,
) -> _Inner:
    """:class:`_Inner` of activity rows (``step`` >= 0; ``call_row``: the submitting call
    of each, -1: none; ``call_end``: the ends of the API calls)."""
    # Sort by (step, start, end); activity arrives sorted by (start, end), so when the
    # steps do not interleave the rows are already in that order.
    order: np.ndarray | None = None
    if not _sorted_by(step, start, end):
        order = np.lexsort((end, start, step))
        step, start, end = step[order], start[order], end[order]
    new_step = np.ones(step.size, bool)
    new_step[1:] = step[1:] != step[:-1]
    heads = np.flatnonzero(new_step)
    run_end = _group_cummax(step, end)
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
    seg_step, seg_start = _take(step, first), _take(start, first)
    # The running end is a step's maximum so far: a segment ends at its last row's.
    seg_end = run_end if first is None else run_end[np.r_[first[1:] - 1, step.size - 1]]
    seg_bounds = _bounds(seg_step, n_steps)
    busy = _sums(seg_end - seg_start, seg_bounds)
    # The gap after each segment to the next (those after a step's last segment lead out of
    # the step and count for nothing); host-wait where the call that submitted the activity
    # after the gap ended after the gap began (float ns, as timeline.lookup_end gives it).
    gap = np.zeros(seg_step.size, dtype=np.int64)
    np.subtract(seg_start[1:], seg_end[:-1], out=gap[:-1])
    step_last = (seg_bounds[1:] - 1)[seg_bounds[1:] > seg_bounds[:-1]]  # its gap leads out of the step
    is_bubble = gap >= threshold
    is_bubble[step_last] = False
    after_gap = slice(1, None) if first is None else first[1:]  # rows (sorted) that end a gap
    wait = np.zeros(seg_step.size, dtype=bool)
    wait[:-1] = _ended_after(call_end, _take(_take(call_row, order), after_gap), seg_end[:-1])
    wait[step_last] = False
    return _Inner(
        gpu_start,
        gpu_end,
        busy,
        _sums(is_bubble, seg_bounds),
        _sums(np.where(is_bubble, gap, 0), seg_bounds),
        _sums(np.where(wait, gap, 0), seg_bounds),
        present,
        first_rows,
        order,
        _bounds(step, n_steps),
    )


def _sorted_by(step: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    """Whether the rows are sorted by (step, start, end)."""
    if not (step[1:] >= step[:-1]).all():
        return False
    s0, s1 = start[:-1], start[1:]
    if (s1 > s0).all():  # steps in order, starts strictly rising: sorted
        return True
    return bool(((step[1:] > step[:-1]) | (s1 > s0) | ((s1 == s0) & (end[1:] >= end[:-1]))).all())


def _per_step(present: np.ndarray, values: np.ndarray, n_steps: int) -> np.ndarray:
    """``values`` of the steps ``present`` spread over 0..n_steps-1: the values as they are
    when every step is present, else float64 with NaN (as pandas reindexes)."""
    inside = present < n_steps
    if inside.sum() == n_steps:
        return values[inside]
    out = np.full(n_steps, np.nan)
    out[present[inside]] = values[inside]
    return out


def _mark_warmup(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
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


def step_stats(steps: Steps) -> dict[str, Any]:
    """Steady-state distribution figures of ``steps`` for the summary (ns, counts).

    Returns a dict with ``source``, ``name``, ``reason``, ``count``, ``warmup``,
    ``steady``, ``device_id``, ``pid``, ``rejected_ranges`` (``[{"range", "reason"}]``:
    :attr:`Steps.rejected`), and for the steady steps ``kernels_per_step_p50``, ``memops_per_step_p50``,
    ``period_p50_ns``, ``period_p90_ns``, ``period_mean_ns``, ``period_std_ns``,
    ``busy_p50_ns``, ``bubble_ns_p50``, ``host_wait_p50_ns``, ``launch_calls_p50``,
    ``launch_call_ns_p50``, ``sync_calls_p50``, ``alloc_calls_p50``,
    ``graph_launches_p50``, ``api_ns_p50``, ``cpu_ns_p50`` (numpy linear percentiles).
    """
    s = steps.steady
    out: dict[str, Any] = {
        "source": steps.source,
        "name": steps.name,
        "reason": steps.reason,
        "count": steps.count,
        "warmup": steps.warmup,
        "steady": int(len(s)),
        "device_id": steps.device_id,
        "pid": steps.pid,
        "rejected_ranges": [{"range": label, "reason": why} for label, why in steps.rejected],
    }

    def pct(col: str, q: float) -> float | None:
        v = s[col].dropna().to_numpy(dtype=float) if col in s else np.empty(0)
        return float(np.percentile(v, q)) if v.size else None

    for col, key in (
        ("kernels", "kernels_per_step_p50"),
        ("memops", "memops_per_step_p50"),
        ("period_ns", "period_p50_ns"),
        ("busy_ns", "busy_p50_ns"),
        ("bubble_ns", "bubble_ns_p50"),
        ("host_wait_ns", "host_wait_p50_ns"),
        ("launch_calls", "launch_calls_p50"),
        ("launch_call_ns", "launch_call_ns_p50"),
        ("sync_calls", "sync_calls_p50"),
        ("alloc_calls", "alloc_calls_p50"),
        ("graph_launches", "graph_launches_p50"),
        ("api_ns", "api_ns_p50"),
        ("cpu_ns", "cpu_ns_p50"),
    ):
        out[key] = pct(col, 50)
    out["period_p90_ns"] = pct("period_ns", 90)
    period = s["period_ns"].dropna().to_numpy(dtype=float) if "period_ns" in s else np.empty(0)
    out["period_mean_ns"] = float(period.mean()) if period.size else None
    out["period_std_ns"] = float(period.std(ddof=1)) if period.size > 1 else None
    return out
