"""A multi-trace folder moves in as one (report/folder.commit_together): what stops a run
stops it before anything of the folder changed, and no wait for a lock outlasts Ctrl-C or
waits for the run itself.

Ground truth: the files of the folder byte for byte before and after, read from disk;
the processes' exit status and time, seen from outside them.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import DATA
from typer.testing import CliRunner

from launchprof.cli import app

runner = CliRunner()
EAGER = DATA / "traces" / "mlp_eager.sqlite.xz"
EXE = str(Path(sys.executable).parent / "launchprof")


def _traces(where: Path, *names: str) -> list[str]:
    paths = []
    for name in names:
        shutil.copyfile(EAGER, where / f"{name}.sqlite.xz")
        paths.append(str(where / f"{name}.sqlite.xz"))
    return paths


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _staging(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*staging*"))


def test_a_rank_folder_that_cannot_take_its_files_is_named_before_any_trace_is_analysed(tmp_path: Path) -> None:
    from launchprof.commands.many import analyze_many
    from launchprof.errors import OutputError

    a, b, c = _traces(tmp_path, "a", "b", "c")
    out = tmp_path / "out"
    assert runner.invoke(app, ["analyze", a, b, "-o", str(out), "-q", "--workers", "0"]).exit_code == 0
    (out / "c" / "steps.csv").mkdir(parents=True)  # where the report of c writes a file
    (out / "c" / "steps.csv" / "mine").write_text("mine")
    before = _files(out)
    failed = runner.invoke(app, ["analyze", a, c, "-o", str(out), "-q", "--workers", "0", "--force"])
    assert failed.exit_code == 2, failed.output
    assert _files(out) == before and _staging(tmp_path) == []
    assert failed.output.strip().splitlines() == [failed.output.strip()]
    assert f"{out / 'c' / 'steps.csv'} is a folder" in " ".join(failed.output.split())
    analysed: list[int] = []  # and no trace was analysed first
    with pytest.raises(OutputError, match="steps.csv is a folder"):
        analyze_many([a, c], out, force=True, workers=0, progress=lambda done, total: analysed.append(done))
    assert analysed == []


def test_an_earlier_rank_folder_that_cannot_be_removed_is_named_before_any_trace_is_analysed(tmp_path: Path) -> None:
    from launchprof.commands.many import analyze_many
    from launchprof.errors import OutputError

    a, b, c = _traces(tmp_path, "a", "b", "c")
    out = tmp_path / "out"
    analyze_many([a, b], out, workers=0)
    (out / "b" / "steps.csv").unlink()
    (out / "b" / "steps.csv").mkdir()
    before = _files(out)
    analysed: list[int] = []
    with pytest.raises(OutputError, match=r"cannot remove the earlier report in .*b: .*steps.csv is a folder; fix it"):
        analyze_many([a, c], out, force=True, workers=0, progress=lambda done, total: analysed.append(done))
    assert analysed == [] and _files(out) == before and _staging(tmp_path) == []


def test_a_rank_folder_spoiled_while_the_traces_are_analysed_stops_the_run_before_anything_moves(
    tmp_path: Path,
) -> None:
    """The same folder made unwritable for a report after the up-front check (here between
    the two traces' analyses): the check under the lock names it, and the folder of the
    earlier run - its combined.json, the rank folder b this run would remove, a's report
    this run would replace - is left byte for byte. (Before, b was removed, a replaced and
    c half written, beside the earlier combined.json.)"""
    from launchprof.commands.common import AnalysisOptions
    from launchprof.commands.many import analyze_many
    from launchprof.errors import OutputError

    a, b, c = _traces(tmp_path, "a", "b", "c")
    out = tmp_path / "out"
    analyze_many([a, b], out, workers=0)
    before: dict[str, bytes] = {}

    def spoil(done: int, total: int) -> None:
        if done == 1:
            (out / "c" / "steps.csv").mkdir(parents=True)
            before.update(_files(out))

    # another bubble threshold: a's report would differ if it moved in
    with pytest.raises(OutputError, match="steps.csv is a folder"):
        analyze_many([a, c], out, force=True, how=AnalysisOptions(bubble_threshold_ns=5_000), workers=0, progress=spoil)
    assert before and _files(out) == before
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        ["a", "b", "c", "combined.json", "combined.html", "plotly.min.js"]
    )
    assert _staging(tmp_path) == []

    shutil.rmtree(out / "c")  # put right, the same run goes through: b goes, c comes
    analyze_many([a, c], out, force=True, workers=0)
    assert not (out / "b").exists() and (out / "c" / "summary.json").is_file()


def _held_by_another(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_ctrl_c_ends_a_wait_for_another_runs_rank_folder_lock(tmp_path: Path) -> None:
    """A --force run that has the folder's lock and waits for a rank folder's (another run
    is moving files into it) stops on Ctrl-C, leaving no report and no staging folder.
    (Before, the rank locks were taken with the signals held: the run hung until the other
    run let go.)"""
    a, b = _traces(tmp_path, "a", "b")
    out = tmp_path / "out"
    out.mkdir()
    other = os.open(out / ".a.lock", os.O_CREAT | os.O_RDWR, 0o600)  # the lock of rank folder a, as a run holds it
    fcntl.flock(other, fcntl.LOCK_EX)
    proc = subprocess.Popen(
        [EXE, "analyze", a, b, "-o", str(out), "-q", "--workers", "0", "--force"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not _held_by_another(tmp_path / ".out.lock"):  # the folder's lock: it is waiting for a's now
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        os.close(other)
    assert proc.returncode != 0, output
    assert "Traceback" not in output
    assert sorted(p.name for p in out.iterdir()) == [".a.lock"]
    assert _staging(tmp_path) == []


def _wait_until_held(lock: Path, *procs: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not _held_by_another(lock):
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)  # and on to the next lock, which it waits for


def _launch(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [EXE, "analyze", *args, "-q", "--workers", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _finish(*procs: subprocess.Popen[str]) -> list[str]:
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=120)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return outputs


def test_an_earlier_rank_folder_is_removed_under_its_own_lock(tmp_path: Path) -> None:
    """A --force run that removes an earlier rank folder waits while another run holds
    that folder's lock (it may be moving a report in), and removes it after. (Before, it
    removed the folder without the lock: 16 of 100 raced rounds left a report.html
    without its summary.json there.)"""
    a, b, c = _traces(tmp_path, "a", "b", "c")
    out = tmp_path / "out"
    assert runner.invoke(app, ["analyze", a, b, "-o", str(out), "-q", "--workers", "0"]).exit_code == 0
    other = os.open(out / ".b.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(other, fcntl.LOCK_EX)
    proc = _launch(a, c, "-o", str(out), "--force")
    try:
        _wait_until_held(tmp_path / ".out.lock", proc)
        assert proc.poll() is None and (out / "b" / "summary.json").is_file()  # waiting for b's lock
    finally:
        os.close(other)
    output = _finish(proc)[0]
    assert proc.returncode == 0, output
    assert not (out / "b").exists() and (out / "c" / "summary.json").is_file()


def test_a_report_written_into_a_listed_folder_while_the_run_waits_is_not_removed(tmp_path: Path) -> None:
    """The earlier reports a --force run removes are read again once it holds their
    locks: a report of another trace moved into one of those folders meanwhile (the run
    was waiting for a rank folder's lock) stays. (Before, the list read under the folder's
    lock alone was removed, that report with it.)"""
    a, b, c, x = _traces(tmp_path, "a", "b", "c", "x")
    out = tmp_path / "out"
    assert runner.invoke(app, ["analyze", a, b, c, "-o", str(out), "-q", "--workers", "0"]).exit_code == 0
    other = os.open(out / ".a.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(other, fcntl.LOCK_EX)
    run = _launch(a, b, "-o", str(out), "--force")  # removes c, once it has a's lock (a before c)
    try:
        _wait_until_held(tmp_path / ".out.lock", run)
        assert runner.invoke(app, ["analyze", x, "-o", str(out / "c"), "-q", "--force"]).exit_code == 0
    finally:
        os.close(other)
    output = _finish(run)[0]
    assert run.returncode == 0, output
    assert json.loads((out / "c" / "summary.json").read_text())["trace"]["path"] == x


def test_two_runs_reaching_one_folder_by_two_names_take_one_lock(tmp_path: Path) -> None:
    """Runs into ``out`` and into a link to it take one folder lock (that of the folder the
    link names), so the one that moves in last leaves the folder as its combined.json
    lists it. (Before, each took the lock of its own name: the run given the link removed
    what the other's document listed, or left a rank folder no document listed, and with
    the rank locks in the traces' order both could hang.)"""
    z, a, b, c = _traces(tmp_path, "0", "a", "b", "c")
    out = tmp_path / "out"
    assert runner.invoke(app, ["analyze", a, b, "-o", str(out), "-q", "--workers", "0"]).exit_code == 0
    (tmp_path / "out2").symlink_to(out)
    other = os.open(out / ".0.lock", os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(other, fcntl.LOCK_EX)
    first = _launch(z, a, b, "-o", str(out), "--force")
    try:
        _wait_until_held(tmp_path / ".out.lock", first)  # holds the folder's lock, waits for 0's
        second = _launch(b, a, c, "-o", str(tmp_path / "out2"), "--force")
        time.sleep(3)
    finally:
        os.close(other)
    outputs = _finish(first, second)
    assert first.returncode == 0 and second.returncode == 0, outputs
    listed = [r["folder"] for r in json.loads((out / "combined.json").read_text())["reports"]]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(listed)
    assert all((out / name / "summary.json").is_file() for name in listed)


def test_a_rank_folder_named_launchprof_in_a_mount_point_does_not_wait_for_its_own_run(tmp_path: Path) -> None:
    """The output folder is a mount point (a tmpfs mounted there, in a mount namespace of
    the test's own), so its run stages and locks inside it (``.launchprof.lock``); a trace
    named launchprof.sqlite has its rank folder's lock at that same path. The run takes it
    once. (Before, it waited for itself: with --force forever, without it "another
    launchprof run is writing".)"""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare")
    a, b = _traces(tmp_path, "launchprof", "b")
    out = tmp_path / "out"
    out.mkdir()
    run = f"{EXE} analyze {a} {b} -o {out} -q --workers 0"
    script = (
        f"mount -t tmpfs none {out} || exit 77; "
        f"{run} && {run} --force && test -f {out}/launchprof/summary.json && test -f {out}/combined.json "
        f"&& test $(stat -c %d {out}) != $(stat -c %d {tmp_path})"
    )
    try:
        done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the run waited for its own lock")
    if done.returncode == 77 or "unshare failed" in done.stderr:
        pytest.skip("cannot mount a tmpfs in a mount namespace here")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_staging_folder_without_its_lock_is_removed_by_a_later_run(tmp_path: Path) -> None:
    """A staging folder no run holds or will hold - made again by a Dask worker after its
    run was stopped, or left by a run killed before it locked it - goes with the next run
    into the same place once a minute old; a younger one stays."""
    a = _traces(tmp_path, "a")[0]
    old = tmp_path / ".out.staging-dead" / ".ranks" / "a"
    old.mkdir(parents=True)
    (old / "summary.json").write_text("{}")
    young = tmp_path / ".out.staging-young"
    young.mkdir()
    hour_ago = time.time() - 3600
    os.utime(tmp_path / ".out.staging-dead", (hour_ago, hour_ago))
    assert runner.invoke(app, ["analyze", a, "-o", str(tmp_path / "out"), "-q"]).exit_code == 0
    assert _staging(tmp_path) == [".out.staging-young"]


def test_one_report_folder_with_a_folder_in_place_of_a_report_file_is_left_as_it_was(tmp_path: Path) -> None:
    a = _traces(tmp_path, "a")[0]
    out = tmp_path / "out"
    assert runner.invoke(app, ["analyze", a, "-o", str(out), "-q"]).exit_code == 0
    (out / "summary.json").unlink()  # the file that moves in last
    (out / "summary.json").mkdir()
    before = _files(out)
    failed = runner.invoke(app, ["analyze", a, "-o", str(out), "-q", "--force", "--bubble-threshold", "5"])
    assert failed.exit_code == 2, failed.output
    assert _files(out) == before and _staging(tmp_path) == []  # (before, the other files had moved in)
    assert "summary.json is a folder" in " ".join(failed.output.split()), failed.output
