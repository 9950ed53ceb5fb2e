"""The real-framework corpus (tests/data/frameworks): steps a user means, the expected
speedup against the workloads' own timings without nsys, verdicts against what each
pair was built to be.

Independent figures: ``manifest.json`` holds each workload's step time measured by the
workload itself without the profiler (same device call as its trace) and how many steps
it ran; ``facts.json`` holds counts read from each trace with plain sqlite3
(``corpus_facts.py``, no launchprof code).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import launchprof
from launchprof.analysis.prediction.expect import NOISE, RUN_SPREAD
from launchprof.api.traces import with_baseline

CORPUS = Path(__file__).resolve().parent / "data" / "frameworks"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
FACTS = json.loads((CORPUS / "facts.json").read_text())
TRACES = sorted(MANIFEST["traces"])
PAIRS = MANIFEST["pairs"]
SAME_KERNELS = [p for p in PAIRS if p["work"] == "same"]


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The documented defaults, whatever the machine's cache holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


_CACHE: dict[str, Any] = {}


def _analysis(name: str) -> Any:
    if name not in _CACHE:
        _CACHE[name] = launchprof.analyze(CORPUS / f"{name}.sqlite.xz")
    return _CACHE[name]


def _truth(pair: dict[str, str]) -> float:
    t = MANIFEST["traces"]
    return float(t[pair["before"]]["bare_step_us"]) / float(t[pair["after"]]["bare_step_us"])


@pytest.mark.parametrize("name", TRACES)
def test_kernel_count_matches_sqlite(name: str) -> None:
    a = _analysis(name)
    assert sum(d.figures.kernels for d in a.devices) == FACTS[name]["kernels"]


@pytest.mark.parametrize("name", TRACES)
def test_steps_are_the_workloads_steps(name: str) -> None:
    s = _analysis(name).found_steps
    facts, truth = FACTS[name], MANIFEST["traces"][name]
    graph_launches = facts["api"].get("cudaGraphLaunch", 0)
    if name.startswith(("gpt2", "llama")) and graph_launches:
        # A replaying decode loop: one graph launch a decoded token (the prefill runs eagerly).
        assert s.source == "graph-launch" and s.count == graph_launches == truth["steps_truth"] - 1
    elif name.startswith(("gpt2", "llama")) or "emit-nvtx" in name:
        # generate() records no user range, emit_nvtx only per-operator ranges: one step per
        # token (prefill + 31 decode steps), one per forward. Several generate() calls in one
        # trace may leave the last call's tail (its final kernels after the last token) as a
        # short last step without a period, never a steady one.
        assert s.source == "inferred"
        full = (
            s.table["kernels"] >= 0.5 * s.table["kernels"].mode().iloc[0]
        )  # a token (the prefill may differ a little)
        if "baseline_folder" not in truth:
            assert int(full.sum()) == truth["steps_truth"]
        else:  # the whole program: a call's first forward runs a few more kernels (GPT-2: 293 of 284),
            # which shift a cut of fixed length by as many; one forward may fall before the first cut
            assert truth["steps_truth"] - 1 <= int(full.sum()) <= truth["steps_truth"]
        rest = s.table.loc[~full]
        assert len(rest) <= 1 and rest["period_ns"].isna().all() and list(rest.index) in ([], [len(s.table) - 1])
    else:
        assert s.source == "nvtx" and s.count == truth["steps_truth"]


@pytest.mark.parametrize("name", [n for n in TRACES if any(k.startswith("CCCL:") for k in FACTS[n]["nvtx"])])
def test_a_library_range_is_never_the_step(name: str) -> None:
    s = _analysis(name).found_steps
    assert s.source != "nvtx"
    assert ("CCCL:cub::DeviceScan::InclusiveScan", "a library's own range, not a loop step") in s.rejected


def test_per_operator_ranges_of_emit_nvtx_are_never_the_step() -> None:
    s = _analysis("resnet50_b1_emit-nvtx").found_steps
    nvtx = FACTS["resnet50_b1_emit-nvtx"]["nvtx"]
    assert nvtx["total"] > 500 * MANIFEST["traces"]["resnet50_b1_emit-nvtx"]["steps_truth"]  # sqlite3
    assert s.source == "inferred"
    assert s.rejected and all(text.startswith("aten::") for text, _ in s.rejected)
    # One entry per operator, not one per range text: the counts add up to sqlite3's.
    counts = [re.fullmatch(r".* \((\d+) range texts\)", text) for text, _ in s.rejected]
    assert sum(int(m.group(1)) if m else 1 for m in counts) == nvtx["distinct"]
    assert len(s.rejected) < 50


# Same-kernel pairs where the estimate from the trace alone misses the truth by more than
# 30 %: it takes nsys's inflation of PyTorch's host time as 2.0x, and these eager ViT steps
# (much Python between few kernels) were inflated less: 1.26x at batch 32, about 1.0x at
# batch 1 against the median of six runs without nsys (2.8-6.0 ms, manifest
# ``bare_runs_us``). No figure of the trace was found to tell them apart, hence the range
# (inflation 1.0x-2.9x), which holds the truth, and the measurement (below). The test keeps
# each entry honest: the miss is still there.
KNOWN_MISSES = {"vit_small_b1_graph", "vit_small_b32_graph"}


@pytest.mark.parametrize("pair", SAME_KERNELS, ids=lambda p: f"{p['before']}->{p['after']}")
def test_expected_speedup_of_a_same_kernel_pair_is_within_30_percent(pair: dict[str, str]) -> None:
    rec = _analysis(pair["before"]).recommendation
    truth = _truth(pair)
    assert rec.expected is not None and rec.expected.eager_source == "estimate"
    assert rec.expected.speedup_low <= truth <= rec.expected.speedup_high
    if pair["after"] in KNOWN_MISSES:
        assert rec.expected_speedup != pytest.approx(truth, rel=0.30)  # else the entry is stale
    else:
        assert rec.expected_speedup == pytest.approx(truth, rel=0.30)


def test_steps_of_two_shapes_are_weighed_as_the_program_runs_them() -> None:
    """The early-exit loop's steps take two paths (26 or 74 kernels; 16 short and 13 long
    steady steps): each path is predicted on its own and weighed by its steps, as the
    workload's own clock (the mean step) weighs them. The medians alone were the short
    path's: the eager step measured by that clock against a short graph step read 7.71x
    where the truth is 4.01x (docs/results.md before this change). The measured
    expectation stays within 25 %: the conversion also copies each batch into the graphs'
    static input, which the eager trace does not hold (+17 % with the launch gap under
    nsys, +21 % with the one measured without it, predict.DEFAULTS)."""
    pair = next(p for p in PAIRS if p["before"] == "early_exit_eager")
    truth = _truth(pair)
    a = _analysis("early_exit_eager")
    e = a.recommendation.expected
    steady = a.steps[~a.steps["warmup"] & a.steps["period_ns"].notna()]  # the last step has no period
    assert e is not None and e.shapes == tuple(
        (float(k), int(n)) for k, n in sorted(steady["kernels"].value_counts().items())
    )
    assert len(e.shapes) == 2 and e.speedup_low <= truth <= e.speedup_high
    bare = MANIFEST["traces"]["early_exit_eager"]["bare_step_us"] * 1e3
    # the steps without a profiler, each shape's weighed, against the workload's clock
    assert e.eager_step_ns == pytest.approx(bare, rel=0.15)
    measured = with_baseline(a, _runs([bare])).recommendation.expected
    assert measured is not None and measured.eager_step_ns == pytest.approx(bare)
    assert measured.speedup == pytest.approx(truth, rel=0.25)
    c = launchprof.compare(CORPUS / "early_exit_eager.sqlite.xz", CORPUS / "early_exit_graphs.sqlite.xz")
    assert c.speedup_unprofiled == pytest.approx(truth, rel=0.30)
    # one shape elsewhere in the corpus: a decode's prefill (1 step in 32) is no shape of its own
    assert all(not _analysis(n).recommendation.expected.shapes for n in ("gpt2_b1_eager", "llama_b1_eager"))


@pytest.mark.parametrize("pair", SAME_KERNELS, ids=lambda p: f"{p['before']}->{p['after']}")
def test_with_the_eager_step_measured_the_expected_speedup_is_within_30_percent(pair: dict[str, str]) -> None:
    """What ``profile`` does when it can time the steps without nsys (``--baseline-runs``):
    the measured eager step (here the workload's own clock without nsys, from the recording)
    replaces the estimate; what is left to predict is the graph step, against the graph
    workload's own clock."""
    t = MANIFEST["traces"][pair["before"]]
    runs = [u * 1e3 for u in t.get("bare_runs_us") or [t["bare_step_us"]]]
    rec = with_baseline(_analysis(pair["before"]), _runs(runs)).recommendation
    truth = _truth(pair)
    assert rec.expected is not None and rec.expected.eager_source == "measured"
    assert rec.expected.eager_step_ns == pytest.approx(float(np.median(runs)))
    assert rec.expected_speedup == pytest.approx(truth, rel=0.30)
    assert rec.expected.speedup_low <= truth <= rec.expected.speedup_high


def _runs(steps_ns: list[float], steps: int = 6) -> list[np.ndarray]:
    """One step-times array per run (as ``profile``'s runs without nsys give), each run's
    steps ``steps_ns[i]`` apart: its period p50 after the warm-up period is ``steps_ns[i]``."""
    return [np.array([[round(k * p), round(k * p) + 1] for k in range(steps)], dtype=np.int64) for p in steps_ns]


# Pairs whose truth the eager trace cannot show, each with what the comparison says instead:
# a conversion built to drop a large kernel. (The range of the estimate, inflation 1.0x-2.9x,
# holds the others: the static-cache decode loops and the compiler's fused kernels.)
EXPLAINED = {"matmul_graph_3": "different"}


@pytest.mark.parametrize(
    "pair", [p for p in PAIRS if p["work"] != "same"], ids=lambda p: f"{p['before']}->{p['after']}"
)
def test_other_pairs_are_held_by_the_range_or_explained_by_the_comparison(pair: dict[str, str]) -> None:
    rec = _analysis(pair["before"]).recommendation
    truth = _truth(pair)
    assert rec.expected is not None
    held = rec.expected.speedup_low <= truth <= rec.expected.speedup_high
    why = EXPLAINED.get(pair["after"])
    if why is None:
        assert held
        return
    assert not held  # else the entry in EXPLAINED is stale
    c = launchprof.compare(CORPUS / f"{pair['before']}.sqlite.xz", CORPUS / f"{pair['after']}.sqlite.xz")
    assert c.work_change is not None and c.work_change.kind == why and c.verdict == "different-work"


def test_a_gain_under_the_minimum_without_nsys_is_not_converted() -> None:
    # ResNet-50 bf16 batch 64: 1.86x under nsys, 1.07x without (manifest): no conversion.
    rec = _analysis("resnet50_b64_eager").recommendation
    assert rec.predicted_speedup is not None and rec.predicted_speedup > 1.25
    assert rec.expected_speedup is not None and rec.expected_speedup < 1.25
    assert rec.convert is False
    assert f"under nsys {rec.predicted_speedup:.2f}x" in rec.reason
    # ... and the verdict says what holds the GPU back without the profiler: its own work.
    assert _analysis("resnet50_b64_eager").diagnosis.verdict == "gpu-bound"


@pytest.mark.parametrize("name", [n for n in TRACES if "static-graphs" in n or "static-compile" in n])
def test_a_replaying_decode_loop_is_host_bound_with_its_copies_and_syncs(name: str) -> None:
    d = _analysis(name).diagnosis
    assert d.verdict == "host-bound"
    f = {x.kind: x for x in d.findings}["host-outside-graph"]
    facts = FACTS[name]
    per_token = facts["copies_between_graph_launches_p50"]  # sqlite3: copy calls between two replays
    copies = f.figures["input_copies_per_step"] + f.figures["read_backs_per_step"]  # both are cudaMemcpyAsync
    assert copies == pytest.approx(per_token, rel=0.05)
    assert f.figures["syncs_per_step"] >= 1  # the stopping check of every token
    assert f.figures["read_backs_per_step"] >= 1  # ... reads a flag back to the host
    assert "static buffers" in f.fix


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p['before']}->{p['after']}")
def test_compare_verdict_and_work_change_match_the_construction(pair: dict[str, str]) -> None:
    c = launchprof.compare(CORPUS / f"{pair['before']}.sqlite.xz", CORPUS / f"{pair['after']}.sqlite.xz")
    assert c.work_change is not None
    kind = {"same": "same", "known-transform": "known-transform", "fused": "fused", "different": "different"}
    assert c.work_change.kind == kind[pair["work"]]
    if pair["work"] == "different":
        assert c.verdict == "different-work"
    elif _truth(pair) < 1.05:  # built to gain nothing (a GPU-bound GEMM loop)
        assert c.verdict == "not-faster"
    else:
        assert c.verdict == "verified"
    parts = c.speedup_parts
    assert parts is not None and c.speedup is not None
    assert parts.from_gpu_work * parts.from_host == pytest.approx(parts.before_period_ns / parts.after_period_ns)
    if pair["work"] == "fused":  # the compiler's kernels do less GPU work per step
        assert parts.from_gpu_work > 1 and parts.gpu_work_saved_ns > 0


def test_measured_step_without_nsys_replaces_the_estimate() -> None:
    truth = MANIFEST["traces"]["resnet50_b1_eager"]["bare_step_us"] * 1e3
    one = with_baseline(_analysis("resnet50_b1_eager"), _runs([truth])).recommendation
    e = one.expected
    assert e is not None and e.eager_source == "measured" and e.eager_step_ns == pytest.approx(truth)
    assert e.eager_runs == 1 and e.eager_timed_by == "step-markers"
    assert one.expected_speedup == pytest.approx(truth / e.graph_step_ns)
    assert one.convert is True and "without the profiler" in one.reason
    # One run: the eager step may move RUN_SPREAD either way between runs.
    assert e.speedup_high == pytest.approx(e.speedup * RUN_SPREAD * (1 + NOISE))
    assert e.speedup_low <= e.speedup / RUN_SPREAD * (1 - NOISE) + 1e-9
    # Three runs: their own lowest and highest step.
    three = with_baseline(_analysis("resnet50_b1_eager"), _runs([0.9 * truth, truth, 1.2 * truth])).recommendation
    t = three.expected
    assert t is not None and t.eager_step_ns == pytest.approx(truth)
    assert t.speedup_high == pytest.approx(1.2 * truth / t.graph_step_ns * (1 + NOISE))
    assert t.speedup_low <= 0.9 * truth / t.graph_step_ns * (1 - NOISE) + 1e-9
    assert three.expected_speedup == pytest.approx(one.expected_speedup)


def _with_baseline(folder: Path, step_ns: int, runs: int = 2, steps: int = 12) -> None:
    """Give a report folder runs without nsys: ``baseline-I.steps`` files of ``steps``
    steps ``step_ns`` apart (+/- 1 %, alternating) and the summary's ``baseline`` section."""
    for i in range(1, runs + 1):
        t, lines = 1_000_000, []
        for k in range(steps):
            lines.append(f"step {t} {t + step_ns // 2}\n")
            t += step_ns + (step_ns // 100 if k % 2 else -step_ns // 100)
        (folder / f"baseline-{i}.steps").write_text("".join(lines))
    doc = json.loads((folder / "summary.json").read_text())
    doc["baseline"] = {"runs": runs, "period_p50_ns": float(step_ns), "host_ahead_of_gpu": False}
    (folder / "summary.json").write_text(json.dumps(doc))


def test_compare_decides_on_the_speedup_without_nsys_when_both_sides_have_it(tmp_path: Path) -> None:
    from launchprof.report.write import write_report

    before, after = tmp_path / "before", tmp_path / "after"
    write_report(_analysis("resnet50_b64_eager"), before)
    write_report(_analysis("resnet50_b64_graph"), after)
    # The workloads' own step times without nsys (manifest): 7216.7 us and 6719.7 us.
    t = MANIFEST["traces"]
    _with_baseline(before, int(t["resnet50_b64_eager"]["bare_step_us"] * 1e3))
    _with_baseline(after, int(t["resnet50_b64_graph"]["bare_step_us"] * 1e3))
    c = launchprof.compare(before, after, min_effect=0.10)
    truth = t["resnet50_b64_eager"]["bare_step_us"] / t["resnet50_b64_graph"]["bare_step_us"]
    assert c.speedup is not None and c.speedup > 1.7  # under nsys
    assert c.speedup_unprofiled == pytest.approx(truth, rel=0.02)
    assert c.verdict == "not-faster"  # 1.07x without nsys is below the 10 % asked for
    assert "Without nsys" in c.check("faster").detail
    # Without --min-effect 0.10 the default 5 % is met by 1.07x.
    assert launchprof.compare(before, after).verdict == "verified"


def test_a_graph_side_whose_host_ran_ahead_uses_its_gpu_paced_period(tmp_path: Path) -> None:
    # As on the H200 (benchmarks/results/check-h200-2026-12-01): the graph replay's host
    # steps take 41 us while the GPU works 6.8 ms a step, so its host step times say
    # nothing; the steady periods under nsys (GPU-bound) stand for the unprofiled ones.
    from launchprof.report.write import write_report

    before, after = tmp_path / "before", tmp_path / "after"
    write_report(_analysis("resnet50_b64_eager"), before)
    write_report(_analysis("resnet50_b64_graph"), after)
    eager_ns = int(MANIFEST["traces"]["resnet50_b64_eager"]["bare_step_us"] * 1e3)
    _with_baseline(before, eager_ns)
    doc = json.loads((after / "summary.json").read_text())
    doc["baseline"] = {"runs": 3, "period_p50_ns": 41_175.0, "host_ahead_of_gpu": True}
    (after / "summary.json").write_text(json.dumps(doc))
    rows = [ln.split(",") for ln in (after / "steps.csv").read_text().splitlines()]
    head = rows[0]
    steady = [
        float(r[head.index("period_ns")])
        for r in rows[1:]
        if r[head.index("warmup")] == "False" and r[head.index("period_ns")] not in ("", "nan")
    ]
    c = launchprof.compare(before, after, min_effect=0.10)
    assert c.speedup_unprofiled == pytest.approx(eager_ns / sorted(steady)[len(steady) // 2], rel=0.03)
    assert c.speedup_unprofiled < 1.10 < c.speedup  # 1.8x under nsys
    assert c.verdict == "not-faster"
    assert any("ran ahead of the GPU" in n for n in c.notes)


@pytest.mark.parametrize("name", ["gpt2_b1", "gpt2_b8", "llama_b1"])
def test_the_profiled_prediction_of_a_decode_loop_keeps_its_host_work(name: str) -> None:
    """A decode step synchronizes every token: a graph holds its forward, not the sampling
    and stopping check around it. The prediction under nsys keeps that host time (it was
    19.7x-20.9x against 1.4x-3.7x measured when all host time counted as removable)."""
    before = _analysis(f"{name}_eager")
    rec = before.recommendation
    assert rec.expected is not None and rec.expected.synchronizing
    assert rec.predicted_step_ns == pytest.approx(rec.expected.profiled_graph_step_ns)
    assert rec.predicted_step_ns > rec.expected.kept_host_ns  # the kept host time is in it
    c = launchprof.compare(CORPUS / f"{name}_eager.sqlite.xz", CORPUS / f"{name}_static-graphs.sqlite.xz")
    assert c.speedup is not None
    assert 0.4 < c.speedup / rec.predicted_speedup < 2.5


# compare of two traces headlines the speedup without nsys, estimated from each side's step
# without the profiler (the one model: recommendation.step_without_profiler; a side that
# replays graphs takes nsys's replay inflation, predict.DEFAULTS). Where the estimate misses
# the truth by more than 30 %: the ViT pairs (nsys inflated their eager Python 1.0x-1.3x,
# not the 2.0x the estimate takes, see KNOWN_MISSES above). The GEMM loop ran slower without
# nsys than under it (machine variance of a GPU-bound loop): no range built from the trace
# holds that. The early-exit loop's steps take two paths: the medians compare the short one
# (MIXED_STEPS).
COMPARE_MISSES = {"vit_small_b1_graph", "vit_small_b32_graph"}
COMPARE_OUT_OF_RANGE = {"matmul_graph", "matmul_graph_3"}


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p['before']}->{p['after']}")
def test_compare_of_two_traces_headlines_the_speedup_without_nsys(pair: dict[str, str]) -> None:
    c = launchprof.compare(CORPUS / f"{pair['before']}.sqlite.xz", CORPUS / f"{pair['after']}.sqlite.xz")
    truth = _truth(pair)
    assert c.speedup_unprofiled is not None and c.speedup_unprofiled_ci is not None
    assert c.speedup_unprofiled_source == "estimate"
    lo, hi = c.speedup_unprofiled_ci
    assert lo <= c.speedup_unprofiled <= hi
    assert (lo <= truth <= hi) is (pair["after"] not in COMPARE_OUT_OF_RANGE)
    close = c.speedup_unprofiled == pytest.approx(truth, rel=0.30)
    assert close is (pair["after"] not in COMPARE_MISSES)  # else an entry is stale


def _program(name: str) -> str:
    """The program a corpus trace ran: its name without the conversion and recording."""
    return re.sub(r"_(eager|graph|graphs|static-graphs|static-compile|compile|emit-nvtx)(_.*)?$", "", name)


@pytest.mark.slow
def test_no_pair_of_different_programs_is_verified() -> None:
    """Every eager trace of the corpus against every replaying or compiled one of another
    program (285 pairs): never ``verified``. Before FUSED_MAX_CHANGED, 19 of them were
    (a compiled AFTER with less kernel time than BEFORE was 'fused', whatever it ran)."""
    names = sorted(MANIFEST["traces"])
    after = [n for n in names if "graph" in n or "compile" in n]
    before = [n for n in names if n not in after]
    verified = []
    for b in before:
        for a in after:
            if _program(a) != _program(b):
                c = launchprof.compare(CORPUS / f"{b}.sqlite.xz", CORPUS / f"{a}.sqlite.xz")
                if c.verdict == "verified":
                    verified.append((b, a, c.work_change.kind if c.work_change else None))
    assert len(before) * len(after) > 200 and verified == []


PLAIN = [n for n in TRACES if "baseline_folder" in MANIFEST["traces"][n]]


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_generate_script_is_timed_by_its_module_calls(name: str) -> None:
    """A user's generate() script with nothing added (examples/frameworks/hf_generate_plain.py),
    the whole program traced: its steps are found (one a forward, as many as the run without
    nsys counted module calls, within the one that a fixed-length cut can leave before the
    first step), and that run's module-call period is the eager step without nsys: at
    most the script's own wall clock per forward in that run (its RESULT: a generate()
    call / its 32 forwards, which also holds generate()'s set-up and a prefill longer than
    a decode step) and at least 90 % of it."""
    truth = MANIFEST["traces"][name]
    folder = CORPUS / truth["baseline_folder"]
    calls = [ln.split()[1] for ln in (folder / "baseline-1.steps").read_text().splitlines()]
    a = launchprof.analyze(CORPUS / f"{name}.sqlite.xz", baseline=folder)
    s = a.found_steps
    full = s.table["kernels"] >= 0.5 * s.table["kernels"].mode().iloc[0]
    assert len(calls) == truth["steps_truth"] and len(calls) - 1 <= int(full.sum()) <= len(calls)
    b = a.summary.baseline
    assert b is not None and b.source == "module-calls" and b.module == f"module {calls[0]}"
    e = a.recommendation.expected
    assert e is not None and e.eager_source == "measured" and e.eager_timed_by == "module-calls"
    assert 0.90 * truth["plain_step_us"] <= e.eager_step_ns / 1e3 <= 1.01 * truth["plain_step_us"]


def test_compare_of_folders_timed_by_module_calls_takes_the_summary_s_half(tmp_path: Path) -> None:
    """compare reads a folder's module-call runs as its summary did, the later half of the
    calls (a plain generate() script's first call met every sequence length first: 70 ms
    a forward against 9 ms later); it pooled every call, 10.2 ms against the summary's 9.0."""
    from launchprof.report.write import write_report

    folders = []
    for name in PLAIN:
        baseline = CORPUS / MANIFEST["traces"][name]["baseline_folder"]
        a = launchprof.analyze(CORPUS / f"{name}.sqlite.xz", baseline=baseline)
        write_report(a, tmp_path / name)
        (tmp_path / name / "baseline-1.steps").write_text((baseline / "baseline-1.steps").read_text())
        folders.append((tmp_path / name, a.summary.baseline.period_p50_ns))
    c = launchprof.compare(folders[0][0], folders[1][0])
    for side, (_, period) in zip((c.before, c.after), folders, strict=True):
        assert side.unprofiled_periods is not None
        assert float(np.median(side.unprofiled_periods)) == pytest.approx(period, rel=0.01)
