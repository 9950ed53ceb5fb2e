"""A new user's first hour: the verdict first, from the steady steps; a CLI for
scripts and CI (``--json``, ``-q``, ``--fail-on``, ``--min-gain``, ``-o -``); the index only
in the reports folder launchprof owns; Dask only when it pays; the Python API."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import launchprof
from launchprof.cli import app
from launchprof.commands.many import DASK_STARTUP_S, SECONDS_PER_MB, use_dask

DATA = Path(__file__).parent / "data"
EAGER = DATA / "traces" / "mlp_eager.sqlite.xz"
GRAPH = DATA / "traces" / "mlp_graph.sqlite.xz"
CPU = DATA / "cpu" / "steps_loop_2022.sqlite.xz"
EXE = Path(sys.executable).parent / "launchprof"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed command, as a script or a CI job runs it (stdout and stderr apart)."""
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False)


@pytest.fixture(scope="module")
def eager(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``launchprof analyze mlp_eager --json`` with the default output folder."""
    cwd = tmp_path_factory.mktemp("eager")
    return _run("analyze", str(EAGER), "--json", cwd=cwd), cwd


def _steady(folder: Path) -> list[dict[str, str]]:
    with (folder / "steps.csv").open() as fh:
        return [r for r in csv.DictReader(fh) if r["warmup"] == "False" and r["period_ns"] not in ("", "nan")]


def test_json_is_the_summary_alone_on_stdout(eager) -> None:
    done, cwd = eager
    assert done.returncode == 0, done.stderr
    folder = cwd / "reports" / "mlp_eager"
    assert done.stdout == (folder / "summary.json").read_text()  # the document, byte for byte, nothing else
    doc = json.loads(done.stdout)
    assert doc["headline"]["verdict"] == doc["diagnosis"]["verdict"] == "launch-bound"
    # the human lines went to stderr, the verdict first
    lines = done.stderr.splitlines()
    assert lines[0].startswith("verdict: launch-bound")
    assert lines[1].startswith("steady steps: GPU busy ")
    assert lines[2].startswith("GPU 0, whole trace (incl. start-up): 10801 kernels")


def test_headline_is_computed_from_the_steady_steps(eager) -> None:
    """GPU busy and host-wait of the headline = sums over steps.csv's steady rows / summed period."""
    _, cwd = eager
    folder = cwd / "reports" / "mlp_eager"
    head = json.loads((folder / "summary.json").read_text())["headline"]
    rows = _steady(folder)
    period = sum(float(r["period_ns"]) for r in rows)
    busy = sum(float(r["busy_ns"]) for r in rows)
    assert head["scope"] == "steady steps" and head["steady_steps"] == len(rows) == 298
    assert head["gpu_busy_ratio"] == pytest.approx(busy / period, rel=0.02)
    assert head["gpu_busy_ratio"] > 0.05 and head["host_wait_ratio"] > 0.8  # not the whole trace's 6.6 % / 93.4 %
    rec = json.loads((folder / "summary.json").read_text())["recommendation"]
    assert head["action"] == "convert" and head["expected_speedup"] == rec["expected_speedup"] > 1.25
    # Paid back on the headline's footing (docs/metrics.md): the steps without the profiler.
    exp = rec["expected"]
    saving = exp["eager_step_ns"] - exp["graph_step_ns"]
    assert head["break_even_iterations"] == int(rec["instantiate_ns"] // saving) + 1 == 4


@pytest.mark.slow
def test_a_graph_run_gets_what_is_left_instead_of_a_conversion(tmp_path: Path) -> None:
    done = _run("analyze", str(GRAPH), "-o", str(tmp_path / "g"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    head = json.loads((tmp_path / "g" / "summary.json").read_text())["headline"]
    rows = _steady(tmp_path / "g")
    period = sum(float(r["period_ns"]) for r in rows)
    busy = sum(float(r["busy_ns"]) for r in rows)
    assert head["graphs"] is True and head["action"] == "none" and head["expected_speedup"] == 1.0
    assert head["break_even_iterations"] is None
    assert head["idle_bound_speedup"] == pytest.approx(period / busy, rel=0.02)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("verdict: gpu-bound") and "predicted" not in lines[0]
    assert f"left to gain: at most {head['idle_bound_speedup']:.2f}x" in lines[1]
    page = (tmp_path / "g" / "report.html").read_text()
    assert 'id="left-to-gain"' in page
    assert "break-even N*" not in page and "Conversion code" not in page and 'id="prediction"' not in page


@pytest.mark.slow
def test_a_cpu_only_trace_shows_its_nvtx_steps(tmp_path: Path) -> None:
    done = _run("analyze", str(CPU), "-o", str(tmp_path / "c"), cwd=tmp_path)
    assert done.returncode == 2  # analyze of a trace without CUDA activity: bad input (README)
    doc = json.loads((tmp_path / "c" / "summary.json").read_text())
    nv = doc["nvtx_steps"]
    # 12 'step' ranges (tests/data/cpu/README.md); their starts, read by hand from the trace
    assert nv["name"] == "step" and nv["count"] == 12 and doc["headline"]["nvtx_steps"]["count"] == 12
    assert 150_000 < nv["period_p50_ns"] < 250_000  # steps_loop.py sleeps ~0.2 ms a step
    assert done.stdout.splitlines()[0] == "verdict: no-gpu-work; no conversion recommended"
    assert done.stdout.splitlines()[1].startswith("CPU only: 12 NVTX 'step' ranges, period p50 ")
    page = (tmp_path / "c" / "report.html").read_text()
    assert 'id="nvtx-steps"' in page and 'id="nvtxfig1"' in page
    for gone in ("<h2>GPU time", "<h2>Launches", "<h2>Plots", "No finding", "break-even", "never"):
        assert gone not in page, gone


@pytest.mark.parametrize(
    ("trace", "args", "code"),
    [
        (EAGER, ["--fail-on", "launch-bound"], 1),
        (EAGER, ["--fail-on", "gpu-bound,sync-bound"], 0),
        (GRAPH, ["--fail-on", "gpu-bound"], 1),
        (GRAPH, ["--fail-on", "launch-bound"], 0),
        (EAGER, ["--fail-on", "none"], 0),
        (EAGER, ["--min-gain", "25"], 1),  # 7.97x expected
        (EAGER, ["--min-gain", "900"], 0),
        (GRAPH, ["--min-gain", "0"], 0),  # already graphs: nothing to gain
        (EAGER, ["--fail-on", "launch_bound"], 2),
        (EAGER, ["--min-gain", "-5"], 2),
    ],
)
def test_fail_on_and_min_gain_exit_codes(tmp_path: Path, trace: Path, args: list[str], code: int) -> None:
    result = CliRunner().invoke(app, ["analyze", str(trace), "-q", "-o", str(tmp_path / "r"), *args])
    assert result.exit_code == code, result.output
    assert "verdict:" not in result.stdout and "report:" not in result.stdout  # -q
    if code == 2:
        assert result.output.startswith("launchprof: error: ") and len(result.output.splitlines()) == 1
        assert not (tmp_path / "r").exists()  # refused before any work


@pytest.mark.slow
def test_quiet_prints_nothing(tmp_path: Path) -> None:
    done = _run("analyze", str(GRAPH), "-q", "-o", str(tmp_path / "q"), cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert (tmp_path / "q" / "report.html").exists()


@pytest.mark.slow
def test_output_dash_is_refused(tmp_path: Path) -> None:
    for args in (["analyze", str(GRAPH), "-o", "-"], ["compare", str(EAGER), str(GRAPH), "--output", "-"]):
        done = _run(*args, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith("launchprof: error: --output - would make a folder named '-'")
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "-").exists()


@pytest.mark.slow
def test_compare_json(tmp_path: Path) -> None:
    done = _run("compare", str(EAGER), str(GRAPH), "--json", "-o", str(tmp_path / "cmp"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (tmp_path / "cmp" / "compare.json").read_text()
    assert json.loads(done.stdout)["verdict"] == "verified"
    assert done.stderr.startswith("verdict: verified")


@pytest.mark.slow
def test_index_only_in_the_reports_folder_launchprof_owns(tmp_path: Path) -> None:
    """-o somewhere/else writes no index into somewhere/; the default reports/ gets one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    assert _run("analyze", str(GRAPH), "-q", "-o", str(repo / "mine"), cwd=tmp_path).returncode == 0
    assert not (repo / "index.html").exists()
    assert _run("analyze", str(GRAPH), "-q", "-o", "here", cwd=repo).returncode == 0
    assert not (repo / "index.html").exists()
    assert _run("analyze", str(GRAPH), "-q", cwd=repo).returncode == 0
    index = (repo / "reports" / "index.html").read_text()
    assert 'href="mlp_graph/report.html"' in index
    # a folder whose index launchprof wrote stays kept
    assert _run("analyze", str(EAGER), "-q", "-o", str(repo / "reports" / "second"), cwd=tmp_path).returncode == 0
    assert 'href="second/report.html"' in (repo / "reports" / "index.html").read_text()


@pytest.mark.slow
def test_index_puts_the_verdict_before_the_whole_trace(tmp_path: Path) -> None:
    assert _run("analyze", str(GRAPH), "-q", cwd=tmp_path).returncode == 0
    page = (tmp_path / "reports" / "index.html").read_text()
    row = page[page.index('href="mlp_graph/report.html"') :]
    assert row.index("gpu-bound") < row.index("91.2 %") < row.index("13.2 %")  # verdict, steady busy, whole trace
    assert "whole trace (incl. start-up)" in page and "nothing to convert" in row


def test_a_launchprof_option_after_the_target_is_warned_about(tmp_path: Path) -> None:
    script = tmp_path / "work.py"
    script.write_text("print('hi')\n")
    done = _run("profile", "--nsys", str(tmp_path / "no-nsys"), str(script), "--open", "--steps", "3", cwd=tmp_path)
    assert done.returncode != 0
    warning, error = done.stderr.splitlines()
    assert warning.startswith("launchprof: warning: --open after the target goes to the workload")
    assert error.startswith("launchprof: error: ")
    done = _run("profile", "--nsys", str(tmp_path / "no-nsys"), str(script), "--steps", "3", cwd=tmp_path)
    assert "warning" not in done.stderr


def _sized(folder: Path, n: int, mb: float, suffix: str = ".sqlite") -> list[str]:
    paths = []
    for i in range(n):
        p = folder / f"rank{i}{suffix}"
        with p.open("wb") as fh:
            fh.truncate(int(mb * 1e6))
        paths.append(str(p))
    return paths


def test_dask_only_when_it_pays(tmp_path: Path) -> None:
    # the time saved must exceed twice the cluster's start-up
    big = 4 * DASK_STARTUP_S / SECONDS_PER_MB  # MB in all that saves about 4x the start-up on many workers
    small = _sized(tmp_path, 2, 2)
    (tmp_path / "many").mkdir()
    many = _sized(tmp_path / "many", 16, big / 16)
    assert not use_dask(small, None, cpus=2)  # measured: 8.2 s on Dask vs 2.7 s serial on 2 cores
    assert not use_dask(small, None, cpus=16)  # small traces: the start-up costs more than it saves
    assert not use_dask(many, None, cpus=2)  # no free cores
    assert use_dask(many, None, cpus=16)
    assert use_dask(small, 2, cpus=2) and not use_dask(many, 0, cpus=16)  # --workers decides
    (tmp_path / "xz").mkdir()
    xz = _sized(tmp_path / "xz", 16, big / 16 / 8, ".sqlite.xz")  # xz files count as about 8x their size
    assert use_dask(xz, None, cpus=16)


@pytest.mark.slow
def test_two_small_traces_run_without_dask(tmp_path: Path) -> None:
    done = _run("analyze", str(EAGER), str(GRAPH), "-o", str(tmp_path / "m"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no Dask warning reaches the terminal
    assert "dask" not in done.stdout.lower()
    lines = done.stdout.splitlines()  # each rank: the steady steps first, then the whole trace
    assert lines[0].startswith("rank 0 (mlp_eager): GPU waiting for the CPU 89.")
    assert lines[1].startswith("rank 1 (mlp_graph): GPU waiting for the CPU 0.0% of each steady step")
    assert lines[1].endswith("whole trace (incl. start-up): 10911 kernels, CPU-bound ratio 85.5%")
    assert json.loads((tmp_path / "m" / "combined.json").read_text())["failed"] == 0


def test_python_api_answers_first() -> None:
    a = launchprof.analyze(EAGER)
    assert a.verdict == "launch-bound"
    assert a.recommendation is not None and a.recommendation.convert is True
    steps = a.steps
    assert len(steps) == 300 and {"step", "warmup", "period_ns", "kernels", "busy_ns"} <= set(steps.columns)
    assert int(steps["warmup"].sum()) == 1
    text = repr(a)
    assert len(text) < 200 and text.startswith("<launchprof analysis of mlp_eager.sqlite.xz: launch-bound")
    html = a._repr_html_()
    expected = a.summary.headline.expected_speedup  # recommendation.expected_speedup: without the profiler
    assert expected == a.recommendation.expected_speedup
    assert '<strong id="verdict">launch-bound</strong>' in html and f"{expected:.2f}&times; expected" in html
    assert "<script" not in html  # a card, not the page
    c = launchprof.compare(EAGER, GRAPH)
    assert repr(c).startswith("<launchprof comparison: verified, 7.67x per step") and len(repr(c)) < 200
    assert {"analyze", "compare", "step", "TraceAnalysis"} <= set(dir(launchprof))


def test_python_api_on_a_cpu_only_trace() -> None:
    a = launchprof.analyze(CPU)
    assert a.verdict == "no-gpu-work"
    assert list(a.steps.columns) == ["step", "start", "end", "duration_ns", "period_ns"] and len(a.steps) == 12
    assert "12 NVTX 'step' steps" in repr(a)


@pytest.mark.slow
def test_the_notebook_example_runs(tmp_path: Path) -> None:
    """docs/python-api.md's code, run as written (from the repository root)."""
    doc = (Path(__file__).parent.parent / "docs" / "python-api.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in doc.split("```")[1::2] if b.startswith("python\n")]
    assert blocks
    code = "\n".join(blocks)
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent.parent,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "launch-bound" in done.stdout and "verified" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", ["analyze", "compare"])
def test_open_hands_the_page_to_the_browser(tmp_path: Path, command: str) -> None:
    """``--open`` goes through Python's webbrowser, which honours $BROWSER: a script that
    writes down the address it was given stands in for the user's browser."""
    seen = tmp_path / "seen.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {seen}\n')
    browser.chmod(0o755)
    args = [command, str(EAGER), *([str(GRAPH)] if command == "compare" else []), "-q", "--open", "-o", "out"]
    done = subprocess.run(
        [str(EXE), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "BROWSER": f"{browser} %s"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    page = "report.html" if command == "analyze" else "compare.html"
    assert seen.read_text().strip() == (tmp_path / "out" / page).resolve().as_uri()
