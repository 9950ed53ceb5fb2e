"""Step times without nsys for workloads without step markers: the profiler region a
workload brackets with ``torch.cuda.profiler.start()/stop()``, timed by
``launchprof/profiler_region.py``, divided by the steps found in that region of the trace.

torch is not installed here (CI has no GPU): the run-through tests put a two-function
``torch.cuda.profiler`` package on PYTHONPATH, which is all the hook touches; the real
torch path ran on the H200 (``launchprof check`` of the HF decode pair, issue note).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from launchprof.analysis.baseline import RegionRuns, baseline_section, region_step_count, trace_regions
from launchprof.commands.baseline import baseline_argv
from launchprof.commands.text import describe_baseline as describe
from launchprof.marker import STEP_TIMES_ENV
from launchprof.profiler_region import REGION_NAME
from launchprof.trace.steptimes import read_step_times, region_step_times

REGION_FILE = str(Path(sys.modules["launchprof.profiler_region"].__file__ or "").resolve())


@pytest.mark.parametrize(
    ("argv", "wrapped_at"),
    [
        (["python3", "x.py", "--a"], 1),
        (["/usr/bin/python3.12", "-u", "x.py"], 2),
        (["python", "-m", "pkg.mod", "1"], 1),
        ([sys.executable, "x.py"], 1),
        (["./serve", "x.py"], None),
        (["python3", "-c", "print(1)"], None),
        (["python3"], None),
        (["pythonista", "x.py"], None),
    ],
)
def test_baseline_argv_wraps_python_workloads_only(argv: list[str], wrapped_at: int | None) -> None:
    got = baseline_argv(argv)
    if wrapped_at is None:
        assert got == argv
    else:
        assert got == [*argv[:wrapped_at], REGION_FILE, *argv[wrapped_at:]]


def _fake_torch(root: Path) -> None:
    """A ``torch`` package with ``cuda.profiler.start/stop/profile`` and ``cuda.is_initialized`` only."""
    (root / "torch" / "cuda").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text("from . import cuda\n")
    (root / "torch" / "cuda" / "__init__.py").write_text(
        "CALLS = []\ndef is_initialized():\n    return False\ndef synchronize():\n    CALLS.append('sync')\n"
    )
    (root / "torch" / "cuda" / "profiler.py").write_text(
        textwrap.dedent(
            """
            import contextlib
            from . import CALLS
            def start():
                CALLS.append('start')
            def stop():
                CALLS.append('stop')
            @contextlib.contextmanager
            def profile():  # as torch.cuda.profiler.profile: start and stop by their module names
                try:
                    start()
                    yield
                finally:
                    stop()
            """
        )
    )


def _run(tmp_path: Path, body: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    _fake_torch(tmp_path / "site")
    script = tmp_path / "work.py"
    script.write_text(textwrap.dedent(body))
    times = tmp_path / "run.steps"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), STEP_TIMES_ENV: str(times)}
    done = subprocess.run(
        baseline_argv([sys.executable, str(script), *args]), env=env, capture_output=True, text=True, check=False
    )
    return done, times


def test_regions_are_timed_and_written_at_exit(tmp_path: Path) -> None:
    done, times = _run(
        tmp_path,
        """
        import sys, time
        import torch
        import torch.cuda.profiler as prof
        print(sys.argv[1:], __name__)
        for pause in (0.05, 0.02):
            prof.start()
            time.sleep(pause)
            prof.stop()
        print(torch.cuda.CALLS)
        """,
        "--flag",
        "7",
    )
    assert done.returncode == 0, done.stderr
    assert "['--flag', '7'] __main__" in done.stdout  # the script's own argv and __main__
    assert "['start', 'stop', 'start', 'stop']" in done.stdout  # the real functions still ran
    rows = region_step_times(times)
    assert rows.shape == (2, 2)
    took = (rows[:, 1] - rows[:, 0]) / 1e9
    assert took[0] == pytest.approx(0.05, abs=0.04) and took[0] >= 0.05
    assert took[1] >= 0.02 and took[1] < took[0]
    assert read_step_times(times, "step").size == 0
    assert times.read_text().startswith(REGION_NAME + " ")


def test_the_profile_context_manager_and_an_exit_code_pass_through(tmp_path: Path) -> None:
    done, times = _run(
        tmp_path,
        """
        import sys, time
        import torch.cuda.profiler
        with torch.cuda.profiler.profile():
            time.sleep(0.01)
        sys.exit(3)
        """,
    )
    assert done.returncode == 3
    assert region_step_times(times).shape == (1, 2)


def test_a_workload_without_a_region_writes_nothing(tmp_path: Path) -> None:
    done, times = _run(tmp_path, "import torch\n")
    assert done.returncode == 0, done.stderr
    assert not times.exists()


def _api(calls: list[tuple[str, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": [c[1] for c in calls],
            "end": [c[2] for c in calls],
            "call": pd.Categorical([c[0] for c in calls]),
        }
    )


def test_trace_regions_pair_each_start_with_the_next_stop() -> None:
    api = _api(
        [
            ("cudaLaunchKernel", 5, 6),
            ("cudaProfilerStart", 100, 110),
            ("cuProfilerStart", 102, 108),  # the driver call inside the runtime's: not a second region
            ("cudaProfilerStop", 500, 520),
            ("cudaProfilerStart", 900, 905),
            ("cudaProfilerStop", 1500, 1501),
        ]
    )
    assert trace_regions(api).tolist() == [[110, 500], [905, 1500]]
    assert trace_regions(_api([("cuProfilerStart", 10, 20), ("cuProfilerStop", 40, 41)])).tolist() == [[20, 40]]
    assert trace_regions(_api([("cudaProfilerStart", 10, 20)])).shape == (0, 2)  # never stopped
    table = pd.DataFrame({"cpu_start": [50, 110, 300, 499, 500, 1000, 2000]})
    assert region_step_count(trace_regions(api), table) == 4  # 110, 300, 499 and 1000


def test_region_section_one_figure_per_run_and_no_host_ahead() -> None:
    runs = RegionRuns(
        [
            np.array([[0, 31_000_000]]),
            np.array([[5, 5 + 32_000_000]]),
            np.array([[0, 10_000_000], [20, 20 + 23_000_000]]),
        ]
    )
    steps = {"period_p50_ns": 1_600_000.0, "busy_p50_ns": 1_500_000.0}
    section = baseline_section(runs, steps, None, (32, 1))
    assert section["source"] == "profiler-region"
    assert section["region_ns"] == [31_000_000, 32_000_000, 33_000_000]
    assert section["period_p50_ns"] == pytest.approx(32_000_000 / 32)
    assert section["periods"] == 3
    assert section["overhead_ratio"] == pytest.approx(1.6)
    assert section["host_ahead_of_gpu"] is False  # 1.0 ms < 1.5 ms busy, but a region drains the GPU
    assert "profiler region" in describe(section) and "32 steps" in describe(section)
    empty = baseline_section(runs, steps, None, (0, 0))
    assert empty["period_p50_ns"] is None and empty["overhead_ratio"] is None
    assert "no step time without nsys" in describe(empty)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["python3", "-X", "pycache_prefix=a.py", "x.py"],
            ["python3", "-X", "pycache_prefix=a.py", REGION_FILE, "x.py"],
        ),
        (["python3", "-W", "ignore", "-u", "x"], ["python3", "-W", "ignore", "-u", REGION_FILE, "x"]),
        (["python3", "-Wignore", "-mpkg.mod", "1"], ["python3", "-Wignore", REGION_FILE, "-m", "pkg.mod", "1"]),
        (["python3", "-c", "a.py"], ["python3", "-c", "a.py"]),
        (["python3", "-cprint(1)"], ["python3", "-cprint(1)"]),
        (["python3", "-", "a.py"], ["python3", "-", "a.py"]),
        (["python3", "-m"], ["python3", "-m"]),
        (["python3", "-X", "dev"], ["python3", "-X", "dev"]),
    ],
)
def test_baseline_argv_reads_python_options_as_python_does(argv: list[str], expected: list[str]) -> None:
    assert baseline_argv(argv) == expected


def test_the_script_runs_as_python_would_run_it(tmp_path: Path) -> None:
    # A symlinked script imports its real folder's modules; __file__ is absolute; a chdir
    # does not lose it.
    real = tmp_path / "real"
    real.mkdir()
    (real / "helper.py").write_text("VALUE = 7\n")
    (real / "main.py").write_text(
        "import os, helper\nos.chdir('/')\nprint(helper.VALUE, os.path.isabs(__file__),"
        " os.path.exists(os.path.join(os.path.dirname(__file__), 'helper.py')))\n"
    )
    link = tmp_path / "sp ace"
    link.mkdir()
    (link / "link.py").symlink_to(real / "main.py")
    for safe in ("", "1"):
        env = {**os.environ, "PYTHONSAFEPATH": safe} if safe else dict(os.environ)
        plain = subprocess.run(
            [sys.executable, "sp ace/link.py"], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        wrapped = subprocess.run(
            baseline_argv([sys.executable, "sp ace/link.py"]), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert (wrapped.returncode, wrapped.stdout) == (plain.returncode, plain.stdout), (safe, wrapped.stderr)
    assert plain.returncode == 1 and "No module named 'helper'" in plain.stderr  # -P: no script folder on sys.path


def test_safe_path_keeps_the_first_pythonpath_entry(tmp_path: Path) -> None:
    done, times = _run(tmp_path, "import torch.cuda.profiler as p\np.start()\np.stop()\n")
    assert done.returncode == 0
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), STEP_TIMES_ENV: str(times), "PYTHONSAFEPATH": "1"}
    again = subprocess.run(baseline_argv([sys.executable, str(tmp_path / "work.py")]), env=env, capture_output=True)
    assert again.returncode == 0, again.stderr
    assert region_step_times(times).shape == (2, 2)


def test_a_start_inside_an_open_region_and_a_fork_change_nothing(tmp_path: Path) -> None:
    done, times = _run(
        tmp_path,
        """
        import os, sys, time
        import torch.cuda.profiler as p
        p.start()
        time.sleep(0.03)
        with p.profile():  # a second start inside the open region: the region ends at its stop
            time.sleep(0.01)
        p.stop()  # no region open: nothing
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # the child exits normally: its atexit must not write the parent's region
        os.waitpid(pid, 0)
        """,
    )
    assert done.returncode == 0, done.stderr
    rows = region_step_times(times)
    assert rows.shape == (1, 2)
    assert (rows[0, 1] - rows[0, 0]) / 1e9 >= 0.04


def test_an_unwritable_step_times_file_is_one_line(tmp_path: Path) -> None:
    _fake_torch(tmp_path / "site")
    script = tmp_path / "work.py"
    script.write_text("import torch.cuda.profiler as p\np.start()\np.stop()\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), STEP_TIMES_ENV: str(tmp_path / "no" / "x.steps")}
    done = subprocess.run(baseline_argv([sys.executable, str(script)]), env=env, capture_output=True, text=True)
    assert done.returncode == 0
    assert done.stderr.strip().splitlines() == [
        f"launchprof: step times not written to {tmp_path / 'no' / 'x.steps'}: No such file or directory"
    ]


def test_unprofiled_interval_of_a_few_runs_is_their_whole_range() -> None:
    from launchprof.analysis.comparison.verify import unprofiled_interval

    point, (low, high) = unprofiled_interval(np.array([80.0, 120.0]), np.array([100.0, 99.0]))
    assert point == pytest.approx(100 / 99.5)
    assert (low, high) == (pytest.approx(0.80), pytest.approx(120 / 99))
    many = np.linspace(90, 110, 20)
    assert unprofiled_interval(many, many / 2)[1][0] > 1.5  # enough values: the bootstrap's narrow interval


def test_describe_says_why_there_are_no_step_times() -> None:
    section = baseline_section([np.empty((0, 2), dtype=np.int64)] * 2, {"period_p50_ns": 1e6}, None)
    assert "no step markers (launchprof.step()) and no torch.cuda.profiler region timed" in describe(section)
