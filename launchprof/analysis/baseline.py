"""Unprofiled baseline runs: the step times measured without nsys, against the profiled
steps, and the overhead correction (the ``baseline`` section of summary.json).

``launchprof profile --baseline-runs N`` runs the workload N more times without nsys, with
``LAUNCHPROF_STEP_TIMES`` set so the step markers (:mod:`launchprof.marker`,
``examples/_step.py``) write each step's host start and end (``time.perf_counter_ns``;
read by :mod:`launchprof.trace.steptimes`; the runs: :mod:`launchprof.commands.baseline`).
This module compares the unprofiled step period with the profiled one; its terminal line
is :func:`launchprof.commands.text.describe_baseline`.

Definitions (all ns, medians over the pooled steps of all runs):

- a run's step periods are the differences of consecutive step starts (so a run of S
  steps gives S - 1 periods); the first ``warmup`` periods of each run are left out;
- ``overhead_ratio = profiled period p50 / unprofiled period p50`` (the profiled figure is
  the analysis' ``steps.period_p50_ns``); ``correction = 1 / overhead_ratio``;
- ``host_ahead_of_gpu``: the unprofiled (host) period is shorter than the profiled steps'
  GPU busy time (``steps.busy_p50_ns``, kept as ``gpu_busy_p50_ns``). The host then queued
  work faster than the GPU ran it (a graph launch a step, GPU-bound work), so its step
  times are not the step's pace: ratio and correction are None, and the prediction keeps
  its estimate.

The measured step goes to the prediction (:func:`measured_step`,
:func:`launchprof.analysis.prediction.expect.with_measured_eager`, called by
:func:`launchprof.analysis.diagnosis.diagnose.diagnose`): it replaces the estimate of the eager
step, and the graph step, speedup and range follow by the one formula of
:mod:`launchprof.analysis.prediction.expect`; this module computes no prediction of its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.nvtx_steps import nvtx_steps
from launchprof.analysis.steps import Steps
from launchprof.analysis.timeline.core import Analysis
from launchprof.defaults import STEP_NAME


def run_periods(runs: Sequence[np.ndarray], warmup: int = 1) -> list[np.ndarray]:
    """Each run's step periods (differences of consecutive step starts, ns), its first
    ``warmup`` periods left out.

    Args:
        runs: one ``(start_ns, end_ns)`` array per run.
    """
    return [np.diff(r[:, 0])[warmup:] for r in runs]


def taken_runs(runs: Sequence[np.ndarray], source: str) -> tuple[list[np.ndarray], int]:
    """The rows of each run and the warm-up periods left out of each, as the ``baseline``
    section takes them for its ``source``: for ``module-calls`` the later half of the
    module's calls (:func:`later_half`) with no period left out, else (``step-markers``)
    every step with the first period left out. One rule for the summary
    (:func:`baseline_section`) and for a report folder read back as a comparison side
    (:func:`pooled_periods`, :mod:`launchprof.api.report_folder`)."""
    if source == "module-calls":
        return [later_half(r) for r in runs], 0
    return list(runs), 1


def pooled_periods(runs: Sequence[np.ndarray], source: str = "step-markers") -> np.ndarray:
    """The step periods of all ``runs`` (one ``(start_ns, end_ns)`` array each) pooled, as
    the ``baseline`` section of ``source`` takes them (:func:`taken_runs`); ns, int64."""
    periods = run_periods(*taken_runs(runs, source))
    return np.concatenate(periods) if periods else np.empty(0, dtype=np.int64)


def summarize_runs(runs: Sequence[np.ndarray], warmup: int = 1) -> dict[str, Any]:
    """Per-run step counts and the pooled unprofiled step figures.

    Args:
        runs: one ``(start_ns, end_ns)`` array per run
            (:func:`launchprof.trace.steptimes.read_step_times`).
        warmup: periods left out at the start of each run.

    Returns:
        ``runs`` (count), ``steps`` (per run), ``periods`` (pooled count),
        ``period_p50_ns``, ``period_mean_ns``, ``duration_p50_ns`` (end - start of each
        step, warm-up steps left out too), ``run_period_p50_ns`` (each run's own p50, None
        for a run without a period); the figures are None without any period.
    """
    periods = run_periods(runs, warmup)
    durations = [(r[:, 1] - r[:, 0])[warmup:] for r in runs]
    pooled = np.concatenate(periods) if periods else np.empty(0, dtype=np.int64)
    pooled_d = np.concatenate(durations) if durations else np.empty(0, dtype=np.int64)
    return {
        "runs": len(runs),
        "steps": [int(len(r)) for r in runs],
        "warmup_per_run": warmup,
        "periods": int(pooled.size),
        "period_p50_ns": float(np.median(pooled)) if pooled.size else None,
        "period_mean_ns": float(pooled.mean()) if pooled.size else None,
        "duration_p50_ns": float(np.median(pooled_d)) if pooled_d.size else None,
        "run_period_p50_ns": [float(np.median(p)) if p.size else None for p in periods],
    }


@dataclasses.dataclass(frozen=True)
class RegionRuns:
    """The runs without nsys of a workload without step markers: per run, the
    ``(start_ns, end_ns)`` rows of its profiler regions (:mod:`launchprof.profiler_region`:
    ``torch.cuda.profiler.start()`` to ``stop()``, GPU drained at both ends; int64, shape
    (regions, 2))."""

    runs: list[np.ndarray]


@dataclasses.dataclass(frozen=True)
class ModuleRuns:
    """The runs without nsys of a PyTorch workload with neither step markers nor a profiler
    region: per run, the outermost ``torch.nn.Module`` calls of each module
    (:mod:`launchprof.profiler_region`; ``{"module NAME": (start_ns, end_ns) rows}``, int64,
    shape (calls, 2)). Which module's period is the step's is decided against the trace
    (:func:`module_match`)."""

    runs: list[dict[str, np.ndarray]]


AnyRuns = Sequence[np.ndarray] | RegionRuns | ModuleRuns


def runs_of(
    step_times: list[np.ndarray],
    regions: list[np.ndarray],
    modules: Sequence[dict[str, np.ndarray]] = (),
) -> list[np.ndarray] | RegionRuns | ModuleRuns:
    """The runs without nsys as the analysis takes them, from each run's marked steps,
    profiler regions and top-level module calls (:mod:`launchprof.trace.steptimes`): the
    steps; when no run recorded a step, the profiler regions (:class:`RegionRuns`) if some
    run timed one, else the module calls (:class:`ModuleRuns`) if some run timed one."""
    if any(len(t) for t in step_times):
        return step_times
    if any(len(r) for r in regions):
        return RegionRuns(regions)
    if any(any(len(a) for a in m.values()) for m in modules):
        return ModuleRuns(list(modules))
    return step_times


# The run-to-run spread of a step's median (benchmarks/README.md, "Timing pass": a round's
# step moved up to 1.15x from the median of its workload's rounds).
RUN_SPREAD = 1.15
# A module's outermost calls are the steps when the step period under nsys is this many times
# their period without it: nsys's host inflation of a PyTorch step (predict.DEFAULTS
# profiler_torch_inflation_low/high, 1.0-2.9x) widened by RUN_SPREAD each way. A module
# called once per layer, or once per several steps, falls outside by its factor of calls.
MODULE_MATCH = (1.0 / RUN_SPREAD, 2.9 * RUN_SPREAD)
# Marked steps without nsys slower than the traced step by more than RUN_SPREAD: nsys does not
# make a program faster, so the two processes ran at different paces (an H200's torch.compile
# loop: 772.8 us a step without nsys, 468.0 us under it, in one call whose bare runs read 573
# and 406 us; tests/data/frameworks/MANIFEST.md) and the measurement is not this trace's step.
SLOWER_THAN_TRACED = RUN_SPREAD


def later_half(calls: np.ndarray) -> np.ndarray:
    """The later half of one run's calls of a module (rows of ``(start_ns, end_ns)``): the
    part of a whole program's run without nsys that stands for its steady steps. A program
    timed by its module calls runs to its end (:mod:`launchprof.profiler_region`), and its
    warm-up can be many calls long - a first ``generate()`` meets every sequence length for
    the first time (cuBLAS and attention kernels chosen and loaded per shape) - so a fixed
    count of warm-up periods does not leave it out; the step table's warm-up rule takes the
    same reference (:func:`launchprof.analysis.steps.table.mark_warmup`: the later half's
    median)."""
    return calls[len(calls) // 2 :]


def module_periods(runs: ModuleRuns) -> dict[str, float]:
    """Each module's median period without nsys (ns) over the later half of each run's
    calls (:func:`later_half`), pooled over the runs like the step markers'
    (:func:`summarize_runs`); modules with no period left out."""
    out = {}
    for name in sorted({n for r in runs.runs for n in r}):
        figure = summarize_runs([later_half(r[name]) for r in runs.runs if name in r], 0)["period_p50_ns"]
        if figure:
            out[name] = float(figure)
    return out


def module_match(runs: ModuleRuns, profiled_period_ns: float | None) -> str | None:
    """The module (``module NAME``) whose outermost calls are the trace's steps: of the
    modules whose period without nsys (:func:`module_periods`) is within
    :data:`MODULE_MATCH` of the step period under nsys, the one with the most calls (then
    the first name); None when none is, or without a profiled period."""
    if not profiled_period_ns:
        return None
    low, high = MODULE_MATCH
    best: tuple[int, str] | None = None
    for name, period in module_periods(runs).items():
        if low <= profiled_period_ns / period <= high:
            count = sum(len(r[name]) for r in runs.runs if name in r)
            if best is None or count > best[0]:
                best = (count, name)
    return best[1] if best else None


PROFILER_START = ("cudaProfilerStart", "cuProfilerStart")
PROFILER_STOP = ("cudaProfilerStop", "cuProfilerStop")


def trace_regions(api: pd.DataFrame) -> np.ndarray:
    """The profiler regions of a trace: ``(start_ns, end_ns)`` from the end of each
    ``cudaProfilerStart`` call to the start of the next ``cudaProfilerStop`` (the driver's
    ``cuProfilerStart/Stop`` when the runtime calls are not in the trace); int64, shape
    (regions, 2); empty when the trace has none (nsys records these calls with
    ``--trace=cuda``; a trace cut by ``--capture-range=cudaProfilerApi`` holds only its
    region, without the calls).

    Args:
        api: the trace's CUDA API calls (columns ``start``, ``end``, ``call``; ns).
    """
    call = api["call"].astype(str)
    regions: list[tuple[int, int]] = []
    for starts_of, stops_of in ((PROFILER_START[0], PROFILER_STOP[0]), (PROFILER_START[1], PROFILER_STOP[1])):
        starts = np.sort(api.loc[call == starts_of, "end"].to_numpy(dtype=np.int64))
        stops = np.sort(api.loc[call == stops_of, "start"].to_numpy(dtype=np.int64))
        for s in starts:
            later = stops[stops > s]
            if later.size and not any(a <= s < b for a, b in regions):
                regions.append((int(s), int(later[0])))
        if regions:
            break
    return np.array(regions, dtype=np.int64).reshape(-1, 2)


def region_step_count(regions: np.ndarray, table: pd.DataFrame | None) -> int:
    """Steps of the analysis' step table (``cpu_start``, ns) that start inside one of
    ``regions`` (:func:`trace_regions`)."""
    if table is None or not len(table) or not len(regions):
        return 0
    start = table["cpu_start"].to_numpy(dtype=np.int64)
    inside = np.zeros(start.size, dtype=bool)
    for a, b in regions:
        inside |= (start >= a) & (start < b)
    return int(inside.sum())


def region_section(runs: RegionRuns, region_steps: int, trace_region_count: int) -> dict[str, Any]:
    """:func:`summarize_runs` for :class:`RegionRuns`: one step time per run, the total time
    of its profiler regions divided by ``region_steps`` (the steps found inside the trace's
    profiler regions, :func:`region_step_count`). ``source`` is ``"profiler-region"``,
    ``steps`` the step count per run (``region_steps``), ``periods`` the number of runs
    with a figure, ``run_period_p50_ns`` each run's step time (None for a run without a
    region), ``region_ns`` each run's total region time, ``regions`` each run's region
    count, ``trace_regions`` the trace's; the figures are None when no steps were found in
    the trace's regions."""
    totals = [int((r[:, 1] - r[:, 0]).sum()) for r in runs.runs]
    per_run = [t / region_steps if (t > 0 and region_steps) else None for t in totals]
    per_step = np.array([x for x in per_run if x is not None], dtype=float)
    return {
        "source": "profiler-region",
        "runs": len(runs.runs),
        "steps": [region_steps] * len(runs.runs),
        "warmup_per_run": 0,
        "periods": int(per_step.size),
        "period_p50_ns": float(np.median(per_step)) if per_step.size else None,
        "period_mean_ns": float(per_step.mean()) if per_step.size else None,
        "duration_p50_ns": None,
        "run_period_p50_ns": per_run,
        "region_ns": totals,
        "regions": [int(len(r)) for r in runs.runs],
        "region_steps": region_steps,
        "trace_regions": trace_region_count,
    }


ASSUMPTION = (
    "nsys slows the host side (CUDA API calls and the code between them) and leaves GPU work alone: the step "
    "measured without nsys replaces the estimate of the eager step, and the graph step, the expected speedup "
    "and its range follow from it by the one prediction (recommendation.expected)."
)


def nvtx_period_p50(nvtx: pd.DataFrame, text: str = STEP_NAME, warmup: int = 1) -> float | None:
    """Median period of the trace's host steps named ``text`` (chosen by the rule of
    summary.json's ``nvtx_steps``, :func:`launchprof.analysis.nvtx_steps.nvtx_steps`: the
    thread holding most of them), their periods taken as a run's are (:func:`run_periods`:
    the first ``warmup`` left out). None when there is no such period. :func:`baseline_of`
    asks for ``step`` (launchprof's marker): where ``--step`` names other ranges, or the
    trace has no ``step`` range and ``nvtx_steps`` takes the most repeated text, the two
    describe different ranges (the step name does not reach the diagnosis). ``nvtx_steps``'
    own ``period_p50_ns`` keeps every period: it describes the ranges, this figure is held
    against runs whose warm-up is left out.

    Args:
        nvtx: the trace's NVTX ranges (columns ``start``, ``end``, ``tid``, ``pid``,
            ``text``; ns).
    """
    host = nvtx_steps(nvtx, text)
    if host is None:
        return None
    periods = run_periods([host.table[["start", "end"]].to_numpy()], warmup)[0]
    return float(np.median(periods)) if periods.size else None


def baseline_section(
    runs: AnyRuns,
    steps: Mapping[str, Any] | None,
    nvtx_period_ns: float | None = None,
    regions: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The ``baseline`` section of summary.json: :func:`summarize_runs` (or, for
    :class:`RegionRuns`, :func:`region_section` with ``regions`` = (steps found inside the
    trace's profiler regions, the trace's region count); for :class:`ModuleRuns`, of the
    later half of the calls (:func:`later_half`) of the module :func:`module_match` picks,
    with ``module`` (its ``module NAME``, None when no module's period fits the steps) and
    ``module_periods`` (every module's period, :func:`module_periods`), source
    ``module-calls``) plus
    ``profiled_period_p50_ns`` (the steps' ``period_p50_ns``, else ``nvtx_period_ns`` -
    the marker ranges' period in the trace, :func:`nvtx_period_p50`, for traces without
    GPU steps) and its ``profiled_source``, ``overhead_ratio``, ``correction`` and
    ``assumption``; ratios are None when either period is missing, the host ran ahead
    of the GPU (``host_ahead_of_gpu``, module docstring), or the runs' step is slower than
    the traced one by more than :data:`SLOWER_THAN_TRACED` (``slower_than_traced``).

    Args:
        steps: the steady steps' figures (``period_p50_ns``, ``busy_p50_ns``:
            :func:`launchprof.analysis.steps.step_stats`), or None.
    """
    if isinstance(runs, RegionRuns):
        section = region_section(runs, *(regions or (0, 0)))
    elif isinstance(runs, ModuleRuns):
        module = module_match(runs, (steps or {}).get("period_p50_ns"))
        chosen = [r.get(module, np.empty((0, 2), dtype=np.int64)) for r in runs.runs] if module else []
        section = {"source": "module-calls", **summarize_runs(*taken_runs(chosen, "module-calls"))}
        section["runs"] = len(runs.runs)
        section["module"] = module
        section["module_periods"] = module_periods(runs)
    else:
        section = {"source": "step-markers", **summarize_runs(*taken_runs(runs, "step-markers"))}
    profiled = (steps or {}).get("period_p50_ns")
    source = "steps"
    if not profiled:
        profiled, source = nvtx_period_ns, "nvtx"
    unprofiled = section["period_p50_ns"]
    section["profiled_period_p50_ns"] = float(profiled) if profiled else None
    section["profiled_source"] = source if profiled else None
    ok = bool(profiled) and bool(unprofiled)
    busy = (steps or {}).get("busy_p50_ns")
    # Host step times show the step's pace only when the host waits for the GPU; a host that
    # runs ahead (a graph launch a step, GPU-bound work) finishes its steps sooner than the GPU.
    # A profiler region's time includes draining the GPU: it is the step's pace either way.
    ahead = bool(ok and busy and unprofiled < float(busy) and section["source"] != "profiler-region")  # type: ignore[operator]
    section["host_ahead_of_gpu"] = ahead
    section["gpu_busy_p50_ns"] = float(busy) if busy else None
    slower = bool(ok and not ahead and unprofiled > float(profiled) * SLOWER_THAN_TRACED)  # type: ignore[operator,arg-type]
    section["slower_than_traced"] = slower
    ok = ok and not ahead and not slower
    section["overhead_ratio"] = float(profiled) / unprofiled if ok else None  # type: ignore[arg-type,operator]
    section["correction"] = unprofiled / float(profiled) if ok else None  # type: ignore[arg-type,operator]
    section["assumption"] = ASSUMPTION
    return section


def measured_step(section: Mapping[str, Any], mean: bool = False) -> tuple[float, list[float], str] | None:
    """The eager step measured without nsys that a ``baseline`` section
    (:func:`baseline_section`) gives the prediction: ``(step_ns, per-run steps, how they
    were timed)``; None when it has no usable period (none, the host ran ahead of the
    GPU, or the runs ran slower than the trace: :data:`SLOWER_THAN_TRACED`). ``mean``: the
    mean period instead of the median, for steps of several shapes
    (:func:`launchprof.analysis.prediction.expect.expect_shapes`: the prediction weighs the shapes as
    the program's time does); the per-run figures are then scaled by mean / median."""
    period = section.get("period_p50_ns")
    if not period or section.get("host_ahead_of_gpu") or section.get("slower_than_traced"):
        return None
    per_run = [float(x) for x in section.get("run_period_p50_ns") or [] if x]
    if mean and section.get("period_mean_ns"):
        scale = float(section["period_mean_ns"]) / float(period)
        period, per_run = float(section["period_mean_ns"]), [x * scale for x in per_run]
    return float(period), per_run, str(section.get("source"))


def baseline_of(analysis: Analysis, steps: Steps, runs: AnyRuns) -> dict[str, Any]:
    """:func:`baseline_section` of the runs without nsys of the program behind
    ``analysis``, whose steps are ``steps``: the steady steps' figures, the marker ranges'
    period (:func:`nvtx_period_p50`) and, for :class:`RegionRuns`, the steps inside the
    trace's profiler regions (:func:`trace_regions`, :func:`region_step_count`)."""
    from launchprof.analysis.steps import step_stats

    regions = None
    if isinstance(runs, RegionRuns):
        found = trace_regions(analysis.trace.api)
        regions = (region_step_count(found, steps.table), len(found))
    return baseline_section(runs, step_stats(steps), nvtx_period_p50(analysis.trace.nvtx), regions)
