"""The speedup a CUDA Graph is expected to give without the profiler (the headline).

A profiled trace overstates launch overhead: nsys adds a cost to every CUDA API call it
traces, and PyTorch makes several traced calls per kernel (``cudaLaunchKernel`` and
driver queries such as ``cuKernelGetName``). And a graph removes only the host work of the
launches it captures, not the loop around them. This module estimates, per steady step
(medians over the steady steps, ns), from the calls of the step's process on its CPU
timeline (:attr:`StepContext.calls`, grouped by the thread that makes most of them):

- ``profiler_ns`` = launch calls x ``profiler_launch_overhead_ns`` + other traced calls x
  ``profiler_call_overhead_ns`` (:mod:`launchprof.analysis.predict`'s constants: a
  calibration's ``profiler`` section, else the defaults measured on H200s);
- the eager step without the profiler ``E = max(period - profiler_ns, busy)`` (the GPU's
  work is not inflated), or the measured one when the run has unprofiled step times;
- the host work a graph keeps ``kept_host_ns``: CPU stretches without any CUDA call of at
  least ``host_gap_ns`` (the loop's own Python: sampling, stopping checks, data handling)
  plus the time in calls a graph does not replace (synchronizations, copies to or from
  the host); everything else on the CPU side - kernel launches, the framework's dispatch
  between them (short gaps) and the driver calls around them - is the launch path a graph
  removes;
- the graph step without the profiler ``G``: its GPU side (busy time, dispatch gaps, the
  gap between graph launches; :func:`~launchprof.analysis.predict.unprofiled_values`) and
  its CPU side (one unprofiled ``cudaGraphLaunch`` + ``kept_host_ns``) add up when the
  step synchronizes (the host waits for the GPU, then the GPU for the host), and overlap
  otherwise: ``G = gpu + cpu`` or ``max(gpu, cpu)``;
- ``expected_speedup = E / G``; the range takes the launch path's share that may stay
  outside the captured region (``UNCAPTURED_SHARE`` of the removed host time, e.g. a
  decode loop's logits processing) and ``PROFILER_SPREAD`` of the profiler estimate:
  ``[E_low / G_high, E_high / G_low]``.

The thresholds and spreads were set on the real-framework corpus
(tests/data/frameworks/MANIFEST.md; benchmarks/fidelity.py prints the comparison).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchprof.analysis.predict import predict_graph_step, unprofiled_values
from launchprof.analysis.stepdata import StepContext

UNCAPTURED_SHARE = 0.25
PROFILER_SPREAD = 0.25
KEPT_CALLS = ("sync",)  # call classes a graph does not replace (besides host<->device copies)


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
        graph_step_ns: the predicted graph step without the profiler.
        speedup, speedup_low, speedup_high: ``eager_step_ns / graph_step_ns`` and its range.
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
    speedup: float
    speedup_low: float
    speedup_high: float


def host_split(ctx: StepContext, host_gap_ns: int) -> pd.DataFrame:
    """Per steady step, the CPU side of the step's main thread (the thread with the most
    calls of the steady steps): ``step``, ``calls`` (all traced calls of the process in
    the step), ``launch_calls``, ``cpu_ns`` (first call start of the step to the first call
    start of the next; NaN for the last), ``long_gap_ns`` (gaps without any call of the
    thread of at least ``host_gap_ns``, the gap to the next step included), ``kept_call_ns``
    (time in synchronizing calls and synchronous copies)."""
    calls = ctx.calls
    if calls.empty:
        return pd.DataFrame(columns=["step", "calls", "launch_calls", "cpu_ns", "long_gap_ns", "kept_call_ns"])
    steps = ctx.steady["step"].to_numpy()
    per = pd.DataFrame({"step": steps})
    counts = calls.groupby("step").size()
    per["calls"] = counts.reindex(steps, fill_value=0).to_numpy(dtype=float)
    launches = calls.loc[calls["launch"].to_numpy(dtype=bool)].groupby("step").size()
    per["launch_calls"] = launches.reindex(steps, fill_value=0).to_numpy(dtype=float)
    main = calls.loc[calls["tid"] == calls["tid"].value_counts().index[0]].sort_values("start", kind="stable")
    start = main["start"].to_numpy(dtype=np.int64)
    end = np.maximum.accumulate(main["end"].to_numpy(dtype=np.int64))
    step_of = main["step"].to_numpy()
    gap = np.r_[start[1:] - end[:-1], 0]  # after each call, to the thread's next call
    first = pd.Series(start).groupby(step_of).min()
    nxt = first.shift(-1).where(np.r_[np.diff(first.index.to_numpy()) == 1, False])
    per["cpu_ns"] = (nxt - first).reindex(steps).to_numpy(dtype=float)
    long_gap = pd.Series(np.where(gap >= host_gap_ns, gap, 0)).groupby(step_of).sum()
    per["long_gap_ns"] = long_gap.reindex(steps, fill_value=0).to_numpy(dtype=float)
    kept = main["sync"].to_numpy(dtype=bool)
    kept_ns = pd.Series(np.where(kept, main["end"].to_numpy() - main["start"].to_numpy(), 0)).groupby(step_of).sum()
    per["kept_call_ns"] = kept_ns.reindex(steps, fill_value=0).to_numpy(dtype=float)
    return per


def expect(
    ctx: StepContext,
    fig: Mapping[str, float | None],
    values: Mapping[str, float],
    host_gap_ns: int,
    eager_step_ns: float | None = None,
) -> Expectation | None:
    """The :class:`Expectation` of the steady steps (module docstring); None without
    calls or periods.

    Args:
        ctx: the steps' context.
        fig: the diagnosis figures (``period_p50_ns``, ``busy_p50_ns``,
            ``kernels_per_step_p50``, ``memops_per_step_p50``).
        values: the prediction constants (``profiler_launch_overhead_ns``,
            ``profiler_call_overhead_ns`` and the ``unprofiled_*`` graph constants: one
            graph per step, its GPU side and its launch call as
            :func:`~launchprof.analysis.predict.predict_graph_step` gives them).
        host_gap_ns: a CPU stretch without CUDA calls at least this long is kept host work.
        eager_step_ns: the step measured without the profiler, when known.
    """
    period, busy = fig.get("period_p50_ns"), fig.get("busy_p50_ns")
    nodes = (fig.get("kernels_per_step_p50") or 0) + (fig.get("memops_per_step_p50") or 0)
    if not period or busy is None or not np.isfinite(period) or nodes <= 0:
        return None
    # Inferred steps are the shortest repeat: one graph may hold many (as the profiled
    # prediction assumes, predict.py).
    amortized = ctx.steps.source == "inferred"
    base = predict_graph_step(float(period), float(busy), nodes, unprofiled_values(values), amortized=amortized)
    split = host_split(ctx, host_gap_ns)
    if split.empty:
        return None
    calls = float(split["calls"].median())
    launches = float(split["launch_calls"].median())
    c_launch, c_other = values["profiler_launch_overhead_ns"], values["profiler_call_overhead_ns"]
    profiler = launches * c_launch + max(calls - launches, 0.0) * c_other
    cpu = split["cpu_ns"].dropna()
    cpu_step = float(cpu.median()) if len(cpu) else float(period)
    kept = float((split["long_gap_ns"] + split["kept_call_ns"]).median())
    kept = min(kept, max(cpu_step - profiler, 0.0))
    removed = max(cpu_step - profiler - kept, 0.0)
    synchronizing = float(ctx.steady["sync_calls"].median()) >= 1 if "sync_calls" in ctx.steady else False
    launch_call, gpu = base.cpu_side_ns, base.gpu_side_ns  # one unprofiled graph launch; the GPU's side

    def graph_step(extra_host: float) -> float:
        host = launch_call + kept + extra_host
        return gpu + host if synchronizing else max(gpu, host)

    def eager(spread: float) -> float:
        return max(float(period) - profiler * (1 + spread), float(busy))

    measured = eager_step_ns is not None and eager_step_ns > 0
    e = float(eager_step_ns) if measured else eager(0.0)  # type: ignore[arg-type]
    e_low, e_high = (e, e) if measured else (eager(PROFILER_SPREAD), eager(-PROFILER_SPREAD))
    g, g_high = graph_step(0.0), graph_step(UNCAPTURED_SHARE * removed)
    return Expectation(
        profiled_step_ns=float(period),
        profiler_ns=profiler,
        traced_calls=calls,
        launch_calls=launches,
        eager_step_ns=e,
        eager_source="baseline" if measured else "estimate",
        kept_host_ns=kept,
        removed_host_ns=removed,
        synchronizing=synchronizing,
        graph_step_ns=g,
        speedup=e / g if g > 0 else float("inf"),
        speedup_low=e_low / g_high if g_high > 0 else float("inf"),
        speedup_high=e_high / g if g > 0 else float("inf"),
    )
