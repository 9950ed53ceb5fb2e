"""`launchprof profile` given awkward but legal inputs, or bad ones that must be refused
before the workload runs (found by a bad-input trial): each case's workload writes a file
when it runs, so "refused before the workload" is checked by that file's absence."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_nsys_retrying

LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")
needs_nsys = pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")

MARKS = "import sys\nopen(sys.argv[1], 'w').write('ran')\n"


def profile(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_nsys_retrying([LAUNCHPROF, "profile", *args], cwd=cwd, timeout=300, env={**os.environ, **(env or {})})


@pytest.mark.nsys
@needs_nsys
@pytest.mark.parametrize("name", ["pct%p", "pct%%", "pct%q{HOME}", "~/tilde"])
def test_an_output_named_like_an_nsys_pattern_is_taken_literally(tmp_path: Path, name: str) -> None:
    """nsys expands %p, %h, %q{VAR}, %% and a leading ~ in its --output: the trace went
    elsewhere and the run was lost ("nsys wrote no trace")."""
    (tmp_path / "w.py").write_text(MARKS)
    done = profile("-o", name, "w.py", "ran", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for file in ("trace.nsys-rep", "trace.sqlite", "summary.json", "report.html"):
        assert (tmp_path / name / file).is_file(), (file, done.stderr)


@pytest.mark.nsys
@needs_nsys
def test_a_script_whose_name_starts_with_a_dash_runs_after_double_dash(tmp_path: Path) -> None:
    (tmp_path / "-dash.py").write_text(MARKS)
    done = profile("-o", "out", "--", "-dash.py", "ran", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ran").read_text() == "ran"  # Python read '-dash.py' as its options before


@pytest.mark.parametrize("existing", ["steps.csv", "step_kernels.csv", "step_timeline.csv", "plotly.min.js"])
def test_an_output_folder_holding_a_report_file_is_refused(tmp_path: Path, existing: str) -> None:
    (tmp_path / "w.py").write_text(MARKS)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / existing).write_text("mine")
    argv = [LAUNCHPROF, "profile", "-o", "out", "w.py", "ran"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"launchprof: error: out already holds {existing}; choose another --output (profile never overwrites)"
    ]
    assert (tmp_path / "out" / existing).read_text() == "mine"
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["-o", ""], {}, "launchprof: error: --output needs a folder, not an empty word"),
        (["--output="], {}, "launchprof: error: --output needs a folder, not an empty word"),
        (["--nsys", ""], {}, "launchprof: error: --nsys needs the path of the nsys executable, not an empty word"),
        (["-o", "/sys"], {}, "launchprof: error: cannot write into /sys: "),
        (
            ["-o", "out"],
            {"LAUNCHPROF_QDSTRM_IMPORTER": "/nonexistent/QdstrmImporter"},
            "launchprof: error: QdstrmImporter not found at /nonexistent/QdstrmImporter "
            "(given by $LAUNCHPROF_QDSTRM_IMPORTER)",
        ),
    ],
)
def test_a_bad_setting_is_refused_before_the_workload_runs(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    (tmp_path / "w.py").write_text(MARKS)
    done = subprocess.run(
        [LAUNCHPROF, "profile", *args, "w.py", "ran"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), done.stderr
    assert not (tmp_path / "ran").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.py"]  # no folder, no index left behind


def test_an_empty_target_is_named_as_such(tmp_path: Path) -> None:
    done = subprocess.run([LAUNCHPROF, "profile", "-o", "out", ""], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "launchprof: error: the target is an empty word: give a Python script, -m module, or an executable"
    ]


def test_ctrl_c_before_nsys_starts_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C while the command line's modules are still being imported printed a
    traceback; the interrupt is raised at the same place here."""
    code = (
        "import sys\n"
        "import launchprof.cli.entry as e\n"
        "import launchprof.cli.options as o\n"
        "def interrupted(words):\n"
        "    raise KeyboardInterrupt\n"
        "o.parse_profile = interrupted\n"
        "sys.argv = ['launchprof', 'profile', 'w.py']\n"
        "e.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 130
    assert done.stderr.splitlines() == ["launchprof: interrupted"]
