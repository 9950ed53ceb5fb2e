"""``launchprof compare`` on the command line: exit codes, --fail-on, errors, the
installed script."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_compare_small import build, eager_run, graph_run
from typer.testing import CliRunner

from launchprof.cli import app

runner = CliRunner()


@pytest.fixture()
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.chdir(tmp_path)
    before, _ = build(tmp_path, "eager", eager_run)
    after, _ = build(tmp_path, "graph", graph_run)
    return before, after


def test_verified_exits_0_and_writes_the_default_folder(pair: tuple[Path, Path], tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", str(pair[0]), str(pair[1])])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("verdict: verified: ")
    assert "pass converted" in result.output
    folder = tmp_path / "reports" / "compare-eager-vs-graph"
    doc = json.loads((folder / "compare.json").read_text())
    assert doc["verdict"] == "verified"
    assert doc["before"]["path"] == str(pair[0])  # recorded as given
    assert (folder / "compare.html").exists() and (folder / "plotly.min.js").exists()
    index = (tmp_path / "reports" / "index.html").read_text()
    assert 'href="compare-eager-vs-graph/compare.html"' in index


@pytest.mark.parametrize(
    ("fail_on", "code"),
    [(None, 1), ("none", 0), ("churn,different-work", 0), ("not-converted", 1)],
)
def test_fail_on_chooses_the_failing_verdicts(pair: tuple[Path, Path], fail_on: str | None, code: int) -> None:
    args = ["compare", str(pair[0]), str(pair[0]), "-o", "out"]  # same trace twice: not-converted
    if fail_on is not None:
        args += ["--fail-on", fail_on]
    result = runner.invoke(app, args)
    assert result.exit_code == code, result.output
    assert result.output.startswith("verdict: not-converted")


def test_fail_on_verified_fails_a_verified_comparison(pair: tuple[Path, Path]) -> None:
    result = runner.invoke(app, ["compare", *map(str, pair), "--fail-on", "verified"])
    assert result.exit_code == 1


def test_existing_folder_needs_force(pair: tuple[Path, Path]) -> None:
    assert runner.invoke(app, ["compare", *map(str, pair), "-o", "out"]).exit_code == 0
    # The same two traces again: their comparison is replaced (a script run twice).
    assert runner.invoke(app, ["compare", *map(str, pair), "-o", "out"]).exit_code == 0
    other = runner.invoke(app, ["compare", *map(str, pair[::-1]), "-o", "out"])
    assert other.exit_code == 2
    assert "already holds a report of" in other.output and "use --force" in other.output
    forced = runner.invoke(app, ["compare", *map(str, pair[::-1]), "-o", "out", "--force"])
    assert forced.exit_code == 1  # written; the swapped pair is slower: --fail-on's default
    assert json.loads(Path("out/compare.json").read_text())["before"]["path"] == str(pair[1])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.sqlite", "graph.sqlite"], "launchprof: error: BEFORE missing.sqlite: no such file: missing.sqlite"),
        (["eager.sqlite", "."], "launchprof: error: AFTER .: a folder without summary.json"),
        (
            ["eager.sqlite", "graph.sqlite", "--fail-on", "slower"],
            "launchprof: error: --fail-on: unknown verdict 'slower'",
        ),
        (
            ["eager.sqlite", "graph.sqlite", "--step", "nope"],
            "launchprof: error: BEFORE eager.sqlite: no NVTX range named 'nope'",
        ),
    ],
)
def test_bad_input_is_one_error_line(pair: tuple[Path, Path], args: list[str], message: str) -> None:
    result = runner.invoke(app, ["compare", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_installed_command(pair: tuple[Path, Path], tmp_path: Path) -> None:
    exe = shutil.which("launchprof") or str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "launchprof")
    done = subprocess.run(
        [exe, "compare", *map(str, pair), "-o", str(tmp_path / "cli")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "verdict: verified" in done.stdout
    done = subprocess.run(
        [exe, "compare", str(pair[0]), str(pair[0]), "-o", str(tmp_path / "cli2")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1


def test_summary_only_folders_say_the_speedup_is_a_ratio_of_means(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Report folders without steps.csv: the speedup is the ratio of the mean step periods,
    and the line says so with those means (it printed the p50s beside the means' ratio)."""
    for side in ("mlp_eager", "mlp_graph"):
        full = tmp_path / f"{side}_full"
        assert runner.invoke(app, ["analyze", str(real_trace(side)), "-o", str(full)]).exit_code == 0
        (tmp_path / side).mkdir()
        shutil.copy(full / "summary.json", tmp_path / side / "summary.json")
    result = runner.invoke(
        app, ["compare", str(tmp_path / "mlp_eager"), str(tmp_path / "mlp_graph"), "-o", str(tmp_path / "c")]
    )
    means = [json.loads((tmp_path / s / "summary.json").read_text())["steps"]["period_mean_ns"] for s in
             ("mlp_eager", "mlp_graph")]  # fmt: skip
    (line,) = [ln for ln in result.output.splitlines() if "Step period" in ln]
    assert f"Step period mean {means[0] / 1e3:,.1f} us -> {means[1] / 1e3:,.1f} us: {means[0] / means[1]:.2f}x" in line
    # The page's headline names the same statistic as the ratio beside it (not the p50s).
    page = (tmp_path / "c" / "compare.html").read_text()
    assert "step period mean under nsys" in page and "step period p50 under nsys" not in page


def test_two_traces_headline_the_speedup_without_nsys_first(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A compare of two traces leads, on the terminal and on the page, with the speedup
    without nsys (compare.json's ``speedup_unprofiled``, an estimate here), the under-nsys
    ratio after it: under nsys the launch-heavy BEFORE is inflated more than the graph."""
    out = tmp_path / "c"
    result = runner.invoke(app, ["compare", str(real_trace("mlp_eager")), str(real_trace("mlp_graph")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "compare.json").read_text())
    unprofiled, under = doc["speedup_unprofiled"], doc["speedup"]
    assert doc["speedup_unprofiled_source"] == "estimate" and unprofiled < under
    first = result.output.splitlines()[0]
    assert first.index(f"{unprofiled:.2f}x per step without nsys") < first.index(f"{under:.2f}x under nsys")
    page = (out / "compare.html").read_text()
    box = page[page.index('<div class="verdict') : page.index("</div>", page.index('<div class="verdict'))]
    bold = re.findall(r"<b>([0-9.]+)x</b>", box)
    assert bold[:2] == [f"{unprofiled:.2f}", f"{under:.2f}"], bold
    headline = re.search(r"<h2>verified</h2>\s*<p>([^<]*)</p>", box)
    assert headline and headline.group(1).startswith(f"{unprofiled:.2f}x per step without nsys (estimate, range ")
