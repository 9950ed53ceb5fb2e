"""Build the :class:`~launchprof.report.schema.Summary` document from an Analysis."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from launchprof.analysis.headline import headline
from launchprof.analysis.nvtx_steps import nvtx_steps
from launchprof.analysis.result import AnalysisResult
from launchprof.analysis.steps import step_stats
from launchprof.analysis.timeline import TimelineFigures
from launchprof.report.html import printable
from launchprof.report.schema import (
    Baseline,
    Bubbles,
    DeviceSummary,
    DiagnosisSection,
    Headline,
    HistogramBin,
    Launches,
    NvtxStepsSection,
    ProcessSummary,
    RanksSection,
    RecommendationSection,
    StepsSection,
    StreamSummary,
    Summary,
    TraceInfo,
)


def _figures(f: TimelineFigures) -> dict[str, Any]:
    b = f.bubbles
    return {
        "kernels": f.kernels,
        "memops": f.memops,
        "span_ns": f.span_ns,
        "busy_ns": f.busy_ns,
        "idle_ns": f.idle_ns,
        "utilization": f.utilization,
        "bubbles": Bubbles(
            threshold_ns=b.threshold_ns,
            count=b.count,
            total_ns=b.total_ns,
            p50_ns=b.p50_ns,
            p90_ns=b.p90_ns,
            max_ns=b.max_ns,
            histogram=[HistogramBin(low_ns=lo, high_ns=hi, count=c) for lo, hi, c in b.histogram],
        ),
        "host_wait_ns": f.host_wait_ns,
        "cpu_bound_ratio": f.cpu_bound_ratio,
    }


def build_summary(analysis: AnalysisResult, trace_path: str | None = None) -> Summary:
    """The summary document of ``analysis``.

    Args:
        analysis: from :func:`launchprof.analyze`.
        trace_path: the path to record under ``trace.path`` (default: the path the
            trace was loaded from, as given).

    Raises:
        pydantic.ValidationError: an invariant (busy + idle == span, ratios in [0, 1])
            does not hold - a bug, never a user error.
    """
    trace = analysis.trace
    devices = [
        DeviceSummary(
            device_id=d.device_id,
            name=d.name,
            processes=[ProcessSummary(pid=p.pid, name=p.name, **_figures(p.figures)) for p in d.processes],
            streams=[StreamSummary(pid=s.pid, stream_id=s.stream_id, **_figures(s.figures)) for s in d.streams],
            **_figures(d.figures),
        )
        for d in analysis.devices
    ]
    steps = step_stats(analysis.found_steps)
    diagnosis = None if analysis.diagnosis is None else analysis.diagnosis.to_dict()
    baseline = None if analysis.diagnosis is None else analysis.diagnosis.baseline
    recommendation = None if analysis.recommendation is None else analysis.recommendation.to_dict()
    ranks = None if analysis.ranks is None else analysis.ranks.to_dict()
    nvtx = None
    if not devices:  # no GPU step to judge: the NVTX step ranges say what the host did
        found = nvtx_steps(trace.nvtx, analysis.step_name)
        if found is not None:
            nvtx = found.to_dict()
    scope = rank_scope(steps, ranks)
    if scope and diagnosis is not None:
        diagnosis = {**diagnosis, "reasons": [*diagnosis.get("reasons", []), scope]}
    return Summary(
        trace=TraceInfo(
            path=printable(trace_path if trace_path is not None else str(trace.path)),
            nsys_version=trace.schema.nsys_version,
            schema_version=trace.schema.schema_version,
        ),
        devices=devices,
        launches=Launches(**asdict(analysis.launches)),
        processes_without_gpu=analysis.processes_without_gpu,
        nvtx_ranges_lost=analysis.nvtx_ranges_lost,
        notes=analysis.notes,
        headline=summary_headline(steps, diagnosis, recommendation, nvtx),
        steps=StepsSection.model_validate(steps),
        diagnosis=None if diagnosis is None else DiagnosisSection.model_validate(diagnosis),
        recommendation=None if recommendation is None else RecommendationSection.model_validate(recommendation),
        ranks=None if ranks is None else RanksSection.model_validate(ranks),
        nvtx_steps=None if nvtx is None else NvtxStepsSection.model_validate(nvtx),
        baseline=None if baseline is None else Baseline.model_validate(baseline),
    )


def summary_headline(
    steps: Mapping[str, Any] | None,
    diagnosis: Mapping[str, Any] | None,
    recommendation: Mapping[str, Any] | None,
    nvtx_steps: Mapping[str, Any] | None,
) -> Headline | None:
    """The ``headline`` section of the summary whose sections (as dicts) these are
    (:func:`launchprof.analysis.headline.headline`); None without a diagnosis."""
    head = headline(steps, diagnosis, recommendation, nvtx_steps)
    return None if head is None else Headline.model_validate(head)


def rank_scope(steps: dict[str, Any] | None, ranks: dict[str, Any] | None) -> str | None:
    """With several ranks: which one the verdict judged (the steps' device and process)
    and, when others differ, which ranks are launch-bound or stragglers; None otherwise.

    Args:
        steps: the summary's ``steps`` section (``device_id``, ``pid``).
        ranks: the summary's ``ranks`` section (``count``, ``ranks[]`` with ``rank``,
            ``device_id``, ``pid``, ``launch_bound``, ``straggler_steps``,
            ``slowest_steps``; ``aligned_steps``, ``critical_rank``).
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
    bound = [str(r["rank"]) for r in others if r.get("launch_bound") and not judged.get("launch_bound")]
    if bound:
        text += (
            f" Rank{'s' if len(bound) > 1 else ''} {', '.join(bound)} {'are' if len(bound) > 1 else 'is'} launch-bound"
        )
        slow = [r for r in others if str(r["rank"]) in bound and r.get("straggler_steps")]
        if slow:
            worst = max(slow, key=lambda r: r["straggler_steps"])
            of = ranks.get("aligned_steps")
            text += f" (rank {worst['rank']} is the straggler in {worst['straggler_steps']} of {of} steps)"
        text += ": see the Ranks section."
    return text
