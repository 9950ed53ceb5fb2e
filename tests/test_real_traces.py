"""launchprof on the bundled real H200 traces (tests/data/traces/README.md).

Two kinds of expected values, neither taken from launchprof:

- figures computed independently by hand from the traces (tests/data/traces/README.md), asserted rounded
  as given (e.g. demo_A_4096 utilization 0.131);
- exact figures computed here from the SQLite file with plain ``sqlite3`` and Python:
  activities and their submitting API call are joined in SQL on (pid, correlationId),
  busy intervals come from a sorted sweep written below, percentiles from a hand-written
  linear interpolation. These must equal launchprof's summary.json exactly.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import dataclass

import pytest

import launchprof
from launchprof.report.write import write_report

ALL_TRACES = ["mlp_eager", "mlp_graph", "demo_A_4096", "demo_B_4096"]
# The demo traces (150k and 2k-step graph) take seconds each: not in the fast subset.
ALL_TRACE_PARAMS = [n if n.startswith("mlp_") else pytest.param(n, marks=pytest.mark.slow) for n in ALL_TRACES]
ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
PID = "((({col}) >> 24) & 16777215)"  # nsys serialized GlobalId -> process id


# ---------------------------------------------------------------- independent figures


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _activity_rows(con: sqlite3.Connection) -> list[tuple[int, int, int, int, int, str, int | None]]:
    """(start, end, deviceId, streamId, pid, kind, end of the submitting API call),
    sorted by (start, end). The API call is found by a SQL join on (pid, correlationId)."""
    parts = [
        f"SELECT start, end, deviceId, streamId, globalPid, correlationId, '{t.rsplit('_', 1)[1].lower()}' AS kind "
        f"FROM {t}"
        for t in ACTIVITY_TABLES
        if t in _tables(con)
    ]
    sql = f"""
        WITH act AS ({" UNION ALL ".join(parts)})
        SELECT act.start, act.end, act.deviceId, act.streamId, {PID.format(col="act.globalPid")}, act.kind, r.end
        FROM act LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
          ON r.correlationId = act.correlationId
         AND {PID.format(col="r.globalTid")} = {PID.format(col="act.globalPid")}
        ORDER BY act.start, act.end"""
    return con.execute(sql).fetchall()


@dataclass
class Expected:
    kernels: int
    memops: int
    span_ns: int
    busy_ns: int
    idle_ns: int
    bubble_count: int
    bubble_total_ns: int
    host_wait_ns: int


def _sweep(rows: list, threshold_ns: int = 1000) -> Expected:
    """Busy time, gaps and host-wait by walking the rows in start order (pure Python).

    A gap is host-wait when the row that ends it was submitted by a call that ended
    after the gap began."""
    busy = 0
    cur_start, cur_end = rows[0][0], rows[0][1]
    gaps: list[tuple[int, int, int | None]] = []
    for start, end, *_, call_end in rows[1:]:
        if start > cur_end:
            busy += cur_end - cur_start
            gaps.append((cur_end, start, call_end))
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    span = cur_end - rows[0][0]
    bubbles = [end - start for start, end, _ in gaps if end - start >= threshold_ns]
    return Expected(
        kernels=sum(1 for r in rows if r[5] == "kernel"),
        memops=sum(1 for r in rows if r[5] != "kernel"),
        span_ns=span,
        busy_ns=busy,
        idle_ns=span - busy,
        bubble_count=len(bubbles),
        bubble_total_ns=sum(bubbles),
        host_wait_ns=sum(end - start for start, end, call_end in gaps if call_end is not None and call_end > start),
    )


def _percentile(values: list[int], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        return None
    xs = sorted(values)
    h = (len(xs) - 1) * q / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def _call_durations(con: sqlite3.Connection, name_pattern: str) -> list[int]:
    """Durations of API calls whose name (nsys _vNNNN suffix removed) matches the regex."""
    rows = con.execute(
        "SELECT s.value, r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r JOIN StringIds AS s ON s.id = r.nameId"
    ).fetchall()
    pattern = re.compile(name_pattern)
    return [d for name, d in rows if pattern.fullmatch(re.sub(r"_v\d+$", "", name))]


@pytest.fixture(scope="module")
def summary(real_trace, tmp_path_factory: pytest.TempPathFactory):
    """``summary(name)``: the summary.json launchprof writes for a bundled trace (cached)."""
    cache: dict[str, dict] = {}

    def get(name: str) -> dict:
        if name not in cache:
            folder = tmp_path_factory.mktemp(name)
            write_report(launchprof.analyze(real_trace(name)), folder, force=True)
            cache[name] = json.loads((folder / "summary.json").read_text())
        return cache[name]

    return get


@pytest.fixture(scope="module")
def activity(real_trace):
    """``activity(name)``: :func:`_activity_rows` of a bundled trace (cached)."""
    cache: dict[str, list] = {}

    def get(name: str) -> list:
        if name not in cache:
            with sqlite3.connect(real_trace(name)) as con:
                cache[name] = _activity_rows(con)
        return cache[name]

    return get


def _close(actual: float | None, expected: float | None) -> bool:
    # Percentiles are floats: numpy's lerp may differ from ours in the last bit.
    if expected is None:
        return actual is None
    return actual is not None and math.isclose(actual, expected, rel_tol=1e-12, abs_tol=1e-9)


# ---------------------------------------------------------------- the issue's figures


@pytest.mark.slow
def test_demo_a_is_launch_bound_as_issue_states(real_trace) -> None:
    a = launchprof.analyze(real_trace("demo_A_4096"))
    f = a.devices[0].figures
    assert f.kernels == 150000
    assert round(f.utilization, 3) == 0.131
    assert round(f.cpu_bound_ratio, 3) == 0.869
    assert a.launches.launch_call_p50_ns is not None
    assert round(a.launches.launch_call_p50_ns / 1000, 2) == 5.59
    assert a.launches.graph_launches == 0


def test_demo_b_graph_figures_as_issue_states(real_trace) -> None:
    a = launchprof.analyze(real_trace("demo_B_4096"))
    assert a.launches.graph_launches == 2000
    assert a.launches.graph_instantiations == 1
    assert round(a.devices[0].figures.utilization, 3) == 0.788


def test_mlp_graph_has_300_graph_launches(real_trace) -> None:
    assert launchprof.analyze(real_trace("mlp_graph")).launches.graph_launches == 300


# ---------------------------------------------------------------- exact, all figures


@pytest.mark.parametrize("name", ALL_TRACE_PARAMS)
def test_device_figures_equal_independent_sql(name: str, activity, summary) -> None:
    rows = activity(name)
    assert {r[2] for r in rows} == {0}  # one GPU in these traces
    exp = _sweep(rows)
    dev = summary(name)["devices"]
    assert len(dev) == 1
    d = dev[0]
    assert d["device_id"] == 0
    assert d["name"] == "NVIDIA H200"
    assert (d["kernels"], d["memops"]) == (exp.kernels, exp.memops)
    assert (d["span_ns"], d["busy_ns"], d["idle_ns"]) == (exp.span_ns, exp.busy_ns, exp.idle_ns)
    assert (d["bubbles"]["count"], d["bubbles"]["total_ns"]) == (exp.bubble_count, exp.bubble_total_ns)
    assert d["bubbles"]["threshold_ns"] == 1000
    assert d["host_wait_ns"] == exp.host_wait_ns
    assert d["utilization"] == exp.busy_ns / exp.span_ns
    assert d["cpu_bound_ratio"] == exp.host_wait_ns / exp.span_ns


@pytest.mark.parametrize("name", ALL_TRACE_PARAMS)
def test_stream_and_process_figures_equal_independent_sql(name: str, activity, summary) -> None:
    rows = activity(name)
    d = summary(name)["devices"][0]
    keys = sorted({(r[4], r[3]) for r in rows})
    assert [(s["pid"], s["stream_id"]) for s in d["streams"]] == keys
    for s in d["streams"]:
        exp = _sweep([r for r in rows if (r[4], r[3]) == (s["pid"], s["stream_id"])])
        got = (s["kernels"], s["memops"], s["span_ns"], s["busy_ns"], s["bubbles"]["count"], s["host_wait_ns"])
        assert got == (exp.kernels, exp.memops, exp.span_ns, exp.busy_ns, exp.bubble_count, exp.host_wait_ns)
    pids = sorted({r[4] for r in rows})
    assert [p["pid"] for p in d["processes"]] == pids
    for p in d["processes"]:
        exp = _sweep([r for r in rows if r[4] == p["pid"]])
        assert (p["kernels"], p["busy_ns"], p["host_wait_ns"]) == (exp.kernels, exp.busy_ns, exp.host_wait_ns)


@pytest.mark.parametrize("name", ALL_TRACE_PARAMS)
def test_launch_figures_equal_independent_sql(name: str, real_trace, summary) -> None:
    with sqlite3.connect(real_trace(name)) as con:
        launch = _call_durations(con, r"cudaLaunchKernel")
        graph_launch = _call_durations(con, r"cudaGraphLaunch")
        instantiate = _call_durations(con, r"cudaGraphInstantiate\w*")
        updates = _call_durations(con, r"cudaGraphExecUpdate")
        kernel_durations = [r[0] for r in con.execute("SELECT end - start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
        (in_graphs,) = con.execute(
            "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL"
        ).fetchone()
        shorter, joined = con.execute(
            f"""SELECT sum(k.end - k.start < r.end - r.start), count(*)
                FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
                  ON r.correlationId = k.correlationId
                 AND {PID.format(col="r.globalTid")} = {PID.format(col="k.globalPid")}
                JOIN StringIds AS s ON s.id = r.nameId
                WHERE k.graphNodeId IS NULL AND s.value LIKE 'cudaLaunchKernel%'"""
        ).fetchone()
    got = summary(name)["launches"]
    assert got["kernel_launch_calls"] == len(launch)
    assert got["launch_call_total_ns"] == sum(launch)
    assert _close(got["launch_call_p50_ns"], _percentile(launch, 50))
    assert _close(got["launch_call_p90_ns"], _percentile(launch, 90))
    assert got["graph_launches"] == len(graph_launch)
    assert _close(got["graph_launch_call_p50_ns"], _percentile(graph_launch, 50))
    assert got["graph_instantiations"] == len(instantiate)
    assert _close(got["graph_instantiate_p50_ns"], _percentile(instantiate, 50))
    assert got["graph_exec_updates"] == len(updates)
    assert _close(got["kernel_p50_ns"], _percentile(kernel_durations, 50))
    assert got["kernels_in_graphs"] == in_graphs
    assert _close(got["kernels_shorter_than_launch_ratio"], shorter / joined if joined else None)


def test_mlp_eager_known_by_construction(real_trace) -> None:
    """Facts of the workload itself (tests/data/traces/README.md): 300 steps of 36
    kernels (10800 launch calls inside the NVTX steps, one before), launched one by one on one stream, no graphs."""
    a = launchprof.analyze(real_trace("mlp_eager"))
    assert a.launches.kernel_launch_calls == 300 * 36 + 1
    assert a.launches.graph_launches == 0
    assert a.launches.kernels_in_graphs == 0
    assert [(s.stream_id, s.figures.kernels) for s in a.devices[0].streams] == [(7, 10801)]
    assert a.processes_without_gpu == []
    assert a.nvtx_ranges_lost is False
    assert a.trace.schema.nsys_version == "2025.3.2.0"


def test_mlp_graph_kernels_ran_inside_the_graph(real_trace) -> None:
    a = launchprof.analyze(real_trace("mlp_graph"))
    # 300 replays of the 36-kernel graph: every graph kernel is a graph node.
    assert a.launches.kernels_in_graphs == 300 * 36
    assert a.launches.graph_instantiations == 1
