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

import numpy as np
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


FORK_JOINS = sorted(n for n, r in REC.items() if "critical_path" in r)


def _graph_bare_us(before: str) -> list[float]:
    after = next(p["after"] for p in FAMILIES["pairs"] if p["before"] == before)
    return list(REC[after]["bare_step_us"])


@pytest.mark.parametrize("name", FORK_JOINS)
def test_a_fork_join_step_s_critical_path_is_the_fork_the_longer_branch_and_the_join(name: str, tmp_path: Path) -> None:
    """The programs' construction: a step runs a head on the main stream, then one branch
    on each stream, then a tail on the main stream (C++: norm, 10 and 10 kernels, join;
    PyTorch: 2 kernels, 6 and 12, 2 - there the side branch is the longer, so the path is
    longer than either stream's kernel time). sqlite3 works the path out per step from
    each stream's kernels in order (head + the longer branch + tail); the graph's GPU side
    takes it (the range's low end the busy time), and the expected graph step is within
    30 % of the program's own graph step without nsys."""
    rec = REC[name]
    cp = rec["critical_path"]
    main, head, tail, side = cp["main_per_step"], cp["head"], cp["tail"], cp["side_per_step"]
    paths = _sql(
        name,
        tmp_path,
        f"""with a as (select (row_number() over (order by start) - 1) / {main} step,
                              (row_number() over (order by start) - 1) % {main} pos, end - start d
                       from CUPTI_ACTIVITY_KIND_KERNEL
                       where streamId = (select streamId from CUPTI_ACTIVITY_KIND_KERNEL
                                         group by streamId order by count(*) {"desc" if main > side else "asc"}
                                         limit 1)),
                 b as (select (row_number() over (order by start) - 1) / {side} step, end - start d
                       from CUPTI_ACTIVITY_KIND_KERNEL
                       where streamId = (select streamId from CUPTI_ACTIVITY_KIND_KERNEL
                                         group by streamId order by count(*) {"asc" if main > side else "desc"}
                                         limit 1)),
                 sa as (select step, sum(case when pos >= {head} and pos < {main - tail} then d else 0 end) br,
                               sum(case when pos < {head} or pos >= {main - tail} then d else 0 end) ends
                        from a group by step having count(*) = {main}),
                 sb as (select step, sum(d) br from b group by step having count(*) = {side}),
                 cp as (select sa.ends + max(sa.br, sb.br) c from sa join sb using (step))
            select c from cp order by c limit 1 offset (select count(*) / 2 from cp)""",
    )
    a = launchprof.analyze(CORPUS / f"{name}.sqlite.xz")
    fig, exp = a.diagnosis.figures, a.recommendation.expected
    assert fig["critical_path_nodes_p50"] == head + max(main - head - tail, side) + tail
    assert fig["critical_path_p50_ns"] == pytest.approx(paths, rel=0.03)
    assert fig["critical_path_p50_ns"] >= fig["stream_busy_max_p50_ns"]
    said = f"{fig['critical_path_nodes_p50']:g} of {rec['kernels_per_step']} kernels"
    assert sum("critical path" in x and said in x for x in a.recommendation.assumptions) == 1
    assert exp.gpu_side_ns < exp.gpu_side_serial_ns and exp.graph_step_high_ns >= exp.gpu_side_serial_ns
    for bare in _graph_bare_us(name):
        assert abs(exp.graph_step_ns / (bare * 1e3) - 1) <= 0.3


@pytest.mark.parametrize("program", ["streams_eager", "torch_streams_eager"])
def test_a_fork_join_program_recorded_twice_gets_the_same_advice_and_its_ranges_hold_the_truth(program: str) -> None:
    """Each recording (two device calls for the C++ step, one call for the PyTorch step's
    two): the same verdict and decision, and the expected speedup's range - the estimate,
    and for the PyTorch step its run without nsys too - holds the truth of every recording
    (the step without nsys over the converted step, each on the program's own clock)."""
    names = [n for n in FORK_JOINS if n.startswith(program + "_rec")]
    assert len(names) >= 2
    truths = [float(np.mean(REC[n]["bare_step_us"])) / float(np.mean(_graph_bare_us(n))) for n in names]
    advice = set()
    for name in names:
        a = launchprof.analyze(CORPUS / f"{name}.sqlite.xz")
        exp = a.recommendation.expected
        advice.add((a.diagnosis.verdict, a.recommendation.convert))
        assert all(exp.speedup_low <= t <= exp.speedup_high for t in truths), (name, truths)
        if "baseline_folder" in REC[name]:
            m = launchprof.analyze(CORPUS / f"{name}.sqlite.xz", baseline=CORPUS / REC[name]["baseline_folder"])
            e = m.recommendation.expected
            assert e.eager_source == "measured" and all(e.speedup_low <= t <= e.speedup_high for t in truths)
            advice.add((m.diagnosis.verdict, m.recommendation.convert))
    assert advice == {("launch-bound", True)}


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


@pytest.mark.parametrize(
    "mutation",
    [
        "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME",
        "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE nameId IN "
        "(SELECT id FROM StringIds WHERE value LIKE 'cudaStreamWaitEvent%')",
    ],
    ids=["no-api-table", "no-event-waits"],
)
def test_a_fork_join_trace_missing_its_calls(mutation: str, tmp_path: Path) -> None:
    """Without the API table no launch is placed: no critical path, the busy time stands
    (an earlier build raised IndexError there). Without the stream-wait-event calls the
    streams are independent: the path is the busier stream's (the main one: norm, branch,
    join), never more than the busy time."""
    _sql("streams_eager_rec2", tmp_path, "select 1")
    trace = tmp_path / "streams_eager_rec2.sqlite"
    con = sqlite3.connect(trace)
    con.execute(mutation)
    con.commit()
    con.close()
    a = launchprof.analyze(trace)
    fig = a.diagnosis.figures
    if "DROP" in mutation:
        assert "critical_path_p50_ns" not in fig and fig["streams_per_step_p50"] == 2
        assert a.diagnosis.verdict is not None
    else:
        assert fig["critical_path_nodes_p50"] == 12
        assert fig["critical_path_p50_ns"] == pytest.approx(fig["stream_busy_max_p50_ns"], rel=0.01)
        assert fig["critical_path_p50_ns"] < fig["busy_p50_ns"]


def test_the_profiler_s_share_measured_on_the_recording_s_machine() -> None:
    """What nsys adds to a launch differs between machines (0.3 us a launch in the first
    C++ recording, 2.3 us in the second, the same program). `launchprof calibrate
    --profiler`, run in the second recording's device call on its machine
    (docs/data/calibration_h200_profiler_2026-12-03.json: 2.25 us a launch), makes that
    recording's eager step without nsys the program's own within 5 % (the defaults'
    2.76 us a launch, measured on another program: 10 % short) and the expected speedup its
    truth within 10 %."""
    from launchprof.cache import cache_dir

    data = json.loads(
        (CORPUS.parent.parent.parent / "docs" / "data" / "calibration_h200_profiler_2026-12-03.json").read_text()
    )
    cache_dir().mkdir(parents=True, exist_ok=True)
    (cache_dir() / "calibration-recording-machine.json").write_text(json.dumps(data))
    a = launchprof.analyze(CORPUS / "streams_eager_rec2.sqlite.xz")
    exp = a.recommendation.expected
    assert a.recommendation.calibration["source"].startswith("calibration file")
    bare = float(np.mean(REC["streams_eager_rec2"]["bare_step_us"])) * 1e3
    truth = bare / (float(np.mean(REC["streams_graph_rec2"]["bare_step_us"])) * 1e3)
    assert exp.eager_step_ns == pytest.approx(bare, rel=0.05)
    assert exp.speedup == pytest.approx(truth, rel=0.10) and exp.speedup_low <= truth <= exp.speedup_high


@pytest.mark.parametrize(("share", "placed"), [(0.3, True), (0.7, False)])
def test_the_path_needs_half_the_steady_steps_placed(share: float, placed: bool) -> None:
    """Steps with copies or memsets are not placed (a copy's launch is not known here):
    with 30 % of the steady steps holding one the path stands on the rest; with 70 %, the
    busy time does (the path was once reported from the 150 steps left)."""
    import dataclasses

    import pandas as pd

    from launchprof.analysis.prediction.stepmix import stream_figures
    from launchprof.analysis.stepdata import step_context

    a = launchprof.analyze(CORPUS / "streams_eager_rec2.sqlite.xz")
    ctx = step_context(a, a.found_steps)
    steady = ctx.steady["step"].to_numpy()
    with_copy = steady[: int(share * len(steady))]
    fig = stream_figures(dataclasses.replace(ctx, memops=pd.DataFrame({"step": with_copy})))
    assert ("critical_path_p50_ns" in fig) is placed
    assert fig["streams_per_step_p50"] == 2


def test_per_thread_default_stream_waits_are_waits(tmp_path: Path) -> None:
    """A build with --default-stream per-thread calls cudaStreamWaitEvent_ptsz: still an
    event wait (matched by name prefix). Without it the PyTorch fork/join's path would be
    the busier stream's 12 kernels, not head + side branch + tail (16)."""
    _sql("torch_streams_eager_rec1", tmp_path, "select 1")
    trace = tmp_path / "torch_streams_eager_rec1.sqlite"
    con = sqlite3.connect(trace)
    changed = con.execute(
        "update StringIds set value = 'cudaStreamWaitEvent_ptsz_v7000' where value like 'cudaStreamWaitEvent%'"
    ).rowcount
    con.commit()
    con.close()
    assert changed == 1
    fig = launchprof.analyze(trace).diagnosis.figures
    assert fig["critical_path_nodes_p50"] == 16
