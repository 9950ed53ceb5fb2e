"""``launchprof profile``: run a workload under nsys, keep its trace, analyse it.

Flow: check the target and the output folder (before anything runs) -> ``nsys profile``
with the workload's output passing through live -> import/export the trace when nsys could
not (:func:`launchprof.nsys.profile.finish_trace`) -> the same analysis and report as
``launchprof analyze`` (:func:`launchprof.commands.run_analyze`). The analysis modules
(pandas, pyarrow, pydantic, jinja2) are imported in a background thread while nsys runs, so their import time
does not add to the wall time.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
import webbrowser
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launchprof.early import EarlyAnalysis, EarlyResult, background_priority, wanted
from launchprof.errors import LaunchprofError, NsysError, OutputError
from launchprof.nsys.locate import check_importer_setting, locate_nsys, nsys_info
from launchprof.nsys.profile import (
    TRACE_STEM,
    TargetError,
    Workload,
    finish_trace,
    nsys_command,
    run_nsys,
    stranded_qdstrm,
    workload,
)
from launchprof.timings import mark

if TYPE_CHECKING:
    from rich.console import Console


class Interrupted(LaunchprofError):
    """Ctrl-C after nsys finished (during import, export or analysis); files are kept."""

    exit_code = 130


# What a run writes into its folder (launchprof.report.sides.STEP_FILES spelled out: that
# module imports pandas); profile never overwrites any of them.
TRACE_FILES = (
    "trace.nsys-rep",
    "trace.sqlite",
    "trace.qdstrm",
    "summary.json",
    "report.html",
    "plotly.min.js",
    "steps.csv",
    "step_kernels.csv",
    "step_timeline.csv",
    "baseline-1.steps",
)


@dataclass(frozen=True)
class ProfileResult:
    """Where the run's files went and the workload's exit code."""

    folder: Path
    exit_code: int
    analysed: bool


def default_folder(label: str, root: Path = Path("reports"), now: datetime | None = None) -> Path:
    """``reports/<label>-<UTC time>``, with ``-2``, ``-3``... appended if it exists."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in label)[:100] or "workload"  # names end at 255 bytes
    base = root / f"{safe}-{stamp}"
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    return folder


def _claim_default_folder(label: str, root: Path = Path("reports")) -> Path:
    """Create and return a new :func:`default_folder`; two runs started in the same second
    get two folders (the creation itself is the check: ``mkdir`` without ``exist_ok``).

    Raises:
        OutputError: the folder cannot be created.
    """
    for _ in range(1000):
        folder = default_folder(label, root)
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue  # another run took it between the check and the creation
        except OSError as exc:
            raise OutputError(f"cannot create {folder}: {exc.strerror or exc}") from None
    raise OutputError(f"cannot find a free folder name for {label} under {root}")


def _claim_folder(folder: Path) -> bool:
    """Create ``folder``; refuse one that already holds a trace or report (never overwrite).
    True when this call created it."""
    existed = folder.exists()
    if existed and not folder.is_dir():
        raise OutputError(f"{folder} exists and is not a folder")
    taken = [name for name in TRACE_FILES if (folder / name).exists()]
    if taken:
        raise OutputError(f"{folder} already holds {taken[0]}; choose another --output (profile never overwrites)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {folder}: {exc.strerror or exc}") from None
    _check_writable(folder)
    return not existed


def _check_writable(folder: Path) -> None:
    """Create and remove a file in ``folder``: a folder nsys cannot write into (read-only,
    another user's) is refused before the workload runs, not after.

    Raises:
        OutputError: the file cannot be created.
    """
    probe = folder / f".launchprof-write-check-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"cannot write into {folder}: {exc.strerror or exc}") from None


# Imported while nsys runs, besides launchprof.commands (pandas and the report modules):
# what the first analysis would otherwise import on the way (measured: 0.01 s), and the
# SQLite reader of the usual path (ADBC: 0.06 s here) or the early path's Arrow reader.
WARM_MODULES = (
    "launchprof.analysis.ranks",
    "launchprof.calibrate.store",
    "numpy.char",
    "pandas.io.formats.csvs",
    "pyarrow.csv",
)
WARM_SQLITE = ("adbc_driver_manager", "adbc_driver_sqlite")
WARM_ARROW = ("launchprof.trace.arrowdir", "pyarrow.ipc", "launchprof.report.figures", "launchprof.report.sides")


WARM_ENV = "LAUNCHPROF_WARM_AT"  # "start": import while the workload runs (the default before)


class WarmUp(threading.Thread):
    """Imports the analysis modules ``modules`` (besides :mod:`launchprof.commands`) in the
    background, at low priority (:func:`~launchprof.early.background_priority`), once the
    workload has exited (:func:`~launchprof.nsys.watch.wait_for_workload_exit`): nsys then
    writes its report for 1.4 s or more, while the imports took 1.4-1.7 s of one CPU on
    the H200 machine, where they slowed down the workload they ran beside
    (benchmarks/README.md). ``ready``: true once the report is complete (the imports start
    then at the latest). With ``$LAUNCHPROF_WARM_AT=start`` they start at once, and the
    wait follows them. :attr:`workload_exited` is set once the workload is known to have
    exited (``run_nsys`` then holds back the first Ctrl-C).

    :meth:`nsys_started` gives the nsys process to watch; :meth:`nsys_exited` ends the wait.
    """

    def __init__(self, modules: Sequence[str], ready: Callable[[], bool] = lambda: False) -> None:
        super().__init__(name="launchprof-warm-up", daemon=True)
        self.modules = tuple(modules)
        self.ready = ready
        self.waited = ""  # why the wait ended (watch.wait_for_workload_exit), for benchmarks
        self.workload_gone = threading.Event()  # set when the wait ends (the workload exited, or no telling)
        self.workload_exited = threading.Event()  # set when the workload is known to have exited
        self._pid: int | None = None
        self._nsys_seen = threading.Event()
        self._nsys_gone = threading.Event()

    def nsys_started(self, pid: int) -> None:
        self._pid = pid
        self._nsys_seen.set()

    def nsys_exited(self) -> None:
        self._nsys_gone.set()
        self._nsys_seen.set()

    def run(self) -> None:
        background_priority()  # the workload and nsys come first
        at_start = os.environ.get(WARM_ENV) == "start"
        if at_start:
            self._import()
        self._nsys_seen.wait()
        if self._pid is not None:
            from launchprof.nsys.watch import wait_for_workload_exit

            self.waited = wait_for_workload_exit(self._pid, self._nsys_gone, self.ready)
            if self.waited in ("exited", "ready"):
                self.workload_exited.set()
        self.workload_gone.set()
        if not at_start:
            self._import()

    def _import(self) -> None:
        mark(f"warm_start_{self.waited or WARM_ENV}")
        mark("warm_start")
        import importlib

        import launchprof.commands  # noqa: F401

        for name in self.modules:
            with contextlib.suppress(ImportError):  # a missing one is met (and reported) where it is used
                importlib.import_module(name)
        mark("warm_done")


def split_nsys_args(values: Sequence[str]) -> list[str]:
    """``--nsys-arg`` values, each split like a shell would (``"--delay 5"`` -> two words).

    Raises:
        TargetError: a value sets ``--output``/``-o``, which launchprof owns, or cannot be
            split (an unbalanced quote).
    """
    words = []
    for v in values:
        try:
            words += shlex.split(v)
        except ValueError as exc:  # "No closing quotation", "No escaped character"
            raise TargetError(f"--nsys-arg {v!r}: {str(exc).lower()}") from None
    for w in words:
        if w in ("-o", "--output") or w.startswith(("--output=", "-o=")):
            raise TargetError("--nsys-arg cannot set nsys's --output; use launchprof's --output DIR")
    return words


def run_profile(
    target: Sequence[str],
    console: Console,
    output: Path | None = None,
    nsys: str | None = None,
    nsys_args: Sequence[str] = (),
    bubble_threshold_ns: int = 1000,
    step: str | None = None,
    open_report: bool = False,
    baseline_runs: int = 0,
) -> ProfileResult:
    """Profile ``target`` (see :func:`launchprof.nsys.profile.workload`) and write
    ``trace.nsys-rep``, ``trace.sqlite``, ``summary.json``, ``report.html`` into ``output``
    (default :func:`default_folder`). The trace is kept whatever happens after recording.
    With ``baseline_runs`` N > 0 and a successful nsys run, the workload then runs N more
    times without nsys (``LAUNCHPROF_STEP_TIMES=FOLDER/baseline-I.steps``) and the report
    gets a ``baseline`` section (:mod:`launchprof.baseline`).

    Returns:
        :class:`ProfileResult` with the workload's exit code (nsys passes it on).

    Raises:
        TargetError, OutputError: before anything runs.
        NsysError: nsys missing, wrote no trace, or import/export failed (files kept).
        LaunchprofError: the analysis failed while the workload succeeded.
    """
    work = workload(target)
    extra = split_nsys_args(nsys_args)
    nsys_path, _ = locate_nsys(nsys)
    check_importer_setting()
    if output is not None:
        folder = output
        created = _claim_folder(folder)
    else:
        folder, created = _claim_default_folder(work.label), True
    cmd = nsys_command(nsys_path, folder / TRACE_STEM, work, extra)
    if cmd.dropped:
        version = nsys_info(nsys_path).version
        console.print(
            f"launchprof: nsys {version or '(unknown version)'} does not know {' '.join(cmd.dropped)}; "
            "profiling without",
            markup=False,
            soft_wrap=True,
        )
    use_early = wanted(cmd.argv)
    stem = folder / TRACE_STEM
    warm = WarmUp(
        WARM_MODULES + (WARM_ARROW if use_early else WARM_SQLITE),
        ready=lambda: stem.with_suffix(".sqlite").exists() or stem.with_suffix(".qdstrm").exists(),
    )
    warm.start()
    early = None
    if use_early:  # analyse while nsys writes its SQLite export (launchprof.early)
        early = EarlyAnalysis(
            folder / TRACE_STEM,
            nsys_path,
            bubble_threshold_ns,
            step,
            warm=warm,
            render=not baseline_runs,
            after=warm.workload_gone,
        ).start()
    interrupts: list[int] = []
    started = time.time()
    mark("nsys_start")
    try:
        code = run_nsys(
            cmd.argv,
            on_interrupt=lambda: console.print(
                "launchprof: interrupted: stopping the workload; nsys is writing the trace",
                markup=False,
                soft_wrap=True,
            ),
            on_repeat=lambda: console.print(
                "launchprof: interrupted: nsys is still writing the trace; waiting for it (kill -9 to abandon it)",
                markup=False,
                soft_wrap=True,
            ),
            interrupts=interrupts,
            on_start=warm.nsys_started,
            hold=warm.workload_exited.is_set,  # a SIGINT would make nsys abandon the trace it writes
            on_hold=lambda: console.print(
                "launchprof: interrupted: the workload has exited and nsys is writing the trace; waiting for it "
                "(Ctrl-C again stops nsys, which may lose the trace)",
                markup=False,
                soft_wrap=True,
            ),
        )
    finally:
        warm.nsys_exited()
    mark("nsys_end")
    try:
        # Interrupted: nsys may have written less than it recorded; analyse what it wrote.
        ready = early.finish(wait=not interrupts) if early is not None else None
        if interrupts:
            _rescue_qdstrm(folder / TRACE_STEM, started, console)
        return _after_recording(
            folder,
            nsys_path,
            code,
            console,
            bubble_threshold_ns,
            step,
            open_report,
            warm,
            work,
            baseline_runs,
            ready,
            created,
            started,
            bool(interrupts),
        )
    except KeyboardInterrupt:
        kept = next(
            (folder / f"{TRACE_STEM}{s}" for s in (".nsys-rep", ".qdstrm") if (folder / f"{TRACE_STEM}{s}").exists()),
            None,
        )
        again = f"; analyse it with: launchprof analyze {kept}" if kept is not None else ""
        raise Interrupted(f"interrupted; everything recorded so far is kept in {folder}{again}") from None


def _rescue_qdstrm(stem: Path, since: float, console: Console) -> None:
    """nsys interrupted while writing leaves its recording as ``/tmp/nsys-report-*.qdstrm``
    and nothing in the output folder: move it there (as ``STEM.qdstrm``) to be imported."""
    if any(stem.with_suffix(s).exists() for s in (".nsys-rep", ".qdstrm")):
        return
    stranded = stranded_qdstrm(since)
    if stranded is None:
        return
    try:
        shutil.move(str(stranded), stem.with_suffix(".qdstrm"))
    except OSError as exc:
        console.print(f"launchprof: nsys left its recording at {stranded} ({exc.strerror})", markup=False)
        return
    console.print(f"launchprof: nsys left its recording at {stranded}; moved it into {stem.parent}", markup=False)


def _after_recording(
    folder: Path,
    nsys_path: Path,
    code: int,
    console: Console,
    bubble_threshold_ns: int,
    step: str | None,
    open_report: bool,
    warm: threading.Thread,
    work: Workload | None = None,
    baseline_runs: int = 0,
    ready: EarlyResult | None = None,
    created: bool = False,
    started: float | None = None,
    interrupted: bool = False,
) -> ProfileResult:
    with contextlib.ExitStack() as stack:
        shown: list[Any] = []  # the spinner starts only when there is an import or export to wait for

        def progress(msg: str) -> None:
            if not shown:
                shown.append(stack.enter_context(console.status(f"{msg}...")))
            shown[0].update(f"{msg}...")

        files = finish_trace(folder / TRACE_STEM, nsys_path, progress=progress)
    if files is None:
        removed = ""
        if created:  # made by this run and still empty (e.g. a --nsys-arg nsys refused): not left behind
            with contextlib.suppress(OSError):
                folder.rmdir()
                removed = ", removed again"
        stranded = stranded_qdstrm(started) if started is not None else None
        if stranded is not None:  # e.g. the output folder's disk is full: nsys kept it in $TMPDIR
            why = f"nsys left its recording at {stranded} (import it with QdstrmImporter -i FILE)"
        elif interrupted:
            why = "interrupted before nsys had written a trace"
        else:
            why = (
                "nsys's own messages above say why (from nsys 2022.4, 'Connection reset by peer' or 'sem_open' "
                "mean its agent failed to start: run it again)"
            )
        error = NsysError(f"nsys wrote no trace into {folder} (nsys exit code {code}{removed}); {why}")
        error.exit_code = code or error.exit_code
        raise error
    if files.imported:
        console.print(
            f"launchprof: nsys did not find its QdstrmImporter; launchprof imported the trace ({files.nsys_rep})",
            markup=False,
            soft_wrap=True,
        )
    mark("trace_ready")
    warm.join()  # before the baseline runs, so the imports do not compete with them for the CPU
    gc.freeze()  # as in `analyze`: the collector leaves the objects of the modules just imported alone
    mark("imports_done")
    baseline = (
        _run_baselines(work, folder, baseline_runs, console, step) if (work and baseline_runs and code == 0) else None
    )
    if baseline_runs and code != 0:
        console.print(
            f"launchprof: no baseline runs: the workload failed under nsys (exit code {code})",
            markup=False,
            soft_wrap=True,
        )
    from launchprof.commands import run_analyze
    from launchprof.trace.columns import prefetch

    prefetch(files.sqlite)  # the big tables are read in background threads (imports done: no import races)
    analysed = True
    try:
        run_analyze(
            files.sqlite,
            folder,
            False,
            bubble_threshold_ns,
            str(nsys_path),
            console,
            step=step,
            baseline=baseline,
            early=ready if (ready is not None and not files.imported and not files.exported) else None,
            workload={"exit_code": code} if code != 0 else None,
        )
    except LaunchprofError as exc:
        if code == 0:
            console.print(
                f"launchprof: the trace is kept in {folder}; analyse it again with: launchprof analyze {files.sqlite}",
                markup=False,
                soft_wrap=True,
            )
            raise
        console.print(f"launchprof: the analysis failed: {exc}", markup=False, soft_wrap=True)
        analysed = False
    mark("report_written")
    if analysed and open_report:
        uri = (folder / "report.html").resolve().as_uri()
        if not webbrowser.open(uri):
            console.print(f"launchprof: no browser to open here; the report is {uri}", markup=False, soft_wrap=True)
    return ProfileResult(folder, code, analysed)


PYTHON_NAME = re.compile(r"python[0-9.]*(?:\.exe)?$")


# Python options that take the next word as their value (``python --help``).
PYTHON_VALUE_OPTIONS = ("-W", "-X", "--check-hash-based-pycs")


def baseline_argv(argv: Sequence[str]) -> list[str]:
    """The command line of a run without nsys: a Python workload (``python[X.Y] [OPTIONS]
    SCRIPT`` or ``... -m MODULE``; options with a value, ``-W``/``-X``, read as Python does)
    runs through ``launchprof/profiler_region.py``, which times its profiler regions for a
    workload without step markers (:mod:`launchprof.profiler_region`); any other command -
    not Python, ``-c CODE``, a script read from stdin - runs unchanged."""
    args = list(argv)
    if len(args) < 2 or not PYTHON_NAME.match(os.path.basename(args[0])):
        return args
    i = 1
    while i < len(args):
        word = args[i]
        if word == "-m" or (word.startswith("-m") and not word.startswith("--")):
            break
        if word == "-" or word.startswith("-c") or word in ("--help", "-h", "--version", "-V"):
            return args
        if word in PYTHON_VALUE_OPTIONS:
            i += 2
        elif word.startswith("-"):
            i += 1
        else:
            break
    if i >= len(args):
        return args
    from launchprof import profiler_region

    rest = args[i:]
    if rest[0].startswith("-m") and rest[0] != "-m":  # -mpkg.mod
        rest = ["-m", rest[0][2:], *rest[1:]]
    if rest[0] == "-m" and len(rest) < 2:
        return args
    return [*args[:i], str(Path(profiler_region.__file__).resolve()), *rest]


def _run_baselines(
    work: Workload, folder: Path, runs: int, console: Console, step: str | None = None
) -> list[Any] | Any:
    """Run ``work`` ``runs`` times without nsys (:func:`baseline_argv`), each with
    ``LAUNCHPROF_STEP_TIMES`` set to its own file (:func:`launchprof.baseline.run_files`),
    and return the step times read back: one array per run that exited 0 (failed runs and
    unreadable step files are reported and left out, so the analysis of the recorded trace
    always runs); when no run recorded a step but some timed a profiler region, the regions
    instead (:class:`launchprof.baseline.RegionRuns`)."""
    from launchprof.baseline import RegionRuns, StepTimesError, read_step_times, region_step_times, run_files
    from launchprof.marker import STEP_NAME, STEP_TIMES_ENV

    argv = baseline_argv(work.argv)
    got, regions = [], []
    for i, path in enumerate(run_files(folder, runs), start=1):
        console.print(f"launchprof: baseline run {i} of {runs} (without nsys)", markup=False)
        with contextlib.suppress(OSError):  # a file left by an earlier run of this folder
            path.unlink(missing_ok=True)
        began = time.perf_counter()
        try:
            done = subprocess.run(argv, env={**os.environ, STEP_TIMES_ENV: str(path.resolve())}, check=False)
        except OSError as exc:
            raise TargetError(f"cannot run {argv[0]}: {exc.strerror}") from None
        wall = time.perf_counter() - began
        if done.returncode != 0:
            if path.exists():  # kept for the record, out of compare's way (it reads baseline-*.steps)
                path.replace(path.with_name(path.name + ".failed"))
            console.print(f"launchprof: baseline run {i} exited with code {done.returncode}; left out", markup=False)
            continue
        try:
            times = read_step_times(path, step or STEP_NAME)
            region = region_step_times(path)
        except StepTimesError as exc:
            console.print(f"launchprof: baseline run {i} left out: {exc}", markup=False, soft_wrap=True)
            continue
        timed = f", profiler regions {(region[:, 1] - region[:, 0]).sum() / 1e9:.3f} s" if len(region) else ""
        console.print(f"launchprof: baseline run {i}: {len(times)} steps{timed} in {wall:.2f} s", markup=False)
        got.append(times)
        regions.append(region)
    if not any(len(t) for t in got) and any(len(r) for r in regions):
        return RegionRuns(regions)
    return got
