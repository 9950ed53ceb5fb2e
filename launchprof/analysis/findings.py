"""Findings: what stands in the way of a CUDA Graph, or skews the numbers (the
capture breakers of docs/metrics.md, and the places where graphs do not pay).

Each finder takes a :class:`~launchprof.analysis.stepdata.StepContext` (steady-state
steps only, so warm-up allocations and one-off syncs do not count) and returns a
:class:`Finding` or None. Severities: ``blocker`` (breaks capture or defeats the graph:
fix it before converting), ``warning`` (the analysis or the conversion needs care),
``info`` (context for the numbers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import row_codes
from launchprof.analysis.callkinds import api_classes
from launchprof.analysis.core import Analysis
from launchprof.analysis.stepdata import StepContext
from launchprof.analysis.timeline import corr_key

MAX_EXAMPLES = 10
CONFIG = ("name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
# CUPTI_ACTIVITY_MEMCPY_KIND_DTOH (CUPTI's CUpti_ActivityMemcpyKind; nsys copyKind column).
COPY_DTOH = 2
# The legacy default stream's id in nsys exports when no synchronous call shows it:
# CUPTI numbers the NULL stream of the primary context 7 (all bundled H200 traces: the
# synchronous cudaMemset of the demo and PyTorch's default-stream kernels run on 7).
LEGACY_STREAM_ID = 7
# Calls that always run on the legacy default stream (no stream argument).
_NULL_STREAM_CALLS = frozenset({"cudaMemset", "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol"})
# Re-instantiation: instantiations/updates/captures per graph launch at or above this
# ratio mean the graph is rebuilt about every launch and its cost is never repaid.
REINSTANTIATE_RATIO = 0.5
# Profiler overhead is reported when nsys's per-launch cost is at least this share of the step.
PROFILER_SHARE_MIN = 0.05
# A sequence or shape variant must cover at least this share of the steady steps to be
# the "usual" one; the rest are variants.
DOMINANT_SHARE = 0.9


@dataclass(frozen=True)
class Finding:
    """One finding.

    Attributes:
        kind: ``sync-in-step``, ``alloc-in-step``, ``dynamic-shapes``,
            ``varying-sequence``, ``reinstantiation``, ``graph-trace-mode``,
            ``legacy-stream``, ``profiler-overhead`` or ``host-outside-graph``
            (:mod:`launchprof.analysis.hostwork`).
        severity: ``blocker``, ``warning`` or ``info``.
        steps_affected: number of steady-state steps that show it.
        steps: up to 10 example step indices.
        evidence: what the trace shows, with numbers and units.
        fix: what to do.
        figures: the numbers behind the evidence (ns, counts), by name.
    """

    kind: str
    severity: str
    steps_affected: int
    steps: list[int]
    evidence: str
    fix: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "steps_affected": self.steps_affected,
            "steps": list(self.steps),
            "evidence": self.evidence,
            "fix": self.fix,
            "figures": dict(self.figures),
        }


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us"


def _examples(steps: pd.Series | np.ndarray) -> list[int]:
    return [int(s) for s in np.unique(np.asarray(steps))[:MAX_EXAMPLES]]


def _names(calls: pd.DataFrame) -> str:
    counts = calls["call"].value_counts()
    return ", ".join(f"{name} x{int(n)}" for name, n in counts.items())


def sync_in_step(ctx: StepContext) -> Finding | None:
    """Synchronizing calls inside steady steps (stream/device/event synchronize,
    synchronous copies), and device-to-host copies followed by one (``.item()``)."""
    sync = ctx.calls_where("sync")
    if sync.empty:
        return None
    steps = sync["step"].unique()
    n_steady = max(len(ctx.steady), 1)
    per_step = sync.groupby("step").size()
    blocked = (sync["end"] - sync["start"]).groupby(sync["step"]).sum()
    d2h = (
        ctx.memops.loc[(ctx.memops["kind"] == "memcpy") & (ctx.memops["copy_kind"] == COPY_DTOH)]
        if len(ctx.memops)
        else ctx.memops
    )
    d2h_steps = set(d2h["step"].unique()) & set(steps) if len(d2h) else set()
    evidence = (
        f"{len(steps)} of {n_steady} steady steps call a synchronizing API ({_names(sync)}); "
        f"p50 {float(per_step.median()):g} per step, CPU blocked p50 {_us(float(blocked.median()))} per step"
    )
    if d2h_steps:
        evidence += (
            f"; {len(d2h_steps)} of them copy device-to-host and wait for it (what .item(), .cpu() or "
            "print(tensor) produce)"
        )
    wait = ctx.steady["sync_wait_ns"] if "sync_wait_ns" in ctx.steady else pd.Series(dtype=float)
    if len(wait) and wait.median() > 0:
        evidence += f"; GPU idle after the sync p50 {_us(float(wait.median()))} per step"
    return Finding(
        "sync-in-step",
        "blocker",
        int(len(steps)),
        _examples(steps),
        evidence,
        "A synchronizing call cannot be captured (capture fails) and drains the GPU every step. Keep results on "
        "the GPU (no .item()/.cpu() inside the step; check values every k steps, outside the captured region), "
        "use cudaMemcpyAsync into pinned memory and synchronize once after the loop.",
        {
            "sync_calls_p50": float(per_step.median()),
            "blocked_p50_ns": float(blocked.median()),
            "d2h_steps": len(d2h_steps),
        },
    )


def alloc_in_step(ctx: StepContext) -> Finding | None:
    """cudaMalloc/cudaFree/cudaHostAlloc (and driver equivalents) inside steady steps."""
    alloc = ctx.calls_where("alloc")
    if alloc.empty:
        return None
    steps = alloc["step"].unique()
    dur = (alloc["end"] - alloc["start"]).groupby(alloc["step"]).sum()
    return Finding(
        "alloc-in-step",
        "blocker",
        int(len(steps)),
        _examples(steps),
        f"{len(steps)} of {max(len(ctx.steady), 1)} steady steps allocate or free memory ({_names(alloc)}); "
        f"p50 {_us(float(dur.median()))} per step in those calls",
        "Allocate before capture and reuse the buffers (static inputs/outputs), or use cudaMallocAsync/"
        "cudaFreeAsync, which a graph can hold as memory nodes. In PyTorch, keep tensors alive across steps "
        "(torch.cuda.graph uses a private memory pool).",
        {"alloc_steps": int(len(steps)), "alloc_call_ns_p50": float(dur.median())},
    )


def _multi_config_names(ctx: StepContext) -> int:
    """How many kernel names of ``ctx.kernels`` run with more than one launch
    configuration (name, grid, block); computed once per context."""

    def count() -> int:
        k = ctx.kernels
        if k.empty:
            return 0
        grid_block = [k[c].to_numpy() for c in CONFIG if c != "name_id"]
        if all(v.dtype.kind in "iu" and v.min() == v.max() for v in grid_block):
            return 0  # one grid and block size for every kernel
        codes = row_codes([k[c].to_numpy() for c in CONFIG])
        # Codes number distinct rows by first appearance: a row is a configuration's first
        # when its code exceeds every code before it.
        first = np.ones(codes.size, dtype=bool)
        first[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
        per_name = np.unique(k["name_id"].to_numpy()[first], return_counts=True)[1]
        return int((per_name > 1).sum())

    return int(ctx.cached("multi_config_names", count))


def _common_config_varies(ctx: StepContext) -> bool:
    """True when most kernel names that run in every steady step (more than half of
    them) change their launch configuration between steps (the largest grid, or the
    block, differs): the input's shape changed, whatever else changed with it (cuBLAS
    picks other GEMM kernels for other sizes, so the kernel count varies too). A
    data-dependent branch runs other kernels, but most kernels every path shares keep
    their configurations. Computed once per context."""

    def varies() -> bool:
        k = ctx.kernels
        n_steps = int(k["step"].nunique()) if len(k) else 0
        if n_steps < 2:
            return False
        grid = (
            k["grid_x"].to_numpy(dtype=np.int64)
            * k["grid_y"].to_numpy(dtype=np.int64)
            * k["grid_z"].to_numpy(dtype=np.int64)
        )
        block = (
            k["block_x"].to_numpy(dtype=np.int64)
            * k["block_y"].to_numpy(dtype=np.int64)
            * k["block_z"].to_numpy(dtype=np.int64)
        )
        per = pd.DataFrame({"step": k["step"].to_numpy(), "name": k["name_id"].to_numpy(), "g": grid, "b": block})
        sig = per.groupby(["name", "step"], sort=False).agg(g=("g", "max"), b=("b", "max"))
        by_name = sig.groupby(level="name").agg(steps=("g", "size"), g=("g", "nunique"), b=("b", "nunique"))
        common = by_name.loc[by_name["steps"] == n_steps]
        return bool(len(common)) and bool(((common["g"] > 1) | (common["b"] > 1)).mean() > 0.5)

    return bool(ctx.cached("common_config_varies", varies))


def _grows(size: pd.Series) -> bool:
    """True when a per-step size grows step after step (at least 90 % of consecutive
    steps do not shrink, and it takes at least half as many values as there are steps):
    a buffer appended to every step, such as a KV cache extended with ``cat``."""
    v = size.to_numpy()
    if v.size < 4:
        return False
    return bool(np.mean(np.diff(v) >= 0) >= 0.9 and np.unique(v).size >= v.size / 2)


def _step_sizes(ctx: StepContext) -> np.ndarray:
    """Kernels per steady step, in step order (``ctx.kernels.groupby("step").size()``); by
    run lengths (the kernels are sorted by step); computed once per context."""
    return ctx.cached("step_sizes", lambda: _run_lengths(ctx.kernels))  # type: ignore[no-any-return]


def _run_lengths(k: pd.DataFrame) -> np.ndarray:
    steps = k["step"].to_numpy()
    if steps.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not (np.diff(steps) >= 0).all():
        return k.groupby("step").size().to_numpy()
    bounds = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    return np.diff(np.r_[0, bounds, steps.size])


def _signatures(kernels: pd.DataFrame, what: str = "both") -> tuple[pd.Series, pd.Series]:
    """Per step: the kernel name sequence and the (name, grid, block) sequence, each as
    one hashable ``bytes`` value (the step's slice of the factorized codes). ``what``:
    ``"names"`` or ``"shapes"`` computes only that one (the other is empty)."""
    steps = kernels["step"].to_numpy()
    start = kernels["start"].to_numpy()
    d_step = np.diff(steps)
    if not ((d_step > 0) | ((d_step == 0) & (np.diff(start) >= 0))).all():
        kernels = kernels.sort_values(["step", "start"], kind="stable")
        steps = kernels["step"].to_numpy()
    bounds = np.flatnonzero(steps[1:] != steps[:-1]) + 1
    index = pd.Index(steps[np.r_[0, bounds]] if steps.size else [], name="step")
    edges = (np.r_[0, bounds, steps.size] * 8).tolist()

    lengths = np.diff(np.r_[0, bounds, steps.size])
    same_length = bool(steps.size) and bool((lengths == lengths[0]).all())

    def per_step(codes: np.ndarray) -> pd.Series:
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        if same_length:  # one fixed-size bytes value per row of a (steps, length) array
            rows = codes.reshape(-1, int(lengths[0])).view(np.dtype((np.void, 8 * int(lengths[0])))).ravel()
            return pd.Series(rows.tolist(), index=index, dtype=object)
        buf = codes.tobytes()
        pairs = zip(edges[:-1], edges[1:], strict=True) if steps.size else iter(())
        return pd.Series([buf[a:b] for a, b in pairs], index=index, dtype=object)

    empty = pd.Series([], dtype=object)
    names = per_step(pd.factorize(kernels["name_id"])[0]) if what != "shapes" else empty
    shapes = per_step(row_codes([kernels[c].to_numpy() for c in CONFIG])) if what != "names" else empty
    return names, shapes


def _next_pow2(x: np.ndarray) -> np.ndarray:
    return np.power(2, np.ceil(np.log2(np.maximum(x, 1)))).astype(np.int64)


def dynamic_shapes(ctx: StepContext, analysis: Analysis) -> Finding | None:
    """The same kernel with changing grid/block sizes across steady steps: count the
    distinct step shapes and propose power-of-two buckets of the most varying grid size
    with their padding cost (extra work, assuming kernel time proportional to grid size).
    Also when the kernel count varies, if a kernel of every step changes its configuration
    (:func:`_common_config_varies`: the shape is the cause). A size that grows step after
    step (:func:`_grows`) is a growing buffer: the fix is a static buffer, not buckets."""
    k = ctx.kernels
    if k.empty or ctx.steady["step"].nunique() < 2:
        return None
    varying = _multi_config_names(ctx)
    if not varying or (_count_varies(ctx) and not _common_config_varies(ctx)):
        return None
    _, shapes = _signatures(k, "shapes")
    distinct = int(shapes.nunique())
    if distinct <= 1:
        # Every step launches the same configurations (a kernel reused with several grid
        # sizes inside one step is not a shape change between steps).
        return None
    usual = shapes.value_counts().iloc[0]
    # The kernel whose grid size takes the most values; its per-step size (largest launch).
    grid = k["grid_x"] * k["grid_y"] * k["grid_z"]
    sizes_per_name = grid.groupby(k["name_id"]).nunique()
    name = int(sizes_per_name.idxmax())
    size = grid.loc[k["name_id"] == name].groupby(k.loc[k["name_id"] == name, "step"]).max()
    bucket = _next_pow2(size.to_numpy())
    padding = float((bucket - size.to_numpy()).sum() / max(size.to_numpy().sum(), 1))
    buckets = pd.Series(bucket).value_counts().sort_index()
    odd_steps = shapes.index[shapes != shapes.value_counts().index[0]]
    kname = analysis.trace.string(name)
    bucket_text = ", ".join(f"{int(b)} ({int(n)} steps)" for b, n in buckets.items())
    # Shapes that vary between graph launches: a pool of graphs is already in place.
    pooled = bool(k["graph_node_id"].notna().mean() > 0.5)
    growing = _grows(size)
    if growing:
        fix = (
            f"{kname}'s grid grows step after step: a buffer grows every step (a dynamic KV cache extended with "
            "cat, a list of outputs). Preallocate it at its largest size and write each step's slice in place "
            "(a static cache: index_copy_ or slice assignment; Hugging Face generate(): "
            "cache_implementation='static'), so every step has one shape and one graph serves all; buckets of a "
            "growing buffer would need a graph per size."
        )
    elif pooled:
        fix = (
            "The shapes vary between graph launches: a pool of graphs is in place; keep the number of buckets small "
            "(each costs an instantiation and memory)."
        )
    else:
        fix = (
            f"A graph freezes launch configurations: capture one graph per shape bucket ({len(buckets)} graphs "
            "for the buckets above), pad the inputs up to the bucket size, and pick the graph by size each step "
            "(a pool of graphs keyed by bucket); shapes outside the buckets run eagerly."
        )
    return Finding(
        "dynamic-shapes",
        "info" if pooled else "blocker",
        int(len(shapes) - usual),
        _examples(odd_steps),
        f"{distinct} distinct step shapes over {len(shapes)} steady steps ({varying} kernels change their "
        f"grid/block sizes); {kname} runs with {int(size.nunique())} grid sizes from {int(size.min())} to "
        f"{int(size.max())} blocks. Power-of-two buckets: {bucket_text}; padding every step up to its bucket "
        f"costs about {padding:.1%} extra GPU work",
        fix,
        {
            "growing": growing,
            "distinct_shapes": distinct,
            "varying_kernels": varying,
            "buckets": [int(b) for b in buckets.index],
            "bucket_steps": [int(n) for n in buckets.to_numpy()],
            "padding_ratio": padding,
        },
    )


def _count_varies(ctx: StepContext) -> bool:
    """True when fewer than DOMINANT_SHARE of the steps have the most common kernel count."""
    sizes = _step_sizes(ctx)
    if sizes.size == 0:
        return False
    most = np.unique(sizes, return_counts=True)[1].max()  # steps with the most common count
    return bool(most / sizes.size < DOMINANT_SHARE)


def _one_sequence(ctx: StepContext) -> bool:
    """True when every steady step runs the same kernels (names) in the same order: the
    steps' name sequences, one row each, all equal the first (the kernels are sorted by
    (step, start))."""
    sizes = _step_sizes(ctx)
    if sizes.size == 0 or not (sizes == sizes[0]).all():
        return False
    names = ctx.kernels["name_id"].to_numpy().reshape(sizes.size, int(sizes[0]))
    return bool((names == names[0]).all())


def varying_sequence(ctx: StepContext) -> Finding | None:
    """The kernel sequence differs between steady steps (data-dependent control flow):
    the kernel count per step varies while the kernels every step runs keep their launch
    configurations, or the kernel names differ while no kernel changes its launch
    configuration (else it is ``dynamic-shapes``)."""
    k = ctx.kernels
    if k.empty or _step_sizes(ctx).size < 2:
        return None
    if _multi_config_names(ctx) and (not _count_varies(ctx) or _common_config_varies(ctx)):
        return None  # shape changes explain it: dynamic-shapes
    if _one_sequence(ctx):
        return None
    names, _ = _signatures(k, "names")
    counts = names.value_counts()
    if len(counts) < 2:
        return None
    usual = counts.index[0]
    odd = names.index[names != usual]
    lengths = _step_sizes(ctx)
    share = float(counts.iloc[0] / len(names))
    return Finding(
        "varying-sequence",
        "blocker" if share < DOMINANT_SHARE else "warning",
        int(len(odd)),
        _examples(odd),
        f"{len(counts)} distinct kernel sequences over {len(names)} steady steps; the most common covers "
        f"{share:.0%} of them; kernels per step range {int(lengths.min())}..{int(lengths.max())}",
        "A graph replays one fixed sequence. Keep data-dependent branches outside the captured region, capture "
        "one graph per path and choose it on the host, or use conditional graph nodes (CUDA 12.4+).",
        {"distinct_sequences": int(len(counts)), "dominant_share": share},
    )


def reinstantiation(ctx: StepContext, analysis: Analysis) -> Finding | None:
    """Graphs captured, instantiated or updated about once per launch."""
    api = analysis.trace.api
    cls = api_classes(analysis.trace)  # once per trace
    mine = (api["pid"] == ctx.pid).to_numpy() if ctx.pid is not None else np.ones(len(api), dtype=bool)
    is_launch = cls["graph_launch"].to_numpy() & mine
    launches = int(is_launch.sum())
    inst = cls["instantiate"].to_numpy() & mine
    upd = cls["exec_update"].to_numpy() & mine
    rebuilt = int(inst.sum() + upd.sum())
    if launches < 2 or rebuilt / launches < REINSTANTIATE_RATIO:
        return None
    dur = (api["end"] - api["start"]).to_numpy()
    inst_p50 = float(np.median(dur[inst])) if inst.any() else 0.0
    upd_p50 = float(np.median(dur[upd])) if upd.any() else 0.0
    launch_p50 = float(np.median(dur[is_launch]))
    steady = ctx.steady
    hit = (
        steady.loc[(steady.get("instantiations", 0) > 0) | (steady.get("exec_updates", 0) > 0)]
        if len(steady)
        else steady
    )
    return Finding(
        "reinstantiation",
        "blocker",
        int(len(hit)),
        _examples(hit["step"]) if len(hit) else [],
        f"{_count(int(inst.sum()), 'instantiation')} and {_count(int(upd.sum()), 'exec update')} "
        f"for {_count(launches, 'graph launch', 'graph launches')} "
        f"({rebuilt / launches:.2f} per launch); cudaGraphInstantiate p50 {_us(inst_p50)}"
        + (f", cudaGraphExecUpdate p50 {_us(upd_p50)}" if upd.any() else "")
        + f", against a graph launch call of p50 {_us(launch_p50)}: the build cost is paid every step and never repaid",
        "Capture and instantiate once, outside the loop; feed new data by copying into the captured (static) "
        "buffers. When parameters must change, use cudaGraphExecUpdate (same topology) or "
        "cudaGraphExecKernelNodeSetParams instead of re-instantiating; keep one graph per shape bucket.",
        {
            "instantiations": int(inst.sum()),
            "exec_updates": int(upd.sum()),
            "graph_launches": launches,
            "instantiate_p50_ns": inst_p50,
        },
    )


def graph_trace_mode(ctx: StepContext, analysis: Analysis) -> Finding | None:
    """Graph launches traced as whole graphs (CUPTI_ACTIVITY_KIND_GRAPH_TRACE rows) without
    their kernels: per-node analysis is impossible."""
    graphs = analysis.trace.graph_execs
    if graphs.empty or analysis.launches.kernels_in_graphs > 0:
        return None
    n = int(len(graphs))
    steps = ctx.steady["step"] if len(ctx.steady) else pd.Series(dtype=int)
    return Finding(
        "graph-trace-mode",
        "warning",
        int(len(steps)),
        _examples(steps),
        f"{n} graph executions were recorded as whole graphs (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) and no kernel "
        "of any graph was recorded: nodes per graph, gaps between nodes and kernel durations are unknown",
        "Record again with nodes traced: nsys profile --cuda-graph-trace=node (nsys's default is graph-level "
        "tracing, which costs less but hides the kernels).",
        {"graph_executions": n},
    )


NULL_STREAM_FLAG = 3  # nsys ENUM_CUPTI_STREAM_TYPE: CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL


def _legacy_streams(analysis: Analysis, pid: int | None) -> tuple[set[int], str]:
    """The legacy default stream ids of ``pid``: from TARGET_INFO_CUDA_STREAM (flag NULL
    stream) when the export has it, else the stream of synchronous memset/memcpy calls,
    else :data:`LEGACY_STREAM_ID`."""
    info = analysis.trace.cuda_streams
    if len(info) and {"stream_id", "pid", "flag"} <= set(info.columns):
        flag = pd.to_numeric(info["flag"], errors="coerce")
        null = info.loc[(flag == NULL_STREAM_FLAG) & (pd.to_numeric(info["pid"], errors="coerce") == pid)]
        if len(null):
            ids = set(int(x) for x in pd.to_numeric(null["stream_id"], errors="coerce").dropna())
            return ids, "TARGET_INFO_CUDA_STREAM marks it the NULL stream"
    api = analysis.trace.api
    mine = api.loc[(api["pid"] == pid) & api["call"].isin(_NULL_STREAM_CALLS)]
    # Streams of the kernels and memops those calls submitted (joined on pid and
    # correlation id, one int64 key per pair).
    keys = corr_key(mine["pid"].to_numpy(), mine["correlation_id"].to_numpy())
    streams: set[int] = set()
    for frame in (analysis.trace.memops, analysis.trace.kernels):
        if len(frame) and keys.size:
            hit = np.isin(corr_key(frame["pid"].to_numpy(), frame["correlation_id"].to_numpy()), keys)
            streams.update(int(s) for s in np.unique(frame["stream_id"].to_numpy()[hit]))
    if streams:
        return streams, "the stream that synchronous cudaMemset/cudaMemcpy calls use"
    return {LEGACY_STREAM_ID}, "the id nsys gives the legacy default stream"


def legacy_stream(ctx: StepContext, analysis: Analysis, framework: str) -> Finding | None:
    """Per-launch kernels of steady steps on the legacy default stream, which stream
    capture cannot use (capture needs a created stream)."""
    k = ctx.kernels
    if k.empty:
        return None
    per_launch = k["graph_node_id"].isna().to_numpy()
    if not per_launch.any():
        return None
    streams, how = _legacy_streams(analysis, ctx.pid)
    on = per_launch & np.isin(k["stream_id"].to_numpy(), list(streams))
    if not on.any():
        return None
    steps = np.unique(k["step"].to_numpy()[on])
    n_on, n_per_launch = int(on.sum()), int(per_launch.sum())
    share = n_on / n_per_launch
    torch = framework == "pytorch"
    return Finding(
        "legacy-stream",
        "warning" if torch else "blocker",
        int(len(steps)),
        _examples(steps),
        f"{n_on} of {n_per_launch} kernels of the steady steps ({share:.0%}) run on the legacy default "
        f"stream (stream {', '.join(map(str, sorted(streams)))}: {how})",
        (
            "torch.cuda.graph captures on its own side stream, so this is handled for you; warm up on a side "
            "stream before capture (torch.cuda.Stream + wait_stream) as in the code below."
            if torch
            else "Stream capture does not work on the legacy default stream: create a stream (cudaStreamCreate"
            "WithFlags(&s, cudaStreamNonBlocking)), launch the step's work on it and capture that stream."
        ),
        {"kernels_on_legacy": n_on, "share": share, "streams": sorted(streams)},
    )


def profiler_overhead(
    ctx: StepContext,
    values: Mapping[str, float],
    unprofiled_graph_step_ns: float | None,
    expected: tuple[float, float] | None = None,
) -> Finding | None:
    """Launch calls inflated under the profiler: each launch call of a step is taken to
    last ``profiler_launch_overhead_ns`` longer than without nsys (a calibration's
    ``profiler.launch_overhead_ns``, measured by ``launchprof calibrate --profiler``, or
    the default: 2.76 us per launch, docs/metrics.md, "Launch overhead and the
    profiler"). The unprofiled per-launch step = step period - launch calls per step x
    that overhead; against ``unprofiled_graph_step_ns`` (the graph step predicted
    without the profiler, :func:`launchprof.analysis.predict.unprofiled_values`) it
    gives ``unprofiled_speedup``. Reported when the overhead is at least
    :data:`PROFILER_SHARE_MIN` of the step period.

    ``expected``: ``(eager_step_ns, graph_step_ns)`` of the recommendation's expectation
    (:mod:`launchprof.analysis.expect`, which counts every traced call and, for PyTorch,
    the inflated dispatch between them); when given, the unprofiled step and speedup are
    those, so the finding and the headline agree."""
    steady = ctx.steady
    if steady.empty or "launch_calls" not in steady or float(steady["launch_calls"].median()) < 1:
        return None
    launches = float(steady["launch_calls"].median())
    period = float(steady["period_ns"].median())
    if ctx.call_classes is None:
        return None
    rows = ctx.call_mask & ctx.call_classes["launch"].to_numpy()  # launch calls of steady steps
    if not math.isfinite(period) or period <= 0 or not rows.any():
        return None
    call_ns = ctx.api["end"].to_numpy()[rows]
    call_ns -= ctx.api["start"].to_numpy()[rows]
    call_p50 = float(np.median(call_ns, overwrite_input=True))  # a new array: partitioned in place
    per_launch = min(values["profiler_launch_overhead_ns"], call_p50)
    overhead = launches * per_launch
    share = overhead / period
    if share < PROFILER_SHARE_MIN:
        return None
    evidence = (
        f"launch calls last p50 {_us(call_p50)} here, of which about {_us(per_launch)} is the profiler's own "
        f"cost; {launches:g} per step make about {_us(overhead)} ({min(share, 1.0):.0%}) of the {_us(period)} step"
    )
    figures: dict[str, Any] = {
        "launch_call_p50_ns": call_p50,
        "overhead_per_launch_ns": per_launch,
        "overhead_ns": overhead,
        "share": share,
    }
    unprofiled = period - overhead
    if expected is not None:
        unprofiled, unprofiled_graph_step_ns = expected
        overhead = period - unprofiled
        figures.update({"overhead_ns": overhead, "share": overhead / period})
        evidence = (
            f"launch calls last p50 {_us(call_p50)} here; with every traced call and the dispatch between them "
            f"slowed by the profiler, about {_us(overhead)} ({min(overhead / period, 1.0):.0%}) of the "
            f"{_us(period)} step is the profiler's"
        )
    if unprofiled <= 0:
        evidence += " (more than the step period: steps overlap here, so the correction cannot be applied)"
    else:
        figures["unprofiled_step_ns"] = unprofiled
        evidence += f". Without the profiler the per-launch step would be about {_us(unprofiled)}"
        if unprofiled_graph_step_ns and unprofiled_graph_step_ns > 0 and unprofiled > unprofiled_graph_step_ns:
            figures["unprofiled_graph_step_ns"] = unprofiled_graph_step_ns
            figures["unprofiled_speedup"] = unprofiled / unprofiled_graph_step_ns
            evidence += (
                f" and a graph about {_us(unprofiled_graph_step_ns)}: {unprofiled / unprofiled_graph_step_ns:.1f}x "
                "instead"
            )
    return Finding(
        "profiler-overhead",
        "info",
        int(len(steady)),
        _examples(steady["step"]),
        evidence,
        "Expect less gain without the profiler (measured on an H200: a 75-kernel demo step gains 5.44x "
        "from a graph under nsys, 4.28x without). "
        "Time the loop without nsys, or run launchprof calibrate, to confirm.",
        figures,
    )


def _count(n: int, one: str, many: str | None = None) -> str:
    """``"1 instantiation"``, ``"2 instantiations"``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"
