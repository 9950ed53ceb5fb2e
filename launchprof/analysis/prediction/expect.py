"""The speedup a CUDA Graph is expected to give without the profiler (the headline).

A profiled trace overstates launch overhead: nsys adds a cost to every CUDA API call it
traces, and PyTorch makes several traced calls per kernel (``cudaLaunchKernel`` and
driver queries such as ``cuKernelGetName``). And a graph removes only the host work of the
launches it captures, not the loop around them. This module estimates, per steady step
(medians over the steady steps, ns), from the calls of the step's process on its CPU
timeline (:attr:`StepContext.calls`, every thread's calls of the process merged by start:
PyTorch launches the backward pass from its autograd threads):

- ``profiler_ns``: for PyTorch, whose host time nsys inflates as a whole (several traced
  driver calls per launch, ``cuKernelGetName`` and friends, and slower dispatch between
  them), the step period x (1 - 1 / ``profiler_torch_inflation``): 2.0x, the median of the
  real-framework corpus and the bundled MLP (1.7x); the range takes 1.0x to 2.9x
  (``profiler_torch_inflation_low``/``_high``): one eager PyTorch step ran 2.86x slower
  under nsys than without, and one no slower, and the same workload moved from 2.86x to
  1.44x between two runs on one machine (benchmarks/README.md), which no figure of the
  trace was found to predict: ``launchprof profile --baseline-runs N`` measures the step
  without nsys, which replaces this estimate; for other
  programs (CUDA C++, cuda-python), launch calls x ``profiler_launch_overhead_ns`` + other
  calls x ``profiler_call_overhead_ns`` (:mod:`launchprof.analysis.prediction.predict`'s constants: a
  calibration's ``profiler`` section, else the defaults);
- the eager step without the profiler ``E = max(period - profiler_ns, G_gpu)``, never below
  the graph's GPU side (the GPU's work is not inflated, and the eager GPU pays the same
  dispatch gaps), or the measured one (floored the same way) when the run has step times
  without the profiler;
- the capture region (:func:`~launchprof.analysis.prediction.captureregion.capture_region`), from the
  program's structure alone: the step's run of kernel launches (for a step that
  synchronizes, its largest run between two synchronizing calls, which a capture cannot
  hold: a decode step's forward), from its first launch call to its last. A graph removes
  the host path inside it (launch calls, the framework's dispatch, the Python between
  them) and keeps the rest of the CPU step (the loop's own work, the sampling and stopping
  check, a sync's wait). The kept share is the CPU steps' time outside their regions over
  their sum (under nsys), applied to the host time without the profiler: ``kept_host_ns``.
  No timing threshold decides it, so the same program on a uniformly faster or slower host
  gets the same region, and a slower host (more host time, the same GPU work) does not
  lower the gain (tests/test_slower_host.py); a host that another process preempts adds
  its pauses where they fall (on the corpus' slowed recordings the kept share moved 0.30
  -> 0.40 for a decode loop);
- the graph step without the profiler ``G``: its GPU side (busy time - for kernels on
  several streams the critical path, a fork/join's branches side by side:
  :func:`~launchprof.analysis.prediction.predict.gpu_work` -, dispatch gaps, the gap between graph
  launches; :func:`~launchprof.analysis.prediction.predict.unprofiled_values`) and
  its CPU side (one unprofiled ``cudaGraphLaunch`` + ``kept_host_ns``) add up when the
  step synchronizes (the host waits for the GPU, then the GPU for the host), and overlap
  otherwise: ``G = gpu + cpu`` or ``max(gpu, cpu)``;
- ``expected_speedup = E / G``; the range takes the launch path's share that may stay
  outside the captured region of a synchronizing step (``UNCAPTURED_SHARE`` of the
  removed host time, e.g. a decode loop's logits processing), the streams' branches
  overlapping no more than in the eager run (its busy time, the union of the kernels'
  intervals, in place of the critical path: kernels that each fill the GPU do not run
  side by side), the profiler estimate's
  spread (PyTorch: the inflation range; others:
  :data:`~launchprof.analysis.prediction.unprofiled.PROFILER_SPREAD` above the per-call estimate,
  down to nothing) and ``NOISE`` (run-to-run):
  ``[E_low / G_high x (1 - NOISE), E_high / G x (1 + NOISE)]``;
- steps of several shapes (:func:`~launchprof.analysis.prediction.stepmix.step_shapes`: kernels a step differ, e.g. a
  data-dependent branch): each shape predicted as above from its own medians, the
  figures the shapes' weighted by their steady steps and the speedup that of the
  weighted steps (:func:`expect_shapes`, :func:`combine`), as the program's time
  weighs them.

The thresholds and spreads were set on the real-framework corpus
(tests/data/frameworks/MANIFEST.md; benchmarks/fidelity.py prints the comparison).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.prediction.captureregion import capture_region, kept_share
from launchprof.analysis.prediction.predict import gpu_work, predict_graph_step, unprofiled_values
from launchprof.analysis.prediction.stepmix import (
    shape_context,
    shape_figures,
    step_shapes,
    stream_figures,
    weighted_sum,
)
from launchprof.analysis.prediction.unprofiled import step_without_profiler
from launchprof.analysis.stepdata import StepContext

UNCAPTURED_SHARE = 0.25
NOISE = 0.05
# A step measured in fewer than MIN_RUNS_FOR_SPREAD runs without nsys: its range takes
# RUN_SPREAD either way. One eager PyTorch workload's step moved by 1.0x-1.85x (median
# 1.1x) between consecutive runs without nsys on lent H200s, its graph 1 % at most
# (benchmarks/README.md, "The headline with the step measured"); from 3 runs on, the
# runs' own spread is taken.
RUN_SPREAD = 1.4
MIN_RUNS_FOR_SPREAD = 3


@dataclass(frozen=True)
class Expectation:
    """The expected (unprofiled) figures of one step shape: the one prediction the
    terminal, the page, summary.json, ``compare`` and the Python API show (ns unless
    said).

    Attributes:
        profiled_step_ns: the measured steady step period under nsys (p50).
        profiler_ns: the profiler's share of it (``profiled_step_ns - eager_step_ns``
            once the eager step is measured).
        traced_calls: CUDA API calls per step (p50), ``launch_calls`` of them kernel launches.
        cpu_step_ns: the CPU step under nsys (p50; first call of a step to the next's).
        region_ns: the capture region's span under nsys (p50;
            :func:`~launchprof.analysis.prediction.captureregion.capture_region`), None without
            launches; ``kept_share``: the share of the CPU steps outside it.
        eager_step_ns: the step without the profiler; ``eager_low_ns``/``eager_high_ns``
            its range; ``eager_source`` ``"estimate"`` (from the trace) or ``"measured"``
            (runs without nsys, ``eager_runs`` of them, timed by ``eager_timed_by``:
            ``"step-markers"`` or ``"profiler-region"``).
        kept_host_ns: host time per step a graph keeps (outside the region);
            ``removed_host_ns``: the rest of the CPU step without the profiler.
        synchronizing: the step synchronizes with the GPU (CPU and GPU sides add up).
        gpu_side_ns: the graph step's GPU side (busy time - or, for kernels on several
            streams, the critical path: :func:`~launchprof.analysis.prediction.predict.gpu_work` -
            dispatch gaps, the gap between graph launches); ``gpu_side_serial_ns``: the
            same with the busy time (the branches overlapping no more than in the eager
            run: the range's low end takes it; ``gpu_side_ns`` for one stream); ``launch_call_ns``: one
            ``cudaGraphLaunch`` call; ``cpu_side_ns``: that call plus ``kept_host_ns``.
        graph_step_ns: the predicted graph step without the profiler (``gpu + cpu`` for a
            synchronizing step, else ``max(gpu, cpu)``); ``graph_step_high_ns``: its upper
            bound (the range's low end).
        speedup, speedup_low, speedup_high: ``eager_step_ns / graph_step_ns`` and its range.
        profiled_graph_step_ns: for a synchronizing step, the graph step as a profiled run
            would show it: the GPU side and one graph launch under nsys plus the host time
            the graph keeps as traced (the same share of the profiled CPU step); None for
            other steps (the profiled prediction stands).
        shapes: for steps of several shapes (:func:`expect_shapes`), ``(kernels a step,
            steady steps)`` of each; the figures above are then the shapes' weighted by
            their steps, as :func:`combine` says for each. Empty for one shape.
    """

    profiled_step_ns: float
    profiler_ns: float
    traced_calls: float
    launch_calls: float
    cpu_step_ns: float
    region_ns: float | None
    kept_share: float
    eager_step_ns: float
    eager_low_ns: float
    eager_high_ns: float
    eager_source: str
    eager_timed_by: str | None
    eager_runs: int
    kept_host_ns: float
    removed_host_ns: float
    synchronizing: bool
    gpu_side_ns: float
    gpu_side_serial_ns: float
    launch_call_ns: float
    cpu_side_ns: float
    graph_step_ns: float
    graph_step_high_ns: float
    speedup: float
    speedup_low: float
    speedup_high: float
    profiled_graph_step_ns: float | None = None
    shapes: tuple[tuple[float, int], ...] = ()


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


def _with_eager(exp: Expectation, e: float, e_low: float, e_high: float) -> Expectation:
    """``exp`` with the eager step ``e`` (range ``e_low``-``e_high``) and every figure that
    follows from it (module docstring): the host time without the profiler is the CPU
    step less the profiler's share (``profiled_step_ns - e``), at most ``e``, split at
    ``kept_share``; the graph step and the speedup's range follow."""
    host_u = min(max(exp.cpu_step_ns - (exp.profiled_step_ns - e), 0.0), e)
    kept = exp.kept_share * host_u
    removed = host_u - kept

    def graph_step(gpu: float, extra_host: float) -> float:
        host = exp.launch_call_ns + kept + extra_host
        return gpu + host if exp.synchronizing else max(gpu, host)

    # What stays outside the graph is uncertain only where the capture cannot take the
    # whole step (a synchronizing step: the graph is one sync-free run), and how far the
    # streams' branches overlap only where there are several.
    g = graph_step(exp.gpu_side_ns, 0.0)
    g_high = graph_step(exp.gpu_side_serial_ns, UNCAPTURED_SHARE * removed if exp.synchronizing else 0.0)
    e_low, e_high = min(e_low, e), max(e_high, e)  # the range holds the step
    return dataclasses.replace(
        exp,
        profiler_ns=exp.profiled_step_ns - e,
        eager_step_ns=e,
        eager_low_ns=e_low,
        eager_high_ns=e_high,
        kept_host_ns=kept,
        removed_host_ns=removed,
        cpu_side_ns=exp.launch_call_ns + kept,
        graph_step_ns=g,
        graph_step_high_ns=g_high,
        speedup=_ratio(e, g),
        speedup_low=_ratio(e_low, g_high) * (1 - NOISE),
        speedup_high=_ratio(e_high, g) * (1 + NOISE),
    )


def with_measured_eager(
    exp: Expectation, eager_step_ns: float, run_steps_ns: Sequence[float] = (), timed_by: str | None = None
) -> Expectation:
    """``exp`` with the eager step measured without the profiler (the runs of ``profile``):
    ``eager_source`` ``"measured"``, the host time, graph step and speedup that follow
    from it (:func:`_with_eager`: one formula for the estimate and the measurement), and
    the range from how far the eager step may move between runs: the runs' own lowest and
    highest step (``run_steps_ns``, one per run) from :data:`MIN_RUNS_FOR_SPREAD` runs on,
    else those widened to at least the measured step divided and multiplied by
    :data:`RUN_SPREAD` (always holding the step)."""
    runs = [float(x) for x in run_steps_ns if x and x > 0]
    # Never below the graph's GPU side, as the estimate: host step times shorter than the
    # GPU's work are a host that ran ahead, not the step's pace.
    step = max(float(eager_step_ns), exp.gpu_side_ns)
    e_low, e_high = measured_range(step, [max(x, exp.gpu_side_ns) for x in runs])
    measured = dataclasses.replace(exp, eager_source="measured", eager_timed_by=timed_by, eager_runs=len(runs))
    return _with_eager(measured, step, e_low, e_high)


def measured_range(step_ns: float, run_steps_ns: Sequence[float]) -> tuple[float, float]:
    """How far a step measured without nsys may be from the next run's: the runs' own
    lowest and highest step from :data:`MIN_RUNS_FOR_SPREAD` runs on, else at least the
    step divided and multiplied by :data:`RUN_SPREAD`; always holding the step."""
    runs = [float(x) for x in run_steps_ns if x and x > 0]
    low, high = (min(runs), max(runs)) if runs else (step_ns, step_ns)
    if len(runs) < MIN_RUNS_FOR_SPREAD:
        low, high = min(low, step_ns / RUN_SPREAD), max(high, step_ns * RUN_SPREAD)
    return min(low, step_ns), max(high, step_ns)


def expect(
    ctx: StepContext,
    fig: Mapping[str, float | None],
    values: Mapping[str, float],
    framework: str = "cuda",
    region: pd.DataFrame | None = None,
) -> Expectation | None:
    """The :class:`Expectation` of the steady steps (module docstring), with the eager
    step estimated from the trace; None without calls or periods.

    Args:
        ctx: the steps' context.
        fig: the diagnosis figures (``period_p50_ns``, ``busy_p50_ns``,
            ``kernels_per_step_p50``, ``memops_per_step_p50``).
        values: the prediction constants (``profiler_launch_overhead_ns``,
            ``profiler_call_overhead_ns``, ``profiler_torch_inflation`` (and its ``_low``,
            ``_high``) and the
            ``unprofiled_*`` graph constants: one graph per step, its GPU side and its
            launch call as :func:`~launchprof.analysis.prediction.predict.predict_graph_step` gives
            them).
        framework: ``"pytorch"`` (the step inflated ``profiler_torch_inflation`` times)
            or anything else (launch calls ``profiler_launch_overhead_ns``, other calls
            ``profiler_call_overhead_ns``).
        region: the steps' :func:`~launchprof.analysis.prediction.captureregion.capture_region` rows,
            when taken from a larger context (a shape's steps: their CPU step runs to the
            next step's first call, whatever its shape); default: computed from ``ctx``.
    """
    period, busy = fig.get("period_p50_ns"), fig.get("busy_p50_ns")
    nodes = (fig.get("kernels_per_step_p50") or 0) + (fig.get("memops_per_step_p50") or 0)
    if not period or busy is None or not np.isfinite(period) or nodes <= 0:
        return None
    period = float(period)
    synchronizing = float(ctx.steady["sync_calls"].median()) >= 1 if "sync_calls" in ctx.steady else False
    # Inferred steps are the shortest repeat: one graph may hold many (as the profiled
    # prediction assumes, predict.py); one graph cannot span a synchronization.
    amortized = ctx.steps.source == "inferred" and not synchronizing
    work, path_nodes = gpu_work(fig)
    unprofiled = unprofiled_values(values)
    base = predict_graph_step(period, work, nodes, unprofiled, amortized=amortized, path_nodes=path_nodes)
    serial = predict_graph_step(period, float(busy), nodes, unprofiled, amortized=amortized).gpu_side_ns
    floor = base.gpu_side_ns
    if region is None:
        region = capture_region(ctx, synchronizing)
    if region.empty:
        return None
    calls = float(region["calls"].median())
    launches = float(region["launch_calls"].median())
    e, e_low, e_high = step_without_profiler(framework, period, floor, calls, launches, values)
    cpu = region["cpu_ns"].dropna()
    spans = region["region_ns"].dropna()
    share = kept_share(region)
    gpu = base.gpu_side_ns  # the eager step's floor: the eager GPU pays the same dispatch gaps
    cpu_step = float(cpu.median()) if len(cpu) else period
    exp = Expectation(
        profiled_step_ns=period,
        profiler_ns=period - e,  # set again by _with_eager, with the rest
        traced_calls=calls,
        launch_calls=launches,
        cpu_step_ns=cpu_step,
        region_ns=float(spans.median()) if len(spans) else None,
        kept_share=share,
        eager_step_ns=e,
        eager_low_ns=e_low,
        eager_high_ns=e_high,
        eager_source="estimate",
        eager_timed_by=None,
        eager_runs=0,
        kept_host_ns=0.0,
        removed_host_ns=0.0,
        synchronizing=synchronizing,
        gpu_side_ns=gpu,
        gpu_side_serial_ns=max(serial, gpu),
        launch_call_ns=base.cpu_side_ns,  # one unprofiled graph launch
        cpu_side_ns=base.cpu_side_ns,
        graph_step_ns=0.0,
        graph_step_high_ns=0.0,
        speedup=0.0,
        speedup_low=0.0,
        speedup_high=0.0,
    )
    exp = _with_eager(exp, exp.eager_step_ns, exp.eager_low_ns, exp.eager_high_ns)
    if synchronizing:  # the sides add up under nsys too, with the host time kept as traced
        traced = predict_graph_step(period, work, nodes, values, amortized=amortized, path_nodes=path_nodes)
        exp = dataclasses.replace(
            exp, profiled_graph_step_ns=traced.gpu_side_ns + traced.cpu_side_ns + share * cpu_step
        )
    return exp


def expect_shapes(
    ctx: StepContext,
    fig: Mapping[str, float | None],
    values: Mapping[str, float],
    framework: str = "cuda",
    measured: tuple[float, Sequence[float], str | None] | None = None,
) -> Expectation | None:
    """:func:`expect`, with the eager step ``measured`` without nsys when given
    (``(step_ns, per-run steps, timed_by)``: :func:`with_measured_eager`); for steps of
    several shapes (:func:`~launchprof.analysis.prediction.stepmix.step_shapes`) each
    shape's expectation from its own medians,
    its capture region taken from the whole context, its eager step the measured one
    (then the runs' mean) scaled by the shape's estimate over the shapes' weighted
    estimate, weighed by its steady steps (:func:`combine`)."""
    shapes = step_shapes(ctx)
    parts: list[Expectation] = []
    regions: dict[bool, pd.DataFrame] = {}
    for _, steps in shapes:
        sub = shape_context(ctx, steps)
        synchronizing = float(sub.steady["sync_calls"].median()) >= 1 if "sync_calls" in sub.steady else False
        if synchronizing not in regions:
            regions[synchronizing] = capture_region(ctx, synchronizing)
        region = regions[synchronizing]
        figures = {**shape_figures(sub.steady), **stream_figures(sub)}
        part = expect(sub, figures, values, framework, region[region["step"].isin(steps)])
        if part is None:
            parts = []
            break
        parts.append(part)
    if not parts:
        exp = expect(ctx, fig, values, framework)
        return with_measured_eager(exp, measured[0], measured[1], measured[2]) if exp and measured else exp
    weights = [len(steps) for _, steps in shapes]
    if measured is not None:
        estimate = weighted_sum(weights, [p.eager_step_ns for p in parts]) / sum(weights)
        scale = measured[0] / estimate if estimate > 0 else 1.0
        runs = [x / measured[0] for x in measured[1]] if measured[0] > 0 else []
        parts = [
            with_measured_eager(p, scale * p.eager_step_ns, [r * scale * p.eager_step_ns for r in runs], measured[2])
            for p in parts
        ]
    return combine(parts, weights, [k for k, _ in shapes])


def combine(parts: Sequence[Expectation], weights: Sequence[int], kernels: Sequence[float]) -> Expectation:
    """One :class:`Expectation` of several step shapes: each time and count the mean of
    the shapes' weighted by ``weights`` (their steady steps; the graph step too: each
    shape's own graph-step formula, then their mean), ``kept_share`` weighted by CPU step
    time, ``synchronizing`` when any shape synchronizes, ``region_ns`` and
    ``profiled_graph_step_ns`` only when every shape has one, the eager source and runs
    the first shape's (one measurement for all), the speedup and its range those of the
    weighted steps (``sum(w E) / sum(w G)``), ``shapes`` filled in."""
    w = np.asarray(weights, dtype=float) / float(sum(weights))

    def mean(name: str) -> float:
        return float(sum(wi * float(getattr(p, name)) for wi, p in zip(w, parts, strict=True)))

    numeric = [
        f.name
        for f in dataclasses.fields(Expectation)
        if f.type in ("float", float) and f.name not in ("speedup", "speedup_low", "speedup_high")
    ]
    figures: dict[str, Any] = {name: mean(name) for name in numeric}
    cpu = np.array([w_i * p.cpu_step_ns for w_i, p in zip(w, parts, strict=True)])
    figures["kept_share"] = weighted_sum(cpu, [p.kept_share for p in parts]) / cpu.sum() if cpu.sum() > 0 else 0.0
    e, e_low, e_high = figures["eager_step_ns"], figures["eager_low_ns"], figures["eager_high_ns"]
    g, g_high = figures["graph_step_ns"], figures["graph_step_high_ns"]
    profiled = [p.profiled_graph_step_ns for p in parts]
    known = [float(x) for x in profiled if x is not None]
    profiled_mean = weighted_sum(w, known) if len(known) == len(parts) else None
    first = parts[0]
    return dataclasses.replace(
        first,
        **figures,
        region_ns=mean("region_ns") if all(p.region_ns is not None for p in parts) else None,
        synchronizing=any(p.synchronizing for p in parts),
        eager_runs=max(p.eager_runs for p in parts),
        speedup=_ratio(e, g),
        speedup_low=_ratio(e_low, g_high) * (1 - NOISE),
        speedup_high=_ratio(e_high, g) * (1 + NOISE),
        profiled_graph_step_ns=profiled_mean,
        shapes=tuple((float(k), int(n)) for k, n in zip(kernels, weights, strict=True)),
    )
