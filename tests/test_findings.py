"""Each finding kind on a tiny built trace (counted by hand) and on a real H200 trace
that shows it by construction (tests/data/gpu/MANIFEST.md; counts from facts.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from steploop import launch_loop
from tracebuilder import TraceBuilder

import launchprof
from launchprof.analysis.diagnosis.diagnose import diagnose
from launchprof.analysis.diagnosis.findings import Finding

GPU = Path(__file__).resolve().parent / "data" / "gpu"
FRAMEWORKS = GPU.parent / "frameworks"
FACTS = json.loads((GPU / "facts.json").read_text())


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Predictions here use the documented defaults, whatever the machine's cache holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _findings(path: Path) -> dict[str, Finding]:
    d = launchprof.analyze(path).diagnosis
    return {f.kind: f for f in d.findings}


def _built(b: TraceBuilder, tmp_path: Path) -> dict[str, Finding]:
    return _findings(b.write(tmp_path / "t.sqlite"))


def test_sync_in_step_with_a_device_to_host_copy(tmp_path: Path) -> None:
    b = TraceBuilder()

    def item(b: TraceBuilder, s: int, t: int) -> int:  # what .item() does: D2H copy + sync
        corr = b.call("cudaMemcpyAsync_v3020", t, t + 1_000)
        b.memcpy(t + 1_500, t + 2_000, corr, copy_kind=2)
        b.call("cudaStreamSynchronize_v3020", t + 1_000, t + 2_100)
        return t + 2_200

    launch_loop(b, steps=11, kernels=8, in_step=item)
    f = _built(b, tmp_path)["sync-in-step"]
    assert f.steps_affected == 10  # steady: the last step has no period
    assert "device-to-host" in f.evidence and f.figures["d2h_steps"] == 10
    assert f.figures["sync_calls_p50"] == 1
    # The .item() comes before the step's 8 launches: a capture of them holds no sync.
    assert f.severity == "warning" and f.figures["region_launch_share"] == 1.0 and f.fix.startswith("Not a blocker")


def _sync_loop(after: int, marked: bool, pause_ns: int) -> TraceBuilder:
    """12 steps of 8 launches (2 us calls, 1 us kernels) with a cudaStreamSynchronize after
    launch ``after`` (0-based), ``pause_ns`` between steps; NVTX ``step`` ranges when
    ``marked``."""
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(12):
        start = t
        for k in range(8):
            b.launch(t, t + 2_000, t + 2_500, t + 3_500)
            t += 2_000
            if k == after:
                b.call("cudaStreamSynchronize_v3020", t, t + 2_000)
                t += 2_000
        if marked:
            b.range("step", start, t, domain="launchprof")
        t += pause_ns
    return b


def test_a_sync_between_the_launches_of_a_step_is_a_blocker(tmp_path: Path) -> None:
    """A sync that cuts a step's launches in two (4 before it, 4 after): no capture of the
    step can hold it."""
    path = _sync_loop(after=3, marked=True, pause_ns=5_000).write(tmp_path / "t.sqlite")
    a = launchprof.analyze(path)
    f = {x.kind: x for x in a.diagnosis.findings}["sync-in-step"]
    assert f.severity == "blocker" and f.figures["region_launch_share"] == 0.5
    assert "sync-in-step" in [x["kind"] for x in a.recommendation.blockers]
    # The prediction's capture region agrees: one half of the user's step, not the
    # second half of one step and the first of the next.
    from launchprof.analysis.prediction.captureregion import capture_region
    from launchprof.analysis.stepdata import step_context
    from launchprof.analysis.steps import find_steps
    from launchprof.analysis.timeline.core import analyze_trace
    from launchprof.trace import load_trace

    analysis = analyze_trace(load_trace(path), 1_000)
    region = capture_region(step_context(analysis, find_steps(analysis)), True)
    assert set(region["region_launches"].dropna()) == {4.0}


@pytest.mark.parametrize("marked", [True, False])
def test_one_sync_a_step_found_from_the_kernels_stays_a_blocker(tmp_path: Path, marked: bool) -> None:
    """Steps found from the kernels start where the cycle's phase fell: one sync a step
    always leaves a whole cycle between syncs, so where it sits in the loop body (the
    middle of a forward, or after it) cannot be told: a blocker. With NVTX steps, the
    same sync after the step's launches lies outside what a capture holds."""
    b = _sync_loop(after=7, marked=marked, pause_ns=30_000)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    assert a.found_steps.source == ("nvtx" if marked else "inferred")
    f = {x.kind: x for x in a.diagnosis.findings}["sync-in-step"]
    assert f.severity == ("warning" if marked else "blocker")


def test_alloc_in_step(tmp_path: Path) -> None:
    b = TraceBuilder()

    def alloc(b: TraceBuilder, s: int, t: int) -> int:
        if s % 2 == 0:
            b.call("cudaMalloc_v3020", t, t + 3_000)
        return t + 3_000

    launch_loop(b, steps=11, kernels=8, in_step=alloc)
    f = _built(b, tmp_path)["alloc-in-step"]
    assert f.steps_affected == 5 and f.steps == [0, 2, 4, 6, 8]  # steady steps 0..9, even ones
    assert f.figures["alloc_call_ns_p50"] == 3_000


def test_dynamic_shapes_propose_buckets_with_their_padding(tmp_path: Path) -> None:
    b = TraceBuilder()
    sizes = [3, 5, 8, 16]
    launch_loop(b, steps=21, kernels=8, grid_of=lambda s, j: (sizes[s % 4], 1, 1))
    f = _built(b, tmp_path)["dynamic-shapes"]
    # 20 steady steps, 5 of each size; buckets 4, 8, 8, 16: padding (1 + 3) / (3 + 5 + 8 + 16) = 12.5 %.
    assert f.figures["distinct_shapes"] == 4
    assert f.figures["buckets"] == [4, 8, 16] and f.figures["bucket_steps"] == [5, 10, 5]
    assert f.figures["padding_ratio"] == pytest.approx(0.125)
    assert f.steps_affected == 15


def test_dynamic_shapes_of_grids_beyond_int32(tmp_path: Path) -> None:
    """A grid of 2**31 - 1 x N blocks: the columns are int32 once loaded, the grid size
    (x * y * z) is not - the buckets are powers of two of the real sizes."""
    b = TraceBuilder()
    sizes = [3, 5, 8, 16]
    launch_loop(b, steps=21, kernels=8, grid_of=lambda s, j: (2**31 - 1, sizes[s % 4], 1))
    f = _built(b, tmp_path)["dynamic-shapes"]
    assert f.figures["buckets"] == [2**33, 2**34, 2**35] and f.figures["bucket_steps"] == [5, 10, 5]


def test_varying_sequence(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=21, kernels=8, kernels_of=lambda s: 4 if s % 3 == 1 else 8)
    found = _built(b, tmp_path)
    f = found["varying-sequence"]
    # steady steps 0..19: 7 with 4 kernels (1, 4, ..., 19), 13 with 8.
    assert f.figures["distinct_sequences"] == 2 and f.steps_affected == 7
    assert f.figures["dominant_share"] == pytest.approx(13 / 20)
    assert "dynamic-shapes" not in found


def test_reinstantiation_every_step(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(10):
        start = t
        b.call("cudaStreamBeginCapture_v10000", t, t + 1_000)
        b.call("cudaStreamEndCapture_v10000", t + 1_000, t + 2_000)
        b.call("cudaGraphInstantiate_v12000", t + 2_000, t + 102_000)
        corr = b.call("cudaGraphLaunch_v10000", t + 102_000, t + 110_000)
        for n in range(3):
            b.kernel(t + 111_000 + n * 1_000, t + 111_900 + n * 1_000, corr, graph_node=n + 1)
        t += 120_000
        b.range("step", start, t, domain="launchprof")
    f = _built(b, tmp_path)["reinstantiation"]
    assert f.figures["instantiations"] == 10 and f.figures["graph_launches"] == 10
    assert f.figures["instantiate_p50_ns"] == 100_000


def test_graph_trace_mode(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(6):
        corr = b.call("cudaGraphLaunch_v10000", t, t + 3_000)
        b.graph_exec(t + 4_000, t + 9_000, corr)
        t += 10_000
    f = _built(b, tmp_path)["graph-trace-mode"]
    assert f.figures["graph_executions"] == 6 and "--cuda-graph-trace=node" in f.fix


def test_legacy_stream_from_a_synchronous_memset(tmp_path: Path) -> None:
    b = TraceBuilder()
    corr = b.call("cudaMemset_v3020", 100, 500)
    b.memset(600, 700, corr, stream=20)  # the legacy default stream of this trace is 20
    launch_loop(b, steps=11, kernels=8, stream=20)
    f = _built(b, tmp_path)["legacy-stream"]
    assert f.figures["streams"] == [20] and f.figures["kernels_on_legacy"] == 80
    assert f.severity == "blocker"  # not PyTorch: the user captures by hand


def test_no_legacy_stream_finding_on_a_created_stream(tmp_path: Path) -> None:
    b = TraceBuilder()
    corr = b.call("cudaMemset_v3020", 100, 500)
    b.memset(600, 700, corr, stream=7)
    launch_loop(b, steps=11, kernels=8, stream=13)
    assert "legacy-stream" not in _built(b, tmp_path)


def test_profiler_overhead(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=11, kernels=8, call_ns=5_000, kernel_ns=1_000)
    f = _built(b, tmp_path)["profiler-overhead"]
    # 8 calls of 5 us each, of which the default 2.76 us is nsys (tests/data/traces/README.md): 8 x 2.76 = 22.08 us.
    assert f.figures["overhead_ns"] == pytest.approx(8 * 2_760)
    assert f.figures["unprofiled_step_ns"] == pytest.approx(41_700 - 8 * 2_760)
    assert f.severity == "info"


def test_profiler_overhead_from_a_calibration(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=11, kernels=8, call_ns=5_000, kernel_ns=1_000)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    d, _ = diagnose(a, calibration={"profiler": {"launch_overhead_ns": 1_500.0}})
    f = {x.kind: x for x in d.findings}["profiler-overhead"]
    assert f.figures["unprofiled_step_ns"] == pytest.approx(41_700 - 8 * 1_500)
    # nsys adding 0.2 us to each of 8 calls of a 41.7 us step: 3.8 %, under the 5 % that is reported
    d, _ = diagnose(a, calibration={"profiler": {"launch_overhead_ns": 200.0}})
    assert "profiler-overhead" not in {x.kind for x in d.findings}


def test_only_the_profiler_note_on_a_clean_launch_loop(tmp_path: Path) -> None:
    b = TraceBuilder()
    launch_loop(b, steps=11, kernels=8, call_ns=3_000, kernel_ns=1_000)
    assert set(_built(b, tmp_path)) == {"profiler-overhead"}


# Real traces ---------------------------------------------------------------------------


def _steady(name: str) -> int:
    return FACTS[name]["steps"]


def test_real_item_loop_syncs_in_every_step(real_trace) -> None:  # type: ignore[no-untyped-def]
    a = launchprof.analyze(real_trace("torch_mlp_item", GPU))
    f = {x.kind: x for x in a.diagnosis.findings}["sync-in-step"]
    assert f.steps_affected == len(a.found_steps.steady)
    assert f.figures["d2h_steps"] == f.steps_affected and f.figures["sync_calls_p50"] == 1
    assert "cudaStreamSynchronize" in f.evidence
    # out.sum().item() after the step's launches (MANIFEST): a capture of the launches ends
    # before it, so it is no blocker; it still drains the GPU every step.
    assert f.severity == "warning" and f.figures["region_launch_share"] == 1.0
    assert "sync-in-step" not in [b["kind"] for b in a.recommendation.blockers]


def test_real_alloc_loop(real_trace) -> None:  # type: ignore[no-untyped-def]
    a = launchprof.analyze(real_trace("small_kernels_alloc", GPU))
    f = {x.kind: x for x in a.diagnosis.findings}["alloc-in-step"]
    assert f.steps_affected == len(a.found_steps.steady) == _steady("small_kernels_alloc") - 1
    assert "cudaMalloc" in f.evidence and "cudaFree" in f.evidence


def test_real_dynamic_batch_sizes(real_trace) -> None:  # type: ignore[no-untyped-def]
    f = _findings(real_trace("torch_mlp_dynamic", GPU))
    d = f["dynamic-shapes"]
    # By construction: batch sizes 1, 2, 4, 8, 16 (LayerNorm runs one block per row).
    assert d.figures["distinct_shapes"] == 5 and d.figures["buckets"] == [1, 2, 4, 8, 16]
    assert sum(d.figures["bucket_steps"]) == 99 and d.figures["padding_ratio"] == 0
    assert "varying-sequence" not in f


def test_real_branchy_sequence(real_trace) -> None:  # type: ignore[no-untyped-def]
    f = _findings(real_trace("torch_mlp_branchy", GPU))
    v = f["varying-sequence"]
    assert v.figures["distinct_sequences"] == FACTS["torch_mlp_branchy"]["per_step"]["distinct_kernel_sequences"]
    assert "17..33" in v.evidence
    assert v.steps_affected in (36, 37)  # the 37 "hard" steps, less the last if it is one


@pytest.mark.parametrize(
    ("name", "inst", "upd", "launches"),
    [
        ("small_kernels_reinstantiate", "cudaGraphInstantiate", None, 100),
        ("small_kernels_update", "cudaGraphInstantiate", "cudaGraphExecUpdate", 100),
        ("torch_mlp_capture-every-step", "cudaGraphInstantiateWithFlags", None, 80),
    ],
)
def test_real_reinstantiation(real_trace, name, inst, upd, launches) -> None:  # type: ignore[no-untyped-def]
    a = launchprof.analyze(real_trace(name, GPU))
    f = {x.kind: x for x in a.diagnosis.findings}["reinstantiation"]
    api = FACTS[name]["api"]
    assert (
        f.figures["instantiations"] == api[inst] and f.figures["graph_launches"] == api["cudaGraphLaunch"] == launches
    )
    assert f.figures["exec_updates"] == (api[upd] if upd else 0)
    assert not a.recommendation.convert


def test_real_graph_trace_mode(real_trace) -> None:  # type: ignore[no-untyped-def]
    f = _findings(real_trace("graph_trace_mode", GPU))["graph-trace-mode"]
    assert f.figures["graph_executions"] == FACTS["graph_trace_mode"]["gpu_activities"]["whole_graph_rows"] == 100


def test_real_legacy_stream(real_trace) -> None:  # type: ignore[no-untyped-def]
    legacy = _findings(real_trace("small_kernels_legacy", GPU))
    assert legacy["legacy-stream"].figures["streams"] == [7]  # MANIFEST.md: streamId 7 here
    assert legacy["legacy-stream"].figures["share"] == 1.0
    assert "legacy-stream" not in _findings(real_trace("small_kernels_launch", GPU))  # created stream 13


@pytest.mark.slow
def test_real_profiler_overhead_on_the_demo(real_trace) -> None:  # type: ignore[no-untyped-def]
    f = _findings(real_trace("demo_A_4096"))["profiler-overhead"]
    # tests/data/traces/README.md: 517 us per 75-launch step under nsys, 310 us without: 25 repeats of 3 launches.
    assert 25 * f.figures["unprofiled_step_ns"] == pytest.approx(310_000, rel=0.15)


def test_legacy_stream_from_target_info_cuda_stream(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.cuda_stream(9, flag=3)  # the NULL stream of pid 100
    b.cuda_stream(7, flag=2)  # stream 7 is an ordinary non-blocking stream here
    launch_loop(b, steps=11, kernels=8, stream=9)
    f = _built(b, tmp_path)["legacy-stream"]
    assert f.figures["streams"] == [9] and "TARGET_INFO_CUDA_STREAM" in f.evidence


def test_real_legacy_stream_is_read_from_target_info(real_trace) -> None:  # type: ignore[no-untyped-def]
    f = _findings(real_trace("small_kernels_legacy", GPU))["legacy-stream"]
    assert "TARGET_INFO_CUDA_STREAM" in f.evidence and f.figures["streams"] == [7]


def test_legacy_stream_in_pytorch_is_a_note(real_trace) -> None:  # type: ignore[no-untyped-def]
    """A PyTorch step on the legacy stream changes nothing for the user (torch.cuda.graph
    captures on a side stream of its own): an ``info`` note, not a warning."""
    f = _findings(real_trace("mlp_eager"))["legacy-stream"]
    assert f.severity == "info" and f.fix.startswith("Nothing to change")


def test_real_graph_pool_over_buckets_is_not_a_blocker(real_trace) -> None:  # type: ignore[no-untyped-def]
    f = _findings(real_trace("decode_buckets_graph", GPU))["dynamic-shapes"]
    # MANIFEST.md: 4 graphs over padded buckets; the steps' shapes vary between replays.
    assert f.severity == "info" and "pool of graphs is in place" in f.fix


def _shape_loop(b: TraceBuilder, steps: list[list[tuple[str, int]]]) -> None:
    """One NVTX ``step`` range (launchprof domain) per entry of ``steps``, each launching
    its (kernel name, grid size) list back to back: 5 us calls, 1 us kernels."""
    t = 1_000_000
    for kernels in steps:
        start = t
        for name, grid in kernels:
            b.launch(t, t + 5_000, t + 5_500, t + 6_500, name=name, grid=(grid, 1, 1))
            t += 5_000
        b.range("step", start, t, domain="launchprof")
        t += 2_000


def test_batch_size_changing_gemm_choice_is_a_shape_change(tmp_path: Path) -> None:
    # Batch 1..32: layer_norm (every step) runs one block per row; cuBLAS picks a split-K
    # GEMM (two kernels) for batches up to 8 and one GEMM above: the count varies too.
    batches = [1, 4, 16, 32, 2, 8, 24, 1, 32, 4, 16, 8, 2, 24, 1, 32, 4, 16, 8, 2, 24]
    steps = []
    for n in batches:
        gemm = [("gemm_splitk", 4), ("splitk_reduce", 1)] if n <= 8 else [("gemm_large", n)]
        steps.append([("layer_norm", n), *gemm, ("gelu", n)])
    b = TraceBuilder()
    _shape_loop(b, steps)
    found = _built(b, tmp_path)
    assert "dynamic-shapes" in found and "varying-sequence" not in found
    assert not found["dynamic-shapes"].figures["growing"]
    assert "shape bucket" in found["dynamic-shapes"].fix


def test_a_branch_that_runs_other_kernels_stays_a_varying_sequence(tmp_path: Path) -> None:
    # The shared kernels keep their grid; the easy path runs a smaller head (its own grid).
    steps = [
        [("block", 8), ("block", 8), ("head", 16 if i % 2 else 4)] + ([("block", 8)] * 2 if i % 2 else [])
        for i in range(21)
    ]
    b = TraceBuilder()
    _shape_loop(b, steps)
    found = _built(b, tmp_path)
    assert "varying-sequence" in found and "dynamic-shapes" not in found


def test_a_cache_that_grows_every_step_is_told_to_be_static(tmp_path: Path) -> None:
    # A decode loop with a dynamic KV cache: the cat kernel's grid grows with every token.
    steps = [[("attention", 4), ("cat", 10 + i), ("mlp", 8)] for i in range(21)]
    b = TraceBuilder()
    _shape_loop(b, steps)
    f = _built(b, tmp_path)["dynamic-shapes"]
    assert f.figures["growing"] is True
    assert "cache_implementation='static'" in f.fix and "cat's grid grows" in f.fix


def test_a_cache_that_grows_and_starts_over_each_sequence_is_told_to_be_static(tmp_path: Path) -> None:
    # Four generate() calls: the cat kernel's grid climbs slowly (a block every 3 tokens)
    # and drops back at each call's first token; a batch varying step to step is not this.
    steps = [[("attention", 4), ("cat", 8 + i // 3), ("mlp", 8)] for _ in range(4) for i in range(24)]
    b = TraceBuilder()
    _shape_loop(b, steps)
    f = _built(b, tmp_path)["dynamic-shapes"]
    assert f.figures["growing"] is True and "cache_implementation='static'" in f.fix


@pytest.mark.parametrize(
    "sizes",
    [
        [1, 2, 4, 8] * 25,  # a round-robin batch size
        ([1] * 8 + [2] * 8 + [4] * 8 + [8] * 8) * 3,  # a sweep of four sizes, 8 steps each, repeated
        [100 + 10 * i + j for j in range(12) for i in range(8)],  # batches of 8 sorted by length
    ],
)
def test_sizes_that_are_no_growing_cache_get_buckets(tmp_path: Path, sizes: list[int]) -> None:
    steps = [[("attention", 4), ("pad_copy", n), ("mlp", 8)] for n in sizes]
    b = TraceBuilder()
    _shape_loop(b, steps)
    f = _built(b, tmp_path)["dynamic-shapes"]
    assert f.figures["growing"] is False and "cache_implementation='static'" not in f.fix


@pytest.mark.parametrize("name", ["llama_b1_eager", "llama_b1_eager_calls4_rec2"])
def test_real_hf_kv_cache_gets_the_static_cache_advice(real_trace, name: str) -> None:  # type: ignore[no-untyped-def]
    """Hugging Face Llama greedy decode with its dynamic cache (one generate() call, and
    four: the copy kernel's grid climbs 8 -> 24 blocks within each call and starts over):
    the fix is a static cache, not buckets of a copy kernel's grid (issue: KV cache growth
    was reported as buckets with 41 % padding)."""
    f = _findings(real_trace(name, FRAMEWORKS))["dynamic-shapes"]
    assert f.figures["growing"] is True
    assert "cache_implementation='static'" in f.fix and "shape bucket" not in f.fix


def test_real_graph_replay_loop_that_waits_for_the_host_is_host_bound(real_trace) -> None:  # type: ignore[no-untyped-def]
    # decode_buckets_graph replays one graph a step (MANIFEST) and the GPU waits for the
    # CPU a third of each step: host-bound, with what the host does around the replay.
    a = launchprof.analyze(real_trace("decode_buckets_graph", GPU))
    d = a.diagnosis
    assert d.verdict == "host-bound"
    f = {x.kind: x for x in d.findings}["host-outside-graph"]
    assert f.figures["host_gaps_ns_per_step"] > 0 and f.figures["period_ns"] > f.figures["host_gaps_ns_per_step"]
    assert "loop's own Python" in f.fix


@pytest.mark.parametrize("stream", ["", "_ptsz"], ids=["legacy-default-stream", "per-thread-default-stream"])
def test_a_built_replay_loop_names_its_input_copies_and_sync(tmp_path: Path, stream: str) -> None:
    # Per step: 3 input copies (cudaMemcpyAsync, 4 us each), one graph launch of 2 kernels,
    # one cudaStreamSynchronize blocked 30 us, then 40 us of Python; 20 steps. A per-thread
    # default stream build calls the _ptsz forms (nsys writes cudaMemcpyAsync_ptsz_v7000).
    b = TraceBuilder()
    t = 1_000_000
    for _ in range(20):
        start = t
        for _ in range(3):
            corr = b.call(f"cudaMemcpyAsync{stream}_v3020", t, t + 4_000)
            b.memcpy(t + 4_500, t + 5_000, corr, copy_kind=8)
            t += 4_000
        corr = b.call(f"cudaGraphLaunch{stream}_v10000", t, t + 6_000)
        b.kernel(t + 7_000, t + 17_000, corr, graph_node=1)
        b.kernel(t + 17_100, t + 37_000, corr, graph_node=2)
        t += 6_000
        b.call(f"cudaStreamSynchronize{stream}_v3020", t, t + 31_500)
        t += 31_500 + 40_000
        b.range("step", start, t, domain="launchprof")
    d = launchprof.analyze(b.write(tmp_path / "t.sqlite")).diagnosis
    # The sync drains the GPU every step, but it sits outside the graph: host-bound, and
    # the sync is one of the host's items (not a capture blocker).
    assert d.verdict == "host-bound"
    found = {x.kind: x for x in d.findings}
    assert "sync-in-step" not in found
    f = found["host-outside-graph"]
    assert f.figures["input_copies_per_step"] == 3 and f.figures["input_copies_ns_per_step"] == 12_000
    assert f.figures["syncs_per_step"] == 1 and f.figures["syncs_ns_per_step"] == 31_500
    # period 3 x 4 + 6 + 31.5 + 40 = 89.5 us; in CUDA calls 12 + 6 + 31.5 = 49.5 us.
    assert f.figures["period_ns"] == 89_500 and f.figures["host_gaps_ns_per_step"] == 40_000
    assert "static buffers" in f.fix and "check every k steps" in f.fix
