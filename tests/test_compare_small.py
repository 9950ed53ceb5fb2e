"""compare on tiny traces built here: every expected figure follows from the construction.

A per-launch run: each step launches NAMES one by one, every launch call CALL_NS long,
each kernel KERNEL_NS long starting 300 ns after its call ends (the GPU waits for every
launch). A graph run: each step is one cudaGraphLaunch (GRAPH_CALL_NS) whose kernels
run back to back 100 ns apart, 500 ns after the call ends. Step s begins at
T0 + s * period + jitter[s], so the step periods are exactly the differences of those
begin times.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracebuilder import TraceBuilder

import launchprof
from launchprof import compare
from launchprof.analysis.comparison.verify import verify
from launchprof.analysis.steps import StepError
from launchprof.api.report_folder import ReportFolderError, side_from_folder
from launchprof.errors import TraceError
from launchprof.report.compare import write_compare
from launchprof.report.compare_schema import CompareDoc
from launchprof.report.write import write_report

T0 = 1_000_000
CALL_NS = 5_000
KERNEL_NS = 1_000
GRAPH_CALL_NS = 3_000
INSTANTIATE_NS = 50_000
NAMES = ["a", "b", "c", "d"]
N_STEPS = 40
EAGER_PERIOD = len(NAMES) * CALL_NS + 3_000  # 23 us
GRAPH_PERIOD = 8_000


def small_jitter(n: int = N_STEPS) -> list[int]:
    return [((s * 7919) % 11) * 50 for s in range(n)]


def eager_run(
    b: TraceBuilder,
    period: int = EAGER_PERIOD,
    jitter: list[int] | None = None,
    nvtx: bool = True,
    names: list[str] = NAMES,
    grids: dict[str, tuple[int, int, int]] | None = None,
    n: int = N_STEPS,
) -> list[int]:
    """Per-launch steps; returns each step's first kernel start."""
    jitter = jitter or [0] * n
    firsts = []
    for s in range(n):
        start = T0 + s * period + jitter[s]
        if nvtx:
            b.range("step", start, start + len(names) * CALL_NS)
        for i, name in enumerate(names):
            cs = start + i * CALL_NS
            ce = cs + CALL_NS - 200
            grid = (grids or {}).get(name, (16, 1, 1))
            b.launch(cs, ce, ce + 300, ce + 300 + KERNEL_NS, name=name, grid=grid, block=(256, 1, 1))
            if i == 0:
                firsts.append(ce + 300)
    return firsts


def graph_run(
    b: TraceBuilder,
    period: int = GRAPH_PERIOD,
    jitter: list[int] | None = None,
    nvtx: bool = True,
    names: list[str] = NAMES,
    churn: bool = False,
    n: int = N_STEPS,
) -> list[int]:
    """Graph steps (captured and instantiated once before step 0, or every step when
    ``churn``); returns each step's first kernel start."""
    jitter = jitter or [0] * n
    if not churn:
        t = T0 - 200_000
        b.call("cudaStreamBeginCapture_v10000", t, t + 1_000)
        for i in range(len(names)):
            b.call("cudaLaunchKernel_v7000", t + 2_000 + i * 2_000, t + 3_000 + i * 2_000)
        b.call("cudaStreamEndCapture_v10000", t + 20_000, t + 21_000)
        b.call("cudaGraphInstantiate_v12000", t + 30_000, t + 30_000 + INSTANTIATE_NS)
    firsts = []
    for s in range(n):
        start = T0 + s * period + jitter[s]
        gs = start
        if churn:
            b.call("cudaStreamBeginCapture_v10000", start, start + 500)
            b.call("cudaStreamEndCapture_v10000", start + 600, start + 1_000)
            b.call("cudaGraphInstantiate_v12000", start + 1_100, start + 1_100 + INSTANTIATE_NS)
            gs = start + 1_200 + INSTANTIATE_NS
        corr = b.call("cudaGraphLaunch_v10000", gs, gs + GRAPH_CALL_NS)
        if nvtx:
            b.range("step", start, gs + GRAPH_CALL_NS + 100)
        k = gs + GRAPH_CALL_NS + 500
        firsts.append(k)
        for i, name in enumerate(names):
            b.kernel(k, k + KERNEL_NS, corr, name=name, grid=(16, 1, 1), block=(256, 1, 1), graph_node=i + 1)
            k += KERNEL_NS + 100
    return firsts


def build(tmp_path: Path, name: str, fill, **kw) -> tuple[Path, list[int]]:  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    firsts = fill(b, **kw)
    return b.write(tmp_path / f"{name}.sqlite"), firsts


def median_period(firsts: list[int]) -> float:
    return float(np.median(np.diff(np.asarray(firsts, dtype=float))))


def test_graph_conversion_is_verified_with_the_constructed_speedup(tmp_path: Path) -> None:
    before, fb = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    after, fa = build(tmp_path, "graph", graph_run, jitter=small_jitter()[::-1])
    c = compare(before, after)
    expected = median_period(fb) / median_period(fa)
    assert c.verdict == "verified"
    assert c.speedup == pytest.approx(expected, rel=1e-12)
    assert c.speedup_ci is not None and c.speedup_ci[0] <= c.speedup <= c.speedup_ci[1]
    assert c.speedup_ci[1] - c.speedup_ci[0] < 0.1 * expected
    conv = c.check("converted")
    assert conv.passed and conv.evidence["after_graph_kernel_share"] == 1.0
    assert conv.evidence["before_graph_kernel_share"] == 0.0
    assert c.check("same_work").passed
    # Per eager step: 3 gaps of (CALL_NS - 200 + 300) - KERNEL_NS - 300 + ... = 4000 ns each.
    # kernel i ends at cs_i + 5100 + 1000 = cs_i + 6100; kernel i+1 starts at cs_i + 5000 + 5100.
    assert c.before_figures.bubble_p50_ns == 3 * 4_000
    assert c.after_figures.bubble_p50_ns == 0  # 100 ns gaps are below the 1 us threshold
    assert c.check("bubbles").passed
    assert c.check("churn").passed
    predicted = c.check("predicted")  # BEFORE's own recommendation (analyze's diagnosis)
    if c.predicted_speedup is None:
        assert predicted.passed is None
    else:
        assert predicted.evidence["measured_over_predicted"] == pytest.approx(expected / c.predicted_speedup)
    paid = c.check("paid_back")
    gain = median_period(fb) - median_period(fa)
    assert paid.evidence["break_even_iterations"] == pytest.approx(INSTANTIATE_NS / gain)
    assert paid.passed  # 50 us / 15 us -> 4 iterations < 40


def test_same_trace_twice_is_not_converted(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    c = compare(before, before)
    assert c.verdict == "not-converted"
    assert c.speedup == 1.0
    assert "AFTER does not run its steps as graphs" in c.check("converted").detail
    assert c.notes[0].startswith("BEFORE and AFTER are the same trace")


def test_swapped_sides_are_said_to_look_swapped(tmp_path: Path) -> None:
    eager, _ = build(tmp_path, "eager", eager_run)
    graph, _ = build(tmp_path, "graph", graph_run)
    c = compare(graph, eager)
    assert c.verdict == "not-converted" and c.notes[0].endswith("were BEFORE and AFTER swapped?")
    assert not any("swapped" in n for n in compare(eager, graph).notes)


def test_graph_twice_is_not_converted(tmp_path: Path) -> None:
    after, _ = build(tmp_path, "graph", graph_run)
    c = compare(after, after)
    assert c.verdict == "not-converted"
    assert "BEFORE already ran its steps as graphs" in c.check("converted").detail


def test_graph_that_drops_a_kernel_is_different_work(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run)
    after, _ = build(tmp_path, "graph", graph_run, names=NAMES[:-1])
    c = compare(before, after)
    assert c.verdict == "different-work"
    diff = c.kernels.loc[c.kernels["differs"]]
    assert diff["name"].tolist() == ["d"]
    assert diff["before_per_step"].tolist() == [1.0] and diff["after_per_step"].tolist() == [0.0]
    assert "d <<<(16,1,1), (256,1,1)>>>: 1 -> 0 per step" in c.check("same_work").detail


def test_graph_with_another_launch_configuration_is_different_work(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run, grids={"b": (32, 1, 1)})
    after, _ = build(tmp_path, "graph", graph_run)
    c = compare(before, after)
    assert c.verdict == "different-work"
    diff = c.kernels.loc[c.kernels["differs"], ["name", "grid_x", "before_per_step", "after_per_step"]]
    assert diff.values.tolist() == [["b", 16, 0.0, 1.0], ["b", 32, 1.0, 0.0]]


def test_reinstantiating_every_step_is_churn(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run)
    after, fa = build(tmp_path, "graph", graph_run, churn=True, period=GRAPH_PERIOD + INSTANTIATE_NS + 2_000)
    c = compare(before, after)
    assert c.verdict == "churn"
    churn = c.check("churn")
    assert churn.passed is False
    assert churn.evidence["instantiations_per_graph_launch"] == 1.0
    assert churn.evidence["captures_per_graph_launch"] == 1.0  # one begin/end pair per launch
    assert churn.evidence["instantiate_each_ns"] == INSTANTIATE_NS
    assert churn.evidence["instantiate_per_step_ns"] == INSTANTIATE_NS
    assert "re-instantiates" in churn.detail and "50.0 us per step" in churn.detail
    # And slower: 23 us per step before, 60 us after.
    assert c.check("faster").passed is False and c.speedup is not None and c.speedup < 1


@pytest.mark.parametrize(
    ("min_effect", "verdict", "phrase"),
    [(0.05, "not-faster", "less than the minimum effect"), (0.01, "verified", "more than the minimum effect")],
)
def test_small_gain_is_judged_against_the_minimum_effect(
    tmp_path: Path, min_effect: float, verdict: str, phrase: str
) -> None:
    # A GPU-bound loop: no jitter, the graph saves 2 % of the period.
    before, _ = build(tmp_path, "eager", eager_run)
    after, _ = build(tmp_path, "graph", graph_run, period=round(EAGER_PERIOD / 1.02))
    c = compare(before, after, min_effect=min_effect)
    assert c.speedup == pytest.approx(EAGER_PERIOD / round(EAGER_PERIOD / 1.02), rel=1e-12)
    assert c.speedup_ci == (c.speedup, c.speedup)  # identical periods: no spread
    assert c.verdict == verdict
    assert phrase in c.check("faster").detail


def test_equal_medians_with_noise_are_within_noise(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    jitter = [int(x) for x in rng.integers(0, 8_000, N_STEPS)]
    before, fb = build(tmp_path, "eager", eager_run, period=30_000, jitter=jitter)
    after, fa = build(tmp_path, "graph", graph_run, period=30_000, jitter=jitter)
    c = compare(before, after)
    assert median_period(fb) == median_period(fa)
    assert c.speedup == 1.0
    assert c.speedup_ci is not None and c.speedup_ci[0] < 1 < c.speedup_ci[1]
    assert c.verdict == "not-faster"
    assert "within noise" in c.check("faster").detail


def test_inferred_steps_are_recut_by_the_graph_step(tmp_path: Path) -> None:
    # Without NVTX, the per-launch run repeats (x, y) three times a step: its inferred
    # step is 2 kernels; the graph's step (one launch) is 6 kernels.
    names = ["x", "y"] * 3
    before, fb = build(tmp_path, "eager", eager_run, nvtx=False, names=names, period=6 * CALL_NS + 3_000)
    after, fa = build(tmp_path, "graph", graph_run, nvtx=False, names=names, period=9_000)
    c = compare(before, after)
    assert c.before.step_source == "inferred" and c.after.step_source == "graph-launch"
    assert any("re-cut into steps of 6 kernels" in n for n in c.notes)
    assert c.before_figures.kernels_per_step == 6
    assert c.verdict == "verified"
    assert c.speedup == pytest.approx(median_period(fb) / median_period(fa), rel=1e-12)


def test_report_folders_compare_like_their_traces(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    after, _ = build(tmp_path, "graph", graph_run, jitter=small_jitter()[::-1])
    folders = []
    for trace in (before, after):
        folder = tmp_path / trace.stem
        write_report(launchprof.analyze(trace), folder)
        assert {p.name for p in folder.iterdir()} >= {"steps.csv", "step_kernels.csv", "step_timeline.csv"}
        folders.append(folder)
    from_traces = compare(before, after)
    from_folders = compare(*folders)
    mixed = compare(folders[0], after)
    for c in (from_folders, mixed):
        assert c.verdict == from_traces.verdict == "verified"
        assert c.speedup == from_traces.speedup
        assert c.speedup_ci == from_traces.speedup_ci
        assert [k.passed for k in c.checks] == [k.passed for k in from_traces.checks]
    assert from_folders.before.origin == "report"
    assert from_folders.before.sample is not None and len(from_folders.before.sample) == 2 * len(
        NAMES
    )  # 4 launch calls, 4 kernels


def test_folder_without_step_files_falls_back_to_summary_statistics(tmp_path: Path) -> None:
    before, fb = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    after, fa = build(tmp_path, "graph", graph_run, jitter=small_jitter()[::-1])
    folder = tmp_path / "eager-report"
    write_report(launchprof.analyze(before), folder)
    for name in ("steps.csv", "step_kernels.csv", "step_timeline.csv"):
        (folder / name).unlink()
    c = compare(folder, after)
    assert any("no steps.csv" in n for n in c.notes)
    assert c.speedup_method.startswith("ratio of mean")
    pb = np.diff(np.asarray(fb, dtype=float))
    pa = np.diff(np.asarray(fa, dtype=float))
    assert c.speedup == pytest.approx(pb.mean() / pa.mean(), rel=1e-9)
    assert c.verdict == "verified"
    assert "only counts compared" in c.check("same_work").detail


def test_folder_of_partial_steps_is_regrouped(tmp_path: Path) -> None:
    names = ["x", "y"] * 3
    before, fb = build(tmp_path, "eager", eager_run, nvtx=False, names=names, period=6 * CALL_NS + 3_000)
    after, fa = build(tmp_path, "graph", graph_run, nvtx=False, names=names, period=9_000)
    folder = tmp_path / "eager-report"
    write_report(launchprof.analyze(before), folder)
    side = side_from_folder(folder)
    assert side.kernels_per_step == 2
    c = compare(folder, after)
    assert any("every 3 consecutive steps were joined" in n for n in c.notes)
    assert c.before_figures.kernels_per_step == 6
    assert c.verdict == "verified"
    assert c.speedup == pytest.approx(median_period(fb) / median_period(fa), rel=1e-12)


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    trace, _ = build(tmp_path, "graph", graph_run)
    with pytest.raises(TraceError, match=r"^BEFORE .*missing.sqlite: no such file"):
        compare(tmp_path / "missing.sqlite", trace)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ReportFolderError, match=r"^AFTER .*empty: a folder without summary.json"):
        compare(trace, empty)
    (empty / "summary.json").write_text('{"hello": 1}')
    with pytest.raises(ReportFolderError, match=r"^BEFORE .*empty: its summary.json is not a launchprof summary"):
        compare(empty, trace)
    plain, _ = build(tmp_path, "plain", graph_run, nvtx=False)
    with pytest.raises(StepError, match=r"^AFTER .*plain.sqlite: no NVTX range named 'step'"):
        compare(trace, plain, step="step")


def test_compare_json_is_deterministic_and_keeps_the_contract(tmp_path: Path) -> None:
    before, _ = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    after, _ = build(tmp_path, "graph", graph_run, jitter=small_jitter()[::-1])
    texts = []
    for i in range(2):
        write_compare(compare(before, after), tmp_path / f"out{i}")
        texts.append((tmp_path / f"out{i}" / "compare.json").read_text())
    assert texts[0] == texts[1]
    doc = json.loads(texts[0])
    assert doc["schema"] == "launchprof.compare/2"
    assert doc["verdict"] == "verified"
    for key in ("speedup", "speedup_ci", "predicted_speedup", "checks"):
        assert key in doc
    assert [c["name"] for c in doc["checks"]] == [
        "converted",
        "same_work",
        "faster",
        "bubbles",
        "predicted",
        "churn",
        "paid_back",
    ]
    assert all(set(c) == {"name", "passed", "detail", "evidence"} for c in doc["checks"])
    assert (tmp_path / "out0" / "plotly.min.js").exists()
    CompareDoc.model_validate(doc)
    bad = dict(doc, speedup_ci=[doc["speedup"] + 1, doc["speedup"] + 2])
    with pytest.raises(ValueError, match="speedup_ci"):
        CompareDoc.model_validate(bad)


def test_trace_strings_are_escaped_in_the_page(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    before, _ = build(tmp_path, "eager", eager_run, names=[evil, "b"])
    after, _ = build(tmp_path, "graph", graph_run, names=[evil, "b"])
    write_compare(compare(before, after), tmp_path / "out")
    page = (tmp_path / "out" / "compare.html").read_text()
    assert evil not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_verify_rejects_a_negative_minimum_effect(tmp_path: Path) -> None:
    trace, _ = build(tmp_path, "graph", graph_run)
    c = compare(trace, trace)
    with pytest.raises(ValueError):
        verify(c.before, c.after, min_effect=-0.1)


@pytest.mark.parametrize(("predicted", "passed"), [(2.0, True), (3.0, True), (5.0, False)])
def test_prediction_in_a_report_folder_is_checked(tmp_path: Path, predicted: float, passed: bool) -> None:
    before, fb = build(tmp_path, "eager", eager_run)
    after, fa = build(tmp_path, "graph", graph_run)
    folder = tmp_path / "eager-report"
    write_report(launchprof.analyze(before), folder)
    summary = json.loads((folder / "summary.json").read_text())
    summary["recommendation"] = {"predicted_speedup": predicted, "break_even_iterations": 3}
    (folder / "summary.json").write_text(json.dumps(summary))
    c = compare(folder, after)
    measured = median_period(fb) / median_period(fa)  # 23 us / 8 us = 2.875
    check = c.check("predicted")
    assert c.predicted_speedup == predicted
    assert check.evidence["measured_over_predicted"] == pytest.approx(measured / predicted)
    assert check.passed is passed  # passes when measured / predicted >= 0.8
    assert c.verdict == "verified"  # the prediction is evidence, not the verdict


def test_a_side_whose_steps_take_no_time_gives_no_speedup(tmp_path: Path) -> None:
    """Every BEFORE kernel at one instant: the period p50 is 0 and the speedup 0, which the
    comparison document refused with a pydantic traceback (breaker)."""
    import sqlite3

    from typer.testing import CliRunner

    from launchprof.cli import app

    before, _ = build(tmp_path, "eager", eager_run)
    con = sqlite3.connect(before)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 5000000, end = 5000000")
    con.commit()
    con.close()
    after, _ = build(tmp_path, "graph", graph_run)
    result = CliRunner().invoke(app, ["compare", str(before), str(after), "-o", str(tmp_path / "c")])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    doc = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert doc["speedup"] is None
    assert "a side's steady step period is 0: no speedup" in doc["notes"]


def test_nothing_in_common_is_a_share_of_one_not_more() -> None:
    """Five kinds only BEFORE runs, five only AFTER: every bit of kernel time differs. The
    float sum of these durations came to 1.0000000000000002, which the schema's bound
    rejected (a traceback on real pairs)."""
    import pandas as pd

    from launchprof.analysis.comparison.workchange import classify

    b = [0.05856803480519435, 0.3361170605456604, 0.15027946689483906, 0.450339366649287, 0.7963242702872942]
    a = [0.23064220899374743, 0.05202130106440961, 0.4045518398215282, 0.19851304450925533, 0.0907530456191219]
    kernels = pd.DataFrame(
        {
            "name": [f"k{i}" for i in range(10)],
            "before_per_step": [1.0] * 5 + [0.0] * 5,
            "after_per_step": [0.0] * 5 + [1.0] * 5,
            "before_gpu_ns_per_step": [x * 1e3 for x in b] + [0.0] * 5,
            "after_gpu_ns_per_step": [0.0] * 5 + [x * 1e3 for x in a],
            "differs": [True] * 10,
        }
    )
    change = classify(kernels)
    assert change.changed_kernel_share == 1.0 and change.kind == "different"


def test_kernel_names_are_text_in_the_step_timelines_of_compare_html(tmp_path: Path) -> None:
    """A kernel named like a link is shown as text in compare.html's hover, as report.html
    shows it (it was a live link there)."""
    hostile = ['<a href="https://x.invalid/">k</a>', "<b>big</b>", "k3", "k4"]
    before, _ = build(tmp_path, "eager", lambda b: eager_run(b, names=hostile))
    after, _ = build(tmp_path, "graph", lambda b: graph_run(b, names=hostile))
    write_compare(compare(before, after), tmp_path / "cmp")
    page = (tmp_path / "cmp" / "compare.html").read_text()
    # In the figures' JSON '<' is written \u003c, '&' \u0026: the names must arrive escaped.
    assert "\\u003ca href" not in page and "\\u003cb\\u003ebig" not in page
    assert "\\u0026lt;a href=" in page and "\\u0026lt;b\\u0026gt;big" in page


def test_a_trace_and_its_report_folder_show_the_same_representative_step(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """One rule picks the step whose timeline compare shows (side.representative_step), for
    a trace and for a report folder read back: both sides name the same step, and the
    folder reader goes through that function."""
    from launchprof.analysis.comparison import side as side_module
    from launchprof.api import report_folder

    trace, _ = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    analysis = launchprof.analyze(trace)
    folder = tmp_path / "report"
    write_report(analysis, folder)
    from_trace = side_module.side_from_analysis(analysis, analysis.found_steps)
    from_folder = side_from_folder(folder)
    assert from_trace.sample_step is not None and from_folder.sample_step == from_trace.sample_step
    assert from_trace.sample_step == side_module.representative_step(analysis.found_steps.steady)
    monkeypatch.setattr(report_folder, "representative_step", lambda steady: -7)
    assert side_from_folder(folder).sample_step == -7


def test_compare_of_traces_reads_the_sides_the_finished_analysis_made(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A trace's side is part of its finished result (Shown.side, made once by finish):
    compare takes it from there (its path the one given) and does not make it again, and
    the sides are those a fresh side_from_analysis gives."""
    from launchprof.analysis.comparison.side import side_from_analysis
    from launchprof.api import compare_runs

    before, _ = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    after, _ = build(tmp_path, "graph", graph_run, jitter=small_jitter()[::-1])
    analyses = [launchprof.analyze(p) for p in (before, after)]
    fresh = [side_from_analysis(a, a.found_steps, path=str(p)) for a, p in zip(analyses, (before, after), strict=True)]

    def again(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("compare made a side the finished analysis already holds")

    monkeypatch.setattr(compare_runs, "side_from_analysis", again)
    c = compare(before, after)
    assert c.verdict == "verified"
    for got, want in zip((c.before, c.after), fresh, strict=True):
        assert got.path == want.path and got.sample_step == want.sample_step
        assert got.predicted_speedup == want.predicted_speedup and got.graph_launches == want.graph_launches
        for frame in ("table", "kernels", "sample"):
            pd.testing.assert_frame_equal(getattr(got, frame), getattr(want, frame))


def test_a_result_with_its_runs_without_nsys_keeps_its_own_recommendation_in_its_side(tmp_path: Path) -> None:
    """with_baseline's result reuses the step tables of the result diagnosed without the
    runs (finish's reuse: the same tables) but its side carries its own recommendation's
    figures (the step measured without nsys), not the first diagnosis'."""
    trace, _ = build(tmp_path, "eager", eager_run, jitter=small_jitter())
    plain = launchprof.analyze(trace)
    runs = tmp_path / "runs"
    runs.mkdir()
    period = int(0.9 * plain.outputs().step_stats["period_p50_ns"])  # nsys's host overhead left out
    (runs / "baseline-1.steps").write_text("".join(f"step {k * period} {k * period + 1_000}\n" for k in range(20)))
    measured = launchprof.analyze(trace, baseline=runs)
    side, rec = measured.outputs().side, measured.recommendation
    pd.testing.assert_frame_equal(side.table, plain.outputs().side.table)
    assert side.step_without_profiler == rec.step_without_profiler
    assert side.expected_eager_step_ns == rec.expected.eager_step_ns
    assert rec.step_without_profiler["source"] == "measured"
    assert plain.outputs().side.step_without_profiler["source"] == "estimate"
