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
  calls x ``profiler_call_overhead_ns`` (:mod:`launchprof.analysis.predict`'s constants: a
  calibration's ``profiler`` section, else the defaults);
- the eager step without the profiler ``E = max(period - profiler_ns, busy)`` (the GPU's
  work is not inflated), or the measured one when the run has unprofiled step times;
- the host work a graph keeps ``kept_host_ns``, as a share of the CPU step applied to the
  unprofiled host time: CPU stretches without any CUDA call of at least ``host_gap_ns``
  (the loop's own Python), or, for a step that synchronizes (a capture cannot hold the
  sync), everything outside the step's largest sync-free run of launches (a decode step's
  forward; the sampling, stopping check and the sync's wait stay); everything else on the
  CPU side - kernel launches, the framework's dispatch between them and the driver calls
  around them - is the launch path a graph removes;
- the graph step without the profiler ``G``: its GPU side (busy time, dispatch gaps, the
  gap between graph launches; :func:`~launchprof.analysis.predict.unprofiled_values`) and
  its CPU side (one unprofiled ``cudaGraphLaunch`` + ``kept_host_ns``) add up when the
  step synchronizes (the host waits for the GPU, then the GPU for the host), and overlap
  otherwise: ``G = gpu + cpu`` or ``max(gpu, cpu)``;
- ``expected_speedup = E / G``; the range takes the launch path's share that may stay
  outside the captured region of a synchronizing step (``UNCAPTURED_SHARE`` of the
  removed host time, e.g. a decode loop's logits processing), the profiler estimate's
  spread (PyTorch: the inflation range; others: ``PROFILER_SPREAD``) and ``NOISE``
  (run-to-run): ``[E_low / G_high x (1 - NOISE), E_high / G x (1 + NOISE)]``.

The thresholds and spreads were set on the real-framework corpus
(tests/data/frameworks/MANIFEST.md; benchmarks/fidelity.py prints the comparison).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchprof.analysis.predict import predict_graph_step, unprofiled_values
from launchprof.analysis.stepdata import StepContext

UNCAPTURED_SHARE = 0.25
PROFILER_SPREAD = 0.35
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
    """The expected (unprofiled) figures of one step shape (ns unless said).

    Attributes:
        profiled_step_ns: the measured steady step period under nsys (p50).
        profiler_ns: the profiler's estimated share of it.
        traced_calls: CUDA API calls per step (p50), ``launch_calls`` of them kernel launches.
        eager_step_ns: the step without the profiler (estimated or measured).
        eager_source: ``"estimate"`` or ``"baseline"`` (measured without nsys).
        kept_host_ns: host time per step a graph keeps; ``removed_host_ns``: the rest of
            the CPU step without the profiler (the launch path).
        synchronizing: the step synchronizes with the GPU (CPU and GPU sides add up).
        graph_step_ns: the predicted graph step without the profiler;
            ``graph_step_high_ns``: its upper bound (the range's low end).
        speedup, speedup_low, speedup_high: ``eager_step_ns / graph_step_ns`` and its range.
        profiled_graph_step_ns: for a synchronizing step, the graph step as a profiled run
            would show it: the GPU side and one graph launch under nsys plus the host time
            the graph keeps as traced (the same share of the profiled CPU step); None for
            other steps (the profiled prediction stands).
    """

    profiled_step_ns: float
    profiler_ns: float
    traced_calls: float
    launch_calls: float
    eager_step_ns: float
    eager_source: str
    kept_host_ns: float
    removed_host_ns: float
    synchronizing: bool
    graph_step_ns: float
    graph_step_high_ns: float
    speedup: float
    speedup_low: float
    speedup_high: float
    profiled_graph_step_ns: float | None = None


def with_measured_eager(exp: Expectation, eager_step_ns: float, run_steps_ns: Sequence[float] = ()) -> Expectation:
    """``exp`` with the eager step measured without the profiler (``--baseline-runs``):
    ``eager_source`` ``"baseline"``, the speedup against the same graph step, and its
    range from the graph step's uncertainty, :data:`NOISE` and how far the eager step
    may move between runs: the runs' own lowest and highest step (``run_steps_ns``, one
    per run) from :data:`MIN_RUNS_FOR_SPREAD` runs on, else those widened to at least the
    measured step divided and multiplied by :data:`RUN_SPREAD` (always holding the step)."""
    g, g_high = exp.graph_step_ns, exp.graph_step_high_ns
    runs = [float(x) for x in run_steps_ns if x and x > 0]
    e_low, e_high = (min(runs), max(runs)) if runs else (eager_step_ns, eager_step_ns)
    if len(runs) < MIN_RUNS_FOR_SPREAD:
        e_low, e_high = min(e_low, eager_step_ns / RUN_SPREAD), max(e_high, eager_step_ns * RUN_SPREAD)
    e_low, e_high = min(e_low, eager_step_ns), max(e_high, eager_step_ns)  # the range holds the step
    return dataclasses.replace(
        exp,
        eager_step_ns=eager_step_ns,
        eager_source="baseline",
        speedup=eager_step_ns / g if g > 0 else float("inf"),
        speedup_low=(e_low / g_high if g_high > 0 else float("inf")) * (1 - NOISE),
        speedup_high=(e_high / g if g > 0 else float("inf")) * (1 + NOISE),
    )


def host_split(ctx: StepContext, host_gap_ns: int) -> pd.DataFrame:
    """Per steady step, the CPU side of the process's calls on one timeline (every thread's
    calls merged by start: PyTorch launches the backward pass from its autograd threads):
    ``step``, ``calls`` (traced calls), ``launch_calls``, ``cpu_ns`` (first call start of
    the step to the first of the next; NaN for the last), ``run_ns`` (the CPU span of the
    step's largest launch run: consecutive calls with no stretch of at least
    ``host_gap_ns`` without any call and no synchronizing call between them, the run with
    the most kernel launches), ``run_launches``, ``long_gap_ns`` (the stretches of at
    least ``host_gap_ns`` without any call, the one before the next step included)."""
    cols = ["step", "calls", "launch_calls", "cpu_ns", "run_ns", "run_launches", "long_gap_ns"]
    calls = ctx.calls
    if calls.empty:
        return pd.DataFrame(columns=cols)
    calls = calls.sort_values("start", kind="stable")
    start = calls["start"].to_numpy(dtype=np.int64)
    end = np.maximum.accumulate(calls["end"].to_numpy(dtype=np.int64))
    step = calls["step"].to_numpy()
    launch = calls["launch"].to_numpy(dtype=bool)
    sync = calls["sync"].to_numpy(dtype=bool)
    # A new run starts after a long call-free stretch, after a sync, and at each step.
    cut = np.r_[True, (start[1:] - end[:-1] >= host_gap_ns) | sync[:-1] | (step[1:] != step[:-1])]
    run = np.cumsum(cut) - 1
    runs = pd.DataFrame({"run": run, "step": step, "start": start, "end": end, "launch": launch})
    per_run = runs.groupby("run", sort=True).agg(
        step=("step", "first"), start=("start", "min"), end=("end", "max"), launches=("launch", "sum")
    )
    best = per_run.sort_values(["step", "launches"], kind="stable").groupby("step").tail(1).set_index("step")
    steps = ctx.steady["step"].to_numpy()
    per = pd.DataFrame({"step": steps})
    per["calls"] = calls.groupby("step").size().reindex(steps, fill_value=0).to_numpy(dtype=float)
    per["launch_calls"] = pd.Series(launch).groupby(step).sum().reindex(steps, fill_value=0).to_numpy(dtype=float)
    first = pd.Series(start).groupby(step).min()
    nxt = first.shift(-1).where(np.r_[np.diff(first.index.to_numpy()) == 1, False])
    per["cpu_ns"] = (nxt - first).reindex(steps).to_numpy(dtype=float)
    per["run_ns"] = (best["end"] - best["start"]).reindex(steps).to_numpy(dtype=float)
    per["run_launches"] = best["launches"].reindex(steps).to_numpy(dtype=float)
    gap = np.r_[start[1:] - end[:-1], 0]  # to the next call of any thread (the next step's too)
    long_gap = pd.Series(np.where(gap >= host_gap_ns, gap, 0)).groupby(step).sum()
    per["long_gap_ns"] = long_gap.reindex(steps, fill_value=0).to_numpy(dtype=float)
    return per


def profiler_share(
    framework: str, period: float, calls: float, launches: float, values: Mapping[str, float]
) -> tuple[float, tuple[float, float]]:
    """The profiler's estimated share of a step (ns) and its range (largest, smallest):
    for PyTorch, whose host time nsys inflates as a whole (several traced calls per launch,
    the dispatch between them slowed too), ``period x (1 - 1 / inflation)`` with the
    ``profiler_torch_inflation`` constants (a calibration's factors below 1 taken as 1:
    nsys does not speed a program up); for other programs, ``launches`` launch calls and
    the other traced ``calls`` at their per-call costs, +/- :data:`PROFILER_SPREAD`."""
    if framework == "pytorch":
        low, inflation, high = sorted(
            max(float(values[k]), 1.0)
            for k in ("profiler_torch_inflation_low", "profiler_torch_inflation", "profiler_torch_inflation_high")
        )
        return period * (1 - 1 / inflation), (period * (1 - 1 / high), period * (1 - 1 / low))
    profiler = (
        launches * values["profiler_launch_overhead_ns"] + (calls - launches) * values["profiler_call_overhead_ns"]
    )
    return profiler, (profiler * (1 + PROFILER_SPREAD), profiler * (1 - PROFILER_SPREAD))


def expect(
    ctx: StepContext,
    fig: Mapping[str, float | None],
    values: Mapping[str, float],
    host_gap_ns: int,
    framework: str = "cuda",
) -> Expectation | None:
    """The :class:`Expectation` of the steady steps (module docstring); None without
    calls or periods.

    Args:
        ctx: the steps' context.
        fig: the diagnosis figures (``period_p50_ns``, ``busy_p50_ns``,
            ``kernels_per_step_p50``, ``memops_per_step_p50``).
        values: the prediction constants (``profiler_launch_overhead_ns``,
            ``profiler_call_overhead_ns``, ``profiler_torch_inflation`` (and its ``_low``,
            ``_high``) and the
            ``unprofiled_*`` graph constants: one graph per step, its GPU side and its
            launch call as :func:`~launchprof.analysis.predict.predict_graph_step` gives
            them).
        host_gap_ns: a CPU stretch without CUDA calls at least this long ends a launch run.
        framework: ``"pytorch"`` (the step inflated ``profiler_torch_inflation`` times)
            or anything else (launch calls ``profiler_launch_overhead_ns``, other calls
            ``profiler_call_overhead_ns``).
    """
    period, busy = fig.get("period_p50_ns"), fig.get("busy_p50_ns")
    nodes = (fig.get("kernels_per_step_p50") or 0) + (fig.get("memops_per_step_p50") or 0)
    if not period or busy is None or not np.isfinite(period) or nodes <= 0:
        return None
    # Inferred steps are the shortest repeat: one graph may hold many (as the profiled
    # prediction assumes, predict.py).
    synchronizing = float(ctx.steady["sync_calls"].median()) >= 1 if "sync_calls" in ctx.steady else False
    # (One graph cannot span a synchronization: a synchronizing step is one graph.)
    amortized = ctx.steps.source == "inferred" and not synchronizing
    base = predict_graph_step(float(period), float(busy), nodes, unprofiled_values(values), amortized=amortized)
    split = host_split(ctx, host_gap_ns)
    if split.empty:
        return None
    calls = float(split["calls"].median())
    launches = float(split["launch_calls"].median())
    profiler, shares = profiler_share(framework, float(period), calls, launches, values)
    cpu = split["cpu_ns"].dropna()
    cpu_step = float(cpu.median()) if len(cpu) else float(period)
    run = split["run_ns"].dropna()
    if synchronizing and len(run) and cpu_step > 0:
        # A capture cannot hold the sync: the graph is at most the largest sync-free run of
        # launches (a decode step's forward); the rest of the step stays on the host.
        kept_share = 1.0 - min(float(run.median()) / cpu_step, 1.0)
    else:
        # The whole step can be captured: only the long call-free stretches stay.
        kept_share = min(float(split["long_gap_ns"].median()) / cpu_step, 1.0) if cpu_step > 0 else 0.0
    launch_call, gpu = base.cpu_side_ns, base.gpu_side_ns  # one unprofiled graph launch; the GPU's side

    def eager(share: float) -> float:
        # Never below what the same kernels take as a graph's GPU side: the eager GPU pays
        # the same dispatch gaps (a GPU-saturated step gains nothing, not less than nothing).
        return max(float(period) - share, gpu)

    e, e_low, e_high = eager(profiler), eager(shares[0]), eager(shares[1])
    # The host time without the profiler, split as the profiled CPU step is.
    host_u = min(max(cpu_step - profiler, 0.0), e)
    kept = kept_share * host_u
    removed = host_u - kept

    def graph_step(extra_host: float) -> float:
        host = launch_call + kept + extra_host
        return gpu + host if synchronizing else max(gpu, host)

    # What stays outside the graph is uncertain only where the capture cannot take the
    # whole step (a synchronizing step: the graph is one sync-free run).
    g, g_high = graph_step(0.0), graph_step(UNCAPTURED_SHARE * removed if synchronizing else 0.0)
    profiled_g = None
    if synchronizing:  # the sides add up under nsys too, with the host time kept as traced
        traced = predict_graph_step(float(period), float(busy), nodes, values, amortized=amortized)
        profiled_g = traced.gpu_side_ns + traced.cpu_side_ns + kept_share * cpu_step
    return Expectation(
        profiled_step_ns=float(period),
        profiler_ns=profiler,
        traced_calls=calls,
        launch_calls=launches,
        eager_step_ns=e,
        eager_source="estimate",  # a measured step comes in through with_measured_eager
        kept_host_ns=kept,
        removed_host_ns=removed,
        synchronizing=synchronizing,
        graph_step_ns=g,
        graph_step_high_ns=g_high,
        speedup=e / g if g > 0 else float("inf"),
        speedup_low=(e_low / g_high if g_high > 0 else float("inf")) * (1 - NOISE),
        speedup_high=(e_high / g if g > 0 else float("inf")) * (1 + NOISE),
        profiled_graph_step_ns=profiled_g,
    )
