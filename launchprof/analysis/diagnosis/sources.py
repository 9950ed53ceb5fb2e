"""Where in the code a step synchronizes: source lines from the runs without nsys.

``launchprof profile``'s runs without nsys of a PyTorch workload turn on PyTorch's own
check, ``torch.cuda.set_sync_debug_mode("warn")``, and write the Python stack of every
operation that synchronizes the host with the GPU (:mod:`launchprof.source_hooks`,
"Synchronizing calls"; read by :func:`launchprof.trace.steptimes.read_sync_events`). This
module turns those stacks into the source lines a ``sync-in-step`` finding lists
(``Finding.where``):

- a run's **window** (:func:`run_window`): the span of what the run timed, start-up left
  out: its marked steps after the first; the later half of its top-level module calls (of
  all modules together, by start); its profiler regions (the workload's own timed part,
  the first one included);
- an event's **site**: its innermost frame outside PyTorch's own package (the line that
  called the synchronizing operation: a user's ``.item()``, or a library's, e.g.
  transformers' stopping check), marked ``library`` when that file lies in an installed
  package (``site-packages``, ``dist-packages``) or the standard library; for a library
  site, ``via`` is the innermost frame of the user's own code on the way there;
- a site's **per_step**: its share of the events in the windows times the steady steps'
  synchronizing calls the trace counted (``sync_calls_p50``): the trace gives the count,
  the runs the split by line (the runs' own step count differs by how they were timed).

Sites are listed the user's own lines first, then library lines, each by count, at most
:data:`TOP_SITES`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from launchprof.analysis.baseline import AnyRuns, ModuleRuns, RegionRuns, later_half
from launchprof.analysis.diagnosis.findings import Finding, Severity

TOP_SITES = 5
TORCH_PARTS = ("/site-packages/torch/", "/dist-packages/torch/")
LIBRARY_PARTS = ("/site-packages/", "/dist-packages/")
Frame = tuple[str, int, str]  # file, line, function


def run_window(runs: AnyRuns, index: int) -> tuple[int, int] | None:
    """Run ``index``'s window (ns, its own perf_counter clock; module docstring), None when
    it timed nothing."""
    if isinstance(runs, RegionRuns):
        r = runs.runs[index]
        return (int(r[:, 0].min()), int(r[:, 1].max())) if len(r) else None
    if isinstance(runs, ModuleRuns):
        calls = [a for a in runs.runs[index].values() if len(a)]
        if not calls:
            return None
        starts = np.sort(np.concatenate([a[:, 0] for a in calls]))
        ends = np.concatenate([a[:, 1] for a in calls])
        return int(starts[len(starts) // 2]), int(ends.max())
    steps = runs[index]
    if len(steps) < 2:
        return None
    return int(steps[1:, 0].min()), int(steps[:, 1].max())


def _library(path: str) -> bool:
    """An installed package's file, the standard library's, or generated code
    (``<string>``, an FX graph's ``<eval_with_key>.N``): not the user's own source."""
    return any(part in path for part in LIBRARY_PARTS) or "/lib/python3" in path or path.startswith("<")


def _short(path: str) -> str:
    """A library file from its package on (``transformers/generation/utils.py``)."""
    for part in LIBRARY_PARTS:
        if part in path:
            return path.rsplit(part, 1)[1]
    return path


def site_of(stack: Sequence[Sequence[Any]]) -> tuple[Frame, Frame | None] | None:
    """``(site, via)`` of one event's stack (innermost last; module docstring), None when
    every frame is PyTorch's own."""
    frames = [(str(f[0]), int(f[1]), str(f[2])) for f in stack if not any(p in str(f[0]) for p in TORCH_PARTS)]
    if not frames:
        return None
    site = frames[-1]
    via = next((f for f in reversed(frames) if not _library(f[0])), None) if _library(site[0]) else None
    return site, via


def module_calls(runs: AnyRuns, index: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Run ``index``'s top-level module calls as sorted ``(starts, ends)`` (ns), for a
    workload timed by its module calls; None for marked steps or profiler regions (a step
    there covers the whole iteration: nothing finer to place a call in)."""
    if not isinstance(runs, ModuleRuns):
        return None
    calls = [a for a in runs.runs[index].values() if len(a)]
    if not calls:
        return None
    both = np.concatenate(calls)
    both = both[np.argsort(both[:, 0], kind="stable")]
    return both[:, 0], both[:, 1]


def _inside(calls: tuple[np.ndarray, np.ndarray], t: int) -> bool:
    """Whether ``t`` falls in one of the (outermost, so disjoint) module calls."""
    starts, ends = calls
    at = int(np.searchsorted(starts, t, side="right")) - 1
    return at >= 0 and t <= int(ends[at])


def _where_line(
    site: Frame, via: Frame | None, share: float, per_step: float | None, outside: bool | None, reason: str | None
) -> dict[str, Any]:
    """One ``Finding.where`` entry (the keys of :class:`launchprof.report.schema.SourceLine`):
    a library's file from its package on, ``via`` as ``file:line (function)``."""
    library = _library(site[0])
    return {
        "file": _short(site[0]) if library else site[0],
        "line": site[1],
        "function": site[2],
        "library": library,
        "via": f"{via[0]}:{via[1]} ({via[2]})" if via is not None else None,
        "share": share,
        "per_step": per_step,
        "outside": outside,
        "reason": reason,
    }


def sync_sites(
    events: Sequence[Sequence[tuple[int, Sequence[Sequence[Any]]]]],
    windows: Sequence[tuple[int, int] | None],
    syncs_per_step: float,
    calls: Sequence[tuple[np.ndarray, np.ndarray] | None] | None = None,
) -> list[dict[str, Any]]:
    """The source lines of the synchronizing calls of the runs' windows (module docstring).

    Args:
        events: per run, its ``(t_ns, stack)`` events.
        windows: per run, its window (:func:`run_window`); a run without one counts no event.
        syncs_per_step: the trace's synchronizing calls per steady step (p50).
        calls: per run, its top-level module calls (:func:`module_calls`) or None.

    Returns:
        up to :data:`TOP_SITES` dicts: ``file`` (a library's from its package on),
        ``line``, ``function``, ``library`` (bool), ``via`` (``"file:line (function)"`` of the
        user's frame that led to a library site, or None), ``share`` (of the events),
        ``per_step`` (``share x syncs_per_step``) and ``outside`` (True when every one of the
        line's calls came between the top-level module calls, as a ``generate()`` loop's
        stopping check does: a graph of the module call leaves it out, it is no blocker;
        False when some came inside one; None without module calls); user lines first.
    """
    counts: Counter[tuple[Frame, Frame | None]] = Counter()
    inside: Counter[tuple[Frame, Frame | None]] = Counter()
    per_run = list(calls) if calls is not None else [None] * len(events)
    for run, window, run_calls in zip(events, windows, per_run, strict=True):
        if window is None:
            continue
        for t, stack in run:
            if window[0] <= t <= window[1]:
                found = site_of(stack)
                if found is not None:
                    counts[found] += 1
                    if run_calls is not None and _inside(run_calls, t):
                        inside[found] += 1
    placed = calls is not None and any(c is not None for c in calls)
    total = sum(counts.values())
    if not total:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (_library(kv[0][0][0]), -kv[1], kv[0][0]))
    out = []
    for (site, via), n in ranked[:TOP_SITES]:
        outside = (inside[(site, via)] == 0) if placed else None
        out.append(_where_line(site, via, n / total, n / total * syncs_per_step, outside, None))
    return out


@dataclass(frozen=True)
class SyncRuns:
    """The synchronizing calls the runs without nsys wrote: per run (in the order of the
    runs the analysis times steps with), its ``(t_ns, stack)`` events; ``unavailable``:
    why a run could not collect them (its torch lacks the check), else None; ``skips``:
    per run, Inductor's reasons for running a compiled function without CUDA Graphs,
    ``(reason, stack)`` (:func:`graph_skips`)."""

    events: list[list[tuple[int, list[list[Any]]]]]
    unavailable: str | None = None
    skips: list[list[tuple[str, list[list[Any]]]]] = dataclasses.field(default_factory=list)
    allocations: AllocRun | None = None


@dataclass(frozen=True)
class AllocRun:
    """The allocation run (:func:`launchprof.commands.baseline.run_allocations`): one more
    run without nsys with PyTorch's allocation history on, its step times as the analysis
    takes them (``runs``, one run) and its allocations (``events``: ``(t_ns, kind,
    size_bytes, stack)``, kind ``alloc`` or ``segment_alloc``); ``unavailable``: why it
    could not record them, else None."""

    runs: AnyRuns
    events: list[tuple[int, str, int, list[list[Any]]]]
    unavailable: str | None = None


NOT_COLLECTED = (
    "source lines: not collected (they come from `launchprof profile`'s runs without nsys of a PyTorch "
    "workload, or `analyze TRACE --baseline FOLDER` of such a report)"
)


def where(runs: AnyRuns | None, sync: SyncRuns | None, syncs_per_step: float) -> tuple[list[dict[str, Any]], str]:
    """A ``sync-in-step`` finding's source lines and, when there are none, one line why:
    ``(sites, note)`` (:func:`sync_sites`; ``note`` empty when sites were found)."""
    if runs is None or sync is None:
        return [], NOT_COLLECTED
    if sync.unavailable and not any(sync.events):
        return [], f"source lines: not collected ({sync.unavailable})"
    count = len(runs.runs) if isinstance(runs, (RegionRuns, ModuleRuns)) else len(runs)
    if len(sync.events) != count:
        return [], "source lines: not collected (the runs' files do not match their step times)"
    sites = sync_sites(
        sync.events,
        [run_window(runs, i) for i in range(count)],
        syncs_per_step,
        [module_calls(runs, i) for i in range(count)],
    )
    if not sites:
        return [], "source lines: the runs without nsys met no synchronizing call in their timed steps"
    return sites, ""


def placed(finding: Finding, runs: AnyRuns | None, sync: SyncRuns | None, module: str | None = None) -> Finding:
    """A ``sync-in-step`` finding with its source lines (:func:`where`), an ``alloc-in-step``
    or ``dynamic-shapes`` one with its allocation lines (:func:`alloc_where`; ``module``: the
    top-level module whose calls are the steps, from the baseline section); any other
    finding as it is."""
    if finding.kind == "sync-in-step":
        sites, note = where(runs, sync, float(finding.figures.get("sync_calls_p50") or 0.0))
        return dataclasses.replace(finding, where=sites, where_note=note)
    if finding.kind in ALLOCATION_KINDS:
        sites, note = alloc_where(sync.allocations if sync is not None else None, finding.kind, module)
        return dataclasses.replace(finding, where=sites, where_note=note)
    return finding


# The findings whose lines come from the allocation run (launchprof.commands.baseline.run_allocations).
ALLOCATION_KINDS = ("alloc-in-step", "dynamic-shapes")
ALLOC_NOT_COLLECTED = (
    "source lines: not collected (they come from the short extra run `launchprof profile` makes of a PyTorch "
    "workload whose steps allocate or change shape, with PyTorch's allocation history on)"
)
# An allocation line "changes size" when its allocations in the timed steps have at least
# this many distinct sizes (a tensor that grows a row a step has one per step; a fixed
# buffer has one; two could be a last partial batch).
CHANGING_SIZES = 3


def _alloc_steps(alloc: AllocRun, module: str | None) -> np.ndarray | None:
    """The allocation run's timed steps as ``(start_ns, end_ns)`` rows: its marked steps but
    the first; the later half of the calls of ``module`` (the top-level module whose calls
    are the steps, :func:`launchprof.analysis.baseline.module_match`; without it, the module
    called most); None for a profiler region (its steps are not in the run). Steps that
    began before the first recorded allocation are left out: PyTorch keeps only the latest
    entries (:data:`launchprof.source_hooks.ALLOC_ENTRIES`), so a long run's first
    steps may have lost theirs."""
    runs = alloc.runs
    if isinstance(runs, RegionRuns):
        return None
    if isinstance(runs, ModuleRuns):
        calls = {k: v for k, v in runs.runs[0].items() if len(v)}
        if not calls:
            return np.empty((0, 2), dtype=np.int64)
        name = module if module in calls else max(calls, key=lambda k: len(calls[k]))
        steps = later_half(calls[name])
    else:
        steps = runs[0][1:]
    if alloc.events and len(steps):
        first = min(e[0] for e in alloc.events)
        steps = steps[steps[:, 0] >= first]
    return steps


def _size(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"


def _growing(sizes: Sequence[int]) -> bool:
    """Whether allocations of one line (in time order) grow: at least 80 % of its distinct
    sizes were larger than every size before them when first met. A cache grown by a row a
    step is (also when it restarts, as a ``generate()`` call's cache does: the sizes of the
    next round were met before); a line that allocates a fixed buffer between the growing
    ones (``cat([cache, x.repeat(...)])``) still is; sizes that go up and down are not."""
    seen: set[int] = set()
    top, new_top = -1, 0
    for size in sizes:
        if size in seen:
            continue
        seen.add(size)
        if size > top:
            new_top += 1
            top = size
    return len(seen) >= CHANGING_SIZES and new_top >= 0.8 * len(seen)


def alloc_sites(alloc: AllocRun, kind: str, module: str | None = None) -> list[dict[str, Any]]:
    """The source lines of the allocation run's timed steps (its window, :func:`run_window`),
    the user's own first, at most :data:`TOP_SITES`: for ``alloc-in-step``, the lines whose
    allocation made the allocator call ``cudaMalloc`` (``segment_alloc``), else - none met in
    the window - the lines whose allocations change size (what makes a caching allocator
    ask for more); for ``dynamic-shapes``, the lines whose allocations change size
    (:data:`CHANGING_SIZES`). The steps are :func:`_alloc_steps` (``module``: the module
    whose calls are the steps). Each: ``file``, ``line``, ``function``, ``library``,
    ``via``, ``share`` (of the events listed), ``per_step`` (events a timed step; None for a
    profiler region), ``outside`` (None), ``reason`` (what the allocations there are:
    count, sizes, growing)."""
    timed = _alloc_steps(alloc, module)
    if timed is None:  # a profiler region: the region's span, no step count
        window, steps = run_window(alloc.runs, 0), 0
    else:
        window = (int(timed[0, 0]), int(timed[-1, 1])) if len(timed) else None
        steps = len(timed)
    if window is None or (timed is not None and steps <= 0):
        return []
    inside = [e for e in alloc.events if window[0] <= e[0] <= window[1]]
    by_site: dict[tuple[Frame, Frame | None], list[tuple[int, str, int]]] = {}
    for t, what, size, stack in inside:
        found = site_of(stack)
        if found is not None:
            by_site.setdefault(found, []).append((t, what, size))
    mallocs = {k: v for k, v in by_site.items() if any(w == "segment_alloc" for _, w, _ in v)}
    changing = {k: v for k, v in by_site.items() if len({size for _, w, size in v if w == "alloc"}) >= CHANGING_SIZES}
    chosen = mallocs if kind == "alloc-in-step" and mallocs else changing
    counted = {
        k: [e for e in v if e[1] == ("segment_alloc" if chosen is mallocs else "alloc")] for k, v in chosen.items()
    }
    total = sum(len(v) for v in counted.values())
    if not total:
        return []

    sizes = {k: [size for _, _, size in sorted(v)] for k, v in counted.items()}  # in time order
    grows = {k: _growing(v) for k, v in sizes.items()}

    # cudaMalloc lines by count; lines that change size by how many sizes (a cache that grows
    # a row a step has one per step), growing ones first
    def rank(key: tuple[Frame, Frame | None]) -> tuple[Any, ...]:
        site = key[0]
        if chosen is mallocs:
            return (_library(site[0]), -len(sizes[key]), site)
        return (_library(site[0]), not grows[key], -len(set(sizes[key])), site)

    out = []
    span = f"in {steps} steps" if steps else "in the profiler region"
    for key in sorted(counted, key=rank)[:TOP_SITES]:
        (site, via), these = key, sizes[key]
        small, large = _size(min(these)), _size(max(these))
        if chosen is mallocs:
            what = f"cudaMalloc {len(these)} times {span} ({small} to {large})"
        else:
            what = f"{'growing' if grows[key] else 'changing'}: {len(set(these))} sizes, {small} to {large}"
        out.append(_where_line(site, via, len(these) / total, len(these) / steps if steps else None, None, what))
    return out


def alloc_where(alloc: AllocRun | None, kind: str, module: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """An ``alloc-in-step`` or ``dynamic-shapes`` finding's allocation lines
    (:func:`alloc_sites`) and, when there are none, one line why."""
    if alloc is None:
        return [], ALLOC_NOT_COLLECTED
    if alloc.unavailable and not alloc.events:
        return [], f"source lines: not collected ({alloc.unavailable})"
    sites = alloc_sites(alloc, kind, module)
    if not sites:
        what = (
            "cudaMalloc or allocation that changes size" if kind == "alloc-in-step" else "allocation that changes size"
        )
        return [], f"source lines: the allocation run met no {what} in its timed steps"
    return sites, ""


# What to do for each of Inductor's reasons for skipping CUDA Graphs, by a word of the
# reason (torch/_inductor/cudagraph_utils.py and cudagraph_trees.py name them: "mutated
# inputs", "cpu device", "non-cuda device", "DeviceCopy", "incompatible op", "dynamic shape").
SKIP_FIXES = (
    (
        "mutated input",
        "the compiled function changes an input in place (buf.add_(...), x[i] = ...): return the new value "
        "instead, or keep the state in a module buffer or parameter (static addresses Inductor can capture)",
    ),
    (
        "incompatible op",
        "an operation a graph cannot hold (.item(), .tolist(), nonzero, a data-dependent shape) runs inside "
        "the compiled function: move it out, or keep the value on the GPU (torch.where) and read it outside",
    ),
    (
        "device",
        "the compiled function has CPU tensors or copies between devices (.cpu(), .to('cpu'), a CPU input): "
        "move them out of it, or make the inputs CUDA tensors before the call",
    ),
    (
        "dynamic shape",
        "the compiled function was compiled for changing shapes: pad inputs to a few fixed sizes, or mark "
        "them static (torch._dynamo.mark_static) so each size gets its own graph",
    ),
)
SKIP_FIX_OTHER = "fix what Inductor names at the line shown (TORCH_LOGS=perf_hints prints its reason too)"


def skip_cause(reason: str) -> str | None:
    """The word of :data:`SKIP_FIXES` that Inductor's ``reason`` holds (what the fix and the
    page's code are chosen by), None for a reason none matches."""
    low = reason.lower()
    return next((word for word, _ in SKIP_FIXES if word in low), None)


def _skip_fix(reason: str) -> str:
    return dict(SKIP_FIXES).get(skip_cause(reason) or "", SKIP_FIX_OTHER)


def graph_skips(sync: SyncRuns | None, replaying: bool) -> Finding | None:
    """A ``cudagraph-skip`` finding: ``torch.compile(mode="reduce-overhead")`` ran a compiled
    function without CUDA Graphs in the runs without nsys, for the reasons Inductor logged
    (:mod:`launchprof.source_hooks`, "CUDA Graphs that ... did not use"). A ``blocker``
    when the trace's steady steps launch no graph (nothing was captured), a ``warning``
    when they do (other compiled parts replay graphs). ``where`` lists the line each reason
    names (:func:`site_of`; ``per_step`` None, ``share`` of the skips, ``reason``), the
    user's own first. None without skips.

    Fix per reason: :data:`SKIP_FIXES` (the reasons' texts are PyTorch's)."""
    if sync is None or not any(sync.skips):
        return None
    counts: Counter[tuple[str, tuple[Frame, Frame | None] | None]] = Counter()
    for run in sync.skips:
        for reason, stack in run:
            counts[(reason, site_of(stack))] += 1
    total = sum(counts.values())
    reasons: Counter[str] = Counter()
    for (reason, _), n in counts.items():
        reasons[reason] += n
    ranked = sorted(counts.items(), key=lambda kv: (kv[0][1] is None or _library(kv[0][1][0][0]), -kv[1]))
    where = []
    for (reason, found), n in ranked[:TOP_SITES]:
        if found is None:
            continue
        site, via = found
        where.append(_where_line(site, via, n / total, None, None, reason))
    said = "; ".join(f"{r} (x{n})" for r, n in reasons.most_common())
    fixes = list(dict.fromkeys(_skip_fix(r) for r in reasons))
    runs = sum(1 for run in sync.skips if run)
    return Finding(
        "cudagraph-skip",
        Severity.WARNING if replaying else Severity.BLOCKER,
        0,
        [],
        f'torch.compile(mode="reduce-overhead") ran compiled code without CUDA Graphs in {runs} of '
        f"{len(sync.skips)} run(s) without nsys: Inductor skipped them due to {said}"
        + ("; other compiled parts replay graphs" if replaying else "; the steady steps launch no graph"),
        "; ".join(f[:1].upper() + f[1:] for f in fixes) + ".",
        {"skips": int(total), "reasons": dict(reasons)},
        where,
        "" if where else "source lines: Inductor named no line of the program for these skips",
    )
