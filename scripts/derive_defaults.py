"""Derive launchprof's default graph-prediction constants from the bundled H200 traces.

Reads tests/data/traces/{demo_B_4096,mlp_graph,demo_A_4096,mlp_eager}.sqlite.xz with plain
SQL (independent of launchprof's own analysis) and prints the constants that
``launchprof/analysis/prediction/predict.py`` ships as ``DEFAULTS``, so they can be re-derived:

    python3 scripts/derive_defaults.py

- node_gap_ns: median GPU idle between consecutive kernels of one graph launch (kernels
  with a graphNodeId, grouped by the launch's correlation id).
- graph_launch_gap_ns: median GPU idle between the last kernel of one graph launch and
  the first of the next, over launches whose cudaGraphLaunch call had returned before
  the previous launch finished (queued ahead: the gap is the GPU-side cost of starting
  a graph, not host wait).
- graph_launch_call_base_ns, graph_launch_call_per_node_ns: the line through the
  (nodes, median cudaGraphLaunch duration) points of the two graph traces.
- instantiate_per_node_ns: the largest cudaGraphInstantiate duration per node of the two
  graph traces (conservative: break-even is not under-estimated); instantiate_base_ns 0.
- launch_call_ns: median cudaLaunchKernel duration of the per-launch traces (under nsys).
- profiler_launch_overhead_ns: what nsys adds to each launch, which is not in a trace:
  DOMAIN.md's demo table, (517 us - 310 us) per step under nsys vs without it, over the
  75 launches of a step = 2.76 us.
- node_interval_ns: 0 (no floor) - only a calibration measures it.
- unprofiled_graph_launch_gap_ns: node_gap_ns plus what a graph boundary adds to the
  %globaltimer gap of two nodes of one graph, without the profiler (medians
  graph_launch_gap_ns - graph_node_gap_ns; the rule launchprof/analysis/prediction/predict.py applies
  to a user's calibration), the median of two ``launchprof calibrate`` runs on an H200
  (docs/data/calibration_h200_2026-12-03_run1.json, _run2.json: 704 and 832 ns). Under nsys
  that gap is graph_launch_gap_ns (5.6 us): taking it without the profiler too put a
  two-stream C++ graph step at 18.0 us where it ran 14.3 us.
- unprofiled_graph_launch_call_base_ns, unprofiled_graph_launch_call_per_node_ns: the
  cudaGraphLaunch line of the H200 calibration run (docs/data/calibration_h200_2026-11-29.json,
  fits.launch_cpu_ns), measured without the profiler.
"""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
CALIBRATION = ROOT / "docs" / "data" / "calibration_h200_2026-11-29.json"
GAP_CALIBRATIONS = [ROOT / "docs" / "data" / f"calibration_h200_2026-12-03_run{i}.json" for i in (1, 2)]


def _open(name: str, folder: Path) -> sqlite3.Connection:
    target = folder / f"{name}.sqlite"
    with lzma.open(TRACES / f"{name}.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(target)


def _calls(con: sqlite3.Connection, like: str) -> np.ndarray:
    rows = con.execute(
        "SELECT r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE ?",
        (like,),
    ).fetchall()
    return np.array([r[0] for r in rows], dtype=np.int64)


def graph_figures(con: sqlite3.Connection) -> dict[str, float]:
    k = np.array(
        con.execute(
            "SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
            "WHERE graphNodeId IS NOT NULL ORDER BY start"
        ).fetchall(),
        dtype=np.int64,
    )
    same = k[1:, 0] == k[:-1, 0]
    gaps = k[1:, 1] - k[:-1, 2]
    node_gaps = gaps[same]
    launch_end = dict(
        con.execute(
            "SELECT r.correlationId, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
            "WHERE s.value LIKE 'cudaGraphLaunch%'"
        ).fetchall()
    )
    nxt_call_end = np.array([launch_end.get(int(c), np.iinfo(np.int64).max) for c in k[1:, 0]])
    queued = ~same & (nxt_call_end <= k[:-1, 2])
    nodes = np.unique(k[:, 0], return_counts=True)[1]
    return {
        "nodes": float(np.median(nodes)),
        "node_gap_ns": float(np.median(node_gaps)),
        "graph_launch_gap_ns": float(np.median(gaps[queued])) if queued.any() else float("nan"),
        "queued_launches": int(queued.sum()),
        "graph_launch_call_ns": float(np.median(_calls(con, "cudaGraphLaunch%"))),
        "instantiate_ns": float(np.median(_calls(con, "cudaGraphInstantiate%"))),
    }


def derive() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        graphs = {name: graph_figures(_open(name, folder)) for name in ("demo_B_4096", "mlp_graph")}
        launches = np.concatenate([_calls(_open(n, folder), "cudaLaunchKernel%") for n in ("demo_A_4096", "mlp_eager")])
    pooled_gap = float(np.median([g["node_gap_ns"] for g in graphs.values()]))
    lead = [g["graph_launch_gap_ns"] for g in graphs.values() if not np.isnan(g["graph_launch_gap_ns"])]
    (n1, c1), (n2, c2) = ((g["nodes"], g["graph_launch_call_ns"]) for g in graphs.values())
    per_node = (c1 - c2) / (n1 - n2)
    constants = {
        "node_gap_ns": round(pooled_gap),
        "graph_launch_gap_ns": round(float(np.median(lead))),
        "graph_launch_call_base_ns": round(max(0.0, c1 - per_node * n1)),
        "graph_launch_call_per_node_ns": round(per_node),
        "instantiate_base_ns": 0,
        "instantiate_per_node_ns": round(max(g["instantiate_ns"] / g["nodes"] for g in graphs.values())),
        "launch_call_ns": round(float(np.median(launches))),
        "profiler_launch_overhead_ns": round((517_000 - 310_000) / 75),
        "node_interval_ns": 0,
    }
    boundary = [json.loads(p.read_text())["medians"] for p in GAP_CALIBRATIONS]
    added = float(np.median([max(m["graph_launch_gap_ns"] - m["graph_node_gap_ns"], 0.0) for m in boundary]))
    constants["unprofiled_graph_launch_gap_ns"] = round(constants["node_gap_ns"] + added)
    fit = json.loads(CALIBRATION.read_text())["fits"]["launch_cpu_ns"]
    constants["unprofiled_graph_launch_call_base_ns"] = round(fit["intercept"])
    constants["unprofiled_graph_launch_call_per_node_ns"] = round(fit["slope"], 1)
    return {"per_trace": graphs, "constants": constants}


if __name__ == "__main__":
    print(json.dumps(derive(), indent=2))
