"""Build the :class:`~launchprof.report.schema.Summary` document from a finished analysis
(:func:`launchprof.analysis.finish.finish`: every value is computed there)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from launchprof.analysis.result import AnalysisResult
from launchprof.analysis.timeline.gaps import TimelineFigures
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
    shown = analysis.outputs()
    steps = shown.step_stats
    d = analysis.diagnosis
    diagnosis = None if d is None else {**d.to_dict(), "reasons": shown.reasons}
    baseline = None if d is None else d.baseline
    recommendation = None if analysis.recommendation is None else analysis.recommendation.to_dict()
    ranks = None if analysis.ranks is None else analysis.ranks.to_dict()
    # A trace without devices: the NVTX step ranges say what the host did.
    nvtx = shown.host_steps.to_dict() if shown.host_steps is not None and not devices else None
    return Summary(
        trace=TraceInfo(
            path=printable(trace_path if trace_path is not None else str(trace.path)),
            nsys_version=trace.schema.nsys_version,
            schema_version=trace.schema.schema_version,
            time_range_ns=None if trace.window is None else list(trace.window),
        ),
        devices=devices,
        launches=Launches(**asdict(analysis.launches)),
        processes_without_gpu=analysis.processes_without_gpu,
        nvtx_ranges_lost=analysis.nvtx_ranges_lost,
        notes=analysis.notes,
        headline=None if shown.headline is None else Headline.model_validate(shown.headline),
        steps=StepsSection.model_validate(steps),
        diagnosis=None if diagnosis is None else DiagnosisSection.model_validate(diagnosis),
        recommendation=None if recommendation is None else RecommendationSection.model_validate(recommendation),
        ranks=None if ranks is None else RanksSection.model_validate(ranks),
        nvtx_steps=None if nvtx is None else NvtxStepsSection.model_validate(nvtx),
        baseline=None if baseline is None else Baseline.model_validate(baseline),
    )
