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
  times are not the step's pace: ratio, correction and corrected prediction are None.

Overhead-corrected prediction (assumption, stated in the report): nsys slows the host side
only - CUDA API calls and the Python between them - and leaves GPU work alone. The
per-launch step is scaled by ``correction`` (which gives the unprofiled period); the graph
step is the one predicted for a run without the profiler (the recommendation's
``model.unprofiled_gpu_side_ns`` and ``model.unprofiled_cpu_side_ns``,
:func:`launchprof.analysis.predict.unprofiled_values`: GPU busy time, node dispatch gaps
and the gap between graph launches measured without nsys; one unprofiled cudaGraphLaunch
call plus the host time a graph keeps):

    corrected graph step = max(unprofiled gpu_side, unprofiled cpu_side)
    corrected speedup    = per-launch step x correction / corrected graph step

Summaries written before those keys existed have only the profiled sides; for them the
profiled GPU side is kept and the CPU side scaled: max(gpu_side, cpu_side x correction).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd


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
    periods = [np.diff(r[:, 0])[warmup:] for r in runs]
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


def corrected_prediction(
    per_launch_step_ns: float,
    gpu_side_ns: float,
    cpu_side_ns: float,
    correction: float,
    cpu_side_unprofiled: bool = False,
) -> dict[str, float]:
    """The overhead-corrected graph prediction (module docstring).

    Args:
        per_launch_step_ns: the profiled per-launch step period.
        gpu_side_ns, cpu_side_ns: the graph step's two sides from the prediction
            (:func:`launchprof.analysis.predict.predict_graph_step`).
        correction: unprofiled period / profiled period.
        cpu_side_unprofiled: ``cpu_side_ns`` is already the unprofiled CPU side (it is
            then not scaled by ``correction``).

    Raises:
        ValueError: a correction that is not positive.
    """
    if not correction > 0:
        raise ValueError("the correction must be > 0")
    step = per_launch_step_ns * correction
    graph = max(gpu_side_ns, cpu_side_ns if cpu_side_unprofiled else cpu_side_ns * correction)
    return {
        "per_launch_step_ns": step,
        "graph_step_ns": graph,
        "speedup": step / graph if graph > 0 else float("inf"),
    }


ASSUMPTION = (
    "Overhead correction: nsys is assumed to slow only the host side (CUDA API calls and the code between them) "
    "and to leave GPU work alone. The per-launch step is scaled by unprofiled / profiled period. The graph step is "
    "the one predicted without the profiler: the larger of its GPU side (GPU busy time, node dispatch gaps and the "
    "gap between graph launches as measured without nsys) and its CPU side (one unprofiled cudaGraphLaunch call "
    "plus the host time a graph keeps)."
)


def nvtx_period_p50(nvtx: pd.DataFrame, text: str = "step", warmup: int = 1) -> float | None:
    """Median period of the NVTX ranges named ``text`` in a trace, computed like the
    baseline's: consecutive starts per thread (``pid``, ``tid``), the first ``warmup``
    periods of each thread left out. None when there is no such period.

    Args:
        nvtx: the trace's NVTX ranges (columns ``start``, ``tid``, ``pid``, ``text``; ns).
    """
    ranges = nvtx.loc[nvtx["text"] == text, ["pid", "tid", "start"]].sort_values(["pid", "tid", "start"])
    by = ranges.groupby(["pid", "tid"], sort=False)["start"]
    periods = by.diff()
    keep = periods.notna() & (by.cumcount() > warmup)
    return float(periods[keep].median()) if keep.any() else None


def baseline_section(
    runs: Sequence[np.ndarray] | RegionRuns,
    steps: Mapping[str, Any] | None,
    recommendation: Mapping[str, Any] | None,
    nvtx_period_ns: float | None = None,
    regions: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """The ``baseline`` section of summary.json: :func:`summarize_runs` (or, for
    :class:`RegionRuns`, :func:`region_section` with ``regions`` = (steps found inside the
    trace's profiler regions, the trace's region count)) plus
    ``profiled_period_p50_ns`` (the analysis' step period, else ``nvtx_period_ns`` - the
    marker ranges' period in the trace, :func:`nvtx_period_p50`, for traces without GPU
    steps) and its ``profiled_source``, ``overhead_ratio``, ``correction`` and, when the
    summary has a graph prediction, ``corrected`` (:func:`corrected_prediction`) and
    ``assumption``; ratios are None when either period is missing."""
    if isinstance(runs, RegionRuns):
        section = region_section(runs, *(regions or (0, 0)))
    else:
        section = {"source": "step-markers", **summarize_runs(runs)}
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
    ok = ok and not ahead
    section["overhead_ratio"] = float(profiled) / unprofiled if ok else None  # type: ignore[arg-type,operator]
    section["correction"] = unprofiled / float(profiled) if ok else None  # type: ignore[arg-type,operator]
    section["corrected"] = None
    model = (recommendation or {}).get("model") or {}
    measured = (recommendation or {}).get("measured_step_ns")
    unprof = "unprofiled_gpu_side_ns" in model and "unprofiled_cpu_side_ns" in model
    sides = ("unprofiled_gpu_side_ns", "unprofiled_cpu_side_ns") if unprof else ("gpu_side_ns", "cpu_side_ns")
    if ok and measured and all(k in model for k in sides):
        corr = corrected_prediction(
            float(measured),
            float(model[sides[0]]),
            float(model[sides[1]]),
            section["correction"],
            cpu_side_unprofiled=unprof,
        )
        corr["profiled_speedup"] = float((recommendation or {}).get("predicted_speedup") or 0.0)
        section["corrected"] = corr
    section["assumption"] = ASSUMPTION
    return section


def apply_to_recommendation(
    recommendation: dict[str, Any] | None, section: Mapping[str, Any], verdict: str | None, min_speedup: float
) -> None:
    """Put the unprofiled step period of ``section`` (the ``baseline`` section) into the
    recommendation's expected speedup, in place: ``expected`` gets ``eager_step_ns`` from
    the runs without nsys and ``eager_source`` ``"baseline"``, ``expected_speedup`` and
    ``expected_speedup_range`` follow (:func:`launchprof.analysis.expect.with_measured_eager`);
    for a launch-bound verdict ``convert`` is decided again on it (at least
    ``min_speedup``) and the reason says so. Nothing changes when the section has no usable
    period (the host ran ahead of the GPU) or the recommendation no expectation."""
    from launchprof.analysis.expect import Expectation, with_measured_eager
    from launchprof.analysis.predict import break_even

    exp = (recommendation or {}).get("expected")
    period = section.get("period_p50_ns")
    if not exp or not period or section.get("host_ahead_of_gpu") or recommendation is None:
        return
    known = {f.name for f in dataclasses.fields(Expectation)}
    per_run = [float(x) for x in section.get("run_period_p50_ns") or [] if x]
    new = with_measured_eager(Expectation(**{k: v for k, v in exp.items() if k in known}), float(period), per_run)
    recommendation["expected"] = dataclasses.asdict(new)
    recommendation["expected_speedup"] = new.speedup
    recommendation["expected_speedup_range"] = [new.speedup_low, new.speedup_high]
    instantiate = recommendation.get("instantiate_ns")
    if instantiate is not None:  # paid back on the same footing as the headline
        recommendation["break_even_iterations"] = break_even(float(instantiate), new.graph_step_ns, new.eager_step_ns)
    if verdict == "launch-bound":
        recommendation["convert"] = bool(new.speedup >= min_speedup)
        recommendation["reason"] = (
            f"With the step measured without nsys ({period / 1e3:,.1f} us, {section.get('runs')} "
            f"run{'s' if section.get('runs') != 1 else ''}): a graph is "
            f"expected to give {new.speedup:.2f}x ({new.speedup_low:.2f}-{new.speedup_high:.2f}x; under nsys "
            f"{recommendation.get('predicted_speedup') or 0:.2f}x)"
            + (", worth converting." if recommendation["convert"] else f", below the {min_speedup:g}x minimum.")
        )
