"""When has the workload that ``nsys profile`` runs exited?

nsys starts the workload from a process of its own, ``nsys-launcher``, a descendant of the
``nsys`` process launchprof started: the launcher forks, the fork execs the workload (and
``nsys-tee``, which copies its output). Once the launcher has no child left, the workload is
gone and nsys is writing the report. Seen with nsys 2022.4 (Debian) and 2025.3.1 by
``benchmarks/nsys_timeline.py``; nsys then takes a second or more before the
``.nsys-rep`` appears (benchmarks/README.md, "Measurements behind constants in the code").

``launchprof profile`` imports its analysis modules in that window
(:func:`wait_for_workload_exit`), so that they do not compete with the workload for the CPU.
Linux only (``/proc``); elsewhere the wait ends at once with ``"no-proc"``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import select
import signal
import threading
import time
from collections.abc import Callable

LAUNCHER = "nsys-launcher"
POLL_S = 0.02  # 50 reads a second of one small /proc file
FIND_LAUNCHER_S = 10.0  # nsys started its launcher 0.23-0.40 s after it was started (both versions)


def comm(pid: int) -> str | None:
    """The process's name (``/proc/PID/comm``), None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _state(pid: int) -> str | None:
    """The process's state letter (``Z``: exited, not yet reaped), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :][:1]


def children(pid: int) -> list[int] | None:
    """The running child processes of ``pid``, exited ones not yet reaped left out
    (those of every thread, from ``/proc/PID/task/TID/children``; where the kernel has no
    such file, from the parent field of every ``/proc/N/stat``). None when ``pid`` is
    gone."""
    tasks = glob.glob(f"/proc/{pid}/task/*/children")
    if tasks:
        found: list[int] = []
        for path in tasks:
            try:
                with open(path, encoding="ascii") as fh:
                    found += [int(c) for c in fh.read().split()]
            except (OSError, ValueError):
                continue  # a thread that just ended
        return [c for c in found if _state(c) not in (None, "Z")]
    if not os.path.isdir(f"/proc/{pid}"):
        return None
    return [child for child, parent in process_parents().items() if parent == pid]


def process_parents() -> dict[int, int]:
    """pid -> parent pid of every process readable in /proc (not zombies: they are exited)."""
    table = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if fields and fields[0] != "Z":
            table[int(stat.split("/")[2])] = int(fields[1])
    return table


def find_launcher(root: int, depth: int = 3) -> int | None:
    """The topmost ``nsys-launcher`` process under ``root`` (searched ``depth`` levels
    down); the workload, forked from it, bears its name until it execs."""
    level = [root]
    for _ in range(depth):
        below: list[int] = []
        for pid in level:
            for child in children(pid) or []:
                if comm(child) == LAUNCHER:
                    return child
                below.append(child)
        level = below
    return None


def open_pidfds(pids: list[int]) -> list[int] | None:
    """A pidfd (readable once the process has exited) for each of ``pids``; None where the
    kernel has none (Linux < 5.3, some sandboxes): then the wait polls."""
    opened: list[int] = []
    try:
        for pid in pids:
            opened.append(os.pidfd_open(pid))
    except (AttributeError, OSError):
        for fd in opened:
            os.close(fd)
        return None
    return opened


def _wait_exits(fds: list[int], done: threading.Event, ready: Callable[[], bool], tick_s: float) -> str | None:
    """Block until every pidfd in ``fds`` is readable (closing them); ``"done"``/``"ready"``
    when that came first (checked every ``tick_s``), None when the processes exited."""
    try:
        left = list(fds)
        while left:
            readable, _, _ = select.select(left, [], [], tick_s)
            left = [fd for fd in left if fd not in readable]
            if left and done.is_set():
                return "done"
            if left and ready():
                return "ready"
        return None
    finally:
        for fd in fds:
            os.close(fd)


def wait_for_workload_exit(
    nsys_pid: int,
    done: threading.Event,
    ready: Callable[[], bool] = lambda: False,
    poll_s: float = POLL_S,
    find_s: float = FIND_LAUNCHER_S,
) -> str:
    """Block until the workload run by the ``nsys profile`` process ``nsys_pid`` has
    exited (module docstring), and say why the wait ended:

    * ``"exited"``: the launcher had a child and has none now (or is gone);
    * ``"ready"``: ``ready()`` became true first (the caller's sign that nsys is writing
      its export, so the report is complete);
    * ``"done"``: ``done`` was set (nsys exited);
    * ``"no-launcher"``: no launcher under nsys within ``find_s`` seconds;
    * ``"no-proc"``: no ``/proc`` to read.

    /proc is read every ``poll_s`` until the launcher's first children are seen (0.3-0.4 s
    after nsys starts); then the wait blocks on their pidfds, so nothing is read while
    the workload runs (where pidfds are missing, /proc is read every ``poll_s`` instead).
    """
    if not os.path.isdir("/proc/self/task"):
        return "no-proc"
    began = time.monotonic()
    launcher = None
    had_child = False
    while not done.wait(poll_s):
        if ready():
            return "ready"
        if launcher is None:
            launcher = find_launcher(nsys_pid)
            if launcher is None and time.monotonic() - began > find_s:
                return "no-launcher"
            continue
        kids = children(launcher)
        if kids:
            had_child = True
            fds = open_pidfds(kids)
            if fds is not None:
                why = _wait_exits(fds, done, ready, max(poll_s, 0.1))
                if why is not None:
                    return why
        elif had_child or kids is None:
            return "exited"
    return "done"


__all__ = ["LAUNCHER", "children", "comm", "find_launcher", "open_pidfds", "process_parents", "wait_for_workload_exit"]


def stop_leftovers(nsys_pid: int, grace_s: float = 2.0) -> list[int]:
    """Stop what an interrupted nsys left running after it exited; return their pids.

    Call it before nsys is reaped (its zombie keeps ``nsys_pid`` from being reused). A
    Ctrl-C in nsys's first second (2022.4, this project's CI) left its agent (``nsys
    --start-agent --session-name=profile-NAME-<nsys pid>``, a session of its own) for
    minutes, and its launcher and ``nsys-tee`` in nsys's process group. Every process
    still in that group (those two, and the workload or its children where they outlived
    the interrupt) and that agent get SIGTERM, then SIGKILL after ``grace_s``. Linux only
    (``/proc``); elsewhere nothing is done and the list is empty."""
    if not os.path.isdir("/proc"):
        return []
    mine: list[int] = []
    for entry in glob.glob("/proc/[0-9]*"):
        try:
            pid = int(os.path.basename(entry))
            with open(f"{entry}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")
            ours = pid != nsys_pid and os.getpgid(pid) == nsys_pid
            agent = b"--start-agent" in cmd and any(
                a.startswith(b"--session-name=profile-") and a.endswith(b"-%d" % nsys_pid) for a in cmd
            )
        except (OSError, ValueError):
            continue  # ended meanwhile, or another user's
        if (ours or agent) and pid != os.getpid():
            mine.append(pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in mine:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
                alive.append(pid)
        if not alive or sig == signal.SIGKILL:
            break
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_state(p) not in (None, "Z") for p in alive):
            time.sleep(0.05)
    return mine
