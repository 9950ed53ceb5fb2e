"""Where in the code a step synchronizes: source lines from the runs without nsys.

``launchprof profile``'s runs without nsys of a PyTorch workload turn on PyTorch's own
check, ``torch.cuda.set_sync_debug_mode("warn")``, and write the Python stack of every
operation that synchronizes the host with the GPU (:mod:`launchprof.profiler_region`,
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

from launchprof.analysis.baseline import AnyRuns, ModuleRuns, RegionRuns
from launchprof.analysis.findings import Finding

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


def sync_sites(
    events: Sequence[Sequence[tuple[int, Sequence[Sequence[Any]]]]],
    windows: Sequence[tuple[int, int] | None],
    syncs_per_step: float,
) -> list[dict[str, Any]]:
    """The source lines of the synchronizing calls of the runs' windows (module docstring).

    Args:
        events: per run, its ``(t_ns, stack)`` events.
        windows: per run, its window (:func:`run_window`); a run without one counts no event.
        syncs_per_step: the trace's synchronizing calls per steady step (p50).

    Returns:
        up to :data:`TOP_SITES` dicts: ``file`` (a library's from its package on),
        ``line``, ``function``, ``library`` (bool), ``via`` (``"file:line (function)"`` of the
        user's frame that led to a library site, or None), ``share`` (of the events) and
        ``per_step`` (``share x syncs_per_step``); user lines first.
    """
    counts: Counter[tuple[Frame, Frame | None]] = Counter()
    for run, window in zip(events, windows, strict=True):
        if window is None:
            continue
        for t, stack in run:
            if window[0] <= t <= window[1]:
                found = site_of(stack)
                if found is not None:
                    counts[found] += 1
    total = sum(counts.values())
    if not total:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (_library(kv[0][0][0]), -kv[1], kv[0][0]))
    out = []
    for (site, via), n in ranked[:TOP_SITES]:
        library = _library(site[0])
        out.append(
            {
                "file": _short(site[0]) if library else site[0],
                "line": site[1],
                "function": site[2],
                "library": library,
                "via": f"{via[0]}:{via[1]} ({via[2]})" if via is not None else None,
                "share": n / total,
                "per_step": n / total * syncs_per_step,
            }
        )
    return out


@dataclass(frozen=True)
class SyncRuns:
    """The synchronizing calls the runs without nsys wrote: per run (in the order of the
    runs the analysis times steps with), its ``(t_ns, stack)`` events; ``unavailable``:
    why a run could not collect them (its torch lacks the check), else None."""

    events: list[list[tuple[int, list[list[Any]]]]]
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
    sites = sync_sites(sync.events, [run_window(runs, i) for i in range(count)], syncs_per_step)
    if not sites:
        return [], "source lines: the runs without nsys met no synchronizing call in their timed steps"
    return sites, ""


def placed(finding: Finding, runs: AnyRuns | None, sync: SyncRuns | None) -> Finding:
    """A ``sync-in-step`` finding with its source lines (:func:`launchprof.analysis.sources.where`);
    any other finding as it is."""
    if finding.kind != "sync-in-step":
        return finding
    sites, note = where(runs, sync, float(finding.figures.get("sync_calls_p50") or 0.0))
    return dataclasses.replace(finding, where=sites, where_note=note)
