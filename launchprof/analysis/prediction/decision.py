"""The decision: whether to convert to a CUDA graph and why, and a verdict that agrees
with it (called last: :func:`decide` by :func:`launchprof.analysis.prediction.recommendation.recommend`,
:func:`agree` by :func:`launchprof.analysis.diagnosis.diagnose.diagnose`).

``convert`` is True for a launch-bound steady state that does not run as graphs already,
with an expected speedup without the profiler (:mod:`launchprof.analysis.prediction.expect`) of at
least :data:`MIN_SPEEDUP` (1.25x, the gain a 20 % host-wait share would allow at best,
:data:`launchprof.analysis.diagnosis.diagnose.HOST_WAIT_MIN`). A verdict of ``launch-bound`` means
a graph is expected to pay; when it is not, :func:`agree` names what holds the GPU back
instead (its own work, or the host work a graph keeps), so the terminal, the page, the
index and summary.json never show "launch-bound" beside "no conversion".
"""

from __future__ import annotations

from typing import Any

from launchprof.analysis.diagnosis.findings import Finding, Severity
from launchprof.analysis.headline import rebuilds_graphs, replays_graphs
from launchprof.analysis.prediction.expect import Expectation
from launchprof.analysis.prediction.predict import Prediction
from launchprof.analysis.stepdata import StepContext
from launchprof.text import us_text

MIN_SPEEDUP = 1.25


def agree(
    verdict: str, reasons: list[str], exp: Expectation | None, pred: Prediction | None = None
) -> tuple[str, list[str]]:
    """The verdict made to agree with the prediction: a step whose GPU waits for the CPU
    (``launch-bound`` or ``host-bound`` by the idle gaps' causes) is ``launch-bound`` when
    a graph is expected to gain at least :data:`MIN_SPEEDUP` without the profiler (the host
    work it waits for lies inside the region a capture removes), else named by what holds
    the GPU back then: ``gpu-bound`` when the graph step's GPU side is the larger,
    ``host-bound`` when the host work a graph keeps is (README: Diagnosis). A ``gpu-bound``
    step (by the idle gaps under nsys) whose expected gain without the profiler reaches
    :data:`MIN_SPEEDUP` is ``launch-bound`` too, with a reason that says so: the decision
    follows that one figure, so "gpu-bound" never stands beside an expected gain that
    would convert (it takes a measured eager step above the traced one, within the runs'
    spread: a step more than that slower is not used, baseline.SLOWER_THAN_TRACED). Without an
    expectation, the prediction under nsys (``pred``) decides the same way. When the
    verdict changes, the idle gaps' cause (the last reason) is said to be nsys's view."""
    if verdict == "gpu-bound" and exp is not None and exp.eager_source == "measured" and exp.speedup >= MIN_SPEEDUP:
        # busy under nsys, yet the step measured without it (within the runs' spread of the
        # traced one, baseline.SLOWER_THAN_TRACED) leaves room a graph is expected to take
        if reasons:
            reasons = [*reasons[:-1], "Under nsys: " + reasons[-1][0].lower() + reasons[-1][1:]]
        return "launch-bound", [
            *reasons,
            f"Under nsys the GPU's own work nearly fills the step, but without the profiler the step is "
            f"{us_text(exp.eager_step_ns)} (measured) against {us_text(exp.graph_step_ns)} as a graph: a graph is "
            f"expected to give {exp.speedup:.2f}x.",
        ]
    if verdict not in ("launch-bound", "host-bound") or (exp is None and pred is None):
        return verdict, reasons
    gain = exp.speedup if exp is not None else pred.speedup  # type: ignore[union-attr]
    new = "launch-bound" if gain >= MIN_SPEEDUP else _holding(exp, pred)
    if new == verdict:
        return verdict, reasons
    if len(reasons) >= 3:  # head, split, the cause by the idle gaps: that is under nsys
        reasons = [*reasons[:-1], "Under nsys: " + reasons[-1][0].lower() + reasons[-1][1:]]
    if exp is None:
        return new, [*reasons, f"A graph is predicted to give {gain:.2f}x (under nsys), below {MIN_SPEEDUP:g}x."]
    eager = "measured" if exp.eager_source == "measured" else "estimated"
    why = {
        "launch-bound": (
            f"The host work the GPU waits for lies inside the region a capture holds (between the step's first "
            f"and last launch: {1 - exp.kept_share:.0%} of its CPU step): a graph removes it, and is expected to "
            f"give {gain:.2f}x without the profiler."
        ),
        "gpu-bound": (
            f"Without the profiler the step is {us_text(exp.eager_step_ns)} ({eager}), and the GPU's own work "
            f"({us_text(exp.gpu_side_ns)} a step as a graph) sets the pace: a graph is expected to give {gain:.2f}x, "
            f"below {MIN_SPEEDUP:g}x."
        ),
        "host-bound": (
            f"Without the profiler the host work a graph keeps ({us_text(exp.kept_host_ns)} a step outside the region "
            f"a capture holds, {exp.kept_share:.0%} of the CPU step) sets the pace: a graph is expected to give "
            f"{gain:.2f}x ({eager} eager step {us_text(exp.eager_step_ns)}), below {MIN_SPEEDUP:g}x."
        ),
    }[new]
    return new, [*reasons, why]


def _holding(exp: Expectation | None, pred: Prediction | None) -> str:
    """What holds the GPU back when a graph would not pay: ``gpu-bound`` when the graph
    step's GPU side is the larger, else ``host-bound``."""
    gpu, cpu = (exp.gpu_side_ns, exp.cpu_side_ns) if exp is not None else (pred.gpu_side_ns, pred.cpu_side_ns)  # type: ignore[union-attr]
    return "gpu-bound" if gpu >= cpu else "host-bound"


# params: the diagnosis' earlier stages' results (context, figures, verdict, findings, predictions),
# each its own
def decide(
    ctx: StepContext,
    fig: dict[str, Any],
    verdict: str,
    findings: list[Finding],
    pred: Prediction | None,
    exp: Expectation | None,
    n_blockers: int,
) -> tuple[bool, str]:
    """Whether to convert to a CUDA graph, and why: not without GPU work, graphs already
    replayed (rebuilt every step or not), a repeating step or figures to predict from;
    for a verdict other than launch-bound, not; else by the expected gain
    (:func:`_launch_bound`)."""
    already = replays_graphs(fig)
    rebuilt = rebuilds_graphs(f.kind for f in findings)
    if verdict == "no-gpu-work":
        return False, "No GPU work: nothing to put in a graph."
    if already and rebuilt:
        return False, (
            "The steps already launch CUDA graphs but rebuild them (capture/instantiate/update) every step: "
            "fix the reinstantiation blocker; a graph built once"
            + (f" is predicted to run a step in {us_text(pred.graph_step_ns)} ({pred.speedup:.2f}x)." if pred else ".")
        )
    if already:
        return False, "The steady state already runs as CUDA graphs (a graph launch a step)."
    if ctx.pseudo:
        return False, "No repeating step was found: a graph needs a repeated launch sequence to capture."
    if pred is None:
        return False, "No per-step figures to predict from."
    if verdict != "launch-bound":
        x = exp.speedup if exp is not None else pred.speedup
        where = " without the profiler" if exp is not None else ""
        under = f" (under nsys {pred.speedup:.2f}x)" if exp is not None else ""
        gain = (
            f"a graph is expected to be slower{where} ({x:.2f}x){under}"
            if x < 1
            else f"a graph is expected to gain only {x:.2f}x{where}{under}"
        )
        breaks = any(f.kind == "sync-in-step" and f.severity == Severity.BLOCKER for f in findings)
        return False, {
            "gpu-bound": f"GPU-bound: {gain}; the GPU's work sets the pace.",
            "sync-bound": "Sync-bound: remove the synchronizing calls from the step first"
            + (
                " (they also break capture)."
                if breaks
                else " (a graph would keep them: they lie outside what it holds)."
            ),
            "host-bound": f"Host-bound: {gain}; the CPU's own work that a graph keeps sets the pace.",
        }[verdict]
    return _launch_bound(pred, exp, n_blockers)


def _launch_bound(pred: Prediction, exp: Expectation | None, n_blockers: int) -> tuple[bool, str]:
    """Convert a launch-bound step, and why. :func:`agree` made the verdict: launch-bound
    only when the expected gain (without the profiler when ``exp`` is given, else under
    nsys) reaches :data:`MIN_SPEEDUP`, so "launch-bound" never stands beside "do not
    convert".

    Raises:
        ValueError: the gain is below :data:`MIN_SPEEDUP` (a verdict :func:`agree` did not
            make: a bug, never a user error).
    """
    gain = exp.speedup if exp is not None else pred.speedup
    if gain < MIN_SPEEDUP:
        raise ValueError(f"a launch-bound verdict with an expected gain of {gain:.2f}x: agree() first")
    head = (
        f"a graph is expected to run a step in {us_text(exp.graph_step_ns)} instead of {us_text(exp.eager_step_ns)} "
        f"without the profiler ({exp.speedup:.2f}x, range {exp.speedup_low:.2f}-{exp.speedup_high:.2f}x; "
        f"under nsys {pred.speedup:.2f}x)"
        if exp is not None
        else f"a graph is predicted to run a step in {us_text(pred.graph_step_ns)} instead of "
        f"{us_text(pred.per_launch_step_ns)} ({pred.speedup:.2f}x)"
    )
    return True, (
        f"Launch-bound: {head}, paying back its instantiation after "
        f"{pred.break_even_iterations} iteration{'s' if pred.break_even_iterations != 1 else ''}"
        + (f"; fix {n_blockers} blocker(s) first." if n_blockers else ".")
    )
