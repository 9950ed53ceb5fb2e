"""``launchprof profile`` in a script or CI job: ``--json`` (summary.json alone on stdout,
the workload's own output moved to stderr), ``-q``, ``--fail-on``, and launchprof's
options written after the target warned about with the command line probably meant.
Through the installed command, under Debian's real nsys, on CPU workloads."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import run_nsys_retrying

from launchprof.cli.options import AFTER_TARGET_WARNED, meant_command, options_after_target

LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")
LOOP = str(Path(__file__).parent.parent / "examples" / "cpu" / "steps_loop.py")
nsys = pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")


@pytest.mark.nsys
@nsys
def test_json_gives_the_summary_alone_on_stdout_and_fail_on_exits_1(tmp_path: Path) -> None:
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "--json", "--fail-on", "no-gpu-work", "-o", "out", LOOP, "--steps", "4"],
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)  # nothing else on stdout: the loop's own prints went to stderr
    assert summary["headline"]["verdict"] == "no-gpu-work"
    assert summary == json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "steps: 4" in done.stderr  # the workload's output, kept
    assert done.stderr.rstrip().endswith("launchprof: verdict no-gpu-work is one of --fail-on")
    assert summary["baseline"]["steps"] == [4]  # its run without nsys was made too


@pytest.mark.nsys
@nsys
def test_quiet_prints_only_the_workloads_own_output_and_passes_without_a_failing_verdict(tmp_path: Path) -> None:
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-q", "--fail-on", "launch-bound", "-o", "out", LOOP, "--steps", "3"],
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "launchprof:" not in done.stdout + done.stderr and "verdict" not in done.stdout
    assert done.stdout.count("steps: 3") == 2  # the nsys run and the run without nsys
    assert (tmp_path / "out" / "summary.json").is_file()


def test_an_option_after_the_target_is_warned_with_the_command_probably_meant() -> None:
    target = [LOOP, "--steps", "5", "-o", "DIR", "--json", "--step=decode", "-x"]
    late = options_after_target(target[1:], AFTER_TARGET_WARNED)
    assert late == ["-o", "--json", "--step"]
    assert meant_command(target, frozenset(late)) == [
        "launchprof",
        "profile",
        "-o",
        "DIR",
        "--json",
        "--step=decode",
        LOOP,
        "--steps",
        "5",
        "-x",
    ]


@pytest.mark.nsys
@nsys
def test_analyze_of_a_report_says_when_it_reads_an_earlier_export(tmp_path: Path) -> None:
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-q", "-o", "out", LOOP, "--steps", "3"], cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    again = run_nsys_retrying([LAUNCHPROF, "analyze", "out/trace.nsys-rep", "-o", "a"], cwd=tmp_path, timeout=300)
    assert again.returncode == 2  # no GPU work: the report is written, the status says so
    assert "note: out/trace.sqlite (exported from trace.nsys-rep on " in again.stdout
    assert "delete it to export the report again" in again.stdout
    (tmp_path / "out" / "trace.sqlite").unlink()
    fresh = run_nsys_retrying([LAUNCHPROF, "analyze", "out/trace.nsys-rep", "-o", "b"], cwd=tmp_path, timeout=300)
    assert "was read as it is" not in fresh.stdout, fresh.stderr
    assert (tmp_path / "out" / "trace.sqlite").is_file()  # exported again
