"""Bad option values, damaged report folders, an unwritable terminal, a stranded
recording: one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchprof.nsys.profile import stranded_qdstrm

LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")


def run(*args: str, cwd: Path, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LAUNCHPROF, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300, check=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e30", "1000000000.0001"])
def test_bubble_threshold_out_of_range_is_one_line(real_trace, tmp_path: Path, value: str) -> None:  # type: ignore[no-untyped-def]
    done = run("analyze", str(real_trace("mlp_eager")), "-o", "r", f"--bubble-threshold={value}", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"launchprof: error: --bubble-threshold must be a number of us from 0 to 1e+09, not {float(value)!r}"
    ]
    assert not (tmp_path / "r").exists()  # refused before anything was written


@pytest.mark.slow
def test_damaged_report_folder_in_compare_is_one_line(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert run("analyze", str(real_trace("mlp_eager")), "-o", "good", cwd=tmp_path).returncode == 0
    for name, damage in (("steps_text", "steps"), ("numbers_text", "launches")):
        shutil.copytree(tmp_path / "good", tmp_path / name)
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        if damage == "steps":
            summary["steps"] = "oops"
        else:
            summary["launches"] = {k: "x" for k in summary["launches"]}
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
        done = run("compare", name, str(real_trace("mlp_graph")), "-o", f"c_{name}", cwd=tmp_path)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"launchprof: error: BEFORE {name}: its summary.json or step files are damaged")


@pytest.mark.slow
def test_closed_and_full_stdout(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trace = str(real_trace("mlp_eager"))
    closed = subprocess.run(
        f"{LAUNCHPROF} analyze {trace} -o closed >&-", shell=True, cwd=tmp_path, capture_output=True, text=True
    )
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr
    assert (tmp_path / "closed" / "summary.json").is_file()
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        done = run("analyze", trace, "-o", "full", cwd=tmp_path, stdout=full)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["launchprof: error: cannot write the output: No space left on device"]


def test_stranded_recording_is_the_one_left_since_the_start(tmp_path: Path) -> None:
    start = time.time()
    old = tmp_path / "nsys-report-0001.qdstrm"
    old.write_text("x")
    os.utime(old, (start - 60, start - 60))  # another run's, from before
    assert stranded_qdstrm(start, str(tmp_path)) is None
    new = tmp_path / "nsys-report-0002.qdstrm"
    new.write_text("x")
    assert stranded_qdstrm(start, str(tmp_path)) == new
    (tmp_path / "nsys-report-0003.qdstrm").write_text("x")  # two new ones: whose is which? neither
    assert stranded_qdstrm(start, str(tmp_path)) is None


@pytest.mark.slow
@pytest.mark.parametrize("command", ["analyze", "compare"])
def test_empty_step_name_is_one_line(real_trace, tmp_path: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    traces = [str(real_trace("mlp_eager"))] + ([str(real_trace("mlp_graph"))] if command == "compare" else [])
    done = run(command, *traces, "-o", "r", "--step", " ", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "launchprof: error: --step needs the text of an NVTX range (for example --step step)"
    ]


@pytest.mark.slow
def test_force_over_a_report_with_steps_leaves_no_stale_step_files(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A CPU-only trace analysed with --force over a GPU report: the old step files go (a new
    user's `compare` then read the old trace's steps beside the new summary: 'verified 7.67x')."""
    assert run("analyze", str(real_trace("mlp_eager")), "-o", "r", cwd=tmp_path).returncode == 0
    assert (tmp_path / "r" / "steps.csv").exists()
    cpu = Path(__file__).parent / "data" / "cpu" / "steps_loop_2022.sqlite.xz"
    assert run("analyze", str(cpu), "-o", "r", "--force", cwd=tmp_path).returncode == 2  # no CUDA activity
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["plotly.min.js", "report.html", "summary.json"]
    done = run("compare", "r", str(real_trace("mlp_graph")), "-o", "c", cwd=tmp_path)
    assert done.returncode == 2 and "no steps found" in done.stderr


@pytest.mark.slow
def test_compare_of_a_cpu_only_trace_says_it_needs_gpu_work(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The CPU-only trace has 'step' NVTX ranges: the old hint ('mark steps with NVTX ranges
    and give --step') sent a new user the wrong way."""
    cpu = Path(__file__).parent / "data" / "cpu" / "steps_loop_2022.sqlite.xz"
    for extra in ([], ["--step", "step"]):
        done = run("compare", str(cpu), str(real_trace("mlp_graph")), "-o", "c", *extra, cwd=tmp_path)
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("launchprof: error: BEFORE "), line
        assert line.endswith(
            "no steps found (no GPU activity in this trace); "
            "compare needs traces with GPU work (kernels, memcpy or memset)"
        ), line


@pytest.mark.slow
def test_a_file_name_too_long_is_one_line(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A path longer than the file system takes was a traceback (breaker)."""
    done = run("analyze", str(real_trace("mlp_graph")), "-o", "L" * 300, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"launchprof: error: file name too long: {'L' * 300}"]


@pytest.mark.slow
def test_a_long_trace_name_gets_a_shorter_default_folder(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A name of 244 bytes is legal, its folder name with a suffix would not be: the folder
    takes 100 characters. Two such names that differ only after the cut were given one
    folder (the second refused); each now gets its own."""
    folders = []
    for last, trace_name in (("a", "mlp_graph"), ("b", "mlp_eager")):
        trace = tmp_path / f"{'t' * 239}{last}.sqlite"
        shutil.copy(real_trace(trace_name), trace)
        done = run("analyze", str(trace), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        folders.append(next(p for p in (tmp_path / "reports").iterdir() if p.is_dir() and p not in folders))
    for folder, last in zip(folders, "ab", strict=True):
        assert len(folder.name) == 100 and folder.name.startswith("t" * 91)
        assert json.loads((folder / "summary.json").read_text())["trace"]["path"].endswith(f"{last}.sqlite")
        assert (folder / "report.html").exists()
    assert folders[0] != folders[1]


@pytest.mark.slow
def test_a_read_only_parent_folder_does_not_fail_the_report(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A writable output folder under a read-only one (a cluster's /scratch/$USER): the
    report was written, then the index beside it failed the command (breaker)."""
    # reports/ of the working folder: the one folder launchprof keeps an index in
    parent, sub = tmp_path / "reports", tmp_path / "reports" / "sub"
    parent.mkdir()
    mounted: list[Path] = []
    try:
        for point in (parent, sub):
            point.mkdir(exist_ok=True)
            if subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(point)], capture_output=True
            ).returncode:
                pytest.skip("cannot mount a tmpfs here")
            mounted.append(point)
        subprocess.run(["mount", "-o", "remount,ro", str(parent)], check=True, capture_output=True)
        out = sub  # the index goes beside it, into the read-only parent
        done = run("analyze", str(real_trace("mlp_graph")), "-o", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (out / "report.html").is_file() and (out / "summary.json").is_file()
        assert done.stderr.startswith("launchprof: note: the index of reports was not updated: ")
    finally:
        for point in reversed(mounted):
            subprocess.run(["umount", str(point)], capture_output=True)


@pytest.mark.slow
def test_staged_step_files_of_an_interrupted_run_are_removed(real_trace, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An interrupted analyze left '.steps.csv.XXXX' files that --force kept (breaker)."""
    assert run("analyze", str(real_trace("mlp_eager")), "-o", "r", cwd=tmp_path).returncode == 0
    for name in ("steps.csv", "step_kernels.csv", "step_timeline.csv"):
        (tmp_path / "r" / f".{name}.k3x9q1").write_text("partial")
    assert run("analyze", str(real_trace("mlp_eager")), "-o", "r", "--force", cwd=tmp_path).returncode == 0
    assert [p.name for p in (tmp_path / "r").iterdir() if p.name.startswith(".")] == []
    assert (tmp_path / "r" / "steps.csv").is_file()


@pytest.mark.slow
def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    """Reading a named pipe blocked for ever (breaker)."""
    fifo = tmp_path / "trace.sqlite"
    os.mkfifo(fifo)
    done = subprocess.run(
        [LAUNCHPROF, "analyze", str(fifo), "-o", "r"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"launchprof: error: {fifo} is not a regular file (expected an nsys .sqlite export)"


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from launchprof.calibrate.store import cache_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert cache_dir() == tmp_path / ".cache" / "launchprof"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "abs"))
    assert cache_dir() == tmp_path / "abs" / "launchprof"


@pytest.mark.slow
@pytest.mark.parametrize("command", ["analyze", "compare"])
def test_a_closed_terminal_during_decompression_leaves_no_copy(tmp_path: Path, command: str) -> None:
    """SIGHUP (a closed terminal) while a .sqlite.xz was decompressed left its copy in
    $TMPDIR (3 of 5 tries); it unwinds like Ctrl-C now: exit 129, nothing left."""
    import signal
    import time

    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:  # under nohup: launchprof keeps it ignored, as it should
        pytest.skip("SIGHUP is ignored in this process (nohup), and so in the command it starts")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    sides = [str(XZ_TRACE)] * (2 if command == "compare" else 1)
    for _ in range(5):  # the copy lives a few tenths of a second: catch it
        proc = subprocess.Popen(
            [LAUNCHPROF, command, *sides, "-o", "r", "--force"],
            cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.time() + 20
        while time.time() < deadline and not list(tmp.glob("launchprof-*")) and proc.poll() is None:
            time.sleep(0.002)
        if proc.poll() is None and list(tmp.glob("launchprof-*")):
            proc.send_signal(signal.SIGHUP)
            assert proc.wait(timeout=60) == 129
            assert list(tmp.glob("launchprof-*")) == []
            return
        proc.wait(timeout=60)
    pytest.skip("the decompressed copy was never caught alive")


XZ_TRACE = Path(__file__).resolve().parent / "data" / "traces" / "mlp_eager.sqlite.xz"


@pytest.mark.parametrize("module", ["launchprof.cli.options", "dataclasses", "launchprof.cli.profile"])
def test_a_ctrl_c_while_the_command_line_is_imported_is_one_line(tmp_path: Path, module: str) -> None:
    """A Ctrl-C 0.03-0.05 s after ``launchprof profile`` started (this VM) came while the
    entry point imported its option table and printed a traceback. Here the interrupt is
    made to come exactly there: an audit hook raises KeyboardInterrupt when ``module`` is
    imported (the script run as the console script runs it)."""
    driver = tmp_path / "drive.py"
    driver.write_text(
        "import runpy, sys\n"
        "def hook(event, args):\n"
        f"    if event == 'import' and args[0] == {module!r}:\n"
        "        raise KeyboardInterrupt\n"
        "sys.addaudithook(hook)\n"
        "script = sys.argv[1]\n"
        "sys.argv = ['launchprof', 'profile', 'no_such_script.py']\n"
        "runpy.run_path(script, run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, str(driver), LAUNCHPROF],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stderr == "launchprof: interrupted\n"
