"""NVTX step ranges: choosing the ranges that are the user's step, and projecting them
onto the GPU through the CUDA calls made inside them (docs/metrics.md, "Step")."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import segment_cummax, stable_order, take
from launchprof.analysis.steps.link import Link, activity_from_api
from launchprof.analysis.steps.model import Assignment, StepError
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis
from launchprof.defaults import STEP_DOMAIN, STEP_NAME

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


def outermost(ranges: pd.DataFrame) -> pd.DataFrame:
    """``ranges`` without those nested inside an earlier range of the same thread (a
    recursive or re-entered range text would otherwise hide its outer range), sorted by
    start (stable). Nested means contained: ``nvtxRangeStart/End`` ranges may overlap
    without nesting (each step's range ending inside the next), and both are kept."""
    tid = ranges["tid"].to_numpy()
    start = ranges["start"].to_numpy()
    end = ranges["end"].to_numpy()
    order = np.lexsort((-end, start, tid))  # by thread, then start, the longer first (stable)
    tid_s = tid[order]
    thread = np.cumsum(np.r_[True, tid_s[1:] != tid_s[:-1]]) - 1 if tid_s.size else tid_s
    run_end = segment_cummax(end[order], thread)
    # Nested: an earlier range of the same thread (which starts at or before this one)
    # ends at or after this one's end.
    nested = np.zeros(order.size, bool)
    same = thread[1:] == thread[:-1]
    nested[1:] = same & (run_end[:-1] >= end[order][1:])
    kept = order[~nested]
    return ranges.iloc[kept[np.argsort(start[kept], kind="stable")]]


def project(api: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """Index (into ``ranges``, sorted by start) of the range on the same thread that
    contains each API call's start; -1 where none does. ``ranges`` must not nest on a
    thread (see :func:`outermost`); where they overlap, the one that started last holds
    the call. Of ranges with the same start, the last counts."""
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
    elif tids.size <= 16:  # each thread's calls by a pass over them: no int64 temporaries per call
        groups = [(tid, np.flatnonzero(call_tid == tid)) for tid in tids]
    else:
        code = np.minimum(np.searchsorted(tids, call_tid), tids.size - 1)
        rows = np.flatnonzero(tids[code] == call_tid)
        rows = rows[stable_order(code[rows])]  # by thread (calls of several threads interleave)
        bounds = np.searchsorted(code[rows], np.arange(tids.size + 1))
        groups = [(tid, rows[bounds[i] : bounds[i + 1]]) for i, tid in enumerate(tids)]
    for tid, calls in groups:
        mine = by_start[r_tid[by_start] == tid]  # this thread's ranges, by start
        on_range = _containing(r_start[mine], r_end[mine], take(call_start, calls), mine)
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


def with_helper_threads(api: pd.DataFrame, ranges: pd.DataFrame, api_step: np.ndarray, pid: int) -> np.ndarray:
    """Extend the same-thread projection to the process's helper threads.

    CUDA calls of process ``pid`` made on a thread that carries none of the step ranges
    (PyTorch runs the backward pass on autograd engine threads; DDP's reducer launches its
    all-reduces from them) belong to the step whose range, on any thread of the process,
    contains the call's start in time. Calls on a thread that has step ranges keep the
    same-thread rule (docs/metrics.md, "Step"). ``ranges`` are the chosen process's step ranges, sorted
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


def named_ranges(nvtx: pd.DataFrame, name: str) -> pd.DataFrame:
    """The NVTX ranges a step name (``--step NAME``) names: those whose text is ``name``,
    else, for ``domain:text`` (the name the summary gives the steps), those of that domain
    and text; empty when none. The one reading of a step name, for the GPU step finder
    (:func:`check_step_name`) and the host steps of a trace without GPU work
    (:func:`launchprof.analysis.nvtx_steps.nvtx_steps`).

    Args:
        nvtx: the trace's NVTX ranges (columns ``text``, ``domain``; ``domain`` may be
            absent: no domain then matches).
    """
    chosen = nvtx.loc[nvtx["text"] == name]
    if chosen.empty and ":" in name and "domain" in nvtx.columns:
        labels = nvtx["domain"].astype(str) + ":" + nvtx["text"].astype(str)
        chosen = nvtx.loc[(nvtx["domain"] != "").to_numpy() & (labels == name).to_numpy()]
    return chosen


def check_step_name(analysis: Analysis, step_name: str | None) -> pd.DataFrame:
    """The NVTX ranges named ``step_name`` (:func:`named_ranges`; empty frame when no name
    is given).

    Raises:
        StepError: a name was given and no range has it.
    """
    nvtx = analysis.trace.nvtx
    if not step_name:
        return nvtx.iloc[:0]
    if nvtx.empty:
        raise StepError(f"no NVTX range named {step_name!r}: this trace has no NVTX ranges")
    chosen = named_ranges(nvtx, step_name)
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


def _window_activity(link: Link, api: pd.DataFrame, ranges: pd.DataFrame) -> int:
    """GPU activities (of ``link``'s device) submitted by a call on one of ``ranges``'
    threads that starts between the first range's start and the last range's end."""
    call = link.call_row[link.call_row >= 0]
    if not call.size or ranges.empty:
        return 0
    start = api["start"].to_numpy()[call]
    inside = (start >= int(ranges["start"].min())) & (start < int(ranges["end"].max()))
    return int((inside & np.isin(api["tid"].to_numpy()[call], ranges["tid"].unique())).sum())


def nvtx_candidates(
    analysis: Analysis, device: DeviceAnalysis, link: Link, step_name: str | None
) -> tuple[pd.DataFrame | None, tuple[tuple[str, str], ...]]:
    """The step ranges (outermost, by start; None: none) and the range texts rejected as
    steps with the reason (:func:`step_range_rejection`). ``step_name`` or launchprof's
    own marker is taken as given."""
    nvtx = analysis.trace.nvtx
    if nvtx.empty:
        check_step_name(analysis, step_name)
        return None, ()
    if step_name:
        chosen = check_step_name(analysis, step_name)
        return outermost(_one_domain(analysis, device, link, chosen)), ()
    own = nvtx.loc[(nvtx["domain"] == STEP_DOMAIN) & (nvtx["text"] == STEP_NAME)]
    if len(own):
        return outermost(own), ()
    api = analysis.trace.api
    best, best_cover = None, 0
    rejected = []
    for (domain, text), group in nvtx.groupby(["domain", "text"], sort=True):
        label = f"{domain}:{text}" if domain else str(text)
        if library_range(str(domain), str(text)):
            rejected.append((label, "a library's own range, not a loop step"))
            continue
        rows = outermost(group)
        if len(rows) < MIN_REPEATS:
            why = step_range_rejection(str(domain), str(text), len(rows), 0, 0)
            rejected.append((label, str(why)))
            continue
        cover = int((activity_from_api(link, device.activity, api, project(api, rows)) >= 0).sum())
        why = step_range_rejection(str(domain), str(text), len(rows), cover, _window_activity(link, api, rows))
        if why is not None:
            rejected.append((label, why))
            continue
        # Equal cover: prefer the finer range (more ranges: one iteration, not an epoch).
        if cover > best_cover or (cover == best_cover and best is not None and len(rows) > len(best)):
            best, best_cover = rows, cover
    return (best if best_cover > 0 else None), collapse_rejected(rejected)


# What emit_nvtx appends to an operator's name ("aten::add, seq = 12", "..., op_id = 7",
# "..., sizes = [[4, 4]]"): one range text per call, the same operator.
_OPERATOR_SUFFIX = re.compile(r",\s*(?:seq|op_id|stashed seq|sizes|input_op_ids)\s*=.*$", re.DOTALL)
MAX_REJECTED = 50


def collapse_rejected(rejected: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The rejected ``(label, reason)`` pairs with the texts of one operator under
    ``emit_nvtx`` (``aten::add, seq = 12``, ``aten::add, seq = 13``, ...) as one entry
    ``aten::add (N range texts)``, in first-seen order, at most :data:`MAX_REJECTED`
    entries (then a last one ``... and K more``); a trace with per-operator ranges has
    thousands of distinct texts."""
    groups: dict[tuple[str, str], int] = {}
    for label, why in rejected:
        key = (_OPERATOR_SUFFIX.sub("", label), why)
        groups[key] = groups.get(key, 0) + 1
    out = [(base if n == 1 else f"{base} ({n} range texts)", why) for (base, why), n in groups.items()]
    if len(out) > MAX_REJECTED:
        more = len(out) - MAX_REJECTED + 1
        out = [*out[: MAX_REJECTED - 1], (f"... and {more} more", "not listed")]
    return tuple(out)


def _one_domain(analysis: Analysis, device: DeviceAnalysis, link: Link, chosen: pd.DataFrame) -> pd.DataFrame:
    """The ranges of ``chosen`` (one text) in one NVTX domain: ranges of the same text in
    two domains (the user's ``step`` and a data loader's) are not one loop's steps, so the
    domain whose ranges hold the most GPU work is taken (equal: the one with more ranges;
    name it ``domain:text`` to choose)."""
    domains = chosen["domain"].unique()
    if len(domains) < 2:
        return chosen
    api = analysis.trace.api
    best, best_key = chosen, (-1, -1)
    for domain in sorted(domains):
        rows = chosen.loc[chosen["domain"] == domain]
        cover = int((activity_from_api(link, device.activity, api, project(api, outermost(rows))) >= 0).sum())
        if (cover, len(rows)) > best_key:
            best, best_key = rows, (cover, len(rows))
    return best


def nvtx_steps(
    analysis: Analysis, act: pd.DataFrame, link: Link, pid: int, ranges: pd.DataFrame, step_name: str | None
) -> tuple[Assignment | None, str]:
    """The steps of the chosen ``ranges`` (:func:`nvtx_candidates`), projected onto the
    device's activity ``act``: each call on a range's thread belongs to the range that
    contains its start, the process's other threads' calls to the range that contains it
    in time (:func:`with_helper_threads`), and an activity to the step of its submitting
    call. The process is the one most of the covered activity is of (``pid`` when none).

    Returns:
        The steps, and ``""``; or None, when no CUDA call on the ranges' threads starts
        inside them, and the sentence saying so (to lead the reason of the steps found
        otherwise).

    Raises:
        StepError: ``step_name`` was given and its ranges hold no GPU work.
    """
    api = analysis.trace.api
    projected = project(api, ranges.sort_values("start", kind="stable"))
    cover = activity_from_api(link, act, api, projected)
    covered = act["pid"].to_numpy()[cover >= 0]
    if covered.size and covered.min() == covered.max():  # one process: no counting needed
        pid = int(covered[0])
    elif covered.size:
        pid = int(pd.Series(covered).value_counts().index[0])
    text, domain = str(ranges["text"].iloc[0]), str(ranges["domain"].iloc[0])
    label = text if not domain else f"{domain}:{text}"
    if not (cover >= 0).any():
        # Ranges on another thread than the CUDA calls (or around no GPU work): they
        # cannot be projected onto the GPU (docs/metrics.md, "Step": same thread).
        if step_name:
            raise StepError(f"NVTX ranges {label!r} hold no GPU work: no CUDA call on their thread starts inside them")
        return None, f"NVTX ranges {label!r} hold no GPU work (no CUDA call on their thread starts inside them); "
    of_pid = ranges.loc[ranges["pid"] == pid].sort_values("start", kind="stable").reset_index(drop=True)
    # All the ranges are the process's: the same ranges in the same order, projected above.
    same = projected if len(of_pid) == len(ranges) else project(api, of_pid)
    api_step = with_helper_threads(api, of_pid, same, pid)
    # Unchanged by either (one process, no helper threads): the steps found above.
    activity_step = cover if api_step is projected else activity_from_api(link, act, api, api_step)
    reason = f"NVTX ranges {label!r} on pid {pid} ({len(of_pid)} ranges)"
    cpu_start, cpu_end = of_pid["start"].to_numpy(), of_pid["end"].to_numpy()
    return Assignment("nvtx", label, reason, pid, activity_step, api_step, cpu_start, cpu_end), ""
