"""The command line, in-process (typer's CliRunner) and as the installed ``launchprof``
command. Hostile inputs beyond the basic ones are in test_bad_inputs.py."""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder
from typer.testing import CliRunner

from launchprof.cli import app

TRACES = Path(__file__).resolve().parent / "data" / "traces"
BIN = Path(sys.executable).parent
REPORT_FILES = {"summary.json", "report.html", "plotly.min.js"}

runner = CliRunner()


def _trace(tmp_path: Path, name: str = "small.sqlite") -> Path:
    """Two kernels, gaps of 1500 ns (host-wait) and none."""
    b = TraceBuilder()
    b.launch(0, 900, 1000, 2000)
    b.launch(1000, 3000, 3500, 4000)
    return b.write(tmp_path / name)


def _installed(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "launchprof"), *args], capture_output=True, text=True, cwd=cwd, timeout=300, check=False
    )


def _assert_one_error_line(stderr: str, needle: str) -> None:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("launchprof: error: "), stderr
    assert needle in lines[0]
    assert "Traceback" not in stderr


# ------------------------------------------------------------------------ in-process


def test_analyze_turns_the_garbage_collector_back_on(tmp_path: Path) -> None:
    """``analyze`` imports with the collector off (cli/typer_app.py): it is on again when
    the command ends, analysed or refused, unless the caller had turned it off."""
    import gc

    trace = _trace(tmp_path)
    result = runner.invoke(app, ["analyze", str(trace), "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert gc.isenabled()
    refused = runner.invoke(app, ["analyze", str(trace), "--bubble-threshold", "-1"])
    assert refused.exit_code == 2, refused.output
    assert gc.isenabled()
    gc.disable()
    try:
        assert runner.invoke(app, ["analyze", str(trace), "-o", str(tmp_path / "again")]).exit_code == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_analyze_writes_the_three_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == REPORT_FILES
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "launchprof.summary/1"
    assert summary["devices"][0]["kernels"] == 2
    assert summary["devices"][0]["host_wait_ns"] == 1500
    assert "GPU 0, whole trace (incl. start-up): 2 kernels over" in result.stdout
    assert f"report: {out / 'report.html'}" in result.stdout
    assert result.stderr == ""


def test_plotlyjs_is_the_package_file_linked_or_copied(tmp_path: Path) -> None:
    from launchprof.report.plainfig import plotly_package_file

    source = plotly_package_file("package_data", "plotly.min.js")
    trace = _trace(tmp_path)
    for name in ("a", "b"):
        assert runner.invoke(app, ["analyze", str(trace), "--output", str(tmp_path / name)]).exit_code == 0
    a, b = tmp_path / "a" / "plotly.min.js", tmp_path / "b" / "plotly.min.js"
    assert a.read_bytes() == b.read_bytes() == source.read_bytes()
    if a.stat().st_dev == source.stat().st_dev and a.samefile(source):  # one copy on disk
        assert b.samefile(a)
    assert not list((tmp_path / "a").glob(".plotly*"))  # no link or temp file left beside it


def test_default_output_is_reports_slash_stem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _trace(tmp_path, "my.trace.sqlite")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["analyze", str(trace)])
    assert result.exit_code == 0, result.output
    # Only the trace suffix is cut (run.v1.sqlite and run.v2.sqlite both went to reports/run).
    assert {p.name for p in (tmp_path / "reports" / "my.trace").iterdir()} == REPORT_FILES


def test_existing_report_is_refused_without_force_and_overwritten_with_it(tmp_path: Path) -> None:
    trace, out = _trace(tmp_path), tmp_path / "out"
    assert runner.invoke(app, ["analyze", str(trace), "-o", str(out)]).exit_code == 0
    first = (out / "summary.json").read_text()
    # Another trace (a copy under another name) into the same folder: refused.
    other = shutil.copy(trace, tmp_path / "other.sqlite")
    refused = runner.invoke(app, ["analyze", str(other), "-o", str(out), "--bubble-threshold", "0"])
    assert refused.exit_code != 0
    _assert_one_error_line(refused.stderr, "--force")
    assert f"already holds a report of {trace}" in refused.stderr
    assert (out / "summary.json").read_text() == first
    forced = runner.invoke(app, ["analyze", str(other), "-o", str(out), "--bubble-threshold", "0", "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads((out / "summary.json").read_text())["devices"][0]["bubbles"]["threshold_ns"] == 0
    assert trace.exists()  # never delete a recorded trace
    # The same trace again (a script run twice): its report is replaced, no --force needed.
    again = runner.invoke(app, ["analyze", str(other), "-o", str(out), "--bubble-threshold", "5"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "summary.json").read_text())["devices"][0]["bubbles"]["threshold_ns"] == 5000


def test_existing_empty_folder_is_used(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert runner.invoke(app, ["analyze", str(_trace(tmp_path)), "-o", str(out)]).exit_code == 0
    assert {p.name for p in out.iterdir()} == REPORT_FILES


def test_bubble_threshold_in_microseconds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "-o", str(out), "--bubble-threshold", "2.5"])
    assert result.exit_code == 0, result.output
    bubbles = json.loads((out / "summary.json").read_text())["devices"][0]["bubbles"]
    assert (bubbles["threshold_ns"], bubbles["count"]) == (2500, 0)  # the only gap is 1500 ns


def test_negative_bubble_threshold_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "--bubble-threshold", "-1"])
    assert result.exit_code != 0
    assert not (tmp_path / "reports").exists()


def test_no_arguments_prints_help() -> None:
    result = runner.invoke(app, [])
    assert "analyze" in result.output


# ------------------------------------------------------------------------ bad inputs


def _no_cuda(tmp_path: Path) -> Path:
    """An SQLite file with StringIds and an NVTX range but no CUDA table."""
    path = tmp_path / "nocuda.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.execute("CREATE TABLE NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, textId)")
    con.execute("INSERT INTO NVTX_EVENTS VALUES (10, 20, 59, 'step', 0, 0, NULL)")
    con.commit()
    con.close()
    return path


def _empty_kernels(tmp_path: Path) -> Path:
    """Every table the builder writes, all activity tables empty, one API call."""
    b = TraceBuilder()
    b.call("cudaMalloc_v3020", 0, 10)
    return b.write(tmp_path / "empty.sqlite")


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / "truncated.sqlite"
    with lzma.open(TRACES / "mlp_eager.sqlite.xz") as src:
        path.write_bytes(src.read()[:500_000])
    return path


def _text(tmp_path: Path) -> Path:
    path = tmp_path / "notes.sqlite"
    path.write_text("this is not a database\n")
    return path


BAD = {
    "missing file": (lambda p: p / "nope.sqlite", "no such file"),
    "directory": (lambda p: p, "is a directory"),
    "non-SQLite file": (_text, "not an SQLite file"),
    "truncated SQLite": (_truncated, "damaged SQLite file"),
    "no CUDA tables": (_no_cuda, "no CUDA activity in this trace"),
    "empty kernel table": (_empty_kernels, "no CUDA activity in this trace"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_gives_one_error_line_in_process(case: str, tmp_path: Path) -> None:
    make, needle = BAD[case]
    result = runner.invoke(app, ["analyze", str(make(tmp_path)), "-o", str(tmp_path / "out")])
    assert result.exit_code not in (0, None)
    assert isinstance(result.exception, SystemExit), result.exception  # not an uncaught error
    _assert_one_error_line(result.stderr, needle)


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_gives_one_error_line_installed(case: str, tmp_path: Path) -> None:
    make, needle = BAD[case]
    proc = _installed("analyze", str(make(tmp_path)), "-o", str(tmp_path / "out"))
    assert proc.returncode != 0
    _assert_one_error_line(proc.stderr, needle)


@pytest.mark.parametrize("make", [_no_cuda, _empty_kernels])
def test_trace_without_gpu_activity_still_writes_what_it_can(make, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(make(tmp_path)), "-o", str(out)])
    assert result.exit_code != 0
    assert {p.name for p in out.iterdir()} == REPORT_FILES
    summary = json.loads((out / "summary.json").read_text())
    assert summary["devices"] == []
    page = (out / "report.html").read_text()
    assert '<strong id="verdict">no-gpu-work</strong>' in page and "holds no kernel, copy or memset" in page
    assert "<h2>GPU time" not in page  # no empty GPU table


def test_empty_kernel_table_names_the_process_without_gpu(tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner.invoke(app, ["analyze", str(_empty_kernels(tmp_path)), "-o", str(out)])
    assert json.loads((out / "summary.json").read_text())["processes_without_gpu"] == [100]


# ------------------------------------------------------------------------ installed


@pytest.mark.slow
def test_installed_command_on_the_bundled_real_trace(tmp_path: Path) -> None:
    """The README's first command, with the compressed trace as given."""
    trace = tmp_path / "mlp_eager.sqlite.xz"
    shutil.copy(TRACES / trace.name, trace)
    proc = _installed("analyze", str(trace), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "reports" / "mlp_eager"
    # With steps found, analyze also writes the step files compare reads (report/stepfiles.py).
    assert {p.name for p in out.iterdir()} == REPORT_FILES | {"steps.csv", "step_kernels.csv", "step_timeline.csv"}
    assert (tmp_path / "reports" / "index.html").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trace"]["path"] == str(trace)
    assert summary["devices"][0]["kernels"] == 10801
    # The span printed is first to last GPU activity (docs/metrics.md), counted here by SQL.
    con = sqlite3.connect(":memory:")
    con.deserialize(lzma.decompress(trace.read_bytes()))
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    activity = [t for t in ("KERNEL", "MEMCPY", "MEMSET") if f"CUPTI_ACTIVITY_KIND_{t}" in tables]
    union = " UNION ALL ".join(f"SELECT start s, end e FROM CUPTI_ACTIVITY_KIND_{t}" for t in activity)
    first, last = con.execute(f"SELECT min(s), max(e) FROM ({union})").fetchone()
    assert f"GPU 0, whole trace (incl. start-up): 10801 kernels over {(last - first) / 1e9:.3f} s," in proc.stdout
    assert proc.stdout.startswith("verdict: launch-bound")  # the verdict first
    assert trace.exists()
    again = _installed("analyze", str(trace), cwd=tmp_path)  # run again as written: the report is replaced
    assert again.returncode == 0, again.stderr
    assert _installed("analyze", str(trace), "--force", cwd=tmp_path).returncode == 0


def test_python_dash_m_help() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "launchprof", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "analyze" in proc.stdout
    assert "launch-bound" in proc.stdout


def test_installed_version() -> None:
    proc = _installed("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip().startswith("launchprof ")


def test_analyze_help_documents_the_options() -> None:
    proc = _installed("analyze", "--help")
    assert proc.returncode == 0
    for option in ("--output", "--force", "--bubble-threshold"):
        assert option in proc.stdout


def test_a_trace_whose_stem_is_dot_dot_writes_under_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``...sqlite`` (stem ``..``) wrote its report into the current folder, replacing a
    user's steps.csv there."""
    trace = _trace(tmp_path, "...sqlite")
    (tmp_path / "steps.csv").write_text("mine\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["analyze", str(trace)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "steps.csv").read_text() == "mine\n" and not (tmp_path / "summary.json").exists()
    assert (tmp_path / "reports" / "trace" / "summary.json").exists()


def test_files_launchprof_did_not_write_are_not_replaced_without_force(tmp_path: Path) -> None:
    trace, out = _trace(tmp_path), tmp_path / "mydata"
    out.mkdir()
    (out / "steps.csv").write_text("mine\n")
    (out / "plotly.min.js").write_text("mine\n")
    refused = runner.invoke(app, ["analyze", str(trace), "-o", str(out)])
    assert refused.exit_code == 2 and "holds steps.csv but no report" in refused.output
    assert (out / "steps.csv").read_text() == "mine\n" and not (out / "summary.json").exists()
    assert runner.invoke(app, ["analyze", str(trace), "-o", str(out), "--force"]).exit_code == 0
    assert (out / "summary.json").exists()


@pytest.mark.parametrize("command", ["analyze", "compare"])
@pytest.mark.parametrize(("output", "why"), [("", "not an empty word"), ("/", "the file system's root")])
def test_an_output_that_names_no_folder_is_refused(tmp_path: Path, command: str, output: str, why: str) -> None:
    trace = _trace(tmp_path)
    args = [command, str(trace)] + ([str(trace)] if command == "compare" else []) + ["-o", output]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and why in result.output
    assert not (tmp_path / "summary.json").exists() and not Path("/summary.json").exists()


def test_names_from_a_trace_reach_the_terminal_as_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file name with an escape sequence (clear the screen) and an emoji code is printed as
    written: the terminal is not cleared, no emoji appears."""
    name = "x\x1b[2J:smile:"
    trace = _trace(tmp_path, f"{name}.sqlite")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["analyze", str(trace)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\U0001f604" not in result.output
    assert "x\\x1b[2J:smile:" in result.output


@pytest.mark.parametrize("devices", [5, 1.5, True, "x"])
def test_a_sibling_summary_with_a_wrong_typed_devices_list_leaves_the_index_whole(
    tmp_path: Path, devices: object
) -> None:
    """Every later analyze in that parent failed with a traceback and no index.html."""
    from launchprof.report.index import write_index

    root = tmp_path / "reports"
    (root / "bad").mkdir(parents=True)
    (root / "bad" / "summary.json").write_text(json.dumps({"devices": devices}))
    assert runner.invoke(app, ["analyze", str(_trace(tmp_path)), "-o", str(root / "good")]).exit_code == 0
    page = write_index(root)
    assert page is not None and "bad" in page.read_text() and "good" in page.read_text()


def test_a_large_bubble_threshold_the_command_line_takes_is_analysed(tmp_path: Path) -> None:
    """--bubble-threshold 1e8 us passed the option's bound but not the analysis' (a traceback)."""
    result = runner.invoke(
        app, ["analyze", str(_trace(tmp_path)), "-o", str(tmp_path / "r"), "--bubble-threshold", "1e8"]
    )
    assert result.exit_code == 0, result.output


def test_another_kind_of_report_in_the_folder_is_refused_by_kind_even_with_force(tmp_path: Path) -> None:
    """compare -o into an analyze report folder would leave summary.json and report.html
    beside compare.json (half one report, half another): refused by kind, not as the
    user's files, and --force does not mix them either."""
    eager, graph, out = TRACES / "mlp_eager.sqlite.xz", TRACES / "mlp_graph.sqlite.xz", tmp_path / "r"
    assert runner.invoke(app, ["analyze", str(eager), "-o", str(out)]).exit_code == 0
    for force in ([], ["--force"]):
        result = runner.invoke(app, ["compare", str(eager), str(graph), "-o", str(out), *force])
        assert result.exit_code == 2 and "holds an analyze report (summary.json)" in result.output, result.output
        assert "no report" not in result.output and not (out / "compare.json").exists()


def test_an_output_through_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    result = runner.invoke(app, ["analyze", str(_trace(tmp_path)), "-o", str(tmp_path / "loop" / "x")])
    assert result.exit_code == 2 and "Traceback" not in result.output and result.output.count("\n") == 1
