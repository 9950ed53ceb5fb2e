"""Programs beyond PyTorch on one stream, recorded on an H200 (tests/data/frameworks,
manifest ``families``): a CUDA C++ step that forks into two streams joined by events, per
launch and as one captured graph; a JAX step op by op and under ``jax.jit``; a PyTorch
step eager and under ``torch.compile(mode="default")``. Ground truth: the programs' own
construction (steps, kernels a step, streams), sqlite3 counts of the traces, and their own
clock without nsys (``bare_step_us``)."""

from __future__ import annotations

import json
import lzma
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import launchprof

CORPUS = Path(__file__).resolve().parent / "data" / "frameworks"
FAMILIES: dict[str, Any] = json.loads((CORPUS / "manifest.json").read_text())["families"]
REC = FAMILIES["recordings"]


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _sql(name: str, tmp_path: Path, query: str) -> int:
    path = tmp_path / f"{name}.sqlite"
    if not path.exists():
        path.write_bytes(lzma.decompress((CORPUS / f"{name}.sqlite.xz").read_bytes()))
    con = sqlite3.connect(path)
    try:
        return int(con.execute(query).fetchone()[0])
    finally:
        con.close()


def test_a_fork_join_step_over_two_streams(tmp_path: Path) -> None:
    """One step = both streams' 22 kernels (not one stream's), the busier stream's kernel
    time reported beside the busy time, and the step without nsys - the program's own
    clock - inside the range of the eager step's estimate (nsys added about 0.3 us a launch
    here, not the demo's 2.76 us: the range now reaches the traced step)."""
    rec = REC["streams_eager_rec1"]
    a = launchprof.analyze(CORPUS / "streams_eager_rec1.sqlite.xz")
    fig = a.diagnosis.figures
    kernels = _sql("streams_eager_rec1", tmp_path, "select count(*) from CUPTI_ACTIVITY_KIND_KERNEL")
    assert kernels == rec["steps"] * rec["kernels_per_step"]
    assert fig["kernels_per_step_p50"] == rec["kernels_per_step"] and fig["streams_per_step_p50"] == rec["streams"]
    assert fig["steady_steps"] >= rec["steps"] - 3
    assert fig["stream_busy_max_p50_ns"] < 0.7 * fig["busy_p50_ns"]
    exp = a.recommendation.expected
    for bare in rec["bare_step_us"]:
        assert exp.eager_low_ns <= bare * 1e3 <= exp.eager_high_ns * 1.05
    assert a.diagnosis.verdict == "launch-bound" and a.recommendation.convert is True


def test_a_fork_join_step_s_critical_path_is_the_fork_the_longer_branch_and_the_join(tmp_path: Path) -> None:
    """The program's construction: a step is norm, then 10 kernels on each stream, then
    join (12 kernels on the first stream, 10 on the second); the path is norm + the longer
    branch + join. sqlite3 works it out per step from each stream's kernels in order; the
    graph's GPU side takes the path (its range's low end the busy time), which brings the
    expectation to the program's own graph step (14.3 us without nsys) within 30 %."""
    rec = REC["streams_eager_rec1"]
    paths = _sql(
        "streams_eager_rec1",
        tmp_path,
        """with a as (select (row_number() over (order by start) - 1) / 12 step,
                             s.value = 'branch' br, end - start d
                      from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.shortName
                      where streamId = (select min(streamId) from CUPTI_ACTIVITY_KIND_KERNEL)),
                b as (select (row_number() over (order by start) - 1) / 10 step, end - start d
                      from CUPTI_ACTIVITY_KIND_KERNEL
                      where streamId = (select max(streamId) from CUPTI_ACTIVITY_KIND_KERNEL)),
                sa as (select step, sum(case when br then d end) br, sum(case when br then 0 else d end) ends
                       from a group by step),
                sb as (select step, sum(d) br from b group by step),
                cp as (select sa.ends + max(sa.br, sb.br) c from sa join sb using (step))
           select c from cp order by c limit 1 offset (select count(*) / 2 from cp)""",
    )
    a = launchprof.analyze(CORPUS / "streams_eager_rec1.sqlite.xz")
    fig, exp = a.diagnosis.figures, a.recommendation.expected
    assert fig["critical_path_nodes_p50"] == 1 + (rec["kernels_per_step"] - 2) // 2 + 1  # norm, a branch, join
    assert fig["critical_path_p50_ns"] == pytest.approx(paths, rel=0.02)
    assert exp.gpu_side_ns < exp.gpu_side_serial_ns and exp.graph_step_high_ns >= exp.gpu_side_serial_ns
    graph_bare_us = FAMILIES["recordings"]["streams_graph_rec1"]["bare_step_us"]
    for bare in graph_bare_us:
        assert abs(exp.graph_step_ns / (bare * 1e3) - 1) <= 0.3


def test_the_captured_fork_join_replays_one_graph_a_step(tmp_path: Path) -> None:
    rec = REC["streams_graph_rec1"]
    a = launchprof.analyze(CORPUS / "streams_graph_rec1.sqlite.xz")
    launches = _sql(
        "streams_graph_rec1",
        tmp_path,
        "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId "
        "where s.value like 'cudaGraphLaunch%'",
    )
    assert launches == rec["steps"]
    assert a.diagnosis.figures["graph_launches_per_step_p50"] == 1 and a.recommendation.convert is False


def test_jax_steps_are_the_marked_steps_not_xla_s_own_ranges() -> None:
    """XLA writes NVTX ranges of its own (``TSL:GpuMetrics``); an earlier launchprof took
    them for the steps (11,511 'steps' of one kernel). The program's launchprof.step()
    ranges are the steps."""
    a = launchprof.analyze(CORPUS / "jax_eager_rec1.sqlite.xz")
    doc = json.loads(a.summary.to_json())
    assert doc["steps"]["name"] == "step" and doc["steps"]["count"] == REC["jax_eager_rec1"]["steps_kept"]
    assert a.diagnosis.verdict == "launch-bound"


def test_jax_jit_replays_xla_s_own_graphs(tmp_path: Path) -> None:
    """Under jax.jit, XLA launches its compiled step as a CUDA graph of its own (command
    buffers): one graph launch a step, told as a program that already replays graphs."""
    launches = _sql(
        "jax_jit_rec1",
        tmp_path,
        "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId "
        "where s.value like 'cudaGraphLaunch%' or s.value like 'cuGraphLaunch%'",
    )
    assert launches >= REC["jax_jit_rec1"]["steps"]
    a = launchprof.analyze(CORPUS / "jax_jit_rec1.sqlite.xz")
    assert a.diagnosis.figures["graph_launches_per_step_p50"] == 1 and a.recommendation.convert is False


@pytest.mark.parametrize("pair", FAMILIES["pairs"], ids=lambda p: f"{p['before']}->{p['after']}")
def test_compare_of_each_family_pair(pair: dict[str, str]) -> None:
    """The streams pair is a conversion (verified); compile without graphs is not one
    (not-converted: no graph launch on the AFTER side); JAX's jit replaces the eager
    kernels by XLA's fused ones in 90 % of the kernel time, which compare cannot tell from
    another program's (different-work)."""
    c = launchprof.compare(CORPUS / f"{pair['before']}.sqlite.xz", CORPUS / f"{pair['after']}.sqlite.xz")
    assert c.verdict == pair["verdict"]
