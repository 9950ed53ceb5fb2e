"""Findings about what changes between steady steps: the launch configurations
(``dynamic-shapes``) and the kernel sequence (``varying-sequence``); both keep one CUDA
Graph from serving every step (docs/metrics.md, capture breakers).

Same contract as :mod:`launchprof.analysis.diagnosis.findings`: each finder takes a
:class:`~launchprof.analysis.stepdata.StepContext` (steady-state steps only) and returns
a :class:`~launchprof.analysis.diagnosis.findings.Finding` or None. A step whose kernels change
their configuration is ``dynamic-shapes``; one whose kernels differ while none changes
its configuration is ``varying-sequence``; never both for one cause.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import row_codes
from launchprof.analysis.diagnosis.findings import Finding, Severity, example_steps
from launchprof.analysis.stepdata import StepContext
from launchprof.analysis.timeline.core import Analysis

# A launch configuration: the kernel's name and its grid and block sizes.
CONFIG = ("name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
# A sequence or shape variant must cover at least this share of the steady steps to be
# the "usual" one; the rest are variants.
DOMINANT_SHARE = 0.9


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


GROW_RUN = 16  # steps of one sequence at least: decode loops generate tens to thousands of tokens


def _grows(size: pd.Series) -> bool:
    """True when a per-step size grows step after step (at least 90 % of consecutive
    steps do not shrink, and it takes at least half as many values as there are steps):
    a buffer appended to every step, such as a KV cache extended with ``cat``; or when it
    grows and starts over (:func:`_grows_and_restarts`: a KV cache per sequence)."""
    v = size.to_numpy()
    if v.size < 4:
        return False
    if np.mean(np.diff(v) >= 0) >= 0.9 and np.unique(v).size >= v.size / 2:
        return True
    return _grows_and_restarts(v)


def _grows_and_restarts(v: np.ndarray) -> bool:
    """True when the sizes climb slowly and may start over: cut where the size drops,
    the runs of at least ``GROW_RUN`` steps hold at least 80 % of the steps, there is at
    most one run per ``GROW_RUN`` steps, and each run climbs through at least 3 sizes, on
    average a new one at least every 8 steps, by increments whose median is at most a
    quarter of the run's range. A KV cache grown with ``cat`` over each ``generate()``
    call has this shape (tests/data/frameworks: llama_b1_eager, one call, the copy
    kernel's grid 8 -> 24 blocks in steps of 2 over 31 steps; llama_b1_eager_calls4_rec2,
    the same over each of 4 calls); a batch size that varies step to step, a sweep of a
    few sizes held for several steps each, or batches of 8 sorted by length do not (test_findings)."""
    cuts = np.flatnonzero(np.diff(v) < 0) + 1
    if cuts.size + 1 > v.size / GROW_RUN:
        return False
    runs = [r for r in np.split(v, cuts) if r.size >= GROW_RUN]
    if not runs or sum(r.size for r in runs) < 0.8 * v.size:
        return False
    for r in runs:
        steps = np.diff(r)
        rises = steps[steps > 0]
        sizes = np.unique(r).size
        if sizes < max(3, r.size / 8) or float(np.median(rises)) > 0.25 * float(r.max() - r.min()):
            return False
    return True


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


def _shapes_fix(kernel: str, growing: bool, pooled: bool, n_buckets: int) -> str:
    """The ``dynamic-shapes`` fix: a static buffer for a size that grows step after step
    (``growing``), a small pool for graphs already pooled (``pooled``: most kernels are
    graph nodes), else one graph per power-of-two bucket (``n_buckets`` graphs)."""
    if growing:
        return (
            f"{kernel}'s grid grows step after step (where it drops back, a new sequence starts): a buffer "
            "grows every step (a dynamic KV cache extended with cat, a list of outputs). Preallocate it at its "
            "largest size and write each step's slice in place (a static cache: index_copy_ or slice assignment; "
            "Hugging Face generate(): cache_implementation='static'), so every step has one shape and one graph "
            "serves all; buckets of a growing buffer would need a graph per size."
        )
    if pooled:
        return (
            "The shapes vary between graph launches: a pool of graphs is in place; keep the number of buckets small "
            "(each costs an instantiation and memory)."
        )
    return (
        f"A graph freezes launch configurations: capture one graph per shape bucket ({n_buckets} graphs "
        "for the buckets above), pad the inputs up to the bucket size, and pick the graph by size each step "
        "(a pool of graphs keyed by bucket); shapes outside the buckets run eagerly."
    )


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
    # int64: the columns may be int32, and a grid of 2**31 - 1 x 65535 blocks overflows it.
    grid = k["grid_x"].astype(np.int64) * k["grid_y"].astype(np.int64) * k["grid_z"].astype(np.int64)
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
    fix = _shapes_fix(kname, growing, pooled, len(buckets))
    return Finding(
        "dynamic-shapes",
        Severity.INFO if pooled else Severity.BLOCKER,
        int(len(shapes) - usual),
        example_steps(odd_steps),
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
        Severity.BLOCKER if share < DOMINANT_SHARE else Severity.WARNING,
        int(len(odd)),
        example_steps(odd),
        f"{len(counts)} distinct kernel sequences over {len(names)} steady steps; the most common covers "
        f"{share:.0%} of them; kernels per step range {int(lengths.min())}..{int(lengths.max())}",
        "A graph replays one fixed sequence. Keep data-dependent branches outside the captured region, capture "
        "one graph per path and choose it on the host, or use conditional graph nodes (CUDA 12.4+).",
        {"distinct_sequences": int(len(counts)), "dominant_share": share},
    )
