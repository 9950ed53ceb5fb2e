"""Steps of several shapes: the steady steps grouped by kernels a step, for the prediction
(:func:`launchprof.analysis.expect.expect_shapes`) and the steps without the profiler of
each side of ``compare`` (:func:`launchprof.analysis.expect.steps_without_profiler`).

A program whose steps take several paths (a data-dependent branch, an optimizer step every
few steps) spends its time in all of them; the medians of its steps are one path's.

Steps over several streams (:func:`stream_figures`): the busiest stream's kernel time a
step, reported beside the busy time (not yet used by the prediction: a graph of a fork/join
step runs its branches side by side, but streams that wait on each other do not, and which
is which needs the events between them).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.stepdata import StepContext

# Steps of several shapes (kernels a step): each shape holding at least this share of the
# steady steps is predicted on its own and the figures are weighted by its steps, as the
# program's time is (a data-dependent branch: early_exit in tests/data/frameworks has 16
# short and 11 long steady steps; its medians were the short path's, the truth without
# nsys the mean of both; gradient accumulation with an optimizer step every few steps is
# another). A decode's prefill (1 step in 32) stays in the one shape.
SHAPE_MIN_SHARE = 0.2


def step_shapes(ctx: StepContext) -> list[tuple[float, np.ndarray]]:
    """The steady steps' shapes by kernels a step: when two or more kernel counts each
    hold at least :data:`SHAPE_MIN_SHARE` of the steady steps and together at least
    ``1 - SHAPE_MIN_SHARE`` of them, ``(kernels, step ids)`` of each, every other step
    joining the shape nearest in kernels; else [] (one shape)."""
    steady = ctx.steady
    if ctx.pseudo or "kernels" not in steady or len(steady) < 4:
        return []
    counts = steady["kernels"].value_counts()
    big = counts[counts >= SHAPE_MIN_SHARE * len(steady)]
    if len(big) < 2 or big.sum() < (1 - SHAPE_MIN_SHARE) * len(steady):
        return []
    shapes = np.sort(big.index.to_numpy(dtype=float))
    k = steady["kernels"].to_numpy(dtype=float)
    nearest = shapes[np.abs(k[:, None] - shapes[None, :]).argmin(axis=1)]
    ids = steady["step"].to_numpy()
    return [(float(n), ids[nearest == n]) for n in shapes]


def shape_context(ctx: StepContext, steps: np.ndarray) -> StepContext:
    """``ctx`` restricted to the steady steps ``steps`` for :func:`expect`: its ``steady``
    rows, kernels, memops and calls (``calls``); the other per-call fields stay the whole
    context's and are not read there."""
    sub = dataclasses.replace(
        ctx,
        steady=ctx.steady[ctx.steady["step"].isin(steps)],
        kernels=ctx.kernels[ctx.kernels["step"].isin(steps)],
        memops=ctx.memops[ctx.memops["step"].isin(steps)] if "step" in ctx.memops else ctx.memops,
    )
    calls = ctx.calls
    sub.cached("calls", lambda: calls[calls["step"].isin(steps)] if len(calls) else calls)
    return sub


def shape_figures(steady: pd.DataFrame) -> dict[str, float | None]:
    """The figures :func:`expect` reads, as medians over one shape's steady steps."""

    def p50(col: str) -> float | None:
        v = steady[col].dropna().to_numpy(dtype=float) if col in steady else np.empty(0)
        return float(np.median(v)) if v.size else None

    return {
        "period_p50_ns": p50("period_ns"),
        "busy_p50_ns": p50("busy_ns"),
        "kernels_per_step_p50": p50("kernels"),
        "memops_per_step_p50": p50("memops"),
    }


def stream_figures(ctx: StepContext) -> dict[str, Any]:
    """For steps whose kernels run on several streams: ``streams_per_step_p50`` and
    ``stream_busy_max_p50_ns``, the median over steady steps of the busiest stream's kernel
    time (a stream runs its kernels one after another, so a graph of the step takes at
    least that long on the GPU; the critical path is longer where the streams wait on each
    other). Empty for one stream. Reported, not used by the prediction (module docstring)."""
    k = ctx.kernels
    if k.empty or k["stream_id"].nunique() < 2:
        return {}
    per = (k["end"] - k["start"]).groupby([k["step"], k["stream_id"]]).sum()
    streams = per.groupby(level=0).size()
    return {
        "streams_per_step_p50": float(streams.median()),
        "stream_busy_max_p50_ns": float(per.groupby(level=0).max().median()),
    }
