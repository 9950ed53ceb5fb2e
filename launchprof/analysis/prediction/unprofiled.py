"""The step without the profiler, estimated from its period under nsys: the profiler's
share of a step (PyTorch's host time inflated as a whole; other programs' traced calls at
their per-call costs) taken off the period, never below the GPU's own work, with its range.
The eager step of :func:`launchprof.analysis.prediction.expect.expect` and each side of ``compare``
(a run that replays graphs too) are estimated by this one model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from launchprof.analysis.headline import replays_graphs
from launchprof.analysis.prediction.stepmix import shape_context, shape_figures, step_shapes, weighted_sum
from launchprof.analysis.stepdata import StepContext

PROFILER_SPREAD = 0.35


def profiler_share(
    framework: str,
    period: float,
    calls: float,
    launches: float,
    values: Mapping[str, float],
    replaying: bool = False,
) -> tuple[float, tuple[float, float]]:
    """The profiler's estimated share of a step (ns) and its range (largest, smallest):
    for PyTorch, whose host time nsys inflates as a whole (several traced calls per launch,
    the dispatch between them slowed too), ``period x (1 - 1 / inflation)`` with the
    ``profiler_torch_inflation`` constants, or ``profiler_torch_replay_inflation`` for a
    run that already ``replaying`` graphs (a calibration's factors below 1 taken as 1:
    nsys does not speed a program up); for other programs, ``launches`` launch calls and
    the other traced ``calls`` at their per-call costs, the range from that + :data:`PROFILER_SPREAD`
    down to nothing: what nsys adds to a launch call differs between programs (2.76 us a
    launch in the bundled demo, about 0.3 us in a two-stream C++ step recorded on the same
    kind of H200: tests/data/frameworks/MANIFEST.md), and it never speeds one up."""
    if framework == "pytorch":
        key = "profiler_torch_replay_inflation" if replaying else "profiler_torch_inflation"
        low, inflation, high = sorted(max(float(values[k]), 1.0) for k in (f"{key}_low", key, f"{key}_high"))
        return period * (1 - 1 / inflation), (period * (1 - 1 / high), period * (1 - 1 / low))
    profiler = (
        launches * values["profiler_launch_overhead_ns"] + (calls - launches) * values["profiler_call_overhead_ns"]
    )
    return profiler, (profiler * (1 + PROFILER_SPREAD), 0.0)


# params: the step's figures the formula reads, each a number
def step_without_profiler(
    framework: str,
    period: float,
    gpu_floor: float,
    calls: float,
    launches: float,
    values: Mapping[str, float],
    replaying: bool = False,
) -> tuple[float, float, float]:
    """A step without the profiler, estimated from its period under nsys: the period less
    the profiler's share (:func:`profiler_share`), never below ``gpu_floor`` (the GPU's
    own work a step, which nsys does not slow); ``(step, low, high)`` in ns, the range
    from the share's range. The eager step of :func:`~launchprof.analysis.prediction.expect.expect`
    and each side of ``compare`` (a run that replays graphs too) are estimated by this one
    function."""
    share, (largest, smallest) = profiler_share(framework, period, calls, launches, values, replaying)
    return max(period - share, gpu_floor), max(period - largest, gpu_floor), max(period - smallest, gpu_floor)


def steps_without_profiler(
    ctx: StepContext, fig: Mapping[str, float | None], values: Mapping[str, float], framework: str
) -> tuple[float, float, float] | None:
    """:func:`step_without_profiler` of the steady steps of ``ctx`` (a run that replays
    graphs, say: ``replaying`` when they launch a graph a step or more), the GPU's busy
    time a step as the floor; for steps of several shapes
    (:func:`~launchprof.analysis.prediction.stepmix.step_shapes`), each
    shape's, weighted by its steady steps; None without a period."""
    shapes = step_shapes(ctx)
    if shapes:
        parts = [_steps_without_profiler(shape_context(ctx, steps), values, framework, fig) for _, steps in shapes]
        if all(p is not None for p in parts):
            w = np.array([len(steps) for _, steps in shapes], dtype=float)
            w /= w.sum()
            step, low, high = (weighted_sum(w, [p[i] for p in parts if p is not None]) for i in range(3))
            return step, low, high
    return _steps_without_profiler(ctx, values, framework, fig, fig)


def _steps_without_profiler(
    ctx: StepContext,
    values: Mapping[str, float],
    framework: str,
    whole: Mapping[str, float | None],
    fig: Mapping[str, float | None] | None = None,
) -> tuple[float, float, float] | None:
    """:func:`steps_without_profiler` of one shape: ``fig`` its figures (default: the
    medians of ``ctx``'s steady steps), ``whole`` the figures of all the steps (whether
    they replay graphs)."""
    fig = fig if fig is not None else shape_figures(ctx.steady)
    period, busy = fig.get("period_p50_ns"), fig.get("busy_p50_ns")
    if not period or not np.isfinite(period):
        return None
    calls = ctx.calls
    if len(calls) and "step" in calls:
        per_step = calls.groupby("step").size().reindex(ctx.steady["step"], fill_value=0)
        launched = calls.groupby("step")["launch"].sum().reindex(ctx.steady["step"], fill_value=0)
        n_calls, n_launches = float(per_step.median()), float(launched.median())
    else:
        n_calls = n_launches = 0.0
    replaying = replays_graphs(whole)
    return step_without_profiler(framework, float(period), float(busy or 0.0), n_calls, n_launches, values, replaying)
