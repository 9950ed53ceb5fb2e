"""Unprofiled baseline runs: the step-times files the markers write, the figures read from
them, the overhead correction (hand values), and ``launchprof profile --baseline-runs``
end to end under the real nsys on the CPU-only steps loop."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_nsys_retrying

from launchprof.analysis.baseline import (
    SLOWER_THAN_TRACED,
    baseline_section,
    measured_step,
    nvtx_period_p50,
    summarize_runs,
)
from launchprof.commands.text import describe_baseline as describe
from launchprof.trace.steptimes import StepTimesError, read_step_times

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")


def test_summarize_runs_by_hand() -> None:
    # run 1 starts at 0, 10, 30, 60 (periods 10, 20, 30; warm-up drops 10): 20, 30
    # run 2 starts at 100, 140, 150 (periods 40, 10; drops 40): 10   -> pooled 20, 30, 10
    r1 = np.array([[0, 5], [10, 14], [30, 33], [60, 62]], dtype=np.int64)
    r2 = np.array([[100, 101], [140, 147], [150, 151]], dtype=np.int64)
    got = summarize_runs([r1, r2])
    assert got["runs"] == 2 and got["steps"] == [4, 3] and got["periods"] == 3
    assert got["period_p50_ns"] == 20.0
    assert got["period_mean_ns"] == pytest.approx(20.0)
    # durations after warm-up: 4, 3, 2 and 7, 1 -> median 3
    assert got["duration_p50_ns"] == 3.0
    empty = summarize_runs([np.array([[0, 1]], dtype=np.int64)])
    assert empty["period_p50_ns"] is None and empty["steps"] == [1]


def test_baseline_section_ratio_by_hand() -> None:
    runs = [np.array([[0, 1], [100_000, 1], [200_000, 1], [300_000, 1]], dtype=np.int64)]  # 100 us periods
    got = baseline_section(runs, {"period_p50_ns": 250_000.0})
    assert got["overhead_ratio"] == pytest.approx(2.5)
    assert got["correction"] == pytest.approx(0.4)
    assert "corrected" not in got  # no second prediction: the measured step goes to recommendation.expected
    assert measured_step(got) == (100_000.0, [100_000.0], "step-markers")
    assert baseline_section(runs, None)["overhead_ratio"] is None


def test_the_profiled_nvtx_period_is_of_the_host_steps_by_hand() -> None:
    # "step" ranges on two threads: (1, 1) has four, so it holds the host steps (the ranges
    # summary.json's nvtx_steps describes); (1, 2) has three and is not pooled in.
    # thread (1, 1): starts 0, 10, 25, 45 -> periods 10, 15, 20, first dropped: 15, 20 -> 17.5
    # "other" ranges are ignored.
    nvtx = pd.DataFrame(
        {
            "pid": [1, 1, 1, 1, 1, 1, 1, 1],
            "tid": [1, 1, 2, 1, 2, 1, 2, 1],
            "start": [45, 0, 305, 10, 5, 25, 105, 11],
            "end": [46, 1, 306, 11, 6, 26, 106, 12],
            "text": ["step", "step", "step", "step", "step", "step", "step", "other"],
        }
    )
    before = nvtx.copy()
    assert nvtx_period_p50(nvtx) == 17.5
    pd.testing.assert_frame_equal(nvtx, before)
    assert nvtx_period_p50(nvtx, text="none") is None
    assert nvtx_period_p50(nvtx, warmup=0) == 15.0


def test_the_baseline_and_the_summary_take_one_trace_s_host_steps(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A trace without GPU work: the profiled period the runs without nsys are held
    against (baseline.nvtx_period_p50) is of the ranges summary.json's nvtx_steps section
    describes (nvtx_steps.nvtx_steps), their first period left out as a run's is; it goes
    through that one rule."""
    import launchprof
    from launchprof.analysis import baseline
    from launchprof.analysis.nvtx_steps import nvtx_steps

    trace = launchprof.analyze(HERE / "data" / "cpu" / "steps_loop_2022.sqlite.xz")
    host = nvtx_steps(trace.trace.nvtx)
    assert host is not None and host.name == "step" and len(host.table) == 12
    assert trace.summary.nvtx_steps is not None and trace.summary.nvtx_steps.count == len(host.table)
    periods = host.table["period_ns"].dropna().to_numpy()
    assert nvtx_period_p50(trace.trace.nvtx) == float(np.median(periods[1:]))
    monkeypatch.setattr(baseline, "nvtx_steps", lambda nvtx, name=None: None)
    assert nvtx_period_p50(trace.trace.nvtx) is None


def test_read_step_times_sorts_and_rejects_bad_lines(tmp_path: Path) -> None:
    f = tmp_path / "t.steps"
    f.write_text("step 30 40\nstep 10 20\n\n")
    assert read_step_times(f).tolist() == [[10, 20], [30, 40]]
    assert read_step_times(tmp_path / "missing").shape == (0, 2)
    f.write_text("step 10\n")
    with pytest.raises(StepTimesError, match=":1:"):
        read_step_times(f)


def test_read_step_times_keeps_the_named_steps(tmp_path: Path) -> None:
    """A workload marking two kinds of steps: the profiled run's name picks its own (a new
    user's script had 10 'decode' and 10 'step' markers: 20 counted, 2.00x overhead)."""
    f = tmp_path / "t.steps"
    f.write_text("decode 0 3\nstep 3 4\ndecode 5 8\nstep 8 9\nmy step 10 12\n")
    assert read_step_times(f, "step").tolist() == [[3, 4], [8, 9]]
    assert read_step_times(f, "decode").tolist() == [[0, 3], [5, 8]]
    assert read_step_times(f, "my step").tolist() == [[10, 12]]
    assert len(read_step_times(f)) == 5


MARKER_SCRIPT = """
import launchprof
s = launchprof.step()
for _ in range(3):
    with s:
        pass
@launchprof.step("decode")
def f():
    return 1
f(); f()
"""


def test_launchprof_marker_writes_step_times_at_exit(tmp_path: Path) -> None:
    out = tmp_path / "times"
    env = {**os.environ, "LAUNCHPROF_STEP_TIMES": str(out)}
    subprocess.run([sys.executable, "-c", MARKER_SCRIPT], env=env, check=True, cwd=tmp_path)
    lines = [ln.split() for ln in out.read_text().splitlines()]
    assert [ln[0] for ln in lines] == ["step"] * 3 + ["decode"] * 2
    assert all(int(b) >= int(a) for _, a, b in lines)
    assert all(int(lines[i + 1][1]) >= int(lines[i][2]) for i in range(4))  # sequential, in order


def test_a_run_without_nsys_ends_once_enough_steps_are_timed(tmp_path: Path) -> None:
    """LAUNCHPROF_STOP_AFTER (profile's runs without nsys): the process leaves after that many
    steps, exit 0, with their times written and its output flushed; the rest never runs."""
    out = tmp_path / "times"
    code = (
        "import launchprof, sys\nprint('before', flush=False)\nfor i in range(1000):\n"
        "    with launchprof.step():\n        pass\nprint('after the loop')"
    )
    env = {**os.environ, "LAUNCHPROF_STEP_TIMES": str(out), "LAUNCHPROF_STOP_AFTER": "7"}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "before\n"  # flushed before leaving; the loop's end never came
    assert len(out.read_text().splitlines()) == 7
    # Only the named steps count (a nested "fwd" step does not), and a distributed rank
    # runs to its end (a rank that left early would leave the others in a collective).
    nested = code.replace("        pass", "        with launchprof.step('fwd'):\n            pass")
    out.unlink()
    env["LAUNCHPROF_STOP_AFTER"] = "7:step"
    done = subprocess.run([sys.executable, "-c", nested], env=env, cwd=tmp_path, capture_output=True, text=True)
    names = [ln.split()[0] for ln in out.read_text().splitlines()]
    assert done.returncode == 0 and names.count("step") == 7 and names.count("fwd") == 7
    out.unlink()
    ranked = {**env, "WORLD_SIZE": "2"}
    done = subprocess.run([sys.executable, "-c", code], env=ranked, cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout == "before\nafter the loop\n" and len(out.read_text().splitlines()) == 1000
    # Without the file variable, the stop variable does nothing.
    env = {k: v for k, v in env.items() if k != "LAUNCHPROF_STEP_TIMES"}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout == "before\nafter the loop\n"


def test_examples_step_helper_writes_step_times(tmp_path: Path) -> None:
    out = tmp_path / "times"
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from _step import step\nfor _ in range(4):\n    with step(): pass"
    )
    env = {**os.environ, "LAUNCHPROF_STEP_TIMES": str(out)}
    subprocess.run([sys.executable, "-c", code, str(EXAMPLES)], env=env, check=True, cwd=tmp_path)
    assert [ln.split()[0] for ln in out.read_text().splitlines()] == ["step"] * 4


def test_no_file_without_the_variable(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHPROF_STEP_TIMES"}
    subprocess.run([sys.executable, "-c", MARKER_SCRIPT], env=env, check=True, cwd=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.nsys
@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")
def test_profile_measures_the_step_without_nsys_by_default_in_a_bounded_run(tmp_path: Path) -> None:
    """No option: one run without nsys, ended after BASELINE_STEPS (50) of the 120 steps the
    loop would mark; --no-baseline: none."""
    loop = [str(EXAMPLES / "cpu" / "steps_loop.py"), "--steps", "120", "--work", "2000"]
    done = run_nsys_retrying([LAUNCHPROF, "profile", "-o", "out", *loop], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("steps: 120") == 1  # the nsys run's; the run without nsys ended early
    assert "launchprof: baseline run 1: 50 steps (ended there: 50 steps are enough to time)" in done.stdout
    b = json.loads((tmp_path / "out" / "summary.json").read_text())["baseline"]
    assert b["runs"] == 1 and b["steps"] == [50] and b["periods"] == 48
    assert len((tmp_path / "out" / "baseline-1.steps").read_text().splitlines()) == 50
    done = run_nsys_retrying([LAUNCHPROF, "profile", "-o", "off", "--no-baseline", *loop], cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "baseline" not in json.loads((tmp_path / "off" / "summary.json").read_text())
    assert "baseline run" not in done.stdout and not list((tmp_path / "off").glob("baseline-*"))


@pytest.mark.nsys
@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")
def test_profile_with_baseline_runs_end_to_end(tmp_path: Path) -> None:
    steps = 9
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", "out", "--baseline-runs", "2", str(EXAMPLES / "cpu" / "steps_loop.py"),
         "--steps", str(steps), "--work", "20000"],
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(f"steps: {steps}") == 3  # the nsys run and two baseline runs
    folder = tmp_path / "out"
    summary = json.loads((folder / "summary.json").read_text())
    b = summary["baseline"]
    assert b["runs"] == 2 and b["steps"] == [steps, steps]  # the loop marks `steps` steps by construction
    # independent recomputation from the files: starts sorted, consecutive differences,
    # first period of each run dropped, median of the pooled rest
    periods = []
    for i in (1, 2):
        rows = [ln.split() for ln in (folder / f"baseline-{i}.steps").read_text().splitlines()]
        assert len(rows) == steps and {r[0] for r in rows} == {"step"}
        starts = sorted(int(r[1]) for r in rows)
        periods += [b_ - a for a, b_ in zip(starts, starts[1:], strict=False)][1:]
    assert b["periods"] == 2 * (steps - 2)
    assert b["period_p50_ns"] == pytest.approx(float(np.median(periods)))
    # CPU-only trace: no GPU steps, so the profiled period comes from the marker's NVTX
    # ranges, recomputed here straight from the export with sqlite3
    assert summary["steps"]["period_p50_ns"] is None and b["profiled_source"] == "nvtx"
    con = sqlite3.connect(folder / "trace.sqlite")
    try:
        starts = [r[0] for r in con.execute(
            "SELECT r.start FROM NVTX_EVENTS r LEFT JOIN StringIds s ON s.id = r.textId "
            "WHERE r.eventType = 59 AND coalesce(r.text, s.value) = 'step' ORDER BY r.start"
        )]  # fmt: skip
    finally:
        con.close()
    assert len(starts) == steps
    profiled = float(np.median(np.diff(starts)[1:]))
    assert b["profiled_period_p50_ns"] == pytest.approx(profiled)
    ratio = profiled / float(np.median(periods))
    # A run without nsys more than SLOWER_THAN_TRACED slower than the traced steps is not
    # taken (nsys does not speed a loop up: the machine was busy); this 2-CPU VM gave one
    # at 0.63x once, with another job beside the suite.
    slower = ratio < 1 / SLOWER_THAN_TRACED
    assert b["slower_than_traced"] is slower
    assert b["overhead_ratio"] == (None if slower else pytest.approx(ratio))
    page = (folder / "report.html").read_text()
    assert 'id="baseline"' in page and "Without the profiler" in page
    assert "baseline: step p50" in done.stdout


@pytest.mark.nsys
def test_no_baseline_runs_after_a_failed_workload_and_it_says_so(tmp_path: Path) -> None:
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", "out", "--baseline-runs", "2", str(EXAMPLES / "cpu" / "fails.py"), "3"],
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "launchprof: no baseline runs: the workload failed under nsys (exit code 3)" in done.stdout
    assert not list((tmp_path / "out").glob("baseline-*"))
    assert "baseline" not in json.loads((tmp_path / "out" / "summary.json").read_text())


def test_a_host_that_ran_ahead_of_the_gpu_gets_no_correction() -> None:
    # a graph a step: the host queues a step every 6 us, the GPU needs 37.6 us of work a step
    runs = [np.array([[i * 6_000, 1] for i in range(10)], dtype=np.int64)]
    steps = {"period_p50_ns": 53_600.0, "busy_p50_ns": 37_600.0}
    got = baseline_section(runs, steps)
    assert got["host_ahead_of_gpu"] is True and got["gpu_busy_p50_ns"] == 37_600
    assert got["overhead_ratio"] is None and got["correction"] is None and measured_step(got) is None
    assert "ran ahead of the GPU" in describe(got)
    # the same host pace against 5 us of GPU work a step: the host sets the pace, corrected
    slow = baseline_section(runs, {"period_p50_ns": 9_000.0, "busy_p50_ns": 5_000.0})
    assert slow["host_ahead_of_gpu"] is False and slow["overhead_ratio"] == pytest.approx(1.5)


def test_read_step_times_rejects_non_text_and_out_of_range_times(tmp_path: Path) -> None:
    """Both were tracebacks in a --baseline-runs run (breaker); now the run is left out."""
    garbage = tmp_path / "g.steps"
    garbage.write_bytes(b"step 1 2\n\xfb\xfc\n")
    with pytest.raises(StepTimesError, match="not UTF-8 text at byte 9"):
        read_step_times(garbage)
    big = tmp_path / "b.steps"
    big.write_text("step 99999999999999999999999 1\n")
    with pytest.raises(StepTimesError, match=r"b.steps:1: expected 'NAME START_NS END_NS'"):
        read_step_times(big)


def test_describe_without_a_ratio() -> None:
    section = {"period_p50_ns": 0.0, "profiled_period_p50_ns": 1500.0, "overhead_ratio": None, "runs": 2}
    assert describe(section) == "baseline: step p50 0.0 us without nsys vs 1.5 us under nsys: no ratio (a zero period)"


@pytest.mark.nsys
def test_a_failed_workload_is_recorded_in_the_summary_and_page(tmp_path: Path) -> None:
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", "out", str(EXAMPLES / "cpu" / "fails.py"), "5"], cwd=tmp_path, timeout=300
    )
    assert done.returncode == 5, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["workload"] == {"exit_code": 5}
    assert "The workload exited with code 5." in (tmp_path / "out" / "report.html").read_text()
    ok = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", "ok", str(EXAMPLES / "cpu" / "fails.py"), "0"], cwd=tmp_path, timeout=300
    )
    assert ok.returncode == 0, ok.stderr
    assert "workload" not in json.loads((tmp_path / "ok" / "summary.json").read_text())


@pytest.mark.slow
def test_a_failed_baseline_runs_file_is_moved_out_of_compares_way(tmp_path: Path) -> None:
    # The workload marks 6 steps, and fails on its second run without nsys (a counter file
    # says which run it is: the nsys run is 1); compare reads every baseline-*.steps.
    script = tmp_path / "flaky.py"
    script.write_text(
        "import sys, time\nfrom pathlib import Path\nimport launchprof\n"
        "count = Path(sys.argv[1])\nn = int(count.read_text()) + 1 if count.exists() else 1\n"
        "count.write_text(str(n))\nfor _ in range(6):\n    with launchprof.step():\n        time.sleep(0.002)\n"
        "sys.exit(1 if n == 3 else 0)\n"
    )
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", "out", "--baseline-runs", "3", str(script), str(tmp_path / "count")],
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "out"
    assert "launchprof: baseline run 2 exited with code 1; left out" in done.stdout
    assert sorted(p.name for p in folder.glob("baseline-*")) == [
        "baseline-1.steps", "baseline-2.steps.failed", "baseline-3.steps",
    ]  # fmt: skip
    assert json.loads((folder / "summary.json").read_text())["baseline"]["runs"] == 2


CORPUS = HERE / "data" / "frameworks"


def _unpacked(tmp_path: Path, name: str) -> Path:
    import lzma

    out = tmp_path / f"{name}.sqlite"
    out.write_bytes(lzma.decompress((CORPUS / f"{name}.sqlite.xz").read_bytes()))
    return out


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # vision.py marks each step with launchprof.step() and brackets the traced loop with
        # torch.cuda.profiler.start()/stop(); under --emit-nvtx it marks no step; hf_decode.py
        # only brackets one generate() (tests/data/frameworks/MANIFEST.md); all run PyTorch kernels.
        ("vit_small_b1_eager", {"markers", "profiler-region", "pytorch"}),
        ("resnet50_b1_emit-nvtx", {"profiler-region", "pytorch"}),
        ("gpt2_b1_eager", {"profiler-region", "pytorch"}),
    ],
)
def test_what_a_run_without_nsys_can_time_is_read_from_the_trace(tmp_path: Path, name: str, expected: set[str]) -> None:
    from launchprof.trace.steptimes import timed_sources

    assert timed_sources(_unpacked(tmp_path, name)) == expected


def test_no_baseline_runs_when_nothing_in_the_trace_can_be_timed(tmp_path: Path) -> None:
    from launchprof.commands.baseline import nothing_to_time
    from launchprof.nsys.profile import Workload
    from launchprof.trace.steptimes import timed_sources

    region_only = _unpacked(tmp_path, "gpt2_b1_eager")
    python = Workload([sys.executable, "decode.py"], "decode")
    binary = Workload(["/opt/app/decode"], "decode")
    assert nothing_to_time(python, region_only) is None  # runs through launchprof/profiler_region.py
    assert "started as `python SCRIPT` or `-m MODULE`" in (nothing_to_time(binary, region_only) or "")
    assert nothing_to_time(binary, _unpacked(tmp_path, "vit_small_b1_eager")) is None  # step markers
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    assert timed_sources(empty) == frozenset()
    # --step names the user's own range: found by the profile, not timed by a run without nsys.
    why = nothing_to_time(binary, empty, "train_iter") or ""
    assert "'train_iter' ranges are not launchprof.step() markers" in why and "launchprof.step('train_iter')" in why
    assert timed_sources(tmp_path / "missing.sqlite") is None  # cannot tell: the runs are not skipped
    assert nothing_to_time(python, tmp_path / "missing.sqlite") is None
    assert nothing_to_time(python, empty) == (
        "the trace has no launchprof.step() range, no profiler region and no PyTorch kernel to time"
    )


@pytest.mark.nsys
@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")
def test_baseline_runs_are_skipped_when_the_workload_marks_no_step(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("import sys\nprint('ran', file=sys.stderr)\n")
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", "out", "--baseline-runs", "3", str(script)], cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert (
        "launchprof: no baseline runs: the trace has no launchprof.step() range, no profiler region and no PyTorch "
        "kernel to time" in done.stdout
    )
    assert done.stderr.count("ran") == 1  # the nsys run only
    assert not list((tmp_path / "out").glob("baseline-*"))


@pytest.mark.nsys
@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")
def test_a_workload_that_failed_before_any_step_is_not_told_to_mark_its_steps(tmp_path: Path) -> None:
    script = tmp_path / "bad_args.py"
    script.write_text("import sys\nsys.exit(3)  # as argparse does with a misplaced option\n")
    done = run_nsys_retrying([LAUNCHPROF, "profile", "-o", "out", str(script)], cwd=tmp_path, timeout=300)
    assert done.returncode == 3, done.stderr
    assert "CPU only, and no NVTX step range; the workload exited with code 3" in done.stdout
    assert "mark your loop's body" not in done.stdout


def test_analyze_with_a_folder_of_runs_without_nsys(tmp_path: Path) -> None:
    """launchprof.analyze(trace, baseline=FOLDER): the step the folder's runs measured goes
    into the one prediction; a folder without runs, or none, is an error, not an estimate."""
    import launchprof
    from launchprof.errors import TraceError

    trace = HERE / "data" / "traces" / "mlp_eager.sqlite.xz"
    lines = [f"step {1_000_000 + k * 500_000} {1_000_000 + k * 500_000 + 400_000}\n" for k in range(12)]
    (tmp_path / "baseline-1.steps").write_text("".join(lines))
    a = launchprof.analyze(trace, baseline=tmp_path)
    e = a.recommendation.expected
    assert e.eager_source == "measured" and e.eager_step_ns == 500_000 and e.eager_runs == 1
    assert a.summary.baseline is not None and a.summary.baseline.period_p50_ns == 500_000
    assert a.recommendation.step_without_profiler["source"] == "measured"
    with pytest.raises(TraceError, match="holds no runs without nsys"):
        launchprof.analyze(trace, baseline=tmp_path / "..")
    with pytest.raises(TraceError, match="no such folder"):
        launchprof.analyze(trace, baseline=tmp_path / "missing")


def test_runs_slower_than_the_trace_are_not_the_step_without_nsys() -> None:
    """nsys does not make a program faster: marked steps without it more than the runs'
    spread (1.15x) slower than the traced step come from a process that ran at another
    pace (an H200 torch.compile loop: 772.8 us without nsys, 468.0 us under it), so the
    expectation falls back to the estimate and the terminal says why; 1.1x slower is
    within the spread and is used."""
    traced = {"period_p50_ns": 468_000.0, "busy_p50_ns": 356_000.0}
    slow = baseline_section([np.array([[i * 772_800, 1] for i in range(50)], dtype=np.int64)], traced)
    assert slow["slower_than_traced"] is True and slow["overhead_ratio"] is None
    assert measured_step(slow) is None
    assert "slower without the profiler than with it" in describe(slow)
    near = baseline_section([np.array([[i * 514_800, 1] for i in range(50)], dtype=np.int64)], traced)
    assert near["slower_than_traced"] is False and measured_step(near) is not None


def test_a_gpu_bound_step_whose_expected_gain_converts_is_launch_bound() -> None:
    """The verdict follows the expected gain without the profiler: 'gpu-bound' (by the idle
    gaps under nsys) beside an expected 2.01x that the decision then refused was one page
    saying two things; now the step is launch-bound and converts (it takes a measured step
    above the traced one within the runs' spread: a slower one is not used, test above).
    Below the bar it stays gpu-bound."""
    from types import SimpleNamespace

    from launchprof.analysis.prediction.decision import MIN_SPEEDUP, agree

    # measured 514.8 us without nsys against 468.0 us traced (1.1x: within the runs' spread)
    exp = SimpleNamespace(speedup=1.34, kept_share=0.1, eager_source="measured", eager_step_ns=514_800.0,
                          graph_step_ns=384_500.0, gpu_side_ns=384_500.0, cpu_side_ns=60_000.0,
                          kept_host_ns=5_000.0)  # fmt: skip
    verdict, reasons = agree("gpu-bound", ["head", "split", "The GPU's own work sets the pace."], exp)  # type: ignore[arg-type]
    assert verdict == "launch-bound" and "1.34x" in reasons[-1] and "514.8 us (measured)" in reasons[-1]
    low = SimpleNamespace(**{**vars(exp), "speedup": MIN_SPEEDUP - 0.01})
    assert agree("gpu-bound", ["head"], low)[0] == "gpu-bound"  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["step-markers", "module-calls"])
def test_a_report_folder_pools_its_runs_as_the_summary_did(tmp_path: Path, source: str) -> None:
    """compare reads a folder's runs without nsys through the summary's one pooling rule
    (baseline.pooled_periods): the same periods as the summary's baseline section counted
    (each run's first period left out for step markers; a module's later half, none left
    out), so the same median."""
    from launchprof.analysis.baseline import ModuleRuns, pooled_periods
    from launchprof.api.report_folder import _baseline_periods

    rng = np.random.default_rng(3)
    runs = []
    for k in range(1, 3):
        starts = np.cumsum(rng.integers(900, 1_100, size=9 + k)).astype(np.int64)
        runs.append(np.stack([starts, starts + 500], axis=1))
    name = "module M" if source == "module-calls" else "step"
    for k, run in enumerate(runs, start=1):
        (tmp_path / f"baseline-{k}.steps").write_text("".join(f"{name} {a} {b}\n" for a, b in run))
    traced = {"period_p50_ns": 1_200.0}
    given = ModuleRuns([{name: r} for r in runs]) if source == "module-calls" else runs
    section = baseline_section(given, traced)
    assert section["source"] == source and section["overhead_ratio"] is not None
    notes: list[str] = []
    got = _baseline_periods(tmp_path, section, None, "step", notes)
    assert got is not None and not notes
    np.testing.assert_array_equal(got, pooled_periods(runs, source).astype(float))
    assert got.size == section["periods"] and float(np.median(got)) == section["period_p50_ns"]
