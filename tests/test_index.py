"""reports/index.html: every report and comparison under the reports folder, linked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_compare_small import build, eager_run, graph_run
from typer.testing import CliRunner

from launchprof.cli import app
from launchprof.report.index import INDEX_MARKER, collect, write_index

runner = CliRunner()


@pytest.fixture()
def reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """analyze two traces and compare them, through the CLI, in tmp_path/reports."""
    monkeypatch.chdir(tmp_path)
    before, _ = build(tmp_path, "eager", eager_run)
    after, _ = build(tmp_path, "graph", graph_run)
    for trace in (before, after):
        assert runner.invoke(app, ["analyze", str(trace)]).exit_code == 0
    assert runner.invoke(app, ["compare", str(before), str(after)]).exit_code == 0
    return tmp_path / "reports"


def test_index_lists_reports_and_comparisons(reports: Path) -> None:
    page = (reports / "index.html").read_text()
    assert INDEX_MARKER in page
    assert 'href="eager/report.html"' in page and 'href="graph/report.html"' in page
    assert 'href="compare-eager-vs-graph/compare.html"' in page
    assert "Comparisons (1)" in page and "Reports (2)" in page
    doc = json.loads((reports / "compare-eager-vs-graph" / "compare.json").read_text())
    assert f"{doc['speedup']:.2f}x" in page
    assert '<span class="ok">verified</span>' in page
    rows, comparisons, _ = collect(reports)
    assert [r.folder for r in rows] == ["eager", "graph"]
    # eager: 40 NVTX steps of 4 kernels, 23 us apart (the construction in test_compare_small).
    assert rows[0].kernels_per_step == 4 and rows[0].period_p50_ns == 23_000 and rows[0].step_source == "nvtx"
    assert comparisons[0].verdict == "verified"


def test_analyze_rewrites_the_index(reports: Path, tmp_path: Path) -> None:
    third, _ = build(tmp_path, "third", graph_run)
    assert runner.invoke(app, ["analyze", str(third)]).exit_code == 0
    assert 'href="third/report.html"' in (reports / "index.html").read_text()


def test_an_index_launchprof_did_not_write_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<h1>my own page</h1>")
    assert write_index(tmp_path) is None
    assert (tmp_path / "index.html").read_text() == "<h1>my own page</h1>"


def test_folder_names_are_escaped_and_bad_summaries_listed(tmp_path: Path) -> None:
    odd = tmp_path / "<b>x & y"
    odd.mkdir()
    (odd / "summary.json").write_text(json.dumps({"schema": "launchprof.summary/1", "trace": {"path": "<i>t</i>"}}))
    (odd / "report.html").write_text("")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text("{not json")
    (tmp_path / "not-a-report").mkdir()
    page_path = write_index(tmp_path)
    assert page_path is not None
    page = page_path.read_text()
    assert "<b>x" not in page and "&lt;b&gt;x &amp; y" in page
    assert "<i>t</i>" not in page
    assert 'href="%3Cb%3Ex%20%26%20y/report.html"' in page
    assert "unreadable summary.json" in page
    assert "not-a-report" not in page
    assert "Reports (2)" in page


def test_multi_trace_runs_are_linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    one, _ = build(tmp_path, "one", eager_run)
    two, _ = build(tmp_path, "two", graph_run)
    result = runner.invoke(app, ["analyze", str(one), str(two), "-o", "reports/run", "--workers", "0"])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "reports" / "index.html").read_text()
    assert 'href="run/combined.html"' in page and "Multi-trace runs (1)" in page
    _, _, multi = collect(tmp_path / "reports")
    assert [(m.folder, m.traces, m.failed) for m in multi] == [("run", 2, 0)]
