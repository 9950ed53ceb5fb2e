"""Ranks: the processes of a multi-GPU job, each with its own steps, compared step by step.

A **rank** is one (device, process) pair with GPU activity. In one trace (a ``torchrun``
job profiled as a whole) ranks are numbered in order of device id, then pid; with the
usual ``torch.cuda.set_device(LOCAL_RANK)`` this is the local rank. Across many reports
(one trace per rank, :mod:`launchprof.commands.many`) they are numbered in the order of the
reports, then as above inside each report.

Communication: a kernel whose short name starts with ``nccl`` (:data:`COMM_PREFIX`) is
a collective or point-to-point transfer. Real names: ``ncclKernel_AllReduce_RING_LL_Sum_float``
(NCCL before 2.19), ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``, ``ncclDevKernel_Generic``,
``ncclDevKernel_SendRecv`` (NCCL 2.19 and later). A collective kernel occupies the GPU
while it waits for the slowest peer, so it counts as busy time; what the rank itself
spends on the step is the rest:

- ``comm_busy_ns``: the union of the rank's communication kernels;
- ``comm_exposed_ns``: busy - busy of the non-communication activity, i.e. time the
  GPU did nothing but communicate (communication overlapped with compute is not exposed);
- per step, ``work_ns`` = step period - exposed communication inside the step (>= 0):
  the part of the step the rank did not spend waiting in a collective. Without NCCL
  kernels it is the step period.

Cross-rank view (steps aligned by step index; clocks of different reports need not
agree, only durations are compared):

- aligned steps: step indices with a ``work_ns`` on at least two ranks and warm-up on
  none of them;
- straggler: a (step, rank) whose ``work_ns`` exceeds :data:`STRAGGLER_FACTOR` (1.25)
  times the median ``work_ns`` of that step across ranks. 1.25 is a heuristic, the same
  1.25x bar launchprof uses for a worthwhile speedup: in a synchronous job every rank
  waits for the slowest at the next collective, so a rank a quarter slower than the
  median costs the whole job a quarter of that step. With two ranks the median is their
  mean, so one rank must take 1.67x the other's time;
- slowest rank of a step: the rank with the largest ``work_ns`` (lowest rank on ties);
- a rank whose GPU waits for the CPU (``launch_bound`` in the records and summary.json,
  a name older than the verdict's meaning): steady host-wait ratio (host-wait idle / step
  period, summed over the rank's steady steps; the whole span's CPU-bound ratio when it
  has no steps) of at least :data:`LAUNCH_BOUND_RATIO` (0.2) under nsys: removing all CPU
  cost could then gain at least 1 / (1 - 0.2) = 1.25x, the bar launchprof's verdict uses.
  Whether a CUDA Graph is expected to pay (the verdict ``launch-bound``) is each rank's
  own verdict, which weighs the step without the profiler; the outputs do not call these
  ranks launch-bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import segment_cummax
from launchprof.analysis.steps import Steps, find_steps
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis
from launchprof.analysis.timeline.intervals import union
from launchprof.analysis.timeline.launches import GRAPH_LAUNCH_CALLS

COMM_PREFIX = "nccl"
STRAGGLER_FACTOR = 1.25
LAUNCH_BOUND_RATIO = 0.2
PER_STEP_COLUMNS = ["step", "warmup", "period_ns", "host_wait_ns", "comm_exposed_ns", "work_ns"]


@dataclass(frozen=True)
class RankRecord:
    """One rank's figures and per-step frame (small and picklable: no trace data).

    Attributes:
        label: ``"GPU d pid p"`` (prefixed with the report name across reports).
        path: the report the rank comes from (None inside one trace).
        device_id, pid, name: the device, the process and its name.
        figures: ``kernels``, ``span_ns``, ``busy_ns``, ``utilization``, ``host_wait_ns``,
            ``cpu_bound_ratio`` of the process on the device (ns, ratios 0..1), and
            ``comm_kernels``, ``comm_busy_ns``, ``comm_exposed_ns``, ``comm_ratio``
            (comm_busy / span).
        step_source, steps, warmup: how steps were found, their number, warm-up steps.
        per_step: one row per step, columns :data:`PER_STEP_COLUMNS` (ns; ``period_ns``
            and ``work_ns`` NaN for the last step).
    """

    label: str
    path: str | None
    device_id: int
    pid: int
    name: str | None
    figures: dict[str, Any]
    step_source: str
    steps: int
    warmup: int
    per_step: pd.DataFrame = field(repr=False)


def comm_kernel_ids(analysis: Analysis) -> np.ndarray:
    """StringIds ids of the kernel names that start with :data:`COMM_PREFIX` (NCCL)."""
    ids = pd.unique(analysis.trace.kernels["name_id"].dropna())
    names = np.array([analysis.trace.string(int(i)) for i in ids], dtype=object)
    return np.asarray(ids[np.char.startswith(names.astype(str), COMM_PREFIX)] if len(ids) else ids, dtype=np.int64)


def _comm_flags(analysis: Analysis, act: pd.DataFrame, comm_ids: np.ndarray) -> np.ndarray:
    """Whether each activity row is a communication kernel (joined to the kernels on
    start, end, stream and correlation id)."""
    if comm_ids.size == 0 or act.empty:
        return np.zeros(len(act), dtype=bool)
    keys = ["start", "end", "stream_id", "correlation_id", "pid", "device_id"]
    k = analysis.trace.kernels
    comm = k.loc[k["name_id"].isin(comm_ids), keys].drop_duplicates().assign(_comm=True)
    merged = act[keys].merge(comm, on=keys, how="left")
    return merged["_comm"].notna().to_numpy() & (act["kind"] == "kernel").to_numpy()


def busy_by_group(start: np.ndarray, end: np.ndarray, group: np.ndarray) -> pd.Series:
    """Length of the union of intervals ``[start, end)`` within each group (ns).

    The sweep of :mod:`launchprof.analysis.timeline.intervals` per group: sort by (group, start),
    running maximum of ends within the group, a new busy interval at each start beyond it.
    Returns a Series indexed by group (groups with no interval are absent), ascending.
    In numpy, as the pandas sort, grouped ``cummax``/``shift`` and sums it replaced (a
    start compared as float with the previous running end, as they did); those held
    ~0.2 GiB of temporaries per rank of the 10M-kernel trace (benchmarks/README.md).
    """
    if len(start) == 0:
        return pd.Series(dtype="int64")
    order = np.lexsort((end, start, group))  # stable, as sort_values(["g", "s", "e"])
    g, s = group[order], start[order]
    new_group = np.ones(g.size, dtype=bool)
    new_group[1:] = g[1:] != g[:-1]
    run_end = segment_cummax(end[order], np.cumsum(new_group) - 1)
    del order
    # A new busy interval where the group starts or the start is beyond the previous run end.
    new_seg = new_group.copy()
    new_seg[1:] |= s[1:] > run_end[:-1].astype(np.float64)
    first = np.flatnonzero(new_seg)
    last = np.append(first[1:] - 1, g.size - 1)
    lengths = run_end[last] - s[first]  # the running end is the largest at the interval's last row
    groups, at = np.unique(g[first], return_index=True)  # the intervals of a group lie together
    sums = np.add.reduceat(lengths.astype(np.int64), at) if at.size else np.zeros(0, dtype=np.int64)
    return pd.Series(sums.astype(np.int64), index=pd.Index(groups, name="g"))


def _per_step(steps: Steps, act: pd.DataFrame, is_comm: np.ndarray) -> pd.DataFrame:
    if steps.source == "none" or steps.table.empty:
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in PER_STEP_COLUMNS})
    step = steps.activity_step.reindex(act.index).fillna(-1).to_numpy(dtype=np.int64)
    inside = step >= 0
    s, e, g = act["start"].to_numpy()[inside], act["end"].to_numpy()[inside], step[inside]
    busy_all = busy_by_group(s, e, g)
    keep = ~is_comm[inside]
    busy_work = busy_by_group(s[keep], e[keep], g[keep])
    t = steps.table
    idx = pd.Index(t["step"].to_numpy())
    exposed = (busy_all.reindex(idx).fillna(0) - busy_work.reindex(idx).fillna(0)).to_numpy(dtype=np.int64)
    period = t["period_ns"].to_numpy(dtype="float64")
    return pd.DataFrame(
        {
            "step": t["step"].to_numpy(dtype=np.int64),
            "warmup": t["warmup"].to_numpy(dtype=bool),
            "period_ns": period,
            "host_wait_ns": t["host_wait_ns"].to_numpy(dtype=np.int64),
            "comm_exposed_ns": exposed,
            "work_ns": np.clip(period - exposed, 0, None),
        }
    )


def _rank_record(
    analysis: Analysis, device: DeviceAnalysis, pid: int, step_name: str | None, comm_ids: np.ndarray
) -> RankRecord:
    proc = next(p for p in device.processes if p.pid == pid)
    f = proc.figures
    # The steps first: their search makes its own copy of the rank's activity, not held
    # beside this one.
    steps = find_steps(analysis, step_name=step_name, device_id=device.device_id, pid=pid)
    act = device.activity.loc[device.activity["pid"] == pid]
    is_comm = _comm_flags(analysis, act, comm_ids)
    starts, ends = act["start"].to_numpy(), act["end"].to_numpy()
    comm_busy = union(starts[is_comm], ends[is_comm]).busy_ns
    work_busy = union(starts[~is_comm], ends[~is_comm]).busy_ns
    per_step = _per_step(steps, act, is_comm)
    if len(device.processes) > 1:
        # A GPU shared by several processes: the report's steps are the whole device's
        # (api.traces._critical_rank), not this rank's; forgotten now rather than held
        # through the other ranks (found again if asked for).
        analysis.forget(lambda key, value: value is steps)
    figures = {
        "kernels": f.kernels,
        "span_ns": f.span_ns,
        "busy_ns": f.busy_ns,
        "utilization": f.utilization,
        "host_wait_ns": f.host_wait_ns,
        "cpu_bound_ratio": f.cpu_bound_ratio,
        "comm_kernels": int(is_comm.sum()),
        "comm_busy_ns": int(comm_busy),
        "comm_exposed_ns": int(f.busy_ns - work_busy),
        "comm_ratio": comm_busy / f.span_ns if f.span_ns else 0.0,
    }
    return RankRecord(
        label=f"GPU {device.device_id} pid {pid}",
        path=None,
        device_id=device.device_id,
        pid=pid,
        name=proc.name,
        figures=figures,
        step_source=steps.source,
        steps=steps.count,
        warmup=steps.warmup,
        per_step=per_step,
    )


def find_ranks(analysis: Analysis, step_name: str | None = None) -> list[RankRecord]:
    """One :class:`RankRecord` per (device, process) with GPU activity, in order of
    device id, then pid; each with its own steps (:func:`find_steps` with ``pid``).

    Raises:
        StepError: ``step_name`` names an NVTX range that is not in the trace.
    """
    comm_ids = comm_kernel_ids(analysis)
    return [
        _rank_record(analysis, d, p.pid, step_name, comm_ids)
        for d in sorted(analysis.devices, key=lambda d: d.device_id)
        for p in sorted(d.processes, key=lambda p: p.pid)
    ]


@dataclass(frozen=True)
class CrossRank:
    """The cross-rank view.

    Attributes:
        ranks: the records, in rank order (rank i is ``ranks[i]``).
        rows: one row per rank: ``rank``, ``label``, ``launch_bound`` (bool),
            ``steady_host_wait_ratio``, ``period_p50_ns``, ``work_p50_ns``,
            ``comm_exposed_p50_ns`` (steady steps), ``straggler_steps``, ``slowest_steps``.
        per_step: one row per aligned step: ``step``, ``ranks`` (with a value),
            ``median_work_ns``, ``max_work_ns``, ``slowest_rank``, ``stragglers``
            (number of straggler ranks).
        stragglers: one row per straggler (step, rank): ``step``, ``rank``, ``work_ns``,
            ``median_work_ns``, ``ratio``; worst ratio first.
    """

    ranks: list[RankRecord]
    rows: pd.DataFrame
    per_step: pd.DataFrame
    stragglers: pd.DataFrame

    @property
    def most_launch_bound(self) -> int | None:
        """The rank with the highest steady host-wait ratio (lowest rank on ties)."""
        r = self.rows["steady_host_wait_ratio"]
        return None if r.dropna().empty else int(self.rows.loc[r.idxmax(), "rank"])

    @property
    def critical(self) -> int | None:
        """The critical rank: the one slowest in the most aligned steps (it paces the job:
        the others wait for it in their collectives); the lowest rank on ties; None with
        fewer than two ranks or no aligned step."""
        if len(self.ranks) < 2 or self.per_step.empty:
            return None
        slowest = self.rows["slowest_steps"]
        if slowest.dropna().empty or not (slowest > 0).any():
            return None
        return int(self.rows.loc[slowest.idxmax(), "rank"])

    def to_dict(self, max_stragglers: int = 50) -> dict[str, Any]:
        """The ``ranks`` section of summary.json / combined.json (see README)."""
        ranks = []
        for rec, row in zip(self.ranks, self.rows.to_dict("records"), strict=True):
            ranks.append(
                {
                    "rank": int(row["rank"]),
                    "label": rec.label,
                    "path": rec.path,
                    "device_id": rec.device_id,
                    "pid": rec.pid,
                    "name": rec.name,
                    **rec.figures,
                    "step_source": rec.step_source,
                    "steps": rec.steps,
                    "warmup": rec.warmup,
                    "steady_host_wait_ratio": _num(row["steady_host_wait_ratio"]),
                    "launch_bound": bool(row["launch_bound"]),
                    "period_p50_ns": _num(row["period_p50_ns"]),
                    "work_p50_ns": _num(row["work_p50_ns"]),
                    "comm_exposed_p50_ns": _num(row["comm_exposed_p50_ns"]),
                    "straggler_steps": int(row["straggler_steps"]),
                    "slowest_steps": int(row["slowest_steps"]),
                }
            )
        ps = self.per_step
        worst = self.stragglers.head(max_stragglers)
        return {
            "count": len(self.ranks),
            "straggler_factor": STRAGGLER_FACTOR,
            "launch_bound_ratio": LAUNCH_BOUND_RATIO,
            "comm_prefix": COMM_PREFIX,
            "ranks": ranks,
            "launch_bound_ranks": [int(r) for r in self.rows.loc[self.rows["launch_bound"], "rank"]],
            "most_launch_bound_rank": self.most_launch_bound,
            "critical_rank": self.critical,
            "aligned_steps": int(len(ps)),
            "straggler_count": int(len(self.stragglers)),
            "stragglers": [
                {
                    "step": int(s["step"]),
                    "rank": int(s["rank"]),
                    "work_ns": float(s["work_ns"]),
                    "median_work_ns": float(s["median_work_ns"]),
                    "ratio": float(s["ratio"]),
                }
                for s in worst.to_dict("records")
            ],
            "per_step": {
                "step": [int(v) for v in ps["step"]],
                "slowest_rank": [int(v) for v in ps["slowest_rank"]],
                "median_work_ns": [float(v) for v in ps["median_work_ns"]],
                "max_work_ns": [float(v) for v in ps["max_work_ns"]],
                "stragglers": [int(v) for v in ps["stragglers"]],
            },
        }


def _num(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def cross_rank(ranks: Sequence[RankRecord]) -> CrossRank:
    """Compare ``ranks`` step by step (see the module docstring for the definitions).

    Args:
        ranks: records in rank order, from :func:`find_ranks` of one trace or of many.

    Returns:
        :class:`CrossRank`.
    """
    ranks = list(ranks)
    frames = [r.per_step.assign(rank=i) for i, r in enumerate(ranks) if len(r.per_step)]
    cols = PER_STEP_COLUMNS + ["rank"]
    long = pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
    long = long.astype({"step": "int64", "rank": "int64", "warmup": bool})
    work = long.pivot(index="step", columns="rank", values="work_ns").astype("float64")
    warm = long.pivot(index="step", columns="rank", values="warmup").fillna(False).astype(bool)
    aligned = (work.notna().sum(axis=1) >= 2) & ~warm.any(axis=1)
    work = work.loc[aligned]
    median = work.median(axis=1, skipna=True)
    ratio = work.div(median.where(median > 0), axis=0)
    is_straggler = ratio > STRAGGLER_FACTOR
    slowest = work.fillna(-np.inf).idxmax(axis=1) if len(work) else pd.Series(dtype="int64")
    per_step = pd.DataFrame(
        {
            "step": work.index.to_numpy(dtype=np.int64),
            "ranks": work.notna().sum(axis=1).to_numpy(dtype=np.int64),
            "median_work_ns": median.to_numpy(dtype="float64"),
            "max_work_ns": work.max(axis=1).to_numpy(dtype="float64"),
            "slowest_rank": slowest.to_numpy(dtype=np.int64),
            "stragglers": is_straggler.sum(axis=1).to_numpy(dtype=np.int64),
        }
    )
    st = is_straggler.stack()
    st = st[st]
    stragglers = pd.DataFrame(
        {
            "step": st.index.get_level_values(0).to_numpy(dtype=np.int64),
            "rank": st.index.get_level_values(1).to_numpy(dtype=np.int64),
        }
    )
    if len(stragglers):
        stragglers["work_ns"] = work.to_numpy()[work.index.get_indexer(stragglers["step"]), stragglers["rank"]]
        stragglers["median_work_ns"] = median.reindex(stragglers["step"]).to_numpy()
        stragglers["ratio"] = stragglers["work_ns"] / stragglers["median_work_ns"]
        stragglers = stragglers.sort_values(["ratio", "step", "rank"], ascending=[False, True, True], kind="stable")
    else:
        stragglers = stragglers.assign(work_ns=[], median_work_ns=[], ratio=[])
    rows = _rank_rows(ranks, is_straggler, slowest)
    return CrossRank(ranks, rows, per_step, stragglers.reset_index(drop=True))


def _rank_rows(ranks: list[RankRecord], is_straggler: pd.DataFrame, slowest: pd.Series) -> pd.DataFrame:
    out = []
    slow_counts = slowest.value_counts()
    for i, r in enumerate(ranks):
        t = r.per_step
        steady = t.loc[~t["warmup"].astype(bool) & t["period_ns"].notna()] if len(t) else t
        period_sum = float(steady["period_ns"].sum()) if len(steady) else 0.0
        if period_sum > 0:
            ratio = float(steady["host_wait_ns"].sum()) / period_sum
        else:
            ratio = float(r.figures["cpu_bound_ratio"])

        def p50(col: str, s: pd.DataFrame = steady) -> float | None:
            v = s[col].dropna().to_numpy(dtype=float) if len(s) else np.empty(0)
            return float(np.percentile(v, 50)) if v.size else None

        out.append(
            {
                "rank": i,
                "label": r.label,
                "steady_host_wait_ratio": min(ratio, 1.0),
                "launch_bound": ratio >= LAUNCH_BOUND_RATIO,
                "period_p50_ns": p50("period_ns"),
                "work_p50_ns": p50("work_ns"),
                "comm_exposed_p50_ns": p50("comm_exposed_ns"),
                "straggler_steps": int(is_straggler[i].sum()) if i in is_straggler.columns else 0,
                "slowest_steps": int(slow_counts.get(i, 0)),
            }
        )
    return pd.DataFrame(out)


def rank_view(analysis: Analysis, step_name: str | None = None) -> CrossRank | None:
    """The cross-rank view of one trace, or None when it has a single rank and no NCCL
    kernel (a single-GPU, single-process program: nothing to compare)."""
    pairs = sum(len(d.processes) for d in analysis.devices)
    if pairs == 0 or (pairs == 1 and comm_kernel_ids(analysis).size == 0):
        return None
    return cross_rank(find_ranks(analysis, step_name))


@dataclass(frozen=True)
class ProgramSignature:
    """What a trace's program is, to tell whether several traces are ranks of one job
    (:func:`not_one_job`): the names of the kernels it ran and whether it replays CUDA
    graphs (``cudaGraphLaunch`` calls, or kernels run as graph nodes). Small and picklable."""

    kernels: frozenset[str]
    replays_graphs: bool


def program_signature(analysis: Analysis) -> ProgramSignature:
    """The :class:`ProgramSignature` of an analysed trace."""
    trace = analysis.trace
    ids = pd.unique(trace.kernels["name_id"].dropna()) if len(trace.kernels) else []
    names = frozenset(str(trace.string(int(i))) for i in ids)
    # The distinct call names (a categorical's few dozen), not a text copy of every call.
    calls = (
        pd.Series(pd.unique(trace.api["call"]), dtype=object).astype(str) if len(trace.api) else pd.Series(dtype=str)
    )
    nodes = trace.kernels["graph_node_id"] if "graph_node_id" in trace.kernels else pd.Series(dtype=float)
    graphs = bool(calls.isin(GRAPH_LAUNCH_CALLS).any() or nodes.notna().any())
    return ProgramSignature(names, graphs)


# Ranks of one data- or tensor-parallel job run the same code: their kernel-name sets are
# nearly equal (the two DDP ranks of tests/data/gpu/ddp_mlp_x2: the same set). Below half in
# common (Jaccard index) they are different programs; a pipeline's stages share most names
# (the same layer kinds), so half leaves them room.
SAME_PROGRAM_MIN_SHARED = 0.5


def not_one_job(signatures: Sequence[tuple[str, ProgramSignature]]) -> list[str]:
    """Why traces (each ``(label, signature)``) do not look like the ranks of one job, one
    sentence per reason; empty when they do (or there is one). Each is held against the
    first: kernel names in common below :data:`SAME_PROGRAM_MIN_SHARED` (Jaccard index),
    or CUDA graphs replayed by some and not others."""
    if len(signatures) < 2:
        return []
    (first, ref), rest = signatures[0], signatures[1:]
    reasons = []
    different = []
    for label, sig in rest:
        union_ = ref.kernels | sig.kernels
        shared = len(ref.kernels & sig.kernels) / len(union_) if union_ else 1.0
        if shared < SAME_PROGRAM_MIN_SHARED:
            different.append(f"{label} ({shared:.0%})")
    if different:
        reasons.append(
            f"these traces do not look like ranks of one job: kernel names in common with {first}: "
            + ", ".join(different)
            + f" (ranks of one job run the same kernels; below {SAME_PROGRAM_MIN_SHARED:.0%} they are different "
            "programs): the per-trace reports stand, the job view (straggler, critical rank) may mean nothing"
        )
    replaying = [label for label, sig in signatures if sig.replays_graphs]
    if replaying and len(replaying) < len(signatures):
        reasons.append(
            f"these traces do not look like ranks of one job: {', '.join(replaying)} replay"
            f"{'s' if len(replaying) == 1 else ''} CUDA graphs, the others launch each kernel (a conversion's "
            "BEFORE and AFTER? compare them with launchprof compare): the per-trace reports stand, the job view may "
            "mean nothing"
        )
    return reasons
