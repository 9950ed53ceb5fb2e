"""``launchprof analyze TRACE``: analyse one trace and write its report folder.

The analysis is :func:`launchprof.api.analyze`; the report and its outputs
(:mod:`launchprof.report.outputs`) are written whole or not at all
(:mod:`launchprof.report.write`). The terminal lines are :mod:`launchprof.commands.text`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from launchprof.analysis import Analysis
from launchprof.api import analyze
from launchprof.api.traces import baseline_runs, sync_runs, with_baseline
from launchprof.commands.common import AnalysisOptions
from launchprof.commands.text import print_summary
from launchprof.errors import NoCudaActivityError, OutputError
from launchprof.report.index import write_index
from launchprof.report.outputs import render_outputs
from launchprof.report.write import commit_report, open_report_folder, render_files, stage_outputs
from launchprof.timings import mark


def update_index(output: Path) -> None:
    """``index.html`` beside the report folder (:func:`~launchprof.report.index.write_index`),
    only in a reports folder launchprof owns (:func:`~launchprof.report.index.owns`: the
    default ``reports/``, or a folder whose index launchprof wrote): never in an arbitrary
    parent such as a repository root. A parent folder that cannot take it (read-only,
    e.g. a writable folder under a shared read-only one) is said in one line on stderr,
    not an error: the report is written."""
    from launchprof.report.index import owns

    parent = output.resolve().parent
    if not owns(parent):
        return
    try:
        write_index(parent)
    except OutputError as exc:
        sys.stderr.write(f"launchprof: note: the index of reports was not updated: {exc}\n")
        sys.stderr.flush()


# params: five for analyze; the rest keyword-only, what profile hands over
def run_analyze(
    trace: Path,
    output: Path,
    force: bool,
    how: AnalysisOptions,
    console: Console,
    *,
    require_gpu: bool = False,
    baseline: list[Any] | None = None,
    early: Any = None,
    workload: dict[str, Any] | None = None,
    document: Callable[[str], None] | None = None,
) -> Any:
    """Analyse ``trace`` as ``how`` says and write its report into ``output``; print where
    it went; return the summary (:class:`~launchprof.report.schema.Summary`).
    ``baseline``: step times of unprofiled runs (:mod:`launchprof.analysis.baseline`), or None.
    ``workload``: the summary's ``workload`` section (``profile``: the failed run's
    ``exit_code``), or None.
    ``document``: called with summary.json's text once written (``--json``), or None.
    ``early``: the analysis already made while nsys exported ``trace``
    (:class:`launchprof.commands.early.EarlyResult`): only the files are written.
    (Ten parameters: the five keyword-only ones are what ``profile`` adds to ``analyze``.)

    Raises:
        NoCudaActivityError: ``require_gpu`` and the trace has no GPU activity (raised
            after the report, which holds what can be said, was written).
    """
    if baseline is None and early is None:
        baseline = _folder_runs(trace, how.step, console)
    if early is not None:
        analysis, summary = _write_early(early, trace, output, force, baseline, workload)
    else:
        analysis, summary = _analyse_and_write(trace, output, force, how, console, baseline, workload)
    print_summary(summary, output, console)
    if document is not None:
        document(summary.to_json())
    if require_gpu and not summary.devices:
        raise _no_gpu_error(analysis, output, how)
    return summary


def _folder_runs(trace: Path, step: str | None, console: Console) -> Any:
    """The runs without nsys that ``launchprof profile`` left beside ``trace`` (its report
    folder's ``baseline-*.steps``, :func:`launchprof.api.traces.baseline_runs`), said in one
    line, so that ``analyze`` of that trace gives the summary ``profile`` wrote; None when
    there are none or they cannot be read (said too)."""
    from launchprof.trace.steptimes import StepTimesError

    try:
        runs = baseline_runs(trace.parent, step)
    except (StepTimesError, OSError) as exc:
        console.print(f"launchprof: note: the runs without nsys beside the trace are left out: {exc}", markup=False)
        return None
    if runs is not None:
        console.print(
            f"launchprof: with the runs without nsys beside the trace ({trace.parent}/baseline-*.steps)",
            markup=False,
            soft_wrap=True,
        )
    return runs


def _write_early(
    early: Any, trace: Path, output: Path, force: bool, baseline: list[Any] | None, workload: dict[str, Any] | None
) -> tuple[Analysis, Any]:
    """Write the report and step files of an early analysis (run_analyze), completed by
    the runs without nsys when there are some; the analysis and summary."""
    rendered, analysis, outputs = early.rendered, early.analysis, early.outputs
    if baseline is not None:  # diagnosed again: its outputs are made again from the new result
        analysis, rendered = with_baseline(analysis, baseline, sync_runs(trace.parent, analysis.step_name)), None
        outputs = render_outputs(analysis)
    with open_report_folder(output, force, trace) as writer:
        if rendered is None or workload is not None:
            rendered = render_files(analysis, str(trace), early.figures, workload)
        summary, page = rendered
        stage_outputs(writer, outputs)
        commit_report(writer, summary, page)
    mark("report_done")
    mark("step_files_done")
    update_index(output)
    mark("index_done")
    return analysis, summary


# params: run_analyze's path without the early result: its own parameters
def _analyse_and_write(
    trace: Path,
    output: Path,
    force: bool,
    how: AnalysisOptions,
    console: Console,
    baseline: list[Any] | None,
    workload: dict[str, Any] | None = None,
) -> tuple[Analysis, Any]:
    """Analyse ``trace`` and write its report (run_analyze); the analysis and summary."""
    with console.status("loading trace") as status:
        analysis = analyze(
            trace,
            how.bubble_threshold_ns,
            nsys=how.nsys,
            progress=lambda msg: status.update(f"{msg}..."),
            step=how.step,
            memory=how.memory,
            baseline=baseline,
            time_range=how.time_range,
            memory_check=how.memory_check,
        )
        sync = sync_runs(trace.parent, how.step) if baseline is not None else None
        if sync is not None:  # the runs' synchronizing calls: the sync-in-step finding's source lines
            analysis = with_baseline(analysis, baseline, sync)
        mark("analysis_done")
        status.update("writing report")
        with open_report_folder(output, force, trace) as writer:  # the staging folder goes, whatever happens
            summary, page = render_files(analysis, trace_path=str(trace), workload=workload)
            stage_outputs(writer, render_outputs(analysis))
            mark("step_files_done")
            commit_report(writer, summary, page)
        mark("report_done")
        update_index(output)
        mark("index_done")
    return analysis, summary


def _no_gpu_error(analysis: Analysis, output: Path, how: AnalysisOptions) -> NoCudaActivityError:
    # Bad input for `analyze` (exit status 2, docs/reference.md): the report holds what can be said.
    why = "no CUDA tables" if not analysis.trace.has_cuda else f"no kernel, memcpy or memset rows{how.within()}"
    return NoCudaActivityError(f"no CUDA activity in this trace ({why}); wrote what it holds to {output}")


def gate(summary: Any, failing: frozenset[str], min_speedup: float | None, err: Console) -> int:
    """``analyze``'s exit status for CI: 1 when the verdict is in ``failing`` or a CUDA
    Graph is expected to bring a gain (summary ``headline``'s ``expected_speedup`` above
    1) of at least ``min_speedup``; else 0. The reason goes to ``err`` in one line."""
    head = summary.headline
    verdict = None if head is None else head.verdict
    if verdict in failing:
        err.print(f"launchprof: verdict {verdict} is one of --fail-on", markup=False, soft_wrap=True)
        return 1
    expected = None if head is None else head.expected_speedup
    if min_speedup is not None and expected is not None and expected > 1 and expected >= min_speedup:
        err.print(
            f"launchprof: a CUDA Graph is expected to make a step {expected:.2f}x faster, at least --min-gain "
            f"{(min_speedup - 1) * 100:g} % ({min_speedup:.2f}x)",
            markup=False,
            soft_wrap=True,
        )
        return 1
    return 0
