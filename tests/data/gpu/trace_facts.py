"""Independent facts of the recorded traces, from plain sqlite3 (no launchprof code).

Usage:  python tests/data/gpu/trace_facts.py [TRACE.sqlite[.xz] ...] > facts.json

With no arguments it reads every ``*.sqlite.xz`` beside this file. For each trace it
prints counts and steady-state figures computed the simplest way, so tests can compare
launchprof's analysis against numbers obtained without it:

- ``api``: calls per CUDA API name, version suffix (``_v7000``) removed, for the names
  that matter (launches, graph life cycle, allocation, synchronization, copies).
- ``steps``: NVTX push/pop ranges whose text is ``step`` (in any domain).
- ``per_step``: GPU activities (kernels, memcpys, memsets, and whole-graph rows of
  ``--cuda-graph-trace=graph`` traces) assigned to a step when the
  CUDA API call that submitted them (same process, same correlation id) started on the
  step's thread inside the step's range; min/median/max over steps of kernels, and the
  number of distinct kernel-name sequences.
- ``steady``: over the steps after the first tenth: median step period (first GPU start
  of step k+1 minus that of step k), GPU busy time (union of activity intervals) over
  the span from the first of those steps' activities to the last one's end.
"""

from __future__ import annotations

import json
import lzma
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

API_OF_INTEREST = re.compile(
    r"^(cudaLaunchKernel|cuLaunchKernel|cuLaunchKernelEx|cudaGraphLaunch|cudaGraphInstantiate"
    r"|cudaGraphInstantiateWithFlags|cudaGraphInstantiateWithParams"
    r"|cudaGraphExecUpdate|cudaGraphExecDestroy|cudaStreamBeginCapture|cudaStreamEndCapture"
    r"|cudaGraphUpload|cudaMalloc|cudaFree|cudaMallocAsync|cudaFreeAsync|cudaStreamSynchronize"
    r"|cudaDeviceSynchronize|cudaEventSynchronize|cudaMemcpy|cudaMemcpyAsync|cudaMemsetAsync"
    r"|cudaMemset)$"
)


def _open(path: Path) -> tuple[sqlite3.Connection, Path | None]:
    if path.suffix != ".xz":
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True), None
    tmp = Path(tempfile.mkdtemp(prefix="lp_facts_"))
    plain = tmp / path.stem
    with lzma.open(path) as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(f"file:{plain}?mode=ro", uri=True), tmp


def _tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("select name from sqlite_master where type='table'")}


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def facts(path: Path) -> dict:
    db, tmp = _open(path)
    try:
        return _facts(db)
    finally:
        db.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _facts(db: sqlite3.Connection) -> dict:
    tables = _tables(db)
    strings = dict(db.execute("select id, value from StringIds"))
    meta = dict(db.execute("select name, value from META_DATA_EXPORT"))
    out: dict = {
        "nsys_version": meta.get("EXPORT_PRODUCT_VERSION"),
        "schema_version": meta.get("EXPORT_SCHEMA_VERSION"),
        "gpu": db.execute("select name from TARGET_INFO_GPU").fetchone()[0],
    }
    # API calls: (globalPid, correlationId) -> (start, globalTid, name)
    api_rows = db.execute("select start, globalTid, correlationId, nameId from CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    api_by_corr = {}
    counts: dict[str, int] = {}
    for start, tid, corr, name_id in api_rows:
        name = re.sub(r"_v\d+$", "", strings.get(name_id, "?"))
        if API_OF_INTEREST.match(name):
            counts[name] = counts.get(name, 0) + 1
        api_by_corr[(tid >> 24 << 24, corr)] = (start, tid)
    out["api"] = dict(sorted(counts.items()))
    # GPU activities
    acts = []  # (start, end, kind, name, pid, corr, graphNodeId)
    kernel_cols = "start, end, shortName, globalPid, correlationId, graphNodeId"
    for s, e, short, pid, corr, node in db.execute(f"select {kernel_cols} from CUPTI_ACTIVITY_KIND_KERNEL"):
        acts.append((s, e, "kernel", strings.get(short, "?"), pid, corr, node))
    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table in tables:
            for s, e, pid, corr in db.execute(f"select start, end, globalPid, correlationId from {table}"):
                acts.append((s, e, kind, kind, pid, corr, None))
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:  # --cuda-graph-trace=graph: one row a launch
        for s, e, pid, corr in db.execute(
            "select start, end, globalPid, correlationId from CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        ):
            acts.append((s, e, "graph", "graph", pid, corr, None))
    acts.sort()
    out["gpu_activities"] = {
        "kernels": sum(a[2] == "kernel" for a in acts),
        "memcpys": sum(a[2] == "memcpy" for a in acts),
        "memsets": sum(a[2] == "memset" for a in acts),
        "whole_graph_rows": sum(a[2] == "graph" for a in acts),
        "kernels_in_graphs": sum(a[2] == "kernel" and a[6] is not None for a in acts),
        "processes": len({a[4] for a in acts}),
    }
    kernel_durations = [a[1] - a[0] for a in acts if a[2] == "kernel"]
    if kernel_durations:
        out["kernel_duration_ns"] = {
            "median": statistics.median(kernel_durations),
            "min": min(kernel_durations),
            "max": max(kernel_durations),
        }
    # steps
    step_rows = db.execute(
        "select n.start, n.end, n.globalTid, coalesce(n.text, s.value) as t from NVTX_EVENTS n "
        "left join StringIds s on s.id = n.textId where n.eventType = 59 and n.end is not null"
    ).fetchall()
    steps = sorted((s, e, tid) for s, e, tid, t in step_rows if t == "step")
    out["steps"] = len(steps)
    domains = [r[0] for r in db.execute("select text from NVTX_EVENTS where eventType = 75")]
    out["nvtx_domains"] = sorted(set(d for d in domains if d))
    if not steps:
        return out
    # assign activities to steps: the submitting API call starts inside a step on its thread
    by_tid: dict[int, list[tuple[int, int, int]]] = {}
    for i, (s, e, tid) in enumerate(steps):
        by_tid.setdefault(tid, []).append((s, e, i))
    per_step: list[list[tuple]] = [[] for _ in steps]
    outside = 0
    for act in acts:
        call = api_by_corr.get((act[4], act[5]))
        idx = None
        if call is not None:
            start, tid = call
            for s, e, i in by_tid.get(tid, ()):
                if s <= start <= e:
                    idx = i
                    break
        if idx is None:
            outside += 1
        else:
            per_step[idx].append(act)
    kernels_per_step = [sum(a[2] == "kernel" for a in acts_) for acts_ in per_step]
    sequences = {tuple(a[3] for a in acts_ if a[2] == "kernel") for acts_ in per_step}
    out["per_step"] = {
        "kernels_min": min(kernels_per_step),
        "kernels_median": statistics.median(kernels_per_step),
        "kernels_max": max(kernels_per_step),
        "activities_median": statistics.median(len(a) for a in per_step),
        "distinct_kernel_sequences": len(sequences),
        "activities_outside_steps": outside,
    }
    # steady state, per process: steps after the first tenth of that process's steps
    periods, busy, span = [], 0, 0
    for pid in sorted({tid >> 24 for _, _, tid in steps}):
        idx = [i for i, (_, _, tid) in enumerate(steps) if tid >> 24 == pid]
        idx = idx[len(idx) // 10 :]
        firsts = [min(a[0] for a in per_step[i]) for i in idx if per_step[i]]
        periods += [b - a for a, b in zip(firsts, firsts[1:], strict=False)]
        window = [a for i in idx for a in per_step[i]]
        if window:
            lo, hi = min(a[0] for a in window), max(a[1] for a in window)
            span += hi - lo
            busy += _union_ns(
                [(max(a[0], lo), min(a[1], hi)) for a in acts if a[4] >> 24 == pid and a[1] > lo and a[0] < hi]
            )
    out["steady"] = {
        "step_period_median_ns": statistics.median(periods) if periods else None,
        "gpu_busy_ns": busy,
        "gpu_span_ns": span,
        "gpu_busy_ratio": round(busy / span, 4) if span else None,
    }
    return out


def main(argv: list[str]) -> None:
    paths = [Path(p) for p in argv] or sorted(Path(__file__).parent.glob("*.sqlite.xz"))
    result = {p.name.split(".sqlite")[0]: facts(p) for p in paths}
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main(sys.argv[1:])
