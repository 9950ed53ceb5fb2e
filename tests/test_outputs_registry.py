"""The files of an analysis report folder are one registry
(launchprof.report.outputs.ANALYSIS_OUTPUTS): an output format added as one line is
written by ``analyze`` (in-process, typer's CliRunner) and by the Python API's
``write_report``, listed with its SHA-256 in summary.json, removed by a later run that
does not write it, and refused by ``profile`` in a folder it would overwrite; and
docs/architecture.md names the files such a change touches."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder
from typer.testing import CliRunner

import launchprof
from launchprof.analysis.result import AnalysisResult
from launchprof.cli import app
from launchprof.commands.folders import claim_folder
from launchprof.errors import OutputError
from launchprof.report import outputs
from launchprof.report.write import write_report

ARCHITECTURE = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
PACKAGE = Path(launchprof.__file__).resolve().parent


def _trace(tmp_path: Path) -> Path:
    b = TraceBuilder()
    for i in range(12):  # a steady loop of one kernel a step
        t = 100_000 * i
        b.launch(t, t + 2_000, t + 4_000, t + 6_000)
    return b.write(tmp_path / "loop.sqlite")


def _verdict_line(result: AnalysisResult) -> str | None:
    """An example format: the verdict and the steady steps' count, one line."""
    d = result.diagnosis
    return None if d is None else f"{d.verdict} {len(result.found_steps.steady)}\n"


def test_an_output_added_as_one_registry_line_is_written_listed_and_owned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = _trace(tmp_path)
    monkeypatch.setattr(
        outputs, "ANALYSIS_OUTPUTS", (*outputs.ANALYSIS_OUTPUTS, outputs.Output("verdict.txt", _verdict_line))
    )
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out), "-q"])
    assert done.exit_code in (0, 1), done.output
    written = (out / "verdict.txt").read_text(encoding="utf-8")
    analysis = launchprof.analyze(trace)
    assert written == _verdict_line(analysis) and written.split()[0] == str(analysis.verdict)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["files"]["verdict.txt"] == hashlib.sha256(written.encode("utf-8")).hexdigest()
    assert set(summary["files"]) == {"steps.csv", "step_kernels.csv", "step_timeline.csv", "verdict.txt"}
    alone = tmp_path / "alone"  # profile never overwrites it, even without a report beside it
    alone.mkdir()
    (alone / "verdict.txt").write_text(written, encoding="utf-8")
    with pytest.raises(OutputError, match="verdict.txt"):
        claim_folder(alone)

    # the Python API's writer goes through the same registry
    api = tmp_path / "api"
    write_report(analysis, api)
    assert (api / "verdict.txt").read_text(encoding="utf-8") == written

    # a run whose renderer has nothing for the result leaves no stale file behind
    monkeypatch.setattr(
        outputs, "ANALYSIS_OUTPUTS", (*outputs.ANALYSIS_OUTPUTS[:-1], outputs.Output("verdict.txt", lambda r: None))
    )
    again = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(api), "-q", "--force"])
    assert again.exit_code in (0, 1), again.output
    assert not (api / "verdict.txt").exists()
    assert "verdict.txt" not in json.loads((api / "summary.json").read_text(encoding="utf-8"))["files"]


def test_without_the_line_the_folder_is_as_before(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    out = tmp_path / "out"
    done = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out), "-q"])
    assert done.exit_code in (0, 1), done.output
    assert sorted(p.name for p in out.iterdir()) == sorted(outputs.analysis_files())


def test_the_architecture_names_the_files_an_output_format_touches() -> None:
    """docs/architecture.md's "Where to change" row for an output format names at most
    three package files, each of which exists, and the registry among them."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("| (c)"))
    named = [n for n in re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", row) if not n.startswith("tests/")]
    assert "report/outputs.py" in named and len(set(named)) <= 3
    assert all((PACKAGE / n).is_file() for n in named), named


def test_a_comparison_output_added_as_one_registry_line_is_written_and_owned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare.html and compare.json are the comparison folder's registry
    (launchprof.report.compare.COMPARE_OUTPUTS): a line added there is written by
    ``compare`` beside them, and a later comparison whose result has nothing for it
    (its renderer gives None) removes it."""
    from launchprof.report import compare as compare_report

    trace = _trace(tmp_path)
    assert [o.name for o in compare_report.COMPARE_OUTPUTS] == [outputs.COMPARE_FILES[1], outputs.COMPARE_FILES[0]]
    line = outputs.Output("verdict.txt", lambda r: f"{r.doc.verdict}\n")
    monkeypatch.setattr(compare_report, "COMPARE_OUTPUTS", (*compare_report.COMPARE_OUTPUTS, line))
    out = tmp_path / "cmp"
    done = CliRunner().invoke(app, ["compare", str(trace), str(trace), "-o", str(out), "-q"])
    assert done.exit_code in (0, 1), done.output
    doc = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    assert (out / "verdict.txt").read_text(encoding="utf-8") == f"{doc['verdict']}\n"
    nothing = outputs.Output("verdict.txt", lambda r: None)
    monkeypatch.setattr(compare_report, "COMPARE_OUTPUTS", (*compare_report.COMPARE_OUTPUTS[:2], nothing))
    again = CliRunner().invoke(app, ["compare", str(trace), str(trace), "-o", str(out), "-q"])
    assert again.exit_code in (0, 1), again.output
    assert not (out / "verdict.txt").exists()
