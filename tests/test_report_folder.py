"""A report folder is written whole or not at all.

Two ``analyze`` runs of different traces (12 and 15 steps) into one folder at the same
time, with and without ``--force``, and ``--force`` runs interrupted at random points:
the folder must always hold every file of exactly one run (told by the step count of
``summary.json`` against the rows of ``steps.csv``, and by comparing every file with a
reference run), never two exits 0 without ``--force``, the old report whole after every
interruption.

The rounds run the installed command's entry point (``launchprof.cli.entry.main``) in
processes forked from this one, with the analysis modules already imported: a fresh
interpreter costs ~1 s of start-up and imports on the 2-CPU CI machine, which would make
the 60 runs take minutes. The forked runs are real processes: their own flock, their own
signals, their own child for the step files. One round runs the installed command itself.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from steploop import launch_loop
from tracebuilder import TraceBuilder

LAUNCHPROF = str(Path(sys.executable).with_name("launchprof"))
FILES = ("summary.json", "report.html", "steps.csv", "step_kernels.csv", "step_timeline.csv", "plotly.min.js")
STEPS = {"a": 12, "b": 15}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("traces")
    made = {}
    for name, steps in STEPS.items():
        b = TraceBuilder()
        launch_loop(b, steps)
        made[name] = b.write(folder / f"{name}.sqlite")
    return made


def _fork_run(argv: list[str], cwd: Path, log: Path) -> int:
    """Start ``launchprof ARGV`` (its entry point) in a forked process; its pid."""
    import launchprof.cli.entry
    import launchprof.commands.analyze  # noqa: F401 - imported once here, not in every child

    pid = os.fork()
    if pid:
        return pid
    code = 70
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(cwd)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        sys.stderr = open(log, "w")  # noqa: SIM115
        sys.argv = ["launchprof", *argv]
        try:
            launchprof.cli.entry.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001
        code = 71
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def _whole(folder: Path, refs: dict[str, dict[str, bytes]]) -> str:
    """Which reference run ``folder`` holds, whole; fails the test on a mixed folder."""
    got = _files(folder)
    summary = json.loads(got["summary.json"])
    rows = got["steps.csv"].decode().count("\n") - 1
    assert summary["steps"]["count"] == rows, f"summary of {summary['steps']['count']} steps beside {rows} step rows"
    which = [name for name, ref in refs.items() if got == ref]
    assert len(which) == 1, f"{folder} matches no single run: {sorted(got)}"
    return which[0]


@pytest.fixture(scope="module")
def refs(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, bytes]]:
    """The files of each trace's report, written alone."""
    work = tmp_path_factory.mktemp("refs")
    made = {}
    for name, trace in traces.items():
        code = _wait(_fork_run(["analyze", str(trace), "-o", f"ref-{name}"], work, work / f"{name}.log"))
        assert code == 0, (work / f"{name}.log").read_text()
        made[name] = _files(work / f"ref-{name}")
        assert sorted(made[name]) == sorted(FILES)
    return made


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".staging-" in p.name)


@pytest.mark.slow
@pytest.mark.parametrize("force", [False, True], ids=["no-force", "force"])
def test_two_concurrent_runs_never_mix_a_folder(traces, refs, tmp_path: Path, force: bool) -> None:  # type: ignore[no-untyped-def]
    flags = ["--force"] if force else []
    winners = {"a": 0, "b": 0}
    for r in range(20):
        out = f"r{r}"
        if force:  # replacing an older report: start from a's
            shutil.copytree(_ref_folder(tmp_path, refs, "a"), tmp_path / out)
        logs = [tmp_path / f"{out}-{n}.log" for n in "ab"]
        pids = [
            _fork_run(["analyze", str(traces[n]), "-o", out, *flags], tmp_path, log)
            for n, log in zip("ab", logs, strict=True)
        ]
        codes = [_wait(p) for p in pids]
        errors = [log.read_text() for log in logs]
        if force:
            assert codes == [0, 0], errors
        else:
            assert sorted(codes) == [0, 2], (codes, errors)
            loser = errors[codes.index(2)].splitlines()
            assert len(loser) == 1 and loser[0].startswith("launchprof: error: "), loser
            assert "already holds a report" in loser[0] or "another launchprof run is writing" in loser[0], loser
        winners[_whole(tmp_path / out, refs)] += 1
        assert _leftovers(tmp_path) == []
    assert sum(winners.values()) == 20


def _ref_folder(tmp_path: Path, refs: dict[str, dict[str, bytes]], name: str) -> Path:
    folder = tmp_path / f"_ref-{name}"
    if not folder.exists():
        folder.mkdir()
        for file, data in refs[name].items():
            (folder / file).write_bytes(data)
    return folder


@pytest.mark.slow
def test_interrupted_force_runs_leave_the_old_report_whole(traces, refs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(17)
    old = _ref_folder(tmp_path, refs, "a")
    began = time.perf_counter()
    assert _wait(_fork_run(["analyze", str(traces["b"]), "-o", "timed", "--force"], tmp_path, tmp_path / "t.log")) == 0
    full = time.perf_counter() - began
    seen = {"a": 0, "b": 0}
    for r in range(20):
        out = tmp_path / f"i{r}"
        shutil.copytree(old, out)
        pid = _fork_run(["analyze", str(traces["b"]), "-o", out.name, "--force"], tmp_path, tmp_path / f"i{r}.log")
        time.sleep(rng.uniform(0, full))
        sig = rng.choice([signal.SIGINT, signal.SIGTERM])
        os.kill(pid, sig)
        code = _wait(pid)
        which = _whole(out, refs)
        seen[which] += 1
        if which == "a":  # interrupted before the swap: the old report, as it was
            assert code in (130, 143, -signal.SIGTERM), (code, (tmp_path / f"i{r}.log").read_text())
            log = (tmp_path / f"i{r}.log").read_text()
            assert "Traceback" not in log, log
        assert _leftovers(tmp_path) == []
    assert seen["a"] >= 5, seen  # most interruptions land before the swap (the analysis is most of the run)


@pytest.mark.slow
def test_a_mixed_folder_is_refused_by_compare(traces, refs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The old code: 'verified' a speedup from another trace's steps beside this summary."""
    folder = _ref_folder(tmp_path, refs, "a")
    (folder / "steps.csv").write_bytes(refs["b"]["steps.csv"])
    done = subprocess.run(
        [LAUNCHPROF, "compare", str(folder), str(traces["b"]), "-o", "cmp"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "its steps.csv is not of the run that wrote summary.json" in lines[0], lines


@pytest.mark.slow
def test_installed_command_second_concurrent_run_fails_cleanly(traces, refs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same race through the installed command (fresh interpreters), once."""
    procs = [
        subprocess.Popen(
            [LAUNCHPROF, "analyze", str(traces[n]), "-o", "out"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in "ab"
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], results
    assert _whole(tmp_path / "out", refs) in ("a", "b")


@pytest.mark.slow
def test_a_staging_folder_is_not_listed_in_the_index(traces, refs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A run's staging folder beside the report holds a summary.json while it runs; an
    index written meanwhile (by another run into the same parent) must not list it."""
    reports = tmp_path / "reports"  # the folder launchprof owns, where it writes the index
    staging = reports / ".busy.staging-abc"
    staging.mkdir(parents=True)
    (staging / "summary.json").write_bytes(refs["a"]["summary.json"])
    done = subprocess.run(
        [LAUNCHPROF, "analyze", str(traces["b"]), "-o", "reports/b"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    index = (reports / "index.html").read_text()
    assert 'href="b/report.html"' in index and "staging" not in index


def test_a_signal_that_another_thread_receives_waits_for_the_held_block() -> None:
    """The kernel gives a process's signal to any thread that does not block it; Python
    then runs the handler in the main thread at its next bytecode. Held signals
    (report.signals.signals_held) must still wait until the block is done."""
    import threading

    from launchprof.report.signals import signals_held

    seen: list[str] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append("handler"))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)  # a thread that does not block SIGTERM
    other.start()
    try:
        with signals_held():
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # this thread blocks it
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # so the other thread receives it
                deadline = time.perf_counter() + 0.2
                while time.perf_counter() < deadline:  # bytecodes: where Python runs pending handlers
                    pass
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            seen.append("block done")
        assert seen == ["block done", "handler"]
    finally:
        stop.set()
        other.join()
        signal.signal(signal.SIGTERM, previous)


def test_every_held_signal_is_handled_after_the_block_and_ignored_ones_stay_ignored() -> None:
    from launchprof.report.signals import signals_held

    seen: list[str] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, lambda signum, _frame: seen.append("INT"))
    signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append("TERM"))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with signals_held():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # left alone
            for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
                signal.raise_signal(sig)
            seen.append("block done")
        assert seen == ["block done", "TERM", "INT"]  # each once, in the order they came
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_report_half_moved_in_by_another_run_is_said_as_busy_not_as_the_users_files(tmp_path: Path) -> None:
    """Another run's commit moves its step files in before its summary, holding the folder's
    lock: a run that looks then sees step files and no report. It must say the folder is
    busy (or, once that run is done, that it holds a report), not that the user's own files
    are there (a 2-run race of test_two_concurrent_runs_never_mix_a_folder, 1 round in 20)."""
    import fcntl

    from launchprof.errors import OutputError
    from launchprof.report.folder import FolderWriter
    from launchprof.report.outputs import REPORT_FILES, analysis_files

    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "steps.csv").write_text("step\n")  # the other run's first file
    fd = os.open(tmp_path / ".out.lock", os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the other run, committing
        with pytest.raises(OutputError, match="another launchprof run is writing a report into"):
            FolderWriter(folder, False, REPORT_FILES, analysis_files())
        (folder / "report.html").write_text("<html>")
        (folder / "summary.json").write_text("{}")  # its commit ends
    finally:
        os.close(fd)
    with pytest.raises(OutputError, match="already holds a report"):
        FolderWriter(folder, False, REPORT_FILES, analysis_files())
    (folder / "summary.json").unlink()
    (folder / "report.html").unlink()  # no run: the user's own steps.csv
    with pytest.raises(OutputError, match="holds steps.csv but no report"):
        FolderWriter(folder, False, REPORT_FILES, analysis_files())
