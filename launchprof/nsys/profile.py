"""Run a workload under ``nsys profile`` and leave ``trace.nsys-rep`` and ``trace.sqlite``.

The flags are the ones the analysis needs (CUDA, NVTX and OS-runtime traces, every graph
node traced, no CPU sampling or context switches, SQLite export); flags the installed nsys
does not list in ``nsys profile --help`` are dropped and reported. nsys runs in its own
process group: Ctrl-C (SIGINT) or SIGTERM given to launchprof is forwarded once to that
group as SIGINT, so nsys stops the workload and still writes the trace. nsys exits with
the workload's exit code (verified with nsys 2022.4: 3 for ``sys.exit(3)``, 137 for
SIGKILL, 130 after Ctrl-C).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from launchprof.errors import LaunchprofError, NsysError
from launchprof.nsys.export import export_sqlite
from launchprof.nsys.importer import import_qdstrm
from launchprof.nsys.watch import stop_leftovers

PROFILE_FLAGS = (
    "--trace=cuda,nvtx",
    "--sample=none",
    "--cpuctxsw=none",
    "--cuda-graph-trace=node",
    "--export=sqlite",
)
TRACE_STEM = "trace"
_OPTION = re.compile(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)")


class TargetError(LaunchprofError):
    """The workload to profile cannot be found or is malformed."""


@dataclass(frozen=True)
class Workload:
    """What nsys runs: ``argv`` (the command line) and a short ``label`` for folder names."""

    argv: list[str]
    label: str


def workload(target: Sequence[str]) -> Workload:
    """The command line for ``target``: ``script.py ARGS`` runs with this Python
    (``sys.executable``, so the user's environment is used), ``-m module ARGS`` likewise,
    anything else as an executable (a path, or a name on PATH). ARGS are passed unchanged.

    Raises:
        TargetError: no target, ``-m`` without a module, or a script/executable not found.
    """
    if not target:
        raise TargetError("nothing to profile: give a Python script, -m module, or an executable")
    first, rest = target[0], list(target[1:])
    if first == "-m":
        if not rest or not rest[0]:
            raise TargetError("-m needs a module name")
        return Workload([sys.executable, "-m", *rest], rest[0])
    if not first:
        raise TargetError("the target is an empty word: give a Python script, -m module, or an executable")
    path = Path(first)
    # A name starting with '-' would be read as an option by Python or nsys: ./-name instead.
    command = os.path.join(".", first) if first.startswith("-") else first
    if first.endswith(".py"):
        if not path.is_file():
            raise TargetError(f"no such Python script: {first}")
        return Workload([sys.executable, command, *rest], path.stem)
    if "/" in first:
        if path.is_dir():
            raise TargetError(f"{first} is a directory, not a Python script or an executable")
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise TargetError(f"not an executable file: {first}")
    elif shutil.which(first) is None:
        if first.startswith("-"):  # options of `profile` go before TARGET; unknown ones end up here
            raise TargetError(
                f"no such option of launchprof profile: {first} (see launchprof profile --help; "
                "a program whose name starts with a dash goes after --)"
            )
        raise TargetError(f"{first} is not a Python script (.py) and not a program on PATH")
    elif first.startswith("-"):  # a program on PATH named -name
        command = shutil.which(first) or first
    return Workload([command, *rest], path.name)


OPTIONS_CACHE = "nsys-profile-options.json"
OPTIONS_CACHE_ENTRIES = 32  # nsys executables remembered (the most recently asked)


def _options_key(nsys: str) -> str | None:
    """Identity of an nsys executable for the options cache: the path given and its real
    path, each with size and modification time (a reinstalled nsys gets a new key); None
    when it cannot be read."""
    try:
        real = os.path.realpath(nsys)
        given, target = os.stat(nsys), os.stat(real)
    except OSError:
        return None
    return f"{nsys}|{given.st_size}|{given.st_mtime_ns}|{real}|{target.st_size}|{target.st_mtime_ns}"


def _options_cache_file() -> Path:
    from launchprof.cache import cache_dir

    return cache_dir() / OPTIONS_CACHE


@functools.lru_cache(maxsize=16)
def profile_options(nsys: str) -> frozenset[str]:
    """The long options ``nsys profile --help`` lists (e.g. ``--cuda-graph-trace``); empty
    when the help cannot be read (then no flag is dropped).

    The list is kept in ``$XDG_CACHE_HOME/launchprof/nsys-profile-options.json`` per nsys
    executable (:func:`_options_key`), so ``launchprof profile`` starts nsys without first
    running ``nsys profile --help`` (0.02-0.07 s); a cache that cannot be read or written
    is ignored.
    """
    key = _options_key(nsys)
    path = _options_cache_file()
    cached: dict[str, list[str]] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            cached = loaded
    if key is not None and isinstance(cached.get(key), list):
        return frozenset(str(o) for o in cached[key])
    try:
        done = subprocess.run([nsys, "profile", "--help"], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    options = frozenset(_OPTION.findall(done.stdout + done.stderr))
    if key is not None and options:
        kept = [(k, v) for k, v in cached.items() if not k.startswith(f"{nsys}|")]  # drop stale entries
        cached = dict(kept[-(OPTIONS_CACHE_ENTRIES - 1) :])
        cached[key] = sorted(options)
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(cached, indent=0), encoding="utf-8")
            os.replace(tmp, path)
    return options


@dataclass(frozen=True)
class NsysCommand:
    """The ``nsys profile`` command line and the default flags dropped from it."""

    argv: list[str]
    dropped: list[str]


def output_argument(stem: Path) -> str:
    """``STEM`` as ``nsys profile --output`` takes it literally: absolute (nsys expands a
    leading ``~``), each ``%`` doubled (nsys expands ``%p``, ``%h``, ``%q{VAR}``, and
    ``%%`` to ``%``; seen with nsys 2022.4: ``-o 'pct%p'`` recorded elsewhere). ``nsys
    export --output`` takes its path as given."""
    return str(stem.absolute()).replace("%", "%%")


def nsys_command(nsys: Path, output_stem: Path, work: Workload, extra: Sequence[str] = ()) -> NsysCommand:
    """``nsys profile FLAGS --output STEM EXTRA -- workload``: :data:`PROFILE_FLAGS` minus
    those this nsys does not know (and minus those ``extra`` overrides), then ``extra``
    (``STEM`` as :func:`output_argument` writes it)."""
    known = profile_options(str(nsys))
    overridden = {e.split("=", 1)[0] for e in extra if e.startswith("--")}
    flags, dropped = [], []
    for flag in PROFILE_FLAGS:
        name = flag.split("=", 1)[0]
        if name in overridden:
            continue
        if known and name not in known:
            dropped.append(flag)
        else:
            flags.append(flag)
    argv = [str(nsys), "profile", *flags, f"--output={output_argument(output_stem)}", *extra, *work.argv]
    return NsysCommand(argv, dropped)


def start_group(argv: list[str], stdout: IO[Any] | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` (nsys) in a process group of its own, so that a signal meant for it
    and its workload can be sent to the group (:func:`run_nsys`); its standard output goes
    to ``stdout`` (default: ours)."""
    if sys.version_info >= (3, 11):
        return subprocess.Popen(argv, process_group=0, stdout=stdout)
    return subprocess.Popen(argv, preexec_fn=os.setpgrp, stdout=stdout)  # pragma: no cover - Python 3.10


# params: the nsys run's optional hooks (interrupt, repeat, start, hold) and its stdout
def run_nsys(
    argv: list[str],
    on_interrupt: Callable[[], None] | None = None,
    on_repeat: Callable[[], None] | None = None,
    interrupts: list[int] | None = None,
    on_start: Callable[[int], None] | None = None,
    hold: Callable[[], bool] | None = None,
    on_hold: Callable[[], None] | None = None,
    stdout: IO[Any] | None = None,
) -> int:
    """Run nsys with the terminal's stdin/stdout/stderr (the workload's output passes
    through live; its standard output to ``stdout`` when given) and return its exit code
    (128 + N when nsys itself dies of signal N; 130 when a signal was forwarded to it and
    it exited 0; the workload's own code when the only signal came while nsys wrote the
    trace of a workload that had finished). The first SIGINT/SIGTERM/SIGHUP received
    meanwhile is forwarded to nsys's process group as SIGINT and ``on_interrupt`` is
    called; later ones are not forwarded (a second SIGINT makes nsys abandon the trace it
    is writing) and ``on_repeat`` is called. The signal numbers received are appended to ``interrupts``. ``on_start`` is
    called with nsys's process id once it runs. When ``hold()`` is true (the workload
    has exited and nsys is writing the trace, which a SIGINT made nsys 2022.4 abandon:
    it left an incomplete recording in /tmp), the first signal is not forwarded:
    ``on_hold`` is called and nsys goes on; a second one is (nsys still waits out a
    workload's daemon child, which only it can stop). nsys gets one SIGINT at most.

    Raises:
        NsysError: nsys cannot be started.
    """
    try:
        proc = start_group(argv, stdout)
    except OSError as exc:
        raise NsysError(f"cannot run {argv[0]}: {exc.strerror}") from None
    if on_start is not None:
        on_start(proc.pid)
    interrupted: list[int] = interrupts if interrupts is not None else []
    first = len(interrupted)  # the caller's list may hold signals of earlier runs
    pending: list[Callable[[], None]] = []
    announcing: list[bool] = []

    def announce(callback: Callable[[], None] | None) -> None:
        # A signal can arrive while the line of the one before is being printed (`timeout
        # -s INT` signals the command, then its group): that handler runs inside this one,
        # so it only queues its line, printed after the first. A line that cannot be
        # printed is dropped: it must not stop the forwarding.
        if callback is None:
            return
        pending.append(callback)
        if announcing:
            return
        announcing.append(True)
        try:
            while pending:
                with contextlib.suppress(Exception):
                    pending.pop(0)()
        finally:
            announcing.clear()

    held: list[bool] = []
    forwarded: list[bool] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        interrupted.append(signum)
        if forwarded:
            announce(on_repeat)
            return
        if not held and hold is not None and hold():
            held.append(True)
            announce(on_hold)
            return
        forwarded.append(True)
        try:  # forwarded before anything is printed (the first print imports rich)
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        announce(on_interrupt)

    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: the terminal closed
            previous[sig] = signal.signal(sig, forward)
    except ValueError:  # not the main thread: signals cannot be handled here
        pass
    try:
        if hasattr(os, "waitid"):  # until nsys exits, not reaped: its pid is not reused meanwhile
            with contextlib.suppress(ChildProcessError):
                os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        if len(interrupted) > first:
            stop_leftovers(proc.pid)
        code = proc.wait()
        if code == 0 and forwarded:  # a signal held while nsys wrote a finished workload's trace is not its code
            return 130
        return 128 - code if code < 0 else code  # nsys itself killed by a signal: shell convention
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def open_by_a_process(path: Path) -> bool:
    """Whether any process has ``path`` open (Linux: its ``/proc/PID/fd`` links); False
    where that cannot be read."""
    try:
        target = str(path.resolve())
        for fd_dir in Path("/proc").glob("[0-9]*/fd"):
            try:
                if any(os.readlink(fd) == target for fd in fd_dir.iterdir()):
                    return True
            except OSError:
                continue  # another user's process, or one that just ended
    except OSError:
        return False
    return False


def stranded_qdstrm(since: float, folder: str | None = None) -> Path | None:
    """The one ``nsys-report-*.qdstrm`` that nsys left in the temporary folder (``$TMPDIR``
    or /tmp) since ``since`` (a ``time.time()``), which it does when interrupted while
    writing the trace or when it cannot write into the output folder; None when there is
    none or more than one. A recording that a process still has open (another nsys run
    writing it) is never one."""
    base = Path(folder or os.environ.get("TMPDIR") or "/tmp")
    try:
        found = [p for p in base.glob("nsys-report-*.qdstrm") if p.is_file() and p.stat().st_mtime >= since]
    except OSError:
        return None
    found = [p for p in found if not open_by_a_process(p)]
    return found[0] if len(found) == 1 else None


@dataclass(frozen=True)
class TraceFiles:
    """What a run left in the output folder: the ``.nsys-rep`` and ``.sqlite``, and how
    they were made (``imported``: launchprof ran QdstrmImporter; ``exported``: launchprof ran
    ``nsys export``)."""

    nsys_rep: Path
    sqlite: Path
    imported: bool
    exported: bool


def finish_trace(stem: Path, nsys: Path, progress: Callable[[str], None] | None = None) -> TraceFiles | None:
    """Make sure ``STEM.nsys-rep`` and ``STEM.sqlite`` exist after ``nsys profile``: import
    a leftover ``STEM.qdstrm``, export a missing SQLite. None when nsys wrote nothing.

    Raises:
        NsysError: the import or export failed (the recorded files are kept).
    """
    say = progress or (lambda _msg: None)
    rep, sqlite, qdstrm = (stem.with_suffix(s) for s in (".nsys-rep", ".sqlite", ".qdstrm"))
    imported = exported = False
    if not rep.is_file() and qdstrm.is_file():
        say("importing the trace (nsys did not find its QdstrmImporter)")
        import_qdstrm(qdstrm, nsys)
        imported = True
    if not rep.is_file():
        return None
    if not sqlite.is_file():
        say("exporting the trace to SQLite")
        export_sqlite(rep, str(nsys), sqlite)
        exported = True
    return TraceFiles(rep, sqlite, imported, exported)


def record_quietly(
    nsys: Path, stem: Path, argv: Sequence[str], flags: Sequence[str], timeout_s: int = 120, attempts: int = 2
) -> TraceFiles:
    """``nsys profile FLAGS --export=sqlite --output=STEM ARGV`` with its output captured,
    then :func:`finish_trace` (used by ``launchprof doctor --check-nvtx`` on a one-line
    script). nsys 2022.4 (this project's CI) at times never finishes after such a short
    workload has exited (its agent spinning, seen in 1 to 2 runs of 6 on a loaded 2-CPU
    machine): a run still going after ``timeout_s`` is stopped with what it left
    (:func:`~launchprof.nsys.watch.stop_leftovers`, the agent included) and made again, up
    to ``attempts`` runs.

    Raises:
        NsysError: nsys did not finish within ``timeout_s`` in any attempt, wrote no
            trace, or the import/export failed.
    """
    cmd = [str(nsys), "profile", *flags, "--export=sqlite", f"--output={output_argument(stem)}", *argv]
    for attempt in range(1, max(attempts, 1) + 1):
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise NsysError(f"cannot run {nsys}: {exc.strerror}") from None
        try:
            proc.wait(timeout=timeout_s)
            break
        except subprocess.TimeoutExpired:
            stop_leftovers(proc.pid)  # before the wait reaps nsys: its pid names the agent's session
            proc.kill()
            proc.wait()
            for leftover in stem.parent.glob(stem.name + ".*"):
                with contextlib.suppress(OSError):
                    leftover.unlink()
            if attempt >= attempts:
                raise NsysError(f"nsys did not finish within {timeout_s} s ({attempts} attempts)") from None
    files = finish_trace(stem, nsys)
    if files is None:
        raise NsysError(f"nsys wrote no trace at {stem}")
    return files
