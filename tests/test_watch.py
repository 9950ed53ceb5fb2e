"""launchprof.nsys.watch: the wait for the workload's exit, against the real nsys (Debian's
2022.4 in CI), and `launchprof profile` importing its analysis modules only after it.

The workloads write the time (time.time()) at which they end into a file: the wait must
end after that, and before nsys exits (nsys 2022.4 writes its recording for a second or
more after the workload)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import run_nsys_retrying

from launchprof.nsys import watch
from launchprof.nsys.profile import nsys_command, workload
from launchprof.nsys.watch import find_launcher, wait_for_workload_exit

LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")
needs_nsys = pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")

ENDS_LATER = """
import sys, time
time.sleep(float(sys.argv[2]))
open(sys.argv[1], "w").write(repr(time.time()))
"""


@pytest.mark.nsys
@needs_nsys
def test_the_wait_ends_when_the_workload_exits_not_when_nsys_does(tmp_path: Path) -> None:
    script = tmp_path / "ends_later.py"
    script.write_text(ENDS_LATER)
    for _attempt in range(3):  # nsys 2022.4 now and then fails to reach its agent (conftest)
        ended = tmp_path / "ended"
        ended.unlink(missing_ok=True)
        argv = nsys_command(
            Path(shutil.which("nsys") or "nsys"), tmp_path / f"t{_attempt}", workload([str(script), str(ended), "0.5"])
        ).argv
        nsys = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        why = wait_for_workload_exit(nsys.pid, threading.Event())
        waited = time.time()
        nsys.wait(timeout=300)
        nsys_end = time.time()
        if ended.exists():
            break
    else:
        pytest.skip("nsys did not run the workload in 3 attempts")
    assert why == "exited"
    assert float(ended.read_text()) <= waited < nsys_end, (float(ended.read_text()), waited, nsys_end)


def test_a_process_without_a_launcher_gives_up_after_find_s() -> None:
    plain = subprocess.Popen(["sleep", "5"])
    try:
        began = time.monotonic()
        why = wait_for_workload_exit(plain.pid, threading.Event(), find_s=0.3)
        assert why == "no-launcher"
        assert 0.3 <= time.monotonic() - began < 2.0
    finally:
        plain.kill()
        plain.wait()


def test_nsys_exiting_or_the_report_ends_the_wait() -> None:
    plain = subprocess.Popen(["sleep", "5"])
    try:
        done = threading.Event()
        threading.Timer(0.2, done.set).start()
        assert wait_for_workload_exit(plain.pid, done) == "done"
        assert wait_for_workload_exit(plain.pid, threading.Event(), ready=lambda: True) == "ready"
    finally:
        plain.kill()
        plain.wait()


@pytest.mark.parametrize("pidfds", [True, False], ids=["pidfd", "polling"])
def test_a_launcher_is_found_by_its_name_and_its_children_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfds: bool
) -> None:
    """A stand-in tree: a shell (the "nsys" process) runs a script named nsys-launcher,
    whose child sleeps 0.5 s; then the script itself becomes a sleep with no child. The
    launcher is found under the shell, and the wait ends once its child is gone (blocked
    on the child's pidfd, or reading /proc where there are no pidfds)."""
    if not pidfds:
        monkeypatch.setattr(watch, "open_pidfds", lambda pids: None)
    launcher = tmp_path / "nsys-launcher"
    launcher.write_text("#!/bin/sh\nsleep 0.5\nexec sleep 5\n")
    launcher.chmod(0o755)
    parent = subprocess.Popen(["/bin/sh", "-c", f"{launcher}; true"])
    try:
        deadline = time.monotonic() + 5
        found = None
        while found is None and time.monotonic() < deadline:
            found = find_launcher(parent.pid)
        assert found is not None
        assert open(f"/proc/{found}/comm").read().strip() == "nsys-launcher"
        began = time.monotonic()
        assert wait_for_workload_exit(parent.pid, threading.Event()) == "exited"
        assert 0.3 < time.monotonic() - began < 3.0
    finally:
        subprocess.run(["pkill", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait()


def test_children_from_task_files_and_from_the_parent_fields_agree() -> None:
    """In a fresh process (the test process may have children of earlier tests coming and
    going): two live children and one exited, not yet reaped, seen the same both ways."""
    code = (
        "import json, os, subprocess, time\n"
        "from launchprof.nsys.watch import process_parents, children\n"
        "kids = [subprocess.Popen(['sleep', '3']) for _ in range(2)]\n"
        "gone = subprocess.Popen(['true'])\n"
        "time.sleep(0.3)\n"  # `true` has exited: a zombie until waited for
        "me = os.getpid()\n"
        "print(json.dumps([sorted(children(me) or []), sorted(c for c, p in process_parents().items() if p == me), "
        "sorted(k.pid for k in kids)]))\n"
        "for k in kids: k.kill()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    from_tasks, from_stat, expected = json.loads(done.stdout)
    assert from_tasks == from_stat == expected, done.stderr


@pytest.mark.nsys
@needs_nsys
@pytest.mark.parametrize("setting", ["", "start"])
def test_profile_imports_its_analysis_after_the_workload_exits(tmp_path: Path, setting: str) -> None:
    """The warm-up imports begin (timings mark ``warm_start``) after the workload's last
    moment; with LAUNCHPROF_WARM_AT=start, before it (while it sleeps)."""
    script = tmp_path / "ends_later.py"
    script.write_text(ENDS_LATER)
    timings = tmp_path / "timings.jsonl"
    env = {**os.environ, "LAUNCHPROF_TIMINGS": str(timings), "LAUNCHPROF_WARM_AT": setting}
    done = run_nsys_retrying(
        [LAUNCHPROF, "profile", "-o", str(tmp_path / "out"), str(script), str(tmp_path / "ended"), "1.0"],
        cwd=tmp_path,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    marks = json.loads(timings.read_text().splitlines()[-1])
    ended = float((tmp_path / "ended").read_text())
    assert marks["warm_start"] <= marks["warm_done"]
    if setting == "start":
        assert marks["warm_start"] < ended
    else:
        assert marks["nsys_start"] < ended <= marks["warm_start"] < marks["nsys_end"]


@pytest.mark.nsys
@needs_nsys
def test_ctrl_c_after_the_workload_exited_is_not_forwarded_and_the_trace_is_kept(tmp_path: Path) -> None:
    """A SIGINT that reached nsys 2022.4 while it wrote the trace (the workload done) made
    it abandon the recording, and the run lost everything. Now launchprof keeps the first
    one from nsys, says it waits, and the report is written (exit status 130)."""
    script = tmp_path / "ends_later.py"
    script.write_text(ENDS_LATER)
    for attempt in range(3):
        ended = tmp_path / f"ended{attempt}"
        out = tmp_path / f"out{attempt}"
        proc = subprocess.Popen(
            [LAUNCHPROF, "profile", "-o", str(out), str(script), str(ended), "0.3"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not ended.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if not ended.exists():  # nsys 2022.4 failed to reach its agent (conftest): not under test
            proc.communicate(timeout=300)
            continue
        time.sleep(0.3)  # the workload has exited; nsys writes for a second or more
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=300)
        break
    else:
        pytest.skip("nsys did not run the workload in 3 attempts")
    assert proc.returncode == 130, stdout + stderr
    assert "the workload has exited and nsys is writing the trace; waiting for it" in stdout
    for name in ("trace.nsys-rep", "trace.sqlite", "summary.json", "report.html"):
        assert (out / name).is_file(), (name, stdout, stderr)


@pytest.mark.slow
def test_after_a_held_signal_the_next_one_reaches_nsys_and_no_more(tmp_path: Path) -> None:
    """run_nsys with hold() true: the first of three SIGINTs is held (on_hold), the second
    forwarded (nsys may still have to stop a workload's daemon), the third only announced.
    The stand-in nsys counts the SIGINTs it gets."""
    fake = tmp_path / "nsys"
    got = tmp_path / "got"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import signal, sys, time\n"
        f"def count(*_):\n    open({str(got)!r}, 'a').write('INT\\n')\n"
        "signal.signal(signal.SIGINT, count)\n"
        "print('ready', flush=True)\n"
        "time.sleep(3)\n"
    )
    fake.chmod(0o755)
    code = (
        "import os, signal, sys, threading, time\n"
        "from launchprof.nsys.profile import run_nsys\n"
        "said = []\n"
        "def send():\n"
        "    time.sleep(1.0)\n"
        "    for _ in range(3):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(0.3)\n"
        "threading.Thread(target=send, daemon=True).start()\n"
        f"rc = run_nsys([{str(fake)!r}], on_interrupt=lambda: said.append('interrupt'),\n"
        "    on_repeat=lambda: said.append('repeat'), hold=lambda: True, on_hold=lambda: said.append('hold'))\n"
        "print(rc, said)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-1] == "130 ['hold', 'interrupt', 'repeat']", done.stdout + done.stderr
    assert got.read_text().splitlines() == ["INT"]
