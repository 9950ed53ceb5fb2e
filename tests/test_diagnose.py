"""Verdicts and recommendations: built traces for each verdict, real H200 traces for the
issue's done-when figures (expected values from facts.json/SQL, never from launchprof)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from steploop import launch_loop
from tracebuilder import TraceBuilder

import launchprof
from launchprof.analysis.diagnosis.diagnose import Diagnosis, diagnose
from launchprof.analysis.prediction.recommendation import Recommendation

HERE = Path(__file__).resolve().parent
GPU = HERE / "data" / "gpu"
FACTS = json.loads((GPU / "facts.json").read_text())


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Predictions here use the documented defaults, whatever the machine's cache holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _run(b: TraceBuilder, tmp_path: Path) -> tuple[Diagnosis, Recommendation]:
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    return a.diagnosis, a.recommendation


def test_small_kernels_waiting_for_launch_calls_are_launch_bound(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=20, kernels=8, call_ns=5_000, kernel_ns=1_000)
    d, r = _run(b, tmp_path)
    assert d.verdict == "launch-bound"
    # period = 8 x 5 us + 0.5 + 1 + 0.2 us = 41.7 us; busy 8 us a step.
    assert d.figures["period_p50_ns"] == 41_700 and d.figures["busy_p50_ns"] == 8_000
    assert d.figures["host_wait_ratio"] > 0.5 and d.figures["launch_wait_ratio"] == d.figures["host_wait_ratio"]
    assert r.convert and r.predicted_speedup is not None and r.predicted_speedup > 1.25
    assert r.break_even_iterations is not None and r.break_even_iterations >= 1
    assert r.assumptions and r.calibration["values"]


def test_long_kernels_queued_ahead_are_gpu_bound(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=20, kernels=4, call_ns=5_000, kernel_ns=200_000)
    d, r = _run(b, tmp_path)
    assert d.verdict == "gpu-bound"
    assert d.figures["busy_ratio"] > 0.99
    assert not r.convert
    assert r.predicted_speedup is not None and r.predicted_speedup < 1.1


def test_idle_start_up_does_not_hide_a_gpu_bound_steady_state(tmp_path: Path) -> None:
    b = TraceBuilder()
    # Step 0 spends 1 s on the host before its first launch; then large kernels back to back.
    launch_loop(b, steps=16, kernels=4, call_ns=5_000, kernel_ns=2_000_000, first_extra_ns=1_000_000_000)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    d, r = a.diagnosis, a.recommendation
    assert a.found_steps.warmup >= 1
    assert d.verdict == "gpu-bound" and not r.convert


def test_sync_every_step_is_sync_bound(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(20):
        start = t
        end_k = 0
        for _ in range(4):  # 2 us calls, 2 us kernels: back to back on the GPU
            end_k = max(t + 2_500, end_k) + 2_000
            b.launch(t, t + 2_000, end_k - 2_000, end_k)
            t += 2_000
        b.call("cudaStreamSynchronize_v3020", t, end_k + 50)  # blocks until the GPU drained
        t = end_k + 50 + 20_000  # then 20 us (< 100 us: not host work) before the next step
        b.range("step", start, t, domain="launchprof")
    d, r = _run(b, tmp_path)
    assert d.verdict == "sync-bound"
    assert d.figures["sync_wait_ratio"] > d.figures["launch_wait_ratio"]
    assert not r.convert
    # The sync follows the step's launches: the GPU waits for it, no capture is broken by it.
    f = {x.kind: x for x in d.findings}["sync-in-step"]
    assert f.severity == "warning" and "sync-in-step" not in [x["kind"] for x in r.blockers]
    assert "lie outside what it holds" in r.reason and "break capture" not in r.reason


def test_host_work_between_steps_is_host_bound(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=20, kernels=4, call_ns=2_000, kernel_ns=2_000, host_ns=500_000)
    d, r = _run(b, tmp_path)
    assert d.verdict == "host-bound"
    assert d.figures["host_work_wait_ratio"] > 0.9
    assert not r.convert


def test_no_gpu_work(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.call("cudaMalloc_v3020", 100, 200)
    d, r = _run(b, tmp_path)
    assert d.verdict == "no-gpu-work" and not r.convert and r.predicted_speedup is None


def test_to_dict_has_the_contract_keys(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=10, kernels=4)
    d, r = _run(b, tmp_path)
    dd, rd = d.to_dict(), r.to_dict()
    assert {"verdict", "reasons", "findings"} <= set(dd)
    assert {
        "convert",
        "predicted_step_ns",
        "predicted_speedup",
        "break_even_iterations",
        "instantiate_ns",
        "blockers",
        "assumptions",
        "calibration",
    } <= set(rd)
    json.dumps(dd), json.dumps(rd)  # plain JSON


def test_explicit_calibration_changes_the_prediction(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=20, kernels=8)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    _, slow = diagnose(
        a, calibration={"graph_launch_call_base_ns": 1_000_000, "unprofiled_graph_launch_call_base_ns": 1_000_000}
    )
    assert slow.calibration["source"] == "argument"
    assert slow.predicted_step_ns is not None and slow.predicted_step_ns > 1_000_000
    assert slow.expected is not None and slow.expected.graph_step_ns > 1_000_000
    assert not slow.convert
    # Only the profiled constant: the profiled prediction is slow, the expected one is
    # not, and the recommendation follows the expected (unprofiled) figure.
    _, profiled_only = diagnose(a, calibration={"graph_launch_call_base_ns": 1_000_000})
    assert profiled_only.predicted_speedup is not None and profiled_only.predicted_speedup < 1
    assert profiled_only.expected_speedup is not None and profiled_only.expected_speedup > 1.25
    assert profiled_only.convert


def test_summary_json_gains_diagnosis_and_recommendation(tmp_path: Path) -> None:
    from launchprof.report.write import write_report

    b = TraceBuilder()
    launch_loop(b, steps=10, kernels=8)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    write_report(a, tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert doc["diagnosis"]["verdict"] == "launch-bound"
    assert doc["recommendation"]["convert"] is True
    assert doc["steps"]["count"] == 10


# Real traces ---------------------------------------------------------------------------


def test_mlp_eager_is_launch_bound_and_the_graph_prediction_is_near_mlp_graph(real_trace) -> None:  # type: ignore[no-untyped-def]
    a = launchprof.analyze(real_trace("mlp_eager"))
    d, r = a.diagnosis, a.recommendation
    assert d.verdict == "launch-bound"
    assert d.figures["kernels_per_step_p50"] == 36
    assert d.figures["period_p50_ns"] == pytest.approx(788_000, rel=0.03)  # tests/data/traces/README.md: 788 us
    assert r.convert
    # Measured: 788 us per eager step vs 103 us per replay under nsys (tests/data/traces/README.md) = 7.65x.
    measured = 788_000 / 103_000
    assert r.predicted_speedup == pytest.approx(measured, rel=0.25)
    assert r.break_even_iterations is not None and 1 <= r.break_even_iterations <= 5
    # Warm-up (module loading in step 0: 44 ms) is not in the prediction.
    assert a.found_steps.warmup >= 1


@pytest.mark.slow
def test_demo_a_is_launch_bound_with_inferred_steps(real_trace) -> None:  # type: ignore[no-untyped-def]
    a = launchprof.analyze(real_trace("demo_A_4096"))
    d, r = a.diagnosis, a.recommendation
    assert a.found_steps.source == "inferred"
    assert d.verdict == "launch-bound" and r.convert
    assert any("inferred" in s for s in r.assumptions)
    # Measured under nsys: 517 us per 75-kernel step vs 95 us per graph (tests/data/traces/README.md) = 5.44x.
    assert r.predicted_speedup == pytest.approx(517 / 95, rel=0.25)


@pytest.mark.parametrize(
    ("eager", "graph"),
    [("small_kernels_launch", "small_kernels_graph"), ("torch_mlp_eager", "torch_mlp_graph")],
)
def test_predicted_speedup_is_within_25_percent_of_the_recorded_conversion(real_trace, eager, graph) -> None:  # type: ignore[no-untyped-def]
    r = launchprof.analyze(real_trace(eager, GPU)).recommendation
    measured = FACTS[eager]["steady"]["step_period_median_ns"] / FACTS[graph]["steady"]["step_period_median_ns"]
    assert r.convert
    assert r.predicted_speedup == pytest.approx(measured, rel=0.25)


def test_large_matmuls_after_an_idle_second_are_gpu_bound(real_trace) -> None:  # type: ignore[no-untyped-def]
    a = launchprof.analyze(real_trace("matmul_eager", GPU))
    d, r = a.diagnosis, a.recommendation
    # The whole run is mostly idle (a 1 s sleep before the loop) ...
    assert a.devices[0].figures.utilization < 0.5
    # ... but the steady state is busy (facts.json: 99.8 %).
    assert d.verdict == "gpu-bound" and not r.convert
    assert d.figures["busy_ratio"] == pytest.approx(FACTS["matmul_eager"]["steady"]["gpu_busy_ratio"], abs=0.01)


def test_small_kernels_big_is_gpu_bound_and_predicts_the_small_gain(real_trace) -> None:  # type: ignore[no-untyped-def]
    r = launchprof.analyze(real_trace("small_kernels_big", GPU)).recommendation
    measured = (
        FACTS["small_kernels_big"]["steady"]["step_period_median_ns"]
        / FACTS["small_kernels_big-graph"]["steady"]["step_period_median_ns"]
    )
    assert not r.convert
    assert r.predicted_speedup == pytest.approx(measured, rel=0.1)


@pytest.mark.parametrize("name", ["mlp_graph", "demo_B_4096"])
def test_graph_runs_are_not_told_to_convert(real_trace, name) -> None:  # type: ignore[no-untyped-def]
    r = launchprof.analyze(real_trace(name)).recommendation
    assert not r.convert and "already" in r.reason


def test_without_a_repeating_step_the_whole_trace_is_one_window(tmp_path: Path) -> None:
    b = TraceBuilder()
    # The three kernels of tests/test_timeline_small.py: 3 us of 5 us idle waiting for the CPU.
    b.launch(100, 900, 1000, 2000)
    b.launch(4000, 4800, 5000, 5500)
    b.launch(2500, 3000, 5700, 6000)
    d, r = _run(b, tmp_path)
    assert d.figures["host_wait_ratio"] == pytest.approx(3000 / 5000)
    assert d.verdict == "launch-bound" and any("whole trace" in x for x in d.reasons)
    assert not r.convert and r.predicted_speedup is None and "No repeating step" in r.reason


@pytest.mark.parametrize(
    ("name", "where", "framework"),
    [
        ("mlp_eager", None, "pytorch"),
        ("matmul_eager", GPU, "pytorch"),
        ("small_kernels_launch", GPU, "cuda"),  # cuda-python: a Python process, CUDA code
        ("demo_A_4096", None, "cuda"),
    ],
)
def test_conversion_code_follows_the_framework_seen_in_the_trace(real_trace, name, where, framework) -> None:  # type: ignore[no-untyped-def]
    path = real_trace(name, where) if where else real_trace(name)
    assert launchprof.analyze(path).diagnosis.framework == framework


def test_call_classes_per_name_match_classify(real_trace) -> None:  # type: ignore[no-untyped-def]
    from launchprof.analysis.stepdata import classes
    from launchprof.analysis.timeline.callkinds import classify

    api = launchprof.analyze(real_trace("mlp_graph")).trace.api
    fast, slow = classes(api["call"]), classify(api["call"])
    assert fast.equals(slow)
    part = api["call"].iloc[::7]
    assert classes(part).equals(classify(part))


def test_kernels_without_api_calls_do_not_break_the_diagnosis(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(30):  # no CUDA API rows: nothing to join the kernels to
        b.kernel(1_000 + i * 3_000, 2_000 + i * 3_000, corr=i + 1, name=f"k{i % 3}")
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    steps = a.found_steps
    assert steps.source == "inferred" and (steps.table["cpu_start"] >= steps.table["gpu_start"].min()).all()
    # No submitting call ended after a gap began: no host-wait, so the GPU's pace rules.
    assert a.diagnosis.verdict == "gpu-bound"


def test_a_single_step_is_judged_as_the_whole_trace(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=1, kernels=8)
    d, r = _run(b, tmp_path)
    assert d.verdict == "launch-bound" and any("whole trace" in x for x in d.reasons)
    assert not r.convert
