"""The Python API: ``launchprof.analyze(path)`` for notebooks and scripts."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import lzma
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis import analyze_trace
from launchprof.analysis.baseline import ModuleRuns, RegionRuns, runs_of
from launchprof.analysis.diagnosis.diagnose import diagnose
from launchprof.analysis.diagnosis.sources import AllocRun, SyncRuns
from launchprof.analysis.finish import finish
from launchprof.analysis.ranks import CrossRank
from launchprof.analysis.result import AnalysisResult
from launchprof.analysis.steps import find_steps, no_gpu_work_note
from launchprof.analysis.steps.find import forget_other_steps
from launchprof.analysis.timeline.core import Analysis
from launchprof.analysis.timeline.gaps import DEFAULT_BUBBLE_THRESHOLD_NS
from launchprof.api.calibration import user_calibration
from launchprof.defaults import STEP_NAME
from launchprof.errors import TraceError
from launchprof.malloc import MallocTuning
from launchprof.nsys.export import export_sqlite
from launchprof.text import us_text
from launchprof.trace import load_trace
from launchprof.trace.columns import Rows, window_ns
from launchprof.trace.model import Trace
from launchprof.trace.steptimes import (
    ALLOCATION_RUN,
    StepTimesError,
    module_step_times,
    read_sources,
    read_step_times,
    region_step_times,
    sources_file,
)

# What :func:`analyze`'s ``baseline`` takes: a report folder, per-run step arrays, region runs.
BaselineRuns = str | Path | Sequence[np.ndarray] | RegionRuns | ModuleRuns | None


def _decompress_xz(path: Path, folder: Path) -> Path:
    """Decompress ``path`` into ``folder`` (the temporary folder, ``$TMPDIR``).

    Raises:
        TraceError: not a valid .xz file, or the temporary folder cannot take it (full:
            said as such, not as an error writing the report).
    """
    target = folder / path.name[: -len(".xz")]
    try:
        with lzma.open(path) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (lzma.LZMAError, EOFError) as exc:
        raise TraceError(f"{path} is not a valid .xz file ({exc})") from None
    except OSError as exc:
        if exc.filename is not None and Path(exc.filename) == path:
            raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
        why = "it is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))
        raise TraceError(
            f"cannot decompress {path} into the temporary folder {folder.parent} ($TMPDIR): {why}; "
            "set TMPDIR to a folder with room, or decompress it yourself (xz -dk)"
        ) from None
    return target


def reused_export(path: Path) -> str | None:
    """A note when ``path`` is a ``.nsys-rep`` whose SQLite export beside it, newer than the
    report, will be read as it is (:func:`launchprof.nsys.export.export_sqlite` reuses it,
    whatever nsys wrote it); None otherwise."""
    if path.suffix != ".nsys-rep":
        return None
    export = path.with_suffix(".sqlite")
    try:
        when = export.stat().st_mtime
        if when < path.stat().st_mtime:
            return None
    except OSError:
        return None
    import time

    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(when))
    return (
        f"{export} (exported from {path.name} on {stamp}, after the report was written) was read as it is; "
        "delete it to export the report again (with another --nsys, say)"
    )


def resolve_trace(path: str | Path, nsys: str | None = None) -> Path:
    """The SQLite file to read for ``path``: itself, the export of a ``.nsys-rep``, or of
    the ``.nsys-rep`` imported from a ``.qdstrm`` (an nsys recording not yet imported, as
    an interrupted ``launchprof profile`` or an nsys without its importer leaves: imported
    next to it with QdstrmImporter, which then removes the ``.qdstrm`` as nsys does).

    Raises:
        TraceError: missing file, a folder, or an unknown suffix.
        NsysError: a ``.nsys-rep`` could not be exported, or a ``.qdstrm`` imported.
    """
    p = Path(path)
    if not p.exists():
        raise TraceError(f"no such file: {p}")
    if p.is_dir():
        raise TraceError(f"{p} is a directory; give an nsys .sqlite or .nsys-rep file")
    if not p.is_file():  # a FIFO named f.sqlite.xz kept the decompression waiting for ever
        raise TraceError(f"{p} is not a regular file (expected an nsys .sqlite export)")
    if p.suffix == ".qdstrm":
        from launchprof.nsys.importer import import_qdstrm
        from launchprof.nsys.locate import locate_nsys

        rep = p.with_suffix(".nsys-rep")
        if not rep.exists():
            rep = import_qdstrm(p, locate_nsys(nsys)[0])
        p = rep
    if p.suffix == ".nsys-rep":
        return export_sqlite(p, nsys)
    return p


@contextlib.contextmanager
def _temporary_folder() -> Iterator[Path]:
    """A temporary folder (``$TMPDIR/launchprof-XXXXXXXXXXXX``, mode 0700) for a
    decompressed trace, removed on the way out, also when a signal unwinds while it is
    being made (Ctrl-C; SIGTERM and SIGHUP raise ``SystemExit`` in the command line): its
    name is held before the folder exists, so no moment has a folder that nothing will
    remove. ``tempfile.TemporaryDirectory`` makes the folder before its object exists (and
    the command line ends with ``os._exit``, so its finalizer never runs): a SIGHUP between
    the two left the copy behind (tests/test_cli_robustness.py, 1 run in 6 under load).

    Raises:
        TraceError: none can be made (``$TMPDIR`` full, missing or read-only).
    """
    base = Path(tempfile.gettempdir())
    folder: Path | None = None
    try:
        for _ in range(100):
            folder = base / f"launchprof-{secrets.token_hex(6)}"  # held before it exists
            try:
                folder.mkdir(mode=0o700)
                break
            except FileExistsError:  # 48 random bits taken: not ours, never removed
                folder = None
            except OSError as exc:
                folder = None
                raise TraceError(
                    f"cannot make a temporary folder in {base} ($TMPDIR) to decompress the trace: {exc.strerror or exc}"
                ) from None
        if folder is None:
            raise TraceError(f"cannot make a temporary folder in {base} ($TMPDIR): every name tried was taken")
        yield folder
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def sqlite_export(
    path: str | Path, nsys: str | None = None, progress: Callable[[str], None] | None = None
) -> Iterator[Path]:
    """The SQLite file to read for ``path`` while the ``with`` block runs: the file itself,
    the export of a ``.nsys-rep`` (:func:`resolve_trace`), or a ``.sqlite.xz``
    decompressed into a temporary folder that is removed on the way out
    (``progress("decompressing")`` first).

    Raises:
        TraceError, NsysError: as :func:`resolve_trace` and the decompression.
    """
    sqlite = resolve_trace(path, nsys)
    if not sqlite.name.endswith(".xz"):
        yield sqlite
        return
    with _temporary_folder() as tmp:
        if progress:
            progress("decompressing")
        yield _decompress_xz(sqlite, tmp)


# params: the Python API: keyword options named as the command line's, each with its default
def analyze(
    path: str | Path,
    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS,
    nsys: str | None = None,
    progress: Callable[[str], None] | None = None,
    step: str | None = None,
    memory: MallocTuning | None = None,
    baseline: BaselineRuns = None,
    pid: int | None = None,
    time_range: tuple[float, float] | None = None,
    memory_check: bool = True,
) -> TraceAnalysis:
    """Load and analyse an nsys trace.

    Args:
        path: an nsys ``.sqlite`` export (or ``.sqlite.xz``), or a ``.nsys-rep`` (exported with
            ``nsys export --type sqlite`` next to it; nsys must be installed).
        bubble_threshold_ns: idle gaps at least this long are bubbles (default 1 us).
        nsys: path of the nsys executable, if not on PATH.
        progress: optional callback given a short text before each stage.
        step: NVTX range text that marks one step (default: launchprof's own marker,
            else the repeating range covering most GPU work, else graph launches, else
            the repeating kernel sequence; see :mod:`launchprof.analysis.steps`).
        memory: malloc settings for loading, then for the analysis (the command line's
            :class:`~launchprof.malloc.MallocTuning`); default: the process's are left alone.
        baseline: the runs of the same program without nsys: a report folder of
            ``launchprof profile`` (its ``baseline-*.steps`` files: :func:`baseline_runs`),
            per-run ``(start_ns, end_ns)`` step arrays,
            :class:`~launchprof.analysis.baseline.RegionRuns` or
            :class:`~launchprof.analysis.baseline.ModuleRuns`; their step replaces the
            estimate of the eager step (``recommendation.expected``, summary.json's
            ``baseline``), as ``profile`` does: the same runs give the same summary.
        pid: analyse the rows of this process only (its kernels, memory operations, CUDA
            API calls and NVTX ranges; :func:`~launchprof.trace.load_trace`), as if the
            trace held nothing else: ``launchprof analyze --per-process`` analyses each
            process with GPU work so (:func:`~launchprof.trace.loader.gpu_processes`).
        time_range: ``(start, end)`` seconds on the trace's clock (as the Nsight Systems
            timeline shows it): analyse only the rows starting in ``[start, end)`` (kernels,
            memory operations, CUDA API calls, NVTX ranges: each table cut by its own
            rows' starts; :class:`~launchprof.trace.columns.Rows`), as if the recording
            held nothing else: the memory of that window, for a trace too large to load
            whole (``launchprof analyze --time-range``).
        memory_check: refuse the rows to analyse (the whole trace, or those of ``pid``
            or ``time_range``) when they need more memory than this process can have,
            before any is read (:mod:`launchprof.trace.footprint`); False: try anyway
            (``launchprof analyze --no-memory-check``).

    Returns:
        :class:`TraceAnalysis` (an :class:`~launchprof.analysis.result.AnalysisResult`):
        ``verdict``, ``recommendation``, ``steps`` (a DataFrame) and ``summary`` first;
        figures per device/process/stream in ``devices``, launch figures in ``launches``,
        the DataFrames in ``trace`` (documented in :mod:`launchprof.trace.model`),
        ``found_steps``, a :class:`~launchprof.analysis.steps.Steps`; ``diagnosis`` and
        ``recommendation`` (:mod:`launchprof.analysis.diagnosis.diagnose`; its prediction uses the
        user's calibration file when there is one:
        :func:`launchprof.api.calibration.user_calibration`).

    Raises:
        TraceError: the file is missing or not an nsys SQLite export.
        NsysError: a ``.nsys-rep`` needs nsys and it is missing or failed.
        StepError: ``step`` names an NVTX range that is not in the trace.
        ValueError: ``time_range`` is not ``0 <= start < end`` (:func:`~launchprof.trace.columns.window_ns`).
        StepTimesError: a step-times file of ``baseline`` is malformed.
        TraceError: ``baseline`` names a folder that does not exist or holds no runs.
        TraceTooLargeError: ``memory_check`` found the rows to analyse too many for the
            memory available.

    With several ranks (device, process pairs with GPU work) or NCCL kernels,
    ``ranks`` holds the cross-rank view, a
    :class:`~launchprof.analysis.ranks.CrossRank`.
    """
    rows = Rows(pid, window_ns(time_range) if time_range is not None else None)
    reused = reused_export(Path(path))
    with sqlite_export(path, nsys, progress) as sqlite:
        trace = _load(sqlite, progress, memory, rows, memory_check)
    trace = dataclasses.replace(trace, path=Path(path), notes=(*trace.notes, *([reused] if reused else [])))
    return analyze_loaded(trace, bubble_threshold_ns, progress, step, baseline)


def _load(
    sqlite: Path, progress: Callable[[str], None] | None, memory: MallocTuning | None, rows: Rows, memory_check: bool
) -> Trace:
    """:func:`~launchprof.trace.load_trace` (of ``rows`` only), between ``memory``'s two
    settings."""
    if memory is not None:
        memory.loading()
    trace = load_trace(sqlite, progress=progress, rows=rows, memory_check=memory_check)
    if memory is not None:
        memory.analysing()  # loaded: the analysis comes next
    return trace


@dataclass(frozen=True, repr=False, eq=False, kw_only=True)
class TraceAnalysis(AnalysisResult):
    """What :func:`analyze` returns: an :class:`~launchprof.analysis.result.AnalysisResult`
    with the answers a notebook asks for first, and a short ``repr``.

    Attributes (besides the result's ``recommendation``:
    :class:`~launchprof.analysis.prediction.recommendation.Recommendation` (``convert``,
    ``predicted_speedup``, ``break_even_iterations``, ``blockers``, ...), ``diagnosis``:
    :class:`~launchprof.analysis.diagnosis.diagnose.Diagnosis` (``findings``, ``figures``,
    ``reasons``), ``found_steps``, ``ranks``; computed on first use):
        verdict: ``launch-bound``, ``sync-bound``, ``host-bound``, ``gpu-bound`` or
            ``no-gpu-work`` (the steady steps'; README: Diagnosis), or None.
        steps: one row per step (a DataFrame, ns): the columns of ``steps.csv``
            (``step``, ``warmup``, ``period_ns``, ``kernels``, ``busy_ns``,
            ``host_wait_ns``, ...); for a trace without GPU work, its NVTX step ranges
            (``step``, ``start``, ``end``, ``duration_ns``, ``period_ns``); empty when
            there is no step.
        summary: the :class:`~launchprof.report.schema.Summary` (summary.json, as a
            pydantic model; ``summary.headline``, a
            :class:`~launchprof.report.schema.Headline`, holds the verdict's figures).

    In Jupyter the object shows as the report card (``_repr_html_``).
    """

    @property
    def verdict(self) -> str | None:
        return None if self.diagnosis is None else str(self.diagnosis.verdict)

    @property
    def steps(self) -> pd.DataFrame:
        found = self.found_steps
        if len(found.table):
            from launchprof.analysis.comparison.side import STEP_COLUMNS

            columns = [c for c in STEP_COLUMNS if c in found.table.columns]
            return found.table[columns].copy()
        nvtx = self.shown.host_steps if self.shown is not None else None
        if nvtx is None:  # a trace with GPU work but no step found: its NVTX steps all the same
            from launchprof.analysis.nvtx_steps import nvtx_steps

            nvtx = nvtx_steps(self.trace.nvtx, self.step_name)
        return nvtx.table.copy() if nvtx is not None else pd.DataFrame(columns=["step", "warmup", "period_ns"])

    @functools.cached_property
    def summary(self) -> Any:
        # Held by this object, not in the cache it shares with the result it was made
        # from (Analysis.cached): with_baseline's result has a summary of its own.
        from launchprof.report.summary import build_summary

        return build_summary(self)

    def __repr__(self) -> str:
        head = self.summary.headline
        name = Path(str(self.trace.path)).name
        parts = [f"{self.verdict or 'no diagnosis'}"]
        if head is None:
            return f"<launchprof analysis of {name}: {', '.join(parts)}>"
        if head.scope == "steady steps" and head.period_p50_ns:
            parts.append(f"{head.steady_steps} steady steps of {us_text(head.period_p50_ns)}")
            parts.append(f"GPU busy {head.gpu_busy_ratio or 0:.0%}")
        if head.nvtx_steps:
            parts.append(f"{head.nvtx_steps.count} NVTX '{head.nvtx_steps.name}' steps")
        if head.action in ("convert", "fix-blockers-then-convert") and head.expected_speedup:
            parts.append(f"{head.action}: {head.expected_speedup:.2f}x expected")
        elif head.action == "build-graph-once":
            parts.append("build the graph once")
        elif head.graphs:
            parts.append("already replays CUDA graphs")
        return f"<launchprof analysis of {name}: {', '.join(parts)}>"

    def _repr_html_(self) -> str:
        from launchprof.report.diagnosis import render_card

        return render_card(self, self.summary)


def analyze_loaded(
    trace: Trace,
    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS,
    progress: Callable[[str], None] | None = None,
    step: str | None = None,
    baseline: BaselineRuns = None,
) -> TraceAnalysis:
    """:func:`analyze` of a trace already loaded (:func:`~launchprof.trace.load_trace`,
    :func:`~launchprof.trace.arrowdir.load_arrowdir`); same arguments, result and errors
    (but for the file's)."""
    if progress:
        progress("analysing")
    analysis = analyze_trace(trace, bubble_threshold_ns)
    from launchprof.analysis.ranks import rank_view

    # Several ranks (processes with GPU work) or NCCL kernels: the cross-rank view.
    ranks = rank_view(analysis, step_name=step)
    if progress:
        progress("finding steps")
    device_id, pid = _critical_rank(analysis, ranks)
    steps = find_steps(analysis, step_name=step, device_id=device_id, pid=pid)
    forget_other_steps(analysis, steps)  # the rank view's steps of each rank are not read again
    note = no_gpu_work_note(steps)
    if note is not None:
        analysis.notes.append(note)
    calibration, source = user_calibration()
    runs = _runs_of(baseline, step)
    sync = sync_runs(baseline, step) if isinstance(baseline, (str, Path)) else None
    diagnosis, recommendation = diagnose(
        analysis, steps, calibration=calibration, calibration_source=source, baseline=runs, sync=sync
    )
    return finish(TraceAnalysis.of(analysis, steps, step, ranks, diagnosis, recommendation))


def _critical_rank(analysis: Analysis, ranks: CrossRank | None) -> tuple[int | None, int | None]:
    """Where the job's headline comes from: the critical rank's device and process
    (:attr:`~launchprof.analysis.ranks.CrossRank.critical`: the others wait for it in
    their collectives) when it has its GPU to itself (one rank per GPU, as a multi-GPU
    job runs); else, as for one process, the busiest device (``(None, None)``)."""
    critical = ranks.critical if ranks is not None else None
    if critical is None or ranks is None:
        return None, None
    rank = ranks.ranks[critical]
    device = next((d for d in analysis.devices if d.device_id == rank.device_id), None)
    if device is None or len(device.processes) != 1:
        return None, None
    return rank.device_id, rank.pid


def _runs_of(
    baseline: BaselineRuns, step: str | None
) -> list[np.ndarray] | RegionRuns | ModuleRuns | Sequence[np.ndarray] | None:
    """``baseline`` as runs: a folder's (:func:`baseline_runs`), or as given.

    Raises:
        TraceError: a folder that does not exist or holds no ``baseline-*.steps`` file.
    """
    if not isinstance(baseline, (str, Path)):
        return baseline
    if not Path(baseline).is_dir():
        raise TraceError(f"baseline: no such folder: {baseline}")
    runs = baseline_runs(baseline, step)
    if runs is None:
        raise TraceError(f"baseline: {baseline} holds no runs without nsys (baseline-*.steps)")
    return runs


def sync_runs(folder: str | Path, step: str | None = None) -> SyncRuns | None:
    """The synchronizing calls the runs without nsys of a report folder wrote
    (``baseline-I.sources`` beside each ``baseline-I.steps``, in :func:`baseline_runs`'
    order; :func:`launchprof.trace.steptimes.read_sources`; with Inductor's reasons for
    skipping CUDA Graphs), None when the folder has
    no such file."""
    paths = _run_paths(folder)
    if not any(sources_file(p).is_file() for p in paths):
        return None
    read = [read_sources(sources_file(p)) for p in paths]
    unavailable = next((r.unavailable for r in read if r.unavailable), None)
    return SyncRuns([r.syncs for r in read], unavailable, [r.skips for r in read], allocation_run(folder, step))


def allocation_run(folder: str | Path, step: str | None = None) -> AllocRun | None:
    """The allocation run of a report folder (``allocations-1.steps`` and its ``.sources``,
    :func:`launchprof.commands.baseline.run_allocations`), None when there is none or its
    step times cannot be read."""
    path = Path(folder) / ALLOCATION_RUN
    if not path.is_file():
        return None
    try:
        runs = runs_of([read_step_times(path, step or STEP_NAME)], [region_step_times(path)], [module_step_times(path)])
    except StepTimesError:
        return None
    read = read_sources(sources_file(path))
    return AllocRun(runs, read.allocs, read.unavailable)


def with_baseline(result: AnalysisResult, baseline: BaselineRuns, sync: SyncRuns | None = None) -> TraceAnalysis:
    """``result`` diagnosed again with the runs without nsys ``baseline`` (as
    :func:`analyze`'s argument): the analysis made while nsys exported the trace, before
    those runs were made, completed by them (``launchprof profile``). The figures, steps
    and ranks are ``result``'s.

    Raises:
        StepTimesError: a step-times file of ``baseline`` is malformed.
    """
    runs = _runs_of(baseline, result.step_name)
    if sync is None and isinstance(baseline, (str, Path)):
        sync = sync_runs(baseline, result.step_name)
    calibration, source = user_calibration()
    diagnosis, recommendation = diagnose(
        result, result.found_steps, calibration=calibration, calibration_source=source, baseline=runs, sync=sync
    )
    redone = TraceAnalysis.of(result, result.found_steps, result.step_name, result.ranks, diagnosis, recommendation)
    return finish(redone, reuse=result.shown)


def _run_paths(folder: str | Path) -> list[Path]:
    """A report folder's ``baseline-I.steps`` files, in run order (``baseline-2`` before
    ``baseline-10``)."""
    return sorted(Path(folder).glob("baseline-*.steps"), key=lambda p: (len(p.name), p.name))


def baseline_runs(folder: str | Path, step: str | None = None) -> list[np.ndarray] | RegionRuns | ModuleRuns | None:
    """The runs without nsys a report folder of ``launchprof profile`` holds: the step
    times of each ``baseline-I.steps`` file (:func:`launchprof.trace.steptimes.read_step_times`,
    the steps named ``step``, default the marker's), or, when none holds a step but some
    hold profiler regions, those (:class:`~launchprof.analysis.baseline.RegionRuns`), else
    their top-level module calls (:class:`~launchprof.analysis.baseline.ModuleRuns`); None
    when the folder has no such file.

    Raises:
        StepTimesError: a file is malformed.
    """
    paths = _run_paths(folder)
    if not paths:
        return None
    got = [read_step_times(p, step or STEP_NAME) for p in paths]
    regions = [region_step_times(p) for p in paths]
    return runs_of(got, regions, [module_step_times(p) for p in paths])
