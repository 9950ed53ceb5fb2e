"""The last stage of the analysis: what the outputs show (:class:`~launchprof.analysis.result.Shown`),
computed once before any output is made.

:func:`finish` takes an :class:`~launchprof.analysis.result.AnalysisResult` (its figures,
steps, ranks and diagnosis) and adds the step statistics, the NVTX step ranges of a trace
without GPU work, the verdict's reasons with the rank it judged, the headline, the
duration histogram, the utilization series and the found steps as a comparison side (the
step files' tables; ``compare`` reads it). summary.json,
report.html, the step files and the notebook card only format them
(:mod:`launchprof.report`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, TypeVar

import pandas as pd

from launchprof.analysis.comparison.side import side_figures, side_from_analysis
from launchprof.analysis.diagnosis.sources import skip_cause
from launchprof.analysis.headline import headline
from launchprof.analysis.nvtx_steps import nvtx_steps
from launchprof.analysis.result import UTILIZATION_BINS, AnalysisResult, Shown
from launchprof.analysis.steps import step_stats
from launchprof.analysis.timeline.core import utilization_series
from launchprof.analysis.timeline.durations import duration_histogram

R = TypeVar("R", bound=AnalysisResult)


def finish(result: R, reuse: Shown | None = None) -> R:
    """``result`` with :attr:`~launchprof.analysis.result.AnalysisResult.shown` made: the
    analysis is over, the outputs can be written.

    Args:
        result: with its diagnosis (or None: no headline, no reasons).
        reuse: the :class:`~launchprof.analysis.result.Shown` of a result with the same
            trace figures and steps, diagnosed without the runs without nsys
            (:func:`launchprof.api.traces.with_baseline`): its utilization series and its
            side's tables (which do not depend on the diagnosis) are taken, not made again;
            the side's recommendation figures are this result's.

    The values computed once for ``result`` (:meth:`~launchprof.analysis.Analysis.cached`)
    are shared with the finished result.
    """
    d, r = result.diagnosis, result.recommendation
    stats = step_stats(result.found_steps)
    host = None
    if not result.devices or (d is not None and d.verdict == "no-gpu-work"):
        host = nvtx_steps(result.trace.nvtx, result.step_name)
    ranks = None if result.ranks is None else result.ranks.to_dict()
    reasons: list[str] = [] if d is None else list(d.reasons)
    scope = rank_scope(stats, ranks)
    if scope and d is not None:
        reasons.append(scope)
    diagnosis = None if d is None else {**d.to_dict(), "reasons": reasons}
    # summary.json's nvtx_steps section: only a trace without devices has one.
    nvtx = host.to_dict() if host is not None and not result.devices else None
    if reuse is not None:  # the tables again, the recommendation's figures of this result
        utilization = reuse.utilization
        side = dataclasses.replace(reuse.side, **side_figures(result, result.found_steps))
    else:
        utilization = {dev.device_id: utilization_series(dev.activity, bins=UTILIZATION_BINS) for dev in result.devices}
        side = side_from_analysis(result, result.found_steps)
    shown = Shown(
        step_stats=stats,
        host_steps=host,
        reasons=reasons,
        headline=headline(stats, diagnosis, None if r is None else r.to_dict(), nvtx),
        durations=duration_histogram(d.durations if d is not None else pd.DataFrame()),
        skip_causes=_skip_causes(result),
        utilization=utilization,
        side=side,
    )
    finished = dataclasses.replace(result, shown=shown)
    object.__setattr__(finished, "_derived", result._derived)
    return finished


def _skip_causes(result: AnalysisResult) -> list[str | None]:
    d = result.diagnosis
    finding = None if d is None else next((f for f in d.findings if f.kind == "cudagraph-skip" and f.where), None)
    return [] if finding is None else [skip_cause(str(w["reason"])) for w in finding.where]


def waiting_ranks(judged: tuple[Any, Any], ranks: Iterable[tuple[int, Any, Any, bool]]) -> list[int]:
    """The ranks to name beside a verdict as ones whose GPU waits for the CPU: those the
    rank view flags (``launch_bound``: waiting at least ``launch_bound_ratio`` of each
    steady step under nsys), other than the judged one, and only when the judged rank is
    not flagged itself (its own verdict then speaks for the wait); ``[]`` otherwise. The
    one rule behind :func:`rank_scope` and the terminal's verdict line
    (:func:`launchprof.commands.text.verdict_line`).

    Args:
        judged: the (device id, pid) of the steps the verdict judged.
        ranks: (rank, device id, pid, flagged) of each rank.
    """
    ranks = list(ranks)
    if any((device, pid) == judged and flagged for _, device, pid, flagged in ranks):
        return []
    return [rank for rank, device, pid, flagged in ranks if flagged and (device, pid) != judged]


def rank_scope(steps: dict[str, Any] | None, ranks: dict[str, Any] | None) -> str | None:
    """With several ranks: which one the verdict judged (the steps' device and process)
    and, when others differ, on which ranks the GPU waits for the CPU (the rank view's
    ``launch_bound`` bar; not called launch-bound, which says a graph is expected to pay)
    or which are stragglers; None otherwise.

    Args:
        steps: the summary's ``steps`` section (``device_id``, ``pid``).
        ranks: the summary's ``ranks`` section (``count``, ``ranks[]`` with ``rank``,
            ``device_id``, ``pid``, ``launch_bound``, ``straggler_steps``,
            ``slowest_steps``; ``aligned_steps``, ``critical_rank``, ``launch_bound_ratio``).
    """
    if not steps or not ranks or int(ranks.get("count") or 0) < 2:
        return None
    rows = ranks.get("ranks") or []
    judged = next(
        (r for r in rows if r.get("device_id") == steps.get("device_id") and r.get("pid") == steps.get("pid")), None
    )
    if judged is None:
        return None
    text = (
        f"This verdict judges rank {judged['rank']} (GPU {judged['device_id']}, pid {judged['pid']}) of "
        f"{ranks['count']} ranks."
    )
    if ranks.get("critical_rank") == judged["rank"]:
        text += (
            f" It is the critical rank: the slowest in {judged.get('slowest_steps')} of {ranks.get('aligned_steps')} "
            "steps, so the others wait for it in their collectives and the job's step is its step."
        )
    others = [r for r in rows if r is not judged]
    flags = [(r["rank"], r.get("device_id"), r.get("pid"), bool(r.get("launch_bound"))) for r in rows]
    bound = [str(rank) for rank in waiting_ranks((steps.get("device_id"), steps.get("pid")), flags)]
    if bound:
        ratio = float(ranks.get("launch_bound_ratio") or 0.2)
        text += (
            f" On rank{'s' if len(bound) > 1 else ''} {', '.join(bound)} the GPU waits for the CPU {ratio:.0%} or "
            "more of each steady step"
        )
        slow = [r for r in others if str(r["rank"]) in bound and r.get("straggler_steps")]
        if slow:
            worst = max(slow, key=lambda r: r["straggler_steps"])
            of = ranks.get("aligned_steps")
            text += f" (rank {worst['rank']} is the straggler in {worst['straggler_steps']} of {of} steps)"
        text += ": see the Ranks section."
    return text
