"""The verdict over the steady state, the findings, and the graph recommendation.

Verdict (over the steady-state steps, :attr:`Steps.steady`; sums over those steps):

- ``no-gpu-work``: no GPU activity (or no step holds any).
- ``gpu-bound``: the GPU waits for the CPU (host-wait idle) less than
  :data:`HOST_WAIT_MIN` = 20 % of the step period. Removing every CPU cost could then gain
  at most 1 / (1 - 0.2) = 1.25x, the same bar as :data:`MIN_SPEEDUP`; the chapter's
  "a few large kernels, the GPU is already busy" case.
- otherwise the largest share of the host-wait idle, split by cause
  (:mod:`launchprof.analysis.diagnosis.gapcauses`): ``launch-bound`` (the GPU waited for the launch
  path), ``sync-bound`` (it waited after a synchronizing call drained it) or
  ``host-bound`` (it waited while the CPU did other work, > 100 us without a CUDA call).
  A steady state that already replays graphs (a graph launch a step or more) and still
  waits for the CPU is ``host-bound`` whatever the split: the launches a graph removes
  are gone, and what the host does around the replays is listed by the
  ``host-outside-graph`` finding (:mod:`launchprof.analysis.diagnosis.hostwork`) instead of
  ``sync-in-step`` (a sync outside the graph does not break its capture).

Recommendation (:mod:`launchprof.analysis.prediction.recommendation`): the prediction
(:mod:`launchprof.analysis.prediction.predict`, for a profiled run) is computed for every verdict
with per-launch kernels, so a gpu-bound workload shows how little a graph would give; the
expectation without the profiler (:mod:`launchprof.analysis.prediction.expect`: the one prediction
the outputs show, with the step measured without nsys when runs are given) decides. The
decision and the verdict's agreement with it: :mod:`launchprof.analysis.prediction.decision`.
Blockers are the findings of severity ``blocker``: fix them before (or while) converting.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.baseline import AnyRuns, baseline_of, measured_step
from launchprof.analysis.diagnosis.finders import FinderInputs, find_all
from launchprof.analysis.diagnosis.findings import Finding
from launchprof.analysis.diagnosis.gapcauses import HOST_GAP_NS
from launchprof.analysis.diagnosis.sources import SyncRuns, placed
from launchprof.analysis.headline import replays_graphs
from launchprof.analysis.prediction.decision import MIN_SPEEDUP, agree
from launchprof.analysis.prediction.expect import expect_shapes
from launchprof.analysis.prediction.predict import constants
from launchprof.analysis.prediction.recommendation import (
    Recommendation,
    on_expectation_footing,
    profiled_predictions,
    recommend,
    unprofiled_step,
)
from launchprof.analysis.prediction.stepmix import step_shapes, stream_figures
from launchprof.analysis.stepdata import StepContext, step_context
from launchprof.analysis.steps import Steps, find_steps
from launchprof.analysis.timeline.core import Analysis
from launchprof.analysis.timeline.durations import launch_durations
from launchprof.analysis.timeline.toptables import top_tables
from launchprof.defaults import DIAGNOSIS_VERDICTS
from launchprof.text import us_text

VERDICTS = DIAGNOSIS_VERDICTS
HOST_WAIT_MIN = 0.2


@dataclass(frozen=True)
class Diagnosis:
    """The verdict and the findings.

    Attributes:
        verdict: one of :data:`VERDICTS`.
        reasons: sentences with the numbers behind the verdict.
        findings: :class:`~launchprof.analysis.diagnosis.findings.Finding` list, blockers first.
        figures: the steady-state numbers (ns, ratios of the summed step periods).
        thresholds: the thresholds used, by name.
        framework: ``"pytorch"`` or ``"cuda"`` (which conversion code fits).
        per_step: one row per step (chart data): ``step``, ``warmup``, ``period_ns``,
            ``busy_ns``, ``launch_wait_ns``, ``sync_wait_ns``, ``host_work_wait_ns``,
            ``other_idle_ns`` (period - busy - the waits, >= 0).
        durations: steady per-launch kernels and their launch calls: ``kernel_ns``,
            ``launch_call_ns`` (one row per kernel joined to its call).
        baseline: the ``baseline`` section of the runs without nsys
            (:func:`launchprof.analysis.baseline.baseline_section`), None without runs.
        top: the top kernels and CUDA API calls of the steady steps
            (:func:`launchprof.analysis.timeline.toptables.top_tables`; ``to_dict``:
            ``top_kernels``, ``top_calls``).
    """

    verdict: str
    reasons: list[str]
    findings: list[Finding]
    figures: dict[str, Any]
    thresholds: dict[str, float]
    framework: str = "cuda"
    per_step: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    durations: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)
    baseline: dict[str, Any] | None = field(default=None, repr=False)
    top: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "findings": [f.to_dict() for f in self.findings],
            "figures": dict(self.figures),
            "thresholds": dict(self.thresholds),
            "framework": self.framework,
            "top_kernels": list(self.top.get("kernels", [])),
            "top_calls": list(self.top.get("calls", [])),
        }


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:g}"


TORCH_KERNELS = r"at::native|elementwise|layer_norm_kernel|softmax_warp|reduce_kernel|cunn_"


def _framework(analysis: Analysis, ctx: StepContext) -> str:
    """``pytorch`` when the stepping process ran PyTorch's own kernels (names from ATen:
    elementwise, layer-norm, softmax, reduction kernels); else ``cuda``. A Python process
    alone is not enough (cuda-python programs are CUDA code)."""
    kernels = analysis.trace.kernels
    name_id, pid = kernels["name_id"].to_numpy(), kernels["pid"].to_numpy()
    ids = _distinct(name_id if (pid == ctx.pid).all() else name_id[pid == ctx.pid])
    names = pd.Series(ids).map(analysis.trace.string).astype(str)
    return "pytorch" if names.str.contains(TORCH_KERNELS, regex=True).any() else "cuda"


def _distinct(ids: np.ndarray) -> np.ndarray:
    """The distinct values of an int array (ascending), by a presence table when they are
    small non-negative ids (StringIds ids are), else by a sort."""
    if ids.size and ids.dtype.kind in "iu" and 0 <= int(ids.min()) and int(ids.max()) <= 4 * ids.size + 65536:
        present = np.zeros(int(ids.max()) + 1, dtype=bool)
        present[ids] = True
        return np.flatnonzero(present)
    return np.unique(ids)


def _figures(ctx: StepContext) -> dict[str, Any]:
    s = ctx.steady
    period = float(s["period_ns"].fillna(0).sum()) if len(s) else 0.0

    def share(col: str) -> float:
        return float(s[col].sum()) / period if period > 0 else 0.0

    def p50(col: str) -> float | None:
        v = s[col].dropna().to_numpy(dtype=float) if col in s else np.empty(0)
        return float(np.percentile(v, 50)) if v.size else None

    return {
        "steady_steps": int(len(s)),
        "period_p50_ns": p50("period_ns"),
        "busy_p50_ns": p50("busy_ns"),
        "kernels_per_step_p50": p50("kernels"),
        "memops_per_step_p50": p50("memops"),
        "launch_calls_per_step_p50": p50("launch_calls"),
        "graph_launches_per_step_p50": p50("graph_launches"),
        "launch_call_ns_per_step_p50": p50("launch_call_ns"),
        "busy_ratio": min(share("busy_ns"), 1.0),
        "host_wait_ratio": min(share("wait_ns"), 1.0),
        "launch_wait_ratio": min(share("launch_wait_ns"), 1.0),
        "sync_wait_ratio": min(share("sync_wait_ns"), 1.0),
        "host_work_wait_ratio": min(share("host_work_wait_ns"), 1.0),
        "launch_wait_p50_ns": p50("launch_wait_ns"),
        "sync_wait_p50_ns": p50("sync_wait_ns"),
        "host_work_wait_p50_ns": p50("host_work_wait_ns"),
        **stream_figures(ctx),
    }


def _figures_empty() -> dict[str, Any]:
    return {"steady_steps": 0, "period_p50_ns": None, "kernels_per_step_p50": None}


def _window(ctx: StepContext, fig: dict[str, Any]) -> str:
    """What the verdict is over: the steady steps (their source, warm-up left out), or the
    whole trace when no repeating step was found."""
    steps = ctx.steps
    if ctx.pseudo:
        return "the whole trace as one window (no repeating step found: start-up is included)"
    return (
        f"{fig['steady_steps']} steady-state steps ({steps.source} steps"
        + (f", {steps.warmup} warm-up step{'s' if steps.warmup > 1 else ''} left out" if steps.warmup else "")
        + ")"
    )


def _verdict(ctx: StepContext, fig: dict[str, Any]) -> tuple[str, list[str]]:
    where = _window(ctx, fig)
    if (
        ctx.device is None
        or ctx.steady.empty
        or (fig["kernels_per_step_p50"] or 0) + (fig["memops_per_step_p50"] or 0) == 0
    ):
        if ctx.device is not None and len(ctx.steady) and ctx.steady["busy_ns"].sum() > 0:
            pass  # graph-level rows only: still GPU work
        else:
            return "no-gpu-work", ["no GPU activity (kernels, copies, memsets) in the steps of this trace"]
    period = fig["period_p50_ns"]
    head = (
        f"Over {where}: {'span' if ctx.pseudo else 'step period p50'} {us_text(period)}, "
        f"GPU busy {fig['busy_ratio']:.0%} of it, "
        f"GPU waiting for the CPU {fig['host_wait_ratio']:.0%}"
    )
    split = (
        f"host-wait split: launch path {fig['launch_wait_ratio']:.0%}, after synchronizing calls "
        f"{fig['sync_wait_ratio']:.0%}, host work between launches {fig['host_work_wait_ratio']:.0%} of the period"
    )
    if fig["host_wait_ratio"] < HOST_WAIT_MIN:
        return "gpu-bound", [
            head + ".",
            f"The GPU waits for the CPU less than {HOST_WAIT_MIN:.0%} of each step: the GPU's own work sets the "
            "pace, and a CUDA Graph (which removes CPU launch cost, not GPU time) has little to gain.",
        ]
    causes = {
        "launch-bound": fig["launch_wait_ratio"],
        "sync-bound": fig["sync_wait_ratio"],
        "host-bound": fig["host_work_wait_ratio"],
    }
    verdict = max(causes, key=lambda k: (causes[k], k == "launch-bound"))
    if replays_graphs(fig):
        # The steps replay graphs: the launches they hold are gone; what keeps the GPU
        # waiting is the host's work around the replays (the host-outside-graph finding).
        return "host-bound", [
            head + ".",
            split + ".",
            f"The steps already replay CUDA graphs ({_g(fig['graph_launches_per_step_p50'])} a step), yet the GPU "
            "waits for the CPU: the host's work around the replays (input copies, synchronizations, launches "
            "outside the graph, the loop's own Python) sets the pace, not the launches a graph removes.",
        ]
    why = {
        "launch-bound": (
            f"The GPU idles between its {_g(fig['kernels_per_step_p50'])} kernels a step waiting for the next "
            f"launch ({_g(fig['launch_calls_per_step_p50'])} launch calls a step): the launch path is the bottleneck."
        ),
        "sync-bound": (
            "Most idle time follows synchronizing calls: the CPU waits for the GPU to drain, then the GPU waits "
            "for the CPU to refill it."
        ),
        "host-bound": (
            f"Most idle time follows CPU work outside CUDA calls (stretches over {HOST_GAP_NS / 1e3:g} us): the "
            "host program, not the launch path, is the bottleneck; a graph would not remove it."
        ),
    }[verdict]
    return verdict, [head + ".", split + ".", why]


def _per_step(ctx: StepContext) -> pd.DataFrame:
    t = ctx.table
    if t.empty:
        return pd.DataFrame()
    waits = sum(t[c].to_numpy(dtype=np.int64) for c in ("launch_wait_ns", "sync_wait_ns", "host_work_wait_ns"))
    other = t["period_ns"].to_numpy(dtype=float) - t["busy_ns"].to_numpy() - waits
    other = np.where(other < 0, 0.0, other)  # as clip(lower=0): NaN (the last step) stays
    return pd.DataFrame(
        {
            "step": t["step"].to_numpy(),
            "warmup": t["warmup"].to_numpy(dtype=bool),
            "period_ns": t["period_ns"].to_numpy(dtype=float),
            "busy_ns": t["busy_ns"].to_numpy(dtype=np.int64),
            "launch_wait_ns": t["launch_wait_ns"].to_numpy(dtype=np.int64),
            "sync_wait_ns": t["sync_wait_ns"].to_numpy(dtype=np.int64),
            "host_work_wait_ns": t["host_work_wait_ns"].to_numpy(dtype=np.int64),
            "other_idle_ns": other,
        }
    )


# params: the steps, the calibration and profile's runs without nsys, each optional
def diagnose(
    analysis: Analysis,
    steps: Steps | None = None,
    calibration: Mapping[str, Any] | None = None,
    host_gap_ns: int = HOST_GAP_NS,
    calibration_source: str = "argument",
    baseline: AnyRuns | None = None,
    sync: SyncRuns | None = None,
) -> tuple[Diagnosis, Recommendation]:
    """Diagnose the steady state of ``analysis`` and recommend (or not) a CUDA Graph.

    Args:
        analysis: from :func:`launchprof.analyze`.
        steps: default :func:`~launchprof.analysis.steps.find_steps` of ``analysis``.
        calibration: prediction constants (see :func:`~launchprof.analysis.prediction.predict.constants`);
            default: the defaults. The analysis reads no file: the API passes the user's
            calibration file (:func:`launchprof.api.calibration.user_calibration`).
        host_gap_ns: CPU time outside CUDA calls above which an idle gap's cause is host
            work (the verdict's split; the capture region does not depend on it).
        calibration_source: what ``calibration`` is (``recommendation.calibration.source``).
        baseline: the runs of the same program without nsys (per-run step-time arrays of
            :mod:`launchprof.trace.steptimes`, or
            :class:`~launchprof.analysis.baseline.RegionRuns` or
            :class:`~launchprof.analysis.baseline.ModuleRuns`), or None: their step
            replaces the estimate of the eager step (``Diagnosis.baseline``, the section).
        sync: the synchronizing calls those runs wrote (:mod:`launchprof.analysis.diagnosis.sources`):
            a ``sync-in-step`` finding lists their source lines (``where``), else says in
            one line why it cannot (``where_note``); Inductor's reasons for skipping CUDA
            Graphs there make a ``cudagraph-skip`` finding.

    Returns:
        ``(Diagnosis, Recommendation)``.
    """
    if steps is None:
        steps = find_steps(analysis)
    values, calib = constants(calibration, calibration_source)
    ctx = step_context(analysis, steps, host_gap_ns)
    fig = _figures(ctx) if len(ctx.steady) else _figures_empty()
    verdict, reasons = _verdict(ctx, fig) if len(ctx.steady) else ("no-gpu-work", ["no GPU activity in this trace"])
    framework = _framework(analysis, ctx) if ctx.device is not None else "cuda"
    pred, single = (
        profiled_predictions(ctx, fig, values) if verdict != "no-gpu-work" and not ctx.pseudo else (None, None)
    )
    replaying = verdict == "host-bound" and replays_graphs(fig)
    section = baseline_of(analysis, steps, baseline) if baseline is not None else None
    # Steps of several shapes: the prediction weighs them as the program's time does, so
    # the measured step is the runs' mean (stepmix.step_shapes).
    shaped = bool(step_shapes(ctx)) if len(ctx.steady) else False
    measured = measured_step(section, mean=shaped) if section is not None else None
    exp = expect_shapes(ctx, fig, values, framework, measured) if pred is not None and not replays_graphs(fig) else None
    pred = on_expectation_footing(pred, exp)
    if not replays_graphs(fig):  # replaying: nothing left to capture
        verdict, reasons = agree(verdict, reasons, exp, pred)
    unprofiled = unprofiled_step(ctx, fig, values, framework, exp, measured)
    inputs = FinderInputs(ctx, analysis, fig, framework, values, exp, unprofiled, sync, replaying)
    found = find_all(inputs, with_steps=ctx.device is not None and bool(len(ctx.steady)))
    module = section.get("module") if section is not None else None
    findings = sorted((placed(f, baseline, sync, module) for f in found), key=lambda f: f.severity.rank)
    diagnosis = Diagnosis(
        verdict=verdict,
        reasons=reasons,
        findings=findings,
        figures=fig,
        thresholds={"host_wait_min": HOST_WAIT_MIN, "host_gap_ns": float(host_gap_ns), "min_speedup": MIN_SPEEDUP},
        framework=framework,
        per_step=_per_step(ctx),
        durations=launch_durations(ctx, analysis),
        baseline=section,
        top=top_tables(ctx, analysis.trace),
    )
    rec = recommend(ctx, fig, verdict, findings, pred, single, calib, exp)
    return diagnosis, dataclasses.replace(rec, step_without_profiler=unprofiled)
