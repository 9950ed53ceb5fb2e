"""The verdict over the steady state, the findings, and the graph recommendation.

Verdict (over the steady-state steps, :attr:`Steps.steady`; sums over those steps):

- ``no-gpu-work``: no GPU activity (or no step holds any).
- ``gpu-bound``: the GPU waits for the CPU (host-wait idle) less than
  :data:`HOST_WAIT_MIN` = 20 % of the step period. Removing every CPU cost could then gain
  at most 1 / (1 - 0.2) = 1.25x, the same bar as :data:`MIN_SPEEDUP`; the chapter's
  "a few large kernels, the GPU is already busy" case.
- otherwise the largest share of the host-wait idle, split by cause
  (:mod:`launchprof.analysis.stepdata`): ``launch-bound`` (the GPU waited for the launch
  path), ``sync-bound`` (it waited after a synchronizing call drained it) or
  ``host-bound`` (it waited while the CPU did other work, > 100 us without a CUDA call).
  A steady state that already replays graphs (a graph launch a step or more) and still
  waits for the CPU is ``host-bound`` whatever the split: the launches a graph removes
  are gone, and what the host does around the replays is listed by the
  ``host-outside-graph`` finding (:mod:`launchprof.analysis.hostwork`) instead of
  ``sync-in-step`` (a sync outside the graph does not break its capture).

Recommendation: the prediction (:mod:`launchprof.analysis.predict`, for a profiled run)
is computed for every verdict with per-launch kernels, so a gpu-bound workload shows how
little a graph would give; the expectation without the profiler
(:mod:`launchprof.analysis.expect`: the one prediction the outputs show, with the step
measured without nsys when runs are given) decides. The decision and the verdict's
agreement with it: :mod:`launchprof.analysis.decision`. Blockers are the findings of
severity ``blocker``: fix them before (or while) converting.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.baseline import AnyRuns, baseline_of, measured_step
from launchprof.analysis.core import Analysis
from launchprof.analysis.decision import MIN_SPEEDUP, agree, decide
from launchprof.analysis.durations import launch_durations
from launchprof.analysis.expect import Expectation, expect_shapes, measured_range
from launchprof.analysis.finders import FinderInputs, find_all
from launchprof.analysis.findings import Finding, Severity
from launchprof.analysis.headline import replays_graphs
from launchprof.analysis.predict import Prediction, break_even, constants, gpu_work, gpu_work_note, predict_graph_step
from launchprof.analysis.sources import SyncRuns, placed
from launchprof.analysis.stepdata import HOST_GAP_NS, StepContext, step_context
from launchprof.analysis.stepmix import step_shapes, stream_figures
from launchprof.analysis.steps import Steps, find_steps
from launchprof.analysis.toptables import top_tables
from launchprof.analysis.unprofiled import steps_without_profiler
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
        findings: :class:`~launchprof.analysis.findings.Finding` list, blockers first.
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
            (:func:`launchprof.analysis.toptables.top_tables`; ``to_dict``:
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


@dataclass(frozen=True)
class Recommendation:
    """Whether to convert to a CUDA Graph, what it would give, and what stands in the way.

    Attributes:
        convert: True when the conversion is recommended.
        reason: one sentence why (or why not).
        measured_step_ns: the steady-state per-launch step period (p50).
        predicted_step_ns, predicted_speedup: the model's graph step and the gain for a
            run under the profiler like this one (what ``compare`` of two profiled runs
            measures).
        expected: the gain expected without the profiler (:mod:`launchprof.analysis.expect`),
            the headline; ``convert`` is decided on it. In ``to_dict``:
            ``expected_speedup``, ``expected_speedup_range`` ([low, high]),
            ``expected_step_ns`` (the graph step) and ``expected`` (every term).
        break_even_iterations: N* of the chapter's exercise 2 (None: never pays back).
        instantiate_ns: predicted cudaGraphInstantiate cost.
        nodes_per_step: kernels + memops per step (p50).
        model: the model's terms (``gpu_work_ns``, ``gpu_side_ns``, ``cpu_side_ns``, ...).
        blockers: ``{"kind", "evidence", "fix"}`` for each blocking finding.
        assumptions: what the prediction assumes, in words.
        calibration: ``source``, ``from_calibration``, ``defaults_source``, ``values``.
        step_without_profiler: the steady step as it runs without nsys, the figure
            ``compare`` divides (a run that replays graphs has one too): ``step_ns``,
            ``low_ns``, ``high_ns`` and ``source`` (``measured``: the runs without nsys;
            ``estimate``: :func:`~launchprof.analysis.unprofiled.step_without_profiler`); the
            expectation's eager step when there is one. None without a step period.
    """

    convert: bool
    reason: str
    measured_step_ns: float | None
    predicted_step_ns: float | None
    predicted_speedup: float | None
    break_even_iterations: int | None
    instantiate_ns: float | None
    nodes_per_step: float | None
    model: dict[str, Any]
    blockers: list[dict[str, Any]]
    assumptions: list[str]
    calibration: dict[str, Any]
    expected: Expectation | None = None
    step_without_profiler: dict[str, Any] | None = None

    @property
    def expected_speedup(self) -> float | None:
        return self.expected.speedup if self.expected is not None else None

    def to_dict(self) -> dict[str, Any]:
        e = self.expected
        return {
            "convert": self.convert,
            "reason": self.reason,
            "expected_speedup": e.speedup if e is not None else None,
            "expected_speedup_range": [e.speedup_low, e.speedup_high] if e is not None else None,
            "expected_step_ns": e.graph_step_ns if e is not None else None,
            "expected": dataclasses.asdict(e) if e is not None else None,
            "measured_step_ns": self.measured_step_ns,
            "predicted_step_ns": self.predicted_step_ns,
            "predicted_speedup": self.predicted_speedup,
            "break_even_iterations": self.break_even_iterations,
            "instantiate_ns": self.instantiate_ns,
            "nodes_per_step": self.nodes_per_step,
            "model": dict(self.model),
            "blockers": [dict(b) for b in self.blockers],
            "assumptions": list(self.assumptions),
            "calibration": dict(self.calibration),
            "step_without_profiler": None if self.step_without_profiler is None else dict(self.step_without_profiler),
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


def _predict(
    ctx: StepContext, fig: dict[str, Any], values: Mapping[str, float]
) -> tuple[Prediction | None, Prediction | None]:
    """The prediction for a profiled run like this one: for the step as found and (inferred
    steps) for one repeat per graph."""
    period = fig["period_p50_ns"]
    busy = fig["busy_p50_ns"]
    nodes = (fig["kernels_per_step_p50"] or 0) + (fig["memops_per_step_p50"] or 0)
    if not period or busy is None or nodes <= 0 or not math.isfinite(period):
        return None, None
    host_ns = (fig["host_work_wait_p50_ns"] or 0) + (fig["sync_wait_p50_ns"] or 0)
    inferred = ctx.steps.source == "inferred"
    work, path = gpu_work(fig)
    main = predict_graph_step(period, work, nodes, values, amortized=inferred, host_ns=host_ns, path_nodes=path)
    single = (
        predict_graph_step(period, work, nodes, values, amortized=False, host_ns=host_ns, path_nodes=path)
        if inferred
        else None
    )
    return main, single


def _kept_note(pred: Prediction, exp: Expectation | None) -> list[str]:
    """The assumption behind a synchronizing step's profiled prediction, when it applies."""
    if exp is None or exp.profiled_graph_step_ns is None or pred.graph_step_ns != exp.profiled_graph_step_ns:
        return []
    return [
        "The step synchronizes: a capture cannot hold the sync, so the graph holds at most the step's largest "
        "sync-free run of launches; the rest of its host time stays (as traced) and the GPU and CPU sides add up: "
        f"graph step {us_text(pred.graph_step_ns)} under nsys (expected.profiled_graph_step_ns)."
    ]


def _assumptions(
    ctx: StepContext, pred: Prediction | None, single: Prediction | None, calib: dict[str, Any]
) -> list[str]:
    v = calib["values"]
    out = [
        "Graph step = max(GPU side, CPU side). GPU side = the step's GPU busy time (a graph does not make kernels "
        f"faster) + {v['node_gap_ns']:g} ns dispatch gap per node"
        + (f" (at least {v['node_interval_ns']:g} ns a node)" if v.get("node_interval_ns") else "")
        + f" + {v['graph_launch_gap_ns'] / 1e3:g} us between "
        "consecutive graph launches. CPU side = one cudaGraphLaunch call "
        f"({v['graph_launch_call_base_ns'] / 1e3:g} us + {v['graph_launch_call_per_node_ns']:g} ns per node) + host "
        "work and post-sync waits that a graph does not remove.",
        f"Instantiation = {v['instantiate_base_ns'] / 1e3:g} us + {v['instantiate_per_node_ns'] / 1e3:g} us per "
        "node; break-even N* = the smallest N with (instantiate + N x graph step) / N < per-launch step.",
        "The step's kernels, copies and memsets become graph nodes one for one, and every step runs the same "
        "sequence with the same shapes (see the findings when not).",
        f"Constants: {calib['source']}"
        + (f" (keys {', '.join(calib['from_calibration'])}; the rest: defaults)" if calib["from_calibration"] else "")
        + "; the prediction is for a profiled run like this one (the graph launch's cost under nsys). Without the "
        f"profiler: {v['profiler_launch_overhead_ns'] / 1e3:g} us less per launch call, one cudaGraphLaunch of "
        f"{v['unprofiled_graph_launch_call_base_ns'] / 1e3:g} us + {v['unprofiled_graph_launch_call_per_node_ns']:g} "
        f"ns per node and {v['unprofiled_graph_launch_gap_ns'] / 1e3:g} us between graph launches "
        "(recommendation.expected: the one prediction without the profiler).",
        "Measured figures are the steady-state medians; warm-up steps are left out.",
    ]
    if pred is not None and pred.amortized and single is not None:
        out.append(
            "Steps were inferred as the shortest repeating kernel sequence; the loop body may hold several. "
            "The prediction assumes one graph holds many repeats (its launch cost amortized); a graph per "
            f"repeat would give {us_text(single.graph_step_ns)} per repeat ({single.speedup:.2f}x)."
        )
    if ctx.pseudo:
        out.append("No repeating step was found: the whole trace is treated as one step.")
    return out


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
        calibration: prediction constants (see :func:`~launchprof.analysis.predict.constants`);
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
        sync: the synchronizing calls those runs wrote (:mod:`launchprof.analysis.sources`):
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
    pred, single = _predict(ctx, fig, values) if verdict != "no-gpu-work" and not ctx.pseudo else (None, None)
    replaying = verdict == "host-bound" and replays_graphs(fig)
    section = baseline_of(analysis, steps, baseline) if baseline is not None else None
    # Steps of several shapes: the prediction weighs them as the program's time does, so
    # the measured step is the runs' mean (stepmix.step_shapes).
    shaped = bool(step_shapes(ctx)) if len(ctx.steady) else False
    measured = measured_step(section, mean=shaped) if section is not None else None
    exp = expect_shapes(ctx, fig, values, framework, measured) if pred is not None and not replays_graphs(fig) else None
    pred = _profiled(pred, exp)
    if not replays_graphs(fig):  # replaying: nothing left to capture
        verdict, reasons = agree(verdict, reasons, exp, pred)
    unprofiled = _step_without_profiler(ctx, fig, values, framework, exp, measured)
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
    rec = _recommend(ctx, fig, verdict, findings, pred, single, calib, exp)
    return diagnosis, dataclasses.replace(rec, step_without_profiler=unprofiled)


def _step_without_profiler(
    ctx: StepContext,
    fig: dict[str, Any],
    values: Mapping[str, float],
    framework: str,
    exp: Expectation | None,
    measured: tuple[float, list[float], str] | None,
) -> dict[str, Any] | None:
    """The recommendation's ``step_without_profiler`` (:class:`Recommendation`): the
    expectation's eager step, else the runs' measured step, else the estimate."""
    if exp is not None:
        low, high, step, source = exp.eager_low_ns, exp.eager_high_ns, exp.eager_step_ns, exp.eager_source
    elif measured is not None:
        step, source = measured[0], "measured"
        low, high = measured_range(step, measured[1])
    else:
        got = (
            steps_without_profiler(ctx, fig, values, framework) if ctx.device is not None and len(ctx.steady) else None
        )
        if got is None:
            return None
        (step, low, high), source = got, "estimate"
    return {"step_ns": float(step), "low_ns": float(low), "high_ns": float(high), "source": source}


def _profiled(pred: Prediction | None, exp: Expectation | None) -> Prediction | None:
    """The profiled prediction on the expectation's footing: a synchronizing step keeps the
    host time outside its capture region under nsys too (its CPU side holds it, and the
    sides add up: ``expected.profiled_graph_step_ns``), and break-even is paid back on
    the headline's footing (the steps without the profiler)."""
    if pred is None or exp is None:
        return pred
    g = exp.profiled_graph_step_ns
    if g is not None and g > pred.graph_step_ns:
        pred = dataclasses.replace(
            pred, graph_step_ns=g, cpu_side_ns=g - pred.gpu_side_ns, speedup=pred.per_launch_step_ns / g
        )
    return dataclasses.replace(
        pred, break_even_iterations=break_even(pred.instantiate_ns, exp.graph_step_ns, exp.eager_step_ns)
    )


def _figures_empty() -> dict[str, Any]:
    return {"steady_steps": 0, "period_p50_ns": None, "kernels_per_step_p50": None}


def _recommend(
    ctx: StepContext,
    fig: dict[str, Any],
    verdict: str,
    findings: list[Finding],
    pred: Prediction | None,
    single: Prediction | None,
    calib: dict[str, Any],
    exp: Expectation | None = None,
) -> Recommendation:
    blockers = [
        {"kind": f.kind, "evidence": f.evidence, "fix": f.fix, "where": [dict(w) for w in f.where]}
        for f in findings
        if f.severity == Severity.BLOCKER
    ]
    convert, reason = decide(ctx, fig, verdict, findings, pred, exp, len(blockers))
    model = _model(pred, single, exp) if pred is not None else {}
    return Recommendation(
        convert=convert,
        reason=reason,
        measured_step_ns=pred.per_launch_step_ns if pred else fig.get("period_p50_ns"),
        predicted_step_ns=pred.graph_step_ns if pred else None,
        predicted_speedup=pred.speedup if pred else None,
        break_even_iterations=pred.break_even_iterations if pred else None,
        instantiate_ns=pred.instantiate_ns if pred else None,
        nodes_per_step=pred.nodes if pred else None,
        model=model,
        blockers=blockers,
        assumptions=[*_assumptions(ctx, pred, single, calib), *gpu_work_note(fig), *_kept_note(pred, exp)]
        if pred
        else [],
        calibration=calib,
        expected=exp,
    )


def _model(pred: Prediction, single: Prediction | None, exp: Expectation | None) -> dict[str, Any]:
    """The recommendation's ``model``: the profiled prediction's GPU/CPU sides (ns; they add
    up to the graph step when ``sides_add``, else the larger is it), the single-repeat
    prediction when made. The figures without the profiler are the expectation's
    (``recommendation.expected``), not repeated here."""
    model: dict[str, Any] = {
        "gpu_work_ns": pred.gpu_work_ns,
        "gpu_side_ns": pred.gpu_side_ns,
        "cpu_side_ns": pred.cpu_side_ns,
        "sides_add": bool(
            exp is not None
            and exp.profiled_graph_step_ns is not None
            and pred.graph_step_ns == exp.profiled_graph_step_ns
        ),
        "amortized": pred.amortized,
    }
    if single is not None:
        model["single_repeat_step_ns"] = single.graph_step_ns
        model["single_repeat_speedup"] = single.speedup
    return model
