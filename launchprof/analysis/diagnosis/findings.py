"""Findings: what stands in the way of a CUDA Graph, or skews the numbers (the
capture breakers of docs/metrics.md, and the places where graphs do not pay).

Each finder takes a :class:`~launchprof.analysis.stepdata.StepContext` (steady-state
steps only, so warm-up allocations and one-off syncs do not count) and returns a
:class:`Finding` or None; :data:`launchprof.analysis.diagnosis.finders.FINDING_KINDS` lists every
finder, one line a kind, and the diagnosis runs them from there. Severities
(:class:`Severity`): ``blocker`` (breaks capture or defeats the graph: fix it before
converting), ``warning`` (the analysis or the conversion needs care), ``info`` (context
for the numbers).

The findings about what changes between steps (``dynamic-shapes``, ``varying-sequence``)
are in :mod:`launchprof.analysis.diagnosis.stepshapes`, those about the host around a graph replay
(``host-outside-graph``) in :mod:`launchprof.analysis.diagnosis.hostwork`; both use :class:`Finding`
and :func:`example_steps` from here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.prediction.captureregion import CYCLE_LAUNCH_SHARE
from launchprof.analysis.prediction.expect import Expectation
from launchprof.analysis.stepdata import StepContext
from launchprof.analysis.timeline.callkinds import api_classes
from launchprof.analysis.timeline.core import Analysis
from launchprof.analysis.timeline.gaps import corr_key
from launchprof.text import us_text

MAX_EXAMPLES = 10
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


class Severity(StrEnum):
    """How much a finding matters, most first: ``blocker`` (breaks capture or defeats the
    graph: fix it before converting), ``warning`` (the analysis or the conversion needs
    care), ``info`` (context for the numbers). Written as its text in summary.json."""

    BLOCKER = "blocker"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 for a blocker, 1 for a warning, 2 for info: the order findings are listed in."""
        return list(Severity).index(self)


@dataclass(frozen=True)
class Finding:
    """One finding.

    Attributes:
        kind: one of :data:`launchprof.analysis.diagnosis.finders.FINDING_KINDS`: ``sync-in-step``,
            ``alloc-in-step``, ``reinstantiation``, ``graph-trace-mode``,
            ``legacy-stream``, ``profiler-overhead`` (this module), ``dynamic-shapes``,
            ``varying-sequence`` (:mod:`launchprof.analysis.diagnosis.stepshapes`),
            ``host-outside-graph`` (:mod:`launchprof.analysis.diagnosis.hostwork`) or
            ``cudagraph-skip`` (:mod:`launchprof.analysis.diagnosis.sources`).
        severity: a :class:`Severity` (``blocker``, ``warning`` or ``info``).
        steps_affected: number of steady-state steps that show it.
        steps: up to 10 example step indices.
        evidence: what the trace shows, with numbers and units.
        fix: what to do.
        figures: the numbers behind the evidence (ns, counts), by name.
        where: for ``sync-in-step``, the source lines of the synchronizing calls
            (:func:`launchprof.analysis.diagnosis.sources.sync_sites`: ``file``, ``line``,
            ``function``, ``library``, ``via``, ``share``, ``per_step``); ``where_note``:
            one line why there are none (not collected, or none met).
    """

    kind: str
    severity: Severity
    steps_affected: int
    steps: list[int]
    evidence: str
    fix: str
    figures: dict[str, Any] = field(default_factory=dict)
    where: list[dict[str, Any]] = field(default_factory=list)
    where_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "steps_affected": self.steps_affected,
            "steps": list(self.steps),
            "evidence": self.evidence,
            "fix": self.fix,
            "figures": dict(self.figures),
            "where": [dict(w) for w in self.where],
            "where_note": self.where_note,
        }


def example_steps(steps: pd.Series | np.ndarray) -> list[int]:
    """The first :data:`MAX_EXAMPLES` distinct step indices of ``steps``, ascending (a
    finding's ``steps``)."""
    return [int(s) for s in np.unique(np.asarray(steps))[:MAX_EXAMPLES]]


def _names(calls: pd.DataFrame) -> str:
    counts = calls["call"].value_counts()
    return ", ".join(f"{name} x{int(n)}" for name, n in counts.items())


def sync_in_step(ctx: StepContext) -> Finding | None:
    """Synchronizing calls inside steady steps (stream/device/event synchronize,
    synchronous copies), and device-to-host copies followed by one (``.item()``).

    A blocker when the syncs cut the step's launches apart, or when a step found from the
    kernels alone has fewer than two (where one sits in the loop body cannot be told); a
    warning when one stretch of launches without a sync holds at least
    :data:`~launchprof.analysis.prediction.captureregion.CYCLE_LAUNCH_SHARE` of them (median over steps,
    :func:`_region_launch_share`; the share that defines a capture region in
    :func:`~launchprof.analysis.prediction.captureregion.capture_region`): the syncs lie before or after
    the region a capture holds (a decode loop's stopping check after the forward, an
    ``.item()`` at the end of the step), so the capture does not fail; they still drain
    the GPU once a step."""
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
        f"p50 {float(per_step.median()):g} per step, CPU blocked p50 {us_text(float(blocked.median()))} per step"
    )
    if d2h_steps:
        evidence += (
            f"; {len(d2h_steps)} of them copy device-to-host and wait for it (what .item(), .cpu() or "
            "print(tensor) produce)"
        )
    wait = ctx.steady["sync_wait_ns"] if "sync_wait_ns" in ctx.steady else pd.Series(dtype=float)
    if len(wait) and wait.median() > 0:
        evidence += f"; GPU idle after the sync p50 {us_text(float(wait.median()))} per step"
    share = _region_launch_share(ctx)
    # Steps found from the kernels start where the phase fell: one sync a cycle always
    # leaves one whole cycle between syncs, wherever it sits in the user's loop body.
    placed = ctx.steps.source != "inferred" or float(per_step.median()) >= 2
    outside = share is not None and share >= CYCLE_LAUNCH_SHARE and placed
    if share is not None:
        evidence += f"; {share:.1%} of a step's launches run in one stretch without a sync (p50)"
        if ctx.steps.source == "inferred":
            evidence += " (steps found from the kernels: a stretch may run on into the next step)"
    return Finding(
        "sync-in-step",
        Severity.WARNING if outside else Severity.BLOCKER,
        int(len(steps)),
        example_steps(steps),
        evidence,
        (
            "Not a blocker: the syncs come before or after the stretch of launches a graph would hold (a decode "
            "loop's stopping check after the forward, an .item() at the end of the step); capture that stretch "
            "and keep the sync outside the graph. It still drains the GPU once a step: if it only checks a value "
            "(a stopping condition, a loss to print), check every k steps so the CPU can run ahead."
            if outside
            else "A synchronizing call cannot be captured (capture fails) and drains the GPU every step. Keep "
            "results on the GPU (no .item()/.cpu() inside the step; check values every k steps, outside the "
            "captured region), use cudaMemcpyAsync into pinned memory and synchronize once after the loop."
        ),
        {
            "sync_calls_p50": float(per_step.median()),
            "blocked_p50_ns": float(blocked.median()),
            "d2h_steps": len(d2h_steps),
            "region_launch_share": share,
        },
    )


def _region_launch_share(ctx: StepContext) -> float | None:
    """The median over steady steps of the share of a step's kernel launches in its
    longest stretch without a synchronizing call; None without launches. Stretches are
    cut after each sync and, for steps the user marked (NVTX, graph launches), at the
    step's edges: the user's loop body. A step found from the kernels alone may start
    anywhere in the cycle, so there a stretch runs on into the next step (as
    :func:`~launchprof.analysis.prediction.captureregion.capture_region` takes it), which only tells where
    the syncs are when a step has two or more (:func:`sync_in_step`). Each stretch counts
    for the step of its first launch, at most all of that step's launches."""
    calls = ctx.calls
    if calls.empty or "launch" not in calls or not calls["launch"].any():
        return None
    calls = calls.sort_values("start", kind="stable")
    step = calls["step"].to_numpy()
    launch = calls["launch"].to_numpy(dtype=bool)
    cut = calls["sync"].to_numpy(dtype=bool)[:-1]
    if ctx.steps.source != "inferred":
        cut = cut | (step[1:] != step[:-1])
    stretch = np.cumsum(np.r_[False, cut])[launch]
    sizes = pd.Series(step[launch]).groupby(stretch).agg(["first", "size"])
    longest = sizes.groupby("first")["size"].max()
    per_step = pd.Series(step[launch]).value_counts()
    share = (longest / per_step.reindex(longest.index)).clip(upper=1.0)
    share = share.reindex(ctx.steady["step"].to_numpy()).dropna()
    return float(share.median()) if len(share) else None


def alloc_in_step(ctx: StepContext) -> Finding | None:
    """cudaMalloc/cudaFree/cudaHostAlloc (and driver equivalents) inside steady steps."""
    alloc = ctx.calls_where("alloc")
    if alloc.empty:
        return None
    steps = alloc["step"].unique()
    dur = (alloc["end"] - alloc["start"]).groupby(alloc["step"]).sum()
    return Finding(
        "alloc-in-step",
        Severity.BLOCKER,
        int(len(steps)),
        example_steps(steps),
        f"{len(steps)} of {max(len(ctx.steady), 1)} steady steps allocate or free memory ({_names(alloc)}); "
        f"p50 {us_text(float(dur.median()))} per step in those calls",
        "Allocate before capture and reuse the buffers (static inputs/outputs), or use cudaMallocAsync/"
        "cudaFreeAsync, which a graph can hold as memory nodes. In PyTorch, keep tensors alive across steps "
        "(torch.cuda.graph uses a private memory pool).",
        {"alloc_steps": int(len(steps)), "alloc_call_ns_p50": float(dur.median())},
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
        Severity.BLOCKER,
        int(len(hit)),
        example_steps(hit["step"]) if len(hit) else [],
        f"{_count(int(inst.sum()), 'instantiation')} and {_count(int(upd.sum()), 'exec update')} "
        f"for {_count(launches, 'graph launch', 'graph launches')} "
        f"({rebuilt / launches:.2f} per launch); cudaGraphInstantiate p50 {us_text(inst_p50)}"
        + (f", cudaGraphExecUpdate p50 {us_text(upd_p50)}" if upd.any() else "")
        + f", against a graph launch call of p50 {us_text(launch_p50)}: the build cost is paid every step and never "
        "repaid",
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
        Severity.WARNING,
        int(len(steps)),
        example_steps(steps),
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
        Severity.INFO if torch else Severity.BLOCKER,  # PyTorch's capture moves to a side stream: nothing to change
        int(len(steps)),
        example_steps(steps),
        f"{n_on} of {n_per_launch} kernels of the steady steps ({share:.0%}) run on the legacy default "
        f"stream (stream {', '.join(map(str, sorted(streams)))}: {how})",
        (
            "Nothing to change for the stream: torch.cuda.graph captures on a side stream of its own. When "
            "converting, warm up on a side stream before capture (torch.cuda.Stream + wait_stream), as in the "
            "code below."
            if torch
            else "Stream capture does not work on the legacy default stream: create a stream (cudaStreamCreate"
            "WithFlags(&s, cudaStreamNonBlocking)), launch the step's work on it and capture that stream."
        ),
        {"kernels_on_legacy": n_on, "share": share, "streams": sorted(streams)},
    )


def _launch_calls(ctx: StepContext) -> tuple[float, float, float] | None:
    """Launch calls per steady step (p50), the step period (p50, ns) and the duration of
    a launch call of the steady steps (p50, ns); None without steady steps, launch calls
    or a positive finite period."""
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
    return launches, period, float(np.median(call_ns, overwrite_input=True))  # a new array: partitioned in place


def profiler_overhead(
    ctx: StepContext,
    values: Mapping[str, float],
    expected: Expectation | None,
    unprofiled: Mapping[str, Any] | None = None,
) -> Finding | None:
    """Launch calls inflated under the profiler: each launch call of a step is taken to
    last ``profiler_launch_overhead_ns`` longer than without nsys (a calibration's
    ``profiler.launch_overhead_ns``, measured by ``launchprof calibrate --profiler``, or
    the default: 2.76 us per launch, docs/metrics.md, "Launch overhead and the
    profiler"). Reported when that is at least :data:`PROFILER_SHARE_MIN` of the step
    period.

    The step without the profiler it quotes is the one prediction's, never its own:
    ``unprofiled`` (the recommendation's ``step_without_profiler``: measured or estimated,
    :mod:`launchprof.analysis.prediction.expect`) and, with an ``expected`` conversion, its graph
    step and speedup; without them the finding gives the launch calls' cost alone."""
    steady = ctx.steady
    launch_calls = _launch_calls(ctx)
    if launch_calls is None:
        return None
    launches, period, call_p50 = launch_calls
    per_launch = min(values["profiler_launch_overhead_ns"], call_p50)
    overhead = launches * per_launch
    share = overhead / period
    if share < PROFILER_SHARE_MIN:
        return None
    evidence = (
        f"launch calls last p50 {us_text(call_p50)} here, of which about {us_text(per_launch)} is the profiler's "
        f"own cost; {launches:g} per step make about {us_text(overhead)} ({min(share, 1.0):.0%}) of the "
        f"{us_text(period)} step"
    )
    figures: dict[str, Any] = {
        "launch_call_p50_ns": call_p50,
        "overhead_per_launch_ns": per_launch,
        "overhead_ns": overhead,
        "share": share,
    }
    measured = unprofiled is not None and unprofiled.get("source") == "measured"
    if unprofiled is not None:
        step = float(unprofiled["step_ns"])
        overhead = max(period - step, 0.0)
        figures.update({"overhead_ns": overhead, "share": overhead / period, "unprofiled_step_ns": step})
        how = "measured without nsys" if measured else "estimated"
        evidence = (
            f"launch calls last p50 {us_text(call_p50)} here; with every traced call and the dispatch between them "
            f"slowed by the profiler, about {us_text(overhead)} ({min(overhead / period, 1.0):.0%}) of the "
            f"{us_text(period)} step is the profiler's: the step is {us_text(step)} without it ({how})"
        )
        if expected is not None:
            figures["unprofiled_graph_step_ns"] = expected.graph_step_ns
            figures["unprofiled_speedup"] = expected.speedup
            evidence += (
                f", a graph's {us_text(expected.graph_step_ns)}: {expected.speedup:.2f}x (recommendation.expected)"
            )
    fix = (
        "The expected speedup uses the step measured without nsys."
        if measured
        else "Expect less gain without the profiler (measured on an H200: a 75-kernel demo step gains 5.44x "
        "from a graph under nsys, 4.28x without). Let launchprof profile time the loop without nsys (steps "
        "marked with launchprof.step()), or run launchprof calibrate, to confirm."
    )
    return Finding(
        "profiler-overhead", Severity.INFO, int(len(steady)), example_steps(steady["step"]), evidence, fix, figures
    )


def _count(n: int, one: str, many: str | None = None) -> str:
    """``"1 instantiation"``, ``"2 instantiations"``."""
    return f"{n} {one if n == 1 else (many or one + 's')}"
