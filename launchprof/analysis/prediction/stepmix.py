"""Steps of several shapes: the steady steps grouped by kernels a step, for the prediction
(:func:`launchprof.analysis.prediction.expect.expect_shapes`) and the steps without the profiler of
each side of ``compare`` (:func:`launchprof.analysis.prediction.unprofiled.steps_without_profiler`).

A program whose steps take several paths (a data-dependent branch, an optimizer step every
few steps) spends its time in all of them; the medians of its steps are one path's. The
shapes' figures are weighed by their steady steps (:func:`weighted_sum`).

Steps over several streams (:func:`stream_figures`): the busiest stream's kernel time a
step and the critical path of the step's kernels (:func:`critical_paths`): a graph of a
fork/join step runs its branches side by side, so its GPU side is the longest chain of
kernels that wait on each other, not the sum over the streams.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.stepdata import StepContext
from launchprof.analysis.timeline.callkinds import EVENT_WAIT_PREFIXES

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
    rows, kernels (and their ``kernel_calls``), memops and calls (``calls``); the other
    per-call fields stay the whole context's and are not read there."""
    in_shape = ctx.kernels["step"].isin(steps).to_numpy()
    sub = dataclasses.replace(
        ctx,
        steady=ctx.steady[ctx.steady["step"].isin(steps)],
        kernels=ctx.kernels[in_shape],
        memops=ctx.memops[ctx.memops["step"].isin(steps)] if "step" in ctx.memops else ctx.memops,
        kernel_calls=ctx.kernel_calls[in_shape] if len(ctx.kernel_calls) == len(in_shape) else ctx.kernel_calls,
    )
    calls = ctx.calls
    sub.cached("calls", lambda: calls[calls["step"].isin(steps)] if len(calls) else calls)
    return sub


def shape_figures(steady: pd.DataFrame) -> dict[str, float | None]:
    """The figures :func:`expect` reads, as medians over one shape's steady steps (the
    period and busy time; :func:`stream_figures` adds a several-stream step's path)."""

    def p50(col: str) -> float | None:
        v = steady[col].dropna().to_numpy(dtype=float) if col in steady else np.empty(0)
        return float(np.median(v)) if v.size else None

    return {
        "period_p50_ns": p50("period_ns"),
        "busy_p50_ns": p50("busy_ns"),
        "kernels_per_step_p50": p50("kernels"),
        "memops_per_step_p50": p50("memops"),
    }


def weighted_sum(weights: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray) -> float:
    """``sum(w * x)`` over the pairs, in order, in plain float arithmetic: the same last bit
    on every CPU. (``np.dot`` goes through the BLAS, whose kernel is chosen by the CPU:
    OpenBLAS's AVX-512 one rounds differently, and the two-shape traces' summary.json
    changed with ``OPENBLAS_CORETYPE=SkylakeX``.)

    Raises:
        ValueError: the two have different lengths.
    """
    total = 0.0
    for w, x in zip(weights, values, strict=True):
        total += float(w) * float(x)
    return total


def stream_figures(ctx: StepContext) -> dict[str, Any]:
    """For steps whose kernels run on several streams: ``streams_per_step_p50``,
    ``stream_busy_max_p50_ns``, the median over steady steps of the busiest stream's kernel
    time (a stream runs its kernels one after another, so a graph of the step takes at
    least that long on the GPU), and, where :func:`critical_paths` can tell for at least
    half the steady steps, ``critical_path_p50_ns`` and ``critical_path_nodes_p50``: the
    kernel time and kernels of the longest chain a step (medians). Empty for one stream."""
    k = ctx.kernels
    if k.empty or k["stream_id"].nunique() < 2:
        return {}
    per = (k["end"] - k["start"]).groupby([k["step"], k["stream_id"]]).sum()
    streams = per.groupby(level=0).size()
    out: dict[str, Any] = {
        "streams_per_step_p50": float(streams.median()),
        "stream_busy_max_p50_ns": float(per.groupby(level=0).max().median()),
    }
    paths, qualified = critical_paths(ctx)
    if len(paths) and qualified >= 0.5 * len(ctx.steady):
        out["critical_path_p50_ns"] = float(np.median(paths[:, 0]))
        out["critical_path_nodes_p50"] = float(np.median(paths[:, 1]))
    return out


# Steady steps whose critical path is taken (evenly spaced): a Python walk over their
# kernels, bounded for traces of millions of kernels.
PATH_STEPS = 256


def critical_paths(ctx: StepContext) -> tuple[np.ndarray, int]:
    """Per steady step (at most :data:`PATH_STEPS` of them, evenly spaced), the kernel
    time (ns) and the kernels of the longest chain of kernels that wait on each other,
    as a graph of the step would run them: ``(n, 2)`` float array (empty when no step
    qualifies), and how many steady steps qualify.

    The dependencies come from the program's order: kernels of one stream run one after
    another (CUDA's stream semantics); a stream-wait-event call (``cudaStreamWaitEvent``,
    ``cuStreamWaitEvent``) makes the kernels launched after it wait for the last kernel
    launched before it on every stream. nsys does not record which stream recorded the
    event, so every stream is taken (more dependencies than the program has: the path is
    never shorter than the program's), and a dependency the trace contradicts - the later
    kernel started before the earlier one ended - is dropped (a wait on one stream does not
    hold the others: DDP's gradient streams). A fork/join step (one stream forks into two
    branches joined by events) gets its exact path: the fork, the longer branch, the join.
    Kernels on the legacy default stream are taken as any stream's: its implicit ordering
    with blocking streams is not modelled (a capture cannot use that stream: the
    ``legacy-stream`` finding says so, and the converted program's streams are created).

    Left out: the whole-trace pseudo-step, steps with copies or memsets (not placed by
    launch here), with kernels of graph replays (their order inside a graph is not
    traced) or kernels without a submitting call.
    """
    none = (np.empty((0, 2)), 0)
    k = ctx.kernels
    if ctx.pseudo or k.empty or len(ctx.kernel_calls) != len(k) or "graph_node_id" not in k:
        return none
    calls = ctx.kernel_calls
    if not (calls >= 0).any() or "start" not in ctx.api:  # no launch call known (no API table)
        return none
    launch = np.where(calls >= 0, ctx.api["start"].to_numpy()[np.maximum(calls, 0)], -1)
    bad = (calls < 0) | k["graph_node_id"].notna().to_numpy()
    step = k["step"].to_numpy()
    skip = set(step[bad].tolist())
    if "step" in ctx.memops and len(ctx.memops):
        skip |= set(ctx.memops["step"].tolist())
    present = set(step.tolist())
    steady = [s for s in ctx.steady["step"].tolist() if s not in skip and s in present]
    if not steady:
        return none
    chosen = np.asarray(steady)[np.unique(np.linspace(0, len(steady) - 1, min(len(steady), PATH_STEPS)).astype(int))]
    calls_frame = ctx.calls
    waits = calls_frame[calls_frame["call"].astype(str).str.startswith(EVENT_WAIT_PREFIXES)]
    wait_at = waits.groupby("step")["start"].apply(np.sort) if len(waits) else pd.Series(dtype=object)
    bounds = np.searchsorted(step, np.stack([chosen, chosen + 1]))
    start, end, stream = k["start"].to_numpy(), k["end"].to_numpy(), k["stream_id"].to_numpy()
    out = [
        longest_chain(launch[lo:hi], start[lo:hi], end[lo:hi], stream[lo:hi], wait_at.get(s, np.empty(0)))
        for s, lo, hi in zip(chosen, bounds[0], bounds[1], strict=True)
    ]
    return np.asarray(out, dtype=float), len(steady)


def longest_chain(
    launch: np.ndarray, start: np.ndarray, end: np.ndarray, stream: np.ndarray, waits: np.ndarray
) -> tuple[float, float]:
    """(kernel time in ns, kernels) of the longest chain of one step's kernels
    (:func:`critical_paths` says which kernels wait on which); (0, 0) without kernels.

    Each wait records, per stream, its chain so far (path end, kernels) keyed by the
    stream's traced end until then; a kernel takes, per stream, the latest record that
    ended by its traced start (both grow along a stream, so that one is the longest): a
    binary search, kernels x streams x log(waits) in all.

    Args:
        launch: per kernel, the start of its launch call (ns, the host's clock).
        start, end: per kernel, its traced start and end (ns, the GPU's).
        stream: per kernel, its stream.
        waits: the starts of the step's stream-wait-event calls (ns, the host's clock).
    """
    if not len(launch):
        return 0.0, 0.0
    order = np.argsort(launch, kind="stable")
    wait_pos = np.sort(np.searchsorted(launch[order], waits, side="left"))  # kernels launched before each wait
    last: dict[Any, tuple[float, int, float]] = {}  # stream -> (path end, path kernels, traced end so far)
    records: dict[Any, tuple[list[float], list[tuple[float, int]]]] = {}  # stream -> (traced ends, chains)
    w = 0
    for i, j in enumerate(order):
        while w < len(wait_pos) and wait_pos[w] <= i:
            for s2, (path, n, ended) in last.items():
                keys, chains = records.setdefault(s2, ([], []))
                if not chains or chains[-1] != (path, n):
                    keys.append(ended)
                    chains.append((path, n))
            w += 1
        s, t = stream[j], float(start[j])
        base = last.get(s, (0.0, 0, 0.0))[:2]
        for keys, chains in records.values():
            p = bisect.bisect_right(keys, t) - 1
            if p >= 0 and chains[p][0] > base[0]:
                base = chains[p]
        ended = max(last[s][2], float(end[j])) if s in last else float(end[j])
        last[s] = (base[0] + float(end[j] - start[j]), base[1] + 1, ended)
    best = max(last.values(), key=lambda v: v[0])
    return best[0], float(best[1])
