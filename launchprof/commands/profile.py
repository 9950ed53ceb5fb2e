"""``launchprof profile``: run a workload under nsys, keep its trace, analyse it.

Flow: check the target and the output folder (before anything runs) -> ``nsys profile``
with the workload's output passing through live -> import/export the trace when nsys could
not (:func:`launchprof.nsys.profile.finish_trace`) -> the same analysis and report as
``launchprof analyze`` (:func:`launchprof.commands.analyze.run_analyze`). The analysis modules
(pandas, pyarrow, pydantic, jinja2) are imported in a background thread while nsys runs, so their import time
does not add to the wall time (:mod:`launchprof.commands.warmup`); the analysis may start
while nsys still exports (:mod:`launchprof.commands.early`); the runs without nsys are
:mod:`launchprof.commands.baseline`.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import shlex
import shutil
import time
import webbrowser
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from launchprof.commands.baseline import nothing_to_time, run_allocations, run_baselines, timing, wants_allocations
from launchprof.commands.common import AnalysisOptions, ProfileOptions
from launchprof.commands.early import EarlyAnalysis, EarlyResult, wanted
from launchprof.commands.folders import claim_default_folder, claim_folder
from launchprof.commands.warmup import WARM_ARROW, WARM_MODULES, WARM_SQLITE, WarmUp
from launchprof.errors import LaunchprofError, NsysError
from launchprof.nsys.locate import check_importer_setting, locate_nsys, nsys_info
from launchprof.nsys.profile import (
    TRACE_STEM,
    TargetError,
    TraceFiles,
    Workload,
    finish_trace,
    nsys_command,
    run_nsys,
    stranded_qdstrm,
    workload,
)
from launchprof.report.outputs import PAGE
from launchprof.timings import mark

if TYPE_CHECKING:
    from rich.console import Console


class Interrupted(LaunchprofError):
    """Ctrl-C after nsys finished (during import, export or analysis); files are kept."""

    exit_code = 130


@dataclass(frozen=True)
class ProfileResult:
    """Where the run's files went, the workload's exit code, and whether a Ctrl-C came
    (``interrupted``: the command then exits 130, whatever the workload's code)."""

    folder: Path
    exit_code: int
    analysed: bool
    summary: Any = None  # the report's Summary, when analysed
    interrupted: bool = False


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


@dataclass(frozen=True)
class _Run:
    """One ``profile`` run: what runs, where its files go, and the analysis' settings."""

    work: Workload
    folder: Path
    created: bool  # the folder was made by this run
    nsys_path: Path
    console: Console
    how: AnalysisOptions  # its nsys: the one located (nsys_path)
    options: ProfileOptions
    document: Callable[[str], None] | None = None


def run_profile(
    target: Sequence[str],
    console: Console,
    output: Path | None = None,
    how: AnalysisOptions | None = None,
    options: ProfileOptions | None = None,
    document: Callable[[str], None] | None = None,
) -> ProfileResult:
    """Profile ``target`` (see :func:`launchprof.nsys.profile.workload`) and write
    ``trace.nsys-rep``, ``trace.sqlite``, ``summary.json``, ``report.html`` into ``output``
    (default :func:`~launchprof.commands.folders.default_folder`). The trace is kept
    whatever happens after recording. ``how``: the analysis' options (``how.nsys``: the
    nsys executable, default from PATH; ``how.memory``: malloc settings for the analysis,
    :func:`launchprof.api.analyze`). ``options``: nsys's own arguments, the runs without
    nsys, ``--open``, where the workload's standard output goes
    (:class:`~launchprof.commands.common.ProfileOptions`). With ``options.baseline_runs``
    N > 0 and a successful nsys run, the workload then runs N more times without nsys
    (``LAUNCHPROF_STEP_TIMES=FOLDER/baseline-I.steps``) and the report gets a ``baseline``
    section (:mod:`launchprof.analysis.baseline`), unless the trace shows no step those
    runs could time (:func:`launchprof.commands.baseline.nothing_to_time`: then a line
    says so and none runs). ``document``: called with summary.json's text once written
    (``--json``).

    Returns:
        :class:`ProfileResult` with the workload's exit code (nsys passes it on) and the
        summary.

    Raises:
        TargetError, OutputError: before anything runs.
        NsysError: nsys missing, wrote no trace, or import/export failed (files kept).
        LaunchprofError: the analysis failed while the workload succeeded.
    """
    how = how or AnalysisOptions()
    options = options or ProfileOptions()
    work = workload(target)
    extra = split_nsys_args(options.nsys_args)
    nsys_path, _ = locate_nsys(how.nsys)
    check_importer_setting()
    if output is not None:
        folder = output
        created = claim_folder(folder)
    else:
        folder, created = claim_default_folder(work.label), True
    run = _Run(work, folder, created, nsys_path, console, replace(how, nsys=str(nsys_path)), options, document)
    cmd = nsys_command(nsys_path, folder / TRACE_STEM, work, extra)
    if cmd.dropped:
        version = nsys_info(nsys_path).version
        console.print(
            f"launchprof: nsys {version or '(unknown version)'} does not know {' '.join(cmd.dropped)}; "
            "profiling without",
            markup=False,
            soft_wrap=True,
        )
    warm, early = _start_background(run, cmd.argv)
    interrupts: list[int] = []
    started = time.time()
    mark("nsys_start")
    try:
        code = _record(cmd.argv, console, warm, interrupts, options.workload_stdout)
    finally:
        warm.nsys_exited()
    mark("nsys_end")
    try:
        # Interrupted: nsys may have written less than it recorded; analyse what it wrote.
        ready = early.finish(wait=not interrupts) if early is not None else None
        if interrupts:
            _rescue_qdstrm(folder / TRACE_STEM, started, console)
        return _after_recording(run, code, warm, ready, started, bool(interrupts))
    except KeyboardInterrupt:
        kept = next(
            (folder / f"{TRACE_STEM}{s}" for s in (".nsys-rep", ".qdstrm") if (folder / f"{TRACE_STEM}{s}").exists()),
            None,
        )
        again = f"; analyse it with: launchprof analyze {kept}" if kept is not None else ""
        raise Interrupted(f"interrupted; everything recorded so far is kept in {folder}{again}") from None


def _start_background(run: _Run, nsys_argv: list[str]) -> tuple[WarmUp, EarlyAnalysis | None]:
    """Start the warm-up imports (:mod:`launchprof.commands.warmup`) and, where it pays,
    the analysis while nsys writes its SQLite export (:mod:`launchprof.commands.early`)."""
    use_early = wanted(nsys_argv)
    stem = run.folder / TRACE_STEM
    warm = WarmUp(
        WARM_MODULES + (WARM_ARROW if use_early else WARM_SQLITE),
        ready=lambda: stem.with_suffix(".sqlite").exists() or stem.with_suffix(".qdstrm").exists(),
    )
    warm.start()
    early = None
    if use_early:
        early = EarlyAnalysis(
            stem, run.nsys_path, run.how, warm=warm, render=not run.options.baseline_runs, after=warm.workload_gone
        ).start()
    return warm, early


def _record(
    argv: list[str], console: Console, warm: WarmUp, interrupts: list[int], stdout: IO[Any] | None = None
) -> int:
    """Run ``nsys profile`` (:func:`launchprof.nsys.profile.run_nsys`), saying what each
    Ctrl-C does; its exit code (the workload's). ``interrupts`` collects the Ctrl-Cs."""
    return run_nsys(
        argv,
        stdout=stdout,
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
    run: _Run, code: int, warm: WarmUp, ready: EarlyResult | None, started: float, interrupted: bool
) -> ProfileResult:
    """After nsys: the trace made ready, the runs without nsys, the analysis and report."""
    console, folder = run.console, run.folder
    files = _trace_files(run, code, started, interrupted)
    mark("trace_ready")
    warm.join()  # before the baseline runs, so the imports do not compete with them for the CPU
    gc.freeze()  # as in `analyze`: the collector leaves the objects of the modules just imported alone
    mark("imports_done")
    baseline = _baseline(run, code, files.sqlite, interrupted)
    from launchprof.commands.analyze import run_analyze
    from launchprof.trace.readahead import prefetch

    prefetch(files.sqlite)  # the big tables are read in background threads (imports done: no import races)
    analysed, summary = True, None
    held: list[str] = []  # summary.json's text, for --json, while an allocation run may follow
    analyse = functools.partial(
        run_analyze,
        files.sqlite,
        folder,
        how=run.how,
        console=console,
        baseline=baseline,
        workload={"exit_code": code} if code != 0 else None,
    )
    try:
        # Held back (the report's lines and --json) until it is known whether an allocation
        # run follows, which makes the report again: the verdict is printed once. The first
        # report's lines are shown unless the second was made - also when anything fails or
        # a Ctrl-C comes.
        first, again = console.capture(), None
        try:
            with first:
                summary = analyse(
                    force=False,
                    early=ready if (ready is not None and not files.imported and not files.exported) else None,
                    document=held.append if run.document is not None else None,
                )
            if baseline is not None and wants_allocations(summary, folder):
                again = _with_allocations(run, files.sqlite, analyse)
        finally:
            if again is None:
                _release(console, first.get(), held, run.document)
        summary = again or summary
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
    if analysed and run.options.open_report:
        uri = (folder / PAGE).resolve().as_uri()
        if not webbrowser.open(uri):
            console.print(f"launchprof: no browser to open here; the report is {uri}", markup=False, soft_wrap=True)
    return ProfileResult(folder, code, analysed, summary, interrupted)


def _release(console: Console, text: str, held: list[str], document: Callable[[str], None] | None) -> None:
    """Print what the analysis printed while held back (rich's own rendering, names already
    escaped) and hand summary.json's text to ``--json``."""
    console.file.write(text)
    console.file.flush()
    if document is not None and held:
        document(held[-1])


def _with_allocations(run: _Run, sqlite: Path, analyse: Callable[..., Any]) -> Any:
    """The allocation run (:func:`launchprof.commands.baseline.run_allocations`) and, when it
    ran, the report made again with its lines (``analyse``: the first analysis' call; printed,
    and handed to ``--json``); None when that run failed (the first report stands)."""
    if not run_allocations(
        run.work, run.folder, run.console, run.how.step, timing(sqlite), run.options.workload_stdout
    ):
        return None
    return analyse(force=True, document=run.document)


def _baseline(run: _Run, code: int, sqlite: Path, interrupted: bool = False) -> Any:
    """The runs without nsys (:func:`launchprof.commands.baseline.run_baselines`) after a
    successful nsys run, or None, with a line saying why there are none (a Ctrl-C while
    nsys wrote the trace of a workload that had finished: none are started)."""
    runs, console = run.options.baseline_runs, run.console
    if runs and code == 0 and interrupted:
        console.print(
            "launchprof: no baseline runs: interrupted (the workload had finished; its trace is analysed)",
            markup=False,
            soft_wrap=True,
        )
        return None
    if runs and code != 0:
        console.print(
            f"launchprof: no baseline runs: the workload failed under nsys (exit code {code})",
            markup=False,
            soft_wrap=True,
        )
    if not runs or code != 0:
        return None
    why = nothing_to_time(run.work, sqlite, run.how.step)
    if why is not None:
        hint = "" if "launchprof.step(" in why else " (mark the loop's body with launchprof.step() to measure it)"
        console.print(
            f"launchprof: no baseline runs: {why}; the expected speedup is an estimate{hint}",
            markup=False,
            soft_wrap=True,
        )
        return None
    return run_baselines(run.work, run.folder, runs, console, run.how.step, timing(sqlite), run.options.workload_stdout)


def _trace_files(run: _Run, code: int, started: float, interrupted: bool) -> TraceFiles:
    """The trace nsys wrote, imported and exported where nsys could not
    (:func:`launchprof.nsys.profile.finish_trace`).

    Raises:
        NsysError: nsys wrote no trace (its exit status is the workload's, when not 0), or,
            interrupted, one it could not finish (exit status 130).
    """
    console, folder = run.console, run.folder
    with contextlib.ExitStack() as stack:
        shown: list[Any] = []  # the spinner starts only when there is an import or export to wait for

        def progress(msg: str) -> None:
            if not shown:
                shown.append(stack.enter_context(console.status(f"{msg}...")))
            shown[0].update(f"{msg}...")

        try:
            files = finish_trace(folder / TRACE_STEM, run.nsys_path, progress=progress)
        except NsysError as exc:
            if not interrupted:
                raise
            # nsys stopped before its recording was whole (a Ctrl-C in its first second)
            error = NsysError(f"interrupted before nsys finished the trace: {exc}")
            error.exit_code = 130
            raise error from None
    if files is None:
        removed = ""
        if run.created:  # made by this run and still empty (e.g. a --nsys-arg nsys refused): not left behind
            with contextlib.suppress(OSError):
                folder.rmdir()
                removed = ", removed again"
        stranded = stranded_qdstrm(started)
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
    return files
