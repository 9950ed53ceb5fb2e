"""Steps of several shapes: the steady steps grouped by kernels a step, for the prediction
(:func:`launchprof.analysis.expect.expect_shapes`) and the steps without the profiler of
each side of ``compare`` (:func:`launchprof.analysis.expect.steps_without_profiler`).

A program whose steps take several paths (a data-dependent branch, an optimizer step every
few steps) spends its time in all of them; the medians of its steps are one path's.

Steps over several streams (:func:`stream_figures`): the busiest stream's kernel time a
step and the critical path of the step's kernels (:func:`critical_paths`): a graph of a
fork/join step runs its branches side by side, so its GPU side is the longest chain of
kernels that wait on each other, not the sum over the streams.
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
    """For steps whose kernels run on several streams: ``streams_per_step_p50``,
    ``stream_busy_max_p50_ns``, the median over steady steps of the busiest stream's kernel
    time (a stream runs its kernels one after another, so a graph of the step takes at
    least that long on the GPU), and, where :func:`critical_paths` can tell,
    ``critical_path_p50_ns`` and ``critical_path_nodes_p50``: the kernel time and kernels
    of the longest chain a step (medians). Empty for one stream."""
    k = ctx.kernels
    if k.empty or k["stream_id"].nunique() < 2:
        return {}
    per = (k["end"] - k["start"]).groupby([k["step"], k["stream_id"]]).sum()
    streams = per.groupby(level=0).size()
    out: dict[str, Any] = {
        "streams_per_step_p50": float(streams.median()),
        "stream_busy_max_p50_ns": float(per.groupby(level=0).max().median()),
    }
    paths = critical_paths(ctx)
    if len(paths) and len(paths) >= 0.5 * min(len(ctx.steady), PATH_STEPS):
        out["critical_path_p50_ns"] = float(np.median(paths[:, 0]))
        out["critical_path_nodes_p50"] = float(np.median(paths[:, 1]))
    return out


# The calls that make a stream wait for work queued on another (an event recorded there).
EVENT_WAIT_CALLS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent"})
# Steady steps whose critical path is taken (evenly spaced): a Python walk over their
# kernels, bounded for traces of millions of kernels.
PATH_STEPS = 256


def critical_paths(ctx: StepContext) -> np.ndarray:
    """Per steady step (at most :data:`PATH_STEPS` of them, evenly spaced), the kernel
    time (ns) and the kernels of the longest chain of kernels that wait on each other,
    as a graph of the step would run them: ``(n, 2)`` float array, empty when no step
    qualifies.

    The dependencies come from the program's order: kernels of one stream run one after
    another (CUDA's stream semantics); a stream-wait-event call (``cudaStreamWaitEvent``,
    ``cuStreamWaitEvent``) makes the kernels launched after it wait for the last kernel
    launched before it on every stream. nsys does not record which stream recorded the
    event, so every stream is taken (more dependencies than the program has: the path is
    never shorter than the program's), and a dependency the trace contradicts - the later
    kernel started before the earlier one ended - is dropped (a wait on one stream does not
    hold the others: DDP's gradient streams). A fork/join step (one stream forks into two
    branches joined by events) gets its exact path: the fork, the longer branch, the join.

    Steps with copies or memsets (not placed by launch here), kernels of graph replays
    (their order inside a graph is not traced) or kernels without a submitting call are
    left out.
    """
    k = ctx.kernels
    if k.empty or not len(ctx.kernel_calls) or "graph_node_id" not in k:
        return np.empty((0, 2))
    calls = ctx.kernel_calls
    if not (calls >= 0).any() or "start" not in ctx.api:  # no launch call known (no API table)
        return np.empty((0, 2))
    launch = np.where(calls >= 0, ctx.api["start"].to_numpy()[np.maximum(calls, 0)], -1)
    bad = (calls < 0) | k["graph_node_id"].notna().to_numpy()
    step = k["step"].to_numpy()
    skip = set(step[bad].tolist())
    if "step" in ctx.memops and len(ctx.memops):
        skip |= set(ctx.memops["step"].tolist())
    steady = [s for s in ctx.steady["step"].tolist() if s not in skip]
    if not steady:
        return np.empty((0, 2))
    chosen = np.asarray(steady)[np.unique(np.linspace(0, len(steady) - 1, min(len(steady), PATH_STEPS)).astype(int))]
    waits = ctx.calls[ctx.calls["call"].astype(str).isin(EVENT_WAIT_CALLS)]
    wait_at = waits.groupby("step")["start"].apply(np.sort) if len(waits) else pd.Series(dtype=object)
    bounds = np.searchsorted(step, np.stack([chosen, chosen + 1]))
    start, end, stream = k["start"].to_numpy(), k["end"].to_numpy(), k["stream_id"].to_numpy()
    out = []
    for s, lo, hi in zip(chosen, bounds[0], bounds[1], strict=True):
        w = wait_at.get(s, np.empty(0))
        out.append(longest_chain(launch[lo:hi], start[lo:hi], end[lo:hi], stream[lo:hi], w))
    return np.asarray(out, dtype=float)


def longest_chain(
    launch: np.ndarray, start: np.ndarray, end: np.ndarray, stream: np.ndarray, waits: np.ndarray
) -> tuple[float, float]:
    """(kernel time in ns, kernels) of the longest chain of one step's kernels
    (:func:`critical_paths` says which kernels wait on which).

    Args:
        launch: per kernel, the start of its launch call (ns, the host's clock).
        start, end: per kernel, its traced start and end (ns, the GPU's).
        stream: per kernel, its stream.
        waits: the starts of the step's stream-wait-event calls (ns, the host's clock).
    """
    order = np.argsort(launch, kind="stable")
    wait_pos = np.searchsorted(launch[order], waits, side="left")  # kernels launched before each wait
    last: dict[Any, tuple[float, int, float]] = {}  # stream -> (path end, path kernels, traced end)
    deps: list[tuple[float, int, float]] = []
    w = 0
    for i, j in enumerate(order):
        while w < len(wait_pos) and wait_pos[w] <= i:
            deps.extend(last.values())
            w += 1
        s = stream[j]
        base = last.get(s, (0.0, 0, 0.0))
        for d in deps:
            if d[2] <= start[j] and d[0] > base[0]:
                base = d
        last[s] = (base[0] + float(end[j] - start[j]), base[1] + 1, float(end[j]))
    best = max(last.values(), key=lambda v: v[0])
    return best[0], float(best[1])
