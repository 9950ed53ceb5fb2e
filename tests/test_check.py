"""``launchprof check``: the conversion loop in one command, end to end under the real nsys
on CPU-only workloads (no GPU here: the loop runs, and ends in one clear line)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_nsys_retrying

from launchprof.commands.check import CheckUsageError, split_commands

LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")
LOOP = str(Path(__file__).resolve().parent.parent / "examples" / "cpu" / "steps_loop.py")


@pytest.mark.parametrize(
    ("words", "before", "after"),
    [
        (["a.py", "--", "b.py"], ["a.py"], ["b.py"]),
        (["a.py", "-x", "1", "--", "b.py", "--", "c"], ["a.py", "-x", "1"], ["b.py", "--", "c"]),
        (["-m", "pkg", "--", "-m", "pkg", "--fast"], ["-m", "pkg"], ["-m", "pkg", "--fast"]),
    ],
)
def test_the_first_double_dash_separates_before_from_after(
    words: list[str], before: list[str], after: list[str]
) -> None:
    assert split_commands(words) == (before, after)


@pytest.mark.parametrize("words", [["a.py", "b.py"], ["--", "b.py"], ["a.py", "--"]])
def test_a_missing_side_is_a_usage_error(words: list[str]) -> None:
    with pytest.raises(CheckUsageError):
        split_commands(words)


@pytest.mark.slow
def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    done = subprocess.run([LAUNCHPROF, "check", LOOP, LOOP], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "separated by --" in done.stderr
    (tmp_path / "taken").mkdir()
    again = subprocess.run(
        [LAUNCHPROF, "check", "-o", "taken", LOOP, "--", LOOP], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 2 and "already exists" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.nsys
def test_check_of_cpu_only_workloads_profiles_both_and_says_no_gpu_work(tmp_path: Path) -> None:
    steps = 8
    done = run_nsys_retrying(
        [LAUNCHPROF, "check", "-o", "loop", "--runs", "1", LOOP, "--steps", str(steps), "--", LOOP,
         "--steps", str(steps)],
        before_retry=lambda: shutil.rmtree(tmp_path / "loop", ignore_errors=True),  # check never writes over it
        cwd=tmp_path, timeout=400,
    )  # fmt: skip
    assert "Traceback" not in done.stderr
    # Both sides were profiled and timed without nsys: the nsys run and one baseline run each.
    assert done.stdout.count(f"steps: {steps}") == 4
    for side in ("before", "after"):
        folder = tmp_path / "loop" / side
        assert (folder / "summary.json").is_file() and (folder / "baseline-1.steps").is_file()
        assert len((folder / "baseline-1.steps").read_text().splitlines()) == steps
    # No GPU here: compare needs GPU work, said in one line, exit 2 (never a traceback).
    assert done.returncode == 2
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("launchprof: error:")]
    assert len(errors) == 1 and "GPU work" in errors[0]


@pytest.mark.slow
def test_a_missing_after_script_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [LAUNCHPROF, "check", "-o", "out", LOOP, "--", "nosuch.py"], cwd=tmp_path, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "nosuch.py" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists() and "steps:" not in done.stdout  # BEFORE never ran


def test_a_mistyped_fail_on_verdict_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """``--fail-on`` is read before the workloads run: a typo after two profiled workloads
    would lose them (it was parsed by the comparison, at the end)."""
    done = subprocess.run(
        [LAUNCHPROF, "check", "-o", "out", "--fail-on", "slower", LOOP, "--", LOOP], cwd=tmp_path,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (
        "launchprof: error: --fail-on: unknown verdict 'slower' (choose from verified, not-faster, not-converted, "
        "different-work, unknown-work, churn, or none)"
    )
    assert not (tmp_path / "out").exists() and "steps:" not in done.stdout  # BEFORE never ran
