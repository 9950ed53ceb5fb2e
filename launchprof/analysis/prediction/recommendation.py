"""The graph recommendation (:class:`Recommendation`): whether to convert to a CUDA Graph,
what it would give and what stands in the way. The prediction for a profiled run like this
one (:mod:`launchprof.analysis.prediction.predict`) is put on the expectation's footing (a
synchronizing step keeps its host time outside the capture region; break-even on the steps
without the profiler), the step without the profiler that ``compare`` divides is chosen
(measured, expected or estimated), the prediction's assumptions are said in words, and
:mod:`launchprof.analysis.prediction.decision` decides. :func:`launchprof.analysis.diagnosis.diagnose.diagnose`
makes it after the verdict and the findings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launchprof.analysis.diagnosis.findings import Finding, Severity
from launchprof.analysis.prediction.decision import decide
from launchprof.analysis.prediction.expect import Expectation, measured_range
from launchprof.analysis.prediction.predict import Prediction, break_even, gpu_work, gpu_work_note, predict_graph_step
from launchprof.analysis.prediction.unprofiled import steps_without_profiler
from launchprof.analysis.stepdata import StepContext
from launchprof.text import us_text


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
        expected: the gain expected without the profiler (:mod:`launchprof.analysis.prediction.expect`),
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
            ``estimate``: :func:`~launchprof.analysis.prediction.unprofiled.step_without_profiler`); the
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


def profiled_predictions(
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


def unprofiled_step(
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


def on_expectation_footing(pred: Prediction | None, exp: Expectation | None) -> Prediction | None:
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


# params: the diagnosis' earlier stages' results (context, figures, verdict, findings, predictions),
# each its own
def recommend(
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
