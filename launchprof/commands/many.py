"""Many reports, one per rank: analyse them in parallel on Dask and compare the ranks.

``launchprof analyze 'traces/*.sqlite'`` (several traces, or a glob) runs
:func:`analyze_one` for every trace as a task of a ``dask.distributed`` cluster - a
``LocalCluster`` of worker processes on this machine by default, or the scheduler at
``--scheduler ADDRESS`` - the way Nsight Systems' own multi-report recipes spread their
per-report work. Each task analyses its trace exactly as ``launchprof analyze TRACE``
does (same function, same options) and writes the rank's report folder with the same
writer, so each per-rank ``summary.json`` is byte for byte the one the single-trace
command writes, into the run's staging folder: the rank folders move in with
``combined.json`` (:func:`~launchprof.report.combined.write_combined`). The task returns
only the small per-rank records (:class:`~launchprof.analysis.ranks.RankRecord`); the
client aligns them by step index into the cross-rank view
(:func:`~launchprof.analysis.ranks.cross_rank`) and writes ``combined.json`` and
``combined.html``.

Layout of the output folder::

    OUTPUT/combined.json, combined.html, plotly.min.js
    OUTPUT/<trace stem>/summary.json, report.html, plotly.min.js (a hard link when possible)

With an existing scheduler the workers open the traces and write the rank folders by
absolute path (staged beside OUTPUT): they must see the client's file system and have
launchprof installed.
"""

from __future__ import annotations

import glob
import logging
import os
import signal
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from launchprof.analysis.ranks import cross_rank, find_ranks, not_one_job, program_signature
from launchprof.commands.analyze import update_index
from launchprof.commands.common import AnalysisOptions
from launchprof.commands.folders import trace_stem
from launchprof.errors import LaunchprofError, OptionError, TraceError
from launchprof.report.combined import Combined, ReportResult
from launchprof.report.html import check_folder, prepare_folder
from launchprof.report.outputs import COMBINED_FILES, REPORT_FILES, analysis_files
from launchprof.text import scope_text


def is_glob(text: str) -> bool:
    """Whether ``text`` holds glob characters (``*``, ``?``, ``[``)."""
    return glob.has_magic(text)


def expand_traces(args: Sequence[str]) -> list[str] | None:
    """The traces named by the ``analyze`` arguments, or None for the single-trace case.

    One argument that is not a glob (or names an existing file) is a single trace: None.
    Otherwise each glob is expanded (sorted) and the paths are de-duplicated in order.

    Raises:
        TraceError: a glob matches no file.
    """
    if len(args) == 1 and (not is_glob(args[0]) or Path(args[0]).exists()):
        return None
    out: list[str] = []
    for arg in args:
        if is_glob(arg) and not Path(arg).exists():
            found = sorted(glob.glob(arg))
            if not found:
                raise TraceError(f"no trace matches {arg!r}")
            out.extend(found)
        else:
            out.append(arg)
    return list(dict.fromkeys(str(Path(p)) for p in out))


def folder_names(paths: Sequence[str]) -> list[str]:
    """One report folder name per trace, all different: its stem
    (:func:`launchprof.commands.folders.trace_stem`); a stem used twice gets
    ``-<position>`` appended, and more dashes while that is another trace's name too
    (``x/a.sqlite y/a.sqlite a-1.sqlite`` gave two ``a-1``: one report was lost)."""
    stems = [trace_stem(Path(p).name) for p in paths]
    taken = {s for s in stems if stems.count(s) == 1}
    names = []
    for i, s in enumerate(stems):
        name = s
        if stems.count(s) > 1:
            name = f"{s}-{i}"
            while name in taken:
                name += f"-{i}"
        taken.add(name)
        names.append(name)
    return names


@dataclass(frozen=True)
class Task:
    """One report of a multi-report run: the trace as given (``path``, what its summary
    names), its folder's name, and for ``--per-process`` the process analysed (``pid``)
    and the SQLite file read (``read``, default ``path``)."""

    path: str
    folder: str
    pid: int | None = None
    read: str | None = None


def analyze_one(task: Task, output: str, force: bool, how: AnalysisOptions) -> ReportResult:
    """Analyse one trace (or one process of it) and write its report into
    ``output/task.folder`` (one Dask task; ``output``: :func:`~launchprof.report.combined.rank_reports`).

    The same calls as ``launchprof analyze TRACE --output output/folder``; ``task.path`` is
    recorded in ``summary.json`` as given. Returns the rank records, labelled with the
    folder's name; a user error (bad trace, unknown ``--step``) becomes ``error``.
    """
    from launchprof.api import analyze
    from launchprof.report.write import write_report

    path, folder = task.path, task.folder
    try:
        analysis = analyze(
            Path(task.read or path),
            how.bubble_threshold_ns,
            nsys=how.nsys,
            step=how.step,
            memory=how.memory,
            pid=task.pid,
            time_range=how.time_range,
            memory_check=how.memory_check,
        )
        if not Path(output).is_dir():  # the run was stopped and removed its staging folder: write nothing
            return ReportResult(path, folder, [], "the run was stopped before this report was written")
        write_report(analysis, Path(output) / folder, force=force, trace_path=path)
        if not analysis.devices:
            # as `launchprof analyze TRACE`: the report is written, the trace counts as failed
            why = f"no kernel, memcpy or memset rows{how.within()}"
            return ReportResult(path, folder, [], f"no CUDA activity in this trace ({why})")
        ranks = analysis.ranks.ranks if analysis.ranks is not None else find_ranks(analysis, how.step)
    except LaunchprofError as exc:
        return ReportResult(path, folder, [], str(exc))
    single = len(ranks) == 1
    labelled = [replace(r, path=path, label=folder if single else f"{folder} {r.label}") for r in ranks]
    return ReportResult(path, folder, labelled, signature=program_signature(analysis))


@contextmanager
def dask_client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    """A ``dask.distributed`` Client: of the scheduler at ``scheduler``, else of a
    ``LocalCluster`` of ``workers`` processes (one thread each; default the CPU count)
    listening on 127.0.0.1 only, without a dashboard.

    Raises:
        LaunchprofError: the scheduler cannot be reached.
    """
    from dask.distributed import Client, LocalCluster

    if scheduler:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address ('garbage')
            raise SchedulerError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or os.cpu_count() or 1
    # Dask's own warnings ("Port 8787 is already in use" ...) are not the user's business:
    # kept off the terminal. Its HTTP server (started even without a dashboard) takes any
    # free port on 127.0.0.1 instead of 8787.
    with _workers_ignore_ctrl_c(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            silence_logs=logging.ERROR,
        )
    with cluster, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Client(cluster) as client:
            yield client


@contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Start processes with SIGINT ignored (the disposition is inherited): a Ctrl-C at the
    terminal reaches the whole process group, and only this process should handle it
    (closing the cluster stops the workers) - not every worker printing its traceback."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class SchedulerError(LaunchprofError):
    """The Dask scheduler given with ``--scheduler`` cannot be reached, or Dask is not installed."""


# When a local Dask cluster pays (docs/reference.md, "Multi-rank analysis"): the cluster's
# start-up and the cost of one MB of SQLite, as measured (benchmarks/README.md,
# "Measurements behind constants in the code").
DASK_MIN_CPUS = 4
DASK_STARTUP_S = 4.2
SECONDS_PER_MB = 0.1
SIZE_FACTORS = {".xz": 8.0, ".nsys-rep": 3.0}  # SQLite size / file size, roughly (xz: 0.08-0.17)


def estimated_seconds(paths: Sequence[str]) -> float:
    """What analysing ``paths`` one after another would take, from their sizes on disk."""
    total_mb = 0.0
    for p in paths:
        try:
            size = os.stat(p).st_size
        except OSError:
            continue
        factor = next((f for suffix, f in SIZE_FACTORS.items() if p.endswith(suffix)), 1.0)
        total_mb += size * factor / 1e6
    return total_mb * SECONDS_PER_MB


def dask_installed() -> bool:
    """Whether Dask's distributed scheduler can be imported (``pip install 'launchprof[dask]'``)."""
    import importlib.util

    try:
        return importlib.util.find_spec("distributed") is not None and importlib.util.find_spec("dask") is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules: not importable
        return False


def use_dask(paths: Sequence[str], workers: int | None, cpus: int | None = None) -> bool:
    """Whether ``analyze_many`` starts a local Dask cluster: ``workers`` >= 1 given says
    yes, 0 says no; by default only when it pays and Dask is installed (an extra,
    :func:`dask_installed`): at least :data:`DASK_MIN_CPUS` CPUs and traces large or many
    enough that the time saved by running them on ``n`` workers (``estimated * (1 - 1/n)``)
    exceeds twice the cluster's start-up."""
    if workers is not None:
        return workers > 0
    if not dask_installed():
        return False
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    n = min(cpus, len(paths))
    if cpus < DASK_MIN_CPUS or n < 2:
        return False
    return estimated_seconds(paths) * (1 - 1 / n) > 2 * DASK_STARTUP_S


# params: the Dask cluster's scheduler and workers, a progress callback: keyword options
def analyze_many(
    paths: Sequence[str],
    output: Path,
    force: bool = False,
    how: AnalysisOptions = AnalysisOptions(),
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Combined:
    """Analyse ``paths`` (one trace per rank) and write one report folder per trace and
    the combined report into ``output``.

    Args:
        paths: traces as given (each as for ``launchprof analyze TRACE``).
        output: the folder for ``combined.json``, ``combined.html`` and the rank folders.
        force: overwrite existing reports.
        how: the bubble threshold, step, nsys and malloc settings of each trace's
            analysis (:class:`~launchprof.commands.common.AnalysisOptions`; the malloc
            settings apply in the process that analyses the trace).
        scheduler: address of a running Dask scheduler (default: a local cluster).
        workers: worker processes of the local cluster (default: the CPU count, at most
            one per trace, and only when a cluster pays: :func:`use_dask`); 0 analyses
            the traces one after another in this process, without Dask.
        progress: called with (done, total) after each trace.

    Returns:
        :class:`Combined`.

    Raises:
        OutputError: a folder holds a report and ``force`` is False, or is not writable.
        SchedulerError: ``scheduler`` cannot be reached.
    """
    if not paths:
        raise TraceError("no trace given")
    _need_dask(scheduler, workers)
    tasks = [Task(p, n) for p, n in zip(paths, folder_names(paths), strict=True)]
    return _analyze_tasks(tasks, output, force, how, (scheduler, workers), progress)


# params: analyze_many's options: the Dask cluster's scheduler and workers, a progress callback
def analyze_processes(
    path: str,
    output: Path,
    force: bool = False,
    how: AnalysisOptions = AnalysisOptions(),
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Combined:
    """Analyse each process with GPU work of the trace ``path`` on its own, as if it were
    a trace of its own (:func:`launchprof.trace.loader.gpu_processes`; each load reads that
    process's rows only, :func:`launchprof.trace.load_trace`), and write one report folder
    per process (``pid<PID>``) and the combined report into ``output``, as
    :func:`analyze_many` does for one trace per rank: ``launchprof analyze TRACE
    --per-process``. Peak memory is that of the largest process's share of the trace, not
    the whole trace's: one process at a time in this process, unless ``workers`` >= 1 or
    ``scheduler`` asks for Dask (then one per worker; never chosen by itself, as
    :func:`use_dask` would for many traces). A process is named ``pid<PID>`` as its
    reports show it (:func:`launchprof.trace.pids.shown_pids`).

    A process's figures are its own rows': a GPU two processes share shows each one's
    kernels alone in its report.

    Raises:
        TraceError: the trace cannot be read, or has no process with GPU work.
        OptionError: ``scheduler`` with a ``.xz`` trace (its workers could not read the
            copy decompressed here).
        OutputError, SchedulerError: as :func:`analyze_many`.
    """
    from launchprof.api.traces import sqlite_export
    from launchprof.trace.loader import gpu_processes, gpu_work_outside
    from launchprof.trace.pids import shown_pids

    _need_dask(scheduler, workers)
    if scheduler and path.endswith(".xz"):
        raise OptionError(
            "--per-process with --scheduler reads the trace on the workers: decompress it first (xz -dk) "
            "to a folder they see"
        )
    with sqlite_export(path, how.nsys) as sqlite:
        processes = gpu_processes(sqlite, how.window())
        if not processes:
            where = f"; {gpu_work_outside(sqlite, how.window())}" if how.time_range is not None else ""
            raise TraceError(
                f"{path}: no process with GPU work (no kernel, memcpy or memset rows{how.within()}){where}"
            )
        read = str(sqlite.resolve())
        tasks = [Task(path, f"pid{shown}", p, read) for p, shown in zip(processes, shown_pids(processes), strict=True)]
        cluster = (scheduler, 0 if scheduler is None and workers is None else workers)
        return _analyze_tasks(tasks, output, force, how, cluster, progress)


def _need_dask(scheduler: str | None, workers: int | None) -> None:
    """Refuse ``--scheduler`` or ``--workers N`` (N >= 1) when Dask is not installed,
    before any folder is made.

    Raises:
        SchedulerError: they need Dask and it is not installed.
    """
    if (scheduler or (workers or 0) > 0) and not dask_installed():
        raise SchedulerError(
            f"{'--scheduler' if scheduler else '--workers'} needs Dask, which is not installed: install "
            "launchprof with its dask extra (pip install '.[dask]' in its checkout), or "
            + ("drop --scheduler" if scheduler else "use --workers 0")
            + " to analyse one trace after another"
        )


def _analyze_tasks(
    tasks: list[Task],
    output: Path,
    force: bool,
    how: AnalysisOptions,
    cluster: tuple[str | None, int | None],
    progress: Callable[[int, int], None] | None,
) -> Combined:
    """Run :func:`analyze_one` for each task (on Dask when ``cluster`` asks for it or it
    pays: :func:`use_dask`), then write the combined report into ``output``."""
    from launchprof.report.combined import (
        check_removable,
        open_combined_folder,
        rank_reports,
        same_reports,
        unlisted_reports,
        write_combined,
    )

    scheduler, workers = cluster
    same = same_reports([(task.path, task.folder) for task in tasks])
    # the same command again replaces its reports (each rank's writer still refuses another trace's)
    again = (output / COMBINED_FILES[0]).is_file() and same(output) is None
    prepare_folder(output, force or again, COMBINED_FILES)
    for task in tasks:
        check_folder(output / task.folder, force or again, REPORT_FILES, analysis_files())
    # the earlier reports this run will remove (those of its traces that fail are known later)
    check_removable(unlisted_reports(output, [ReportResult(t.path, t.folder, []) for t in tasks]))
    with open_combined_folder(output, force, same) as writer:
        staged = str(rank_reports(writer).resolve())
        args = [(task, staged, force, how) for task in tasks]
        results: dict[int, ReportResult] = {}
        if not scheduler and not use_dask([t.read or t.path for t in tasks], workers):
            for i, a in enumerate(args):
                results[i] = analyze_one(*a)
                if progress:
                    progress(len(results), len(args))
        else:
            results = _run_on_dask(args, scheduler, workers, progress)
        reports = [results[i] for i in range(len(args))]
        ranks = [r for rep in reports for r in rep.ranks]
        view = cross_rank(ranks) if ranks else None
        notes = not_one_job([(rep.folder, rep.signature) for rep in reports if rep.signature is not None])
        combined = Combined(reports, view, notes)
        write_combined(combined, writer, force)
    return combined


def _run_on_dask(
    args: list[tuple[Any, ...]],
    scheduler: str | None,
    workers: int | None,
    progress: Callable[[int, int], None] | None,
) -> dict[int, ReportResult]:
    from dask.distributed import as_completed

    n = min(workers or os.cpu_count() or 1, len(args))
    results: dict[int, ReportResult] = {}
    with dask_client(scheduler, n) as client:
        futures = [
            client.submit(analyze_one, *a, pure=False, key=f"launchprof-{i}-{a[0].folder}") for i, a in enumerate(args)
        ]
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures):
            results[index[fut.key]] = fut.result()
            if progress:
                progress(len(results), len(args))
            fut.release()
    return results


MAX_RANK_LINES = 32


# params: analyze_many's options, the console, and whether to analyse one trace's processes
def run_analyze_many(
    traces: list[str],
    output: Path,
    force: bool,
    how: AnalysisOptions,
    console: Console,
    cluster: tuple[str | None, int | None] = (None, None),
    per_process: bool = False,
) -> None:
    """Analyse many per-rank traces (:func:`analyze_many`), or with ``per_process`` each process of
    the one trace (:func:`analyze_processes`), on Dask when ``cluster`` (scheduler, workers)
    asks for it or it pays; print one line per rank and where the combined report went.

    Raises:
        TraceError: some traces (processes) could not be analysed (after writing the others).
    """
    scheduler, workers = cluster
    if per_process and scheduler is None and workers is None:
        workers = 0  # one process at a time unless asked (analyze_processes)
    where = f"the Dask scheduler at {scheduler}" if scheduler else ("local Dask" if use_dask(traces, workers) else "")
    where = where or "this process"
    what = f"the processes of {traces[0]}" if per_process else f"{len(traces)} traces"
    with console.status(f"analysing {what} on {where}") as status:

        def done(n: int, total: int) -> None:
            status.update(f"analysed {n} of {total} {'processes' if per_process else 'traces'}")

        if per_process:
            combined = analyze_processes(traces[0], output, force, how, scheduler, workers, progress=done)
        else:
            combined = analyze_many(traces, output, force, how, scheduler, workers, progress=done)
    ranks = combined.view.to_dict()["ranks"] if combined.view is not None else []
    for r in ranks[:MAX_RANK_LINES]:
        # Steady steps first (how long the GPU waits for the CPU), then the whole trace (window).
        # Not "launch-bound": that word says a graph is expected to pay, which each rank's own
        # report judges (its verdict weighs the step without the profiler).
        steady = r.get("steady_host_wait_ratio")
        head = "no steady steps" if steady is None else f"GPU waiting for the CPU {steady:.1%} of each steady step"
        console.print(
            f"rank {r['rank']} ({r['label']}): {head}; {r['steps']} steps, {r['straggler_steps']} straggler steps; "
            f"{scope_text(how.window().window)}: {r['kernels']} kernels, CPU-bound ratio {r['cpu_bound_ratio']:.1%}",
            markup=False,
            soft_wrap=True,
        )
    if len(ranks) > MAX_RANK_LINES:
        console.print(f"... and {len(ranks) - MAX_RANK_LINES} more ranks in combined.json", markup=False)
    for note in combined.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    console.print(f"combined report: {output / 'combined.html'}", markup=False)
    update_index(output)
    failed = [r for r in combined.reports if r.error is not None]
    if failed:
        first = failed[0].folder if per_process else failed[0].path
        raise TraceError(
            f"{len(failed)} of {len(combined.reports)} {'processes' if per_process else 'traces'} could not be "
            f"analysed; first: {first}: {failed[0].error}"
        )
