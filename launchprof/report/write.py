"""Write an analysis report folder: ``summary.json`` and ``report.html`` (and the step
files and ``plotly.min.js``), whole or not at all (:mod:`launchprof.report.folder`)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from launchprof.analysis import Analysis
from launchprof.analysis.result import AnalysisResult
from launchprof.report import figures
from launchprof.report.diagnosis import render_diagnosis
from launchprof.report.folder import FolderWriter, stage_plotlyjs
from launchprof.report.html import EmbeddedFigure, render
from launchprof.report.outputs import PAGE, REPORT_FILES, SUMMARY, analysis_files, output_names, render_outputs
from launchprof.report.same_input import report_of
from launchprof.report.schema import Summary, Workload
from launchprof.report.summary import build_summary

RUN_META = '<meta name="launchprof-run" content="{}">'
# the files a report moves in last, in this order: summary.json says what the folder holds
REPORT_ORDER = (PAGE, SUMMARY)


def render_report(
    analysis: AnalysisResult,
    summary: Summary,
    diagnosis_html: str = "",
    device_figures: list[EmbeddedFigure] | None = None,
) -> str:
    """The report page of ``analysis`` (its figures: ``device_figures`` when already made
    by :func:`~launchprof.report.figures.embedded_device_figures`) and ``summary`` (its
    numbers)."""
    embedded = device_figures if device_figures is not None else figures.embedded_device_figures(analysis)
    return render(
        "report.html.j2",
        title=Path(summary.trace.path).name,
        summary=summary,
        threshold=analysis.bubble_threshold_ns,
        figures=embedded,
        diagnosis_html=diagnosis_html,
        process_names=_process_names(analysis, summary.processes_without_gpu),
    )


def _process_names(analysis: Analysis, pids: list[int]) -> dict[int, str]:
    """Names (``PROCESSES`` table) of ``pids``, for the page; pids without a name are left out."""
    procs = analysis.trace.processes.dropna(subset=["pid", "name"])
    wanted = procs.loc[procs["pid"].astype("int64").isin(pids)]
    return {int(p): str(n) for p, n in zip(wanted["pid"], wanted["name"], strict=False)}


def open_report_folder(folder: Path, force: bool = False, trace: Path | None = None) -> FolderWriter:
    """A :class:`~launchprof.report.folder.FolderWriter` for a report folder; with ``trace``
    (the path analysed, as given), a report of that same trace is replaced without
    ``force`` (its summary.json's ``trace.path``: :func:`~launchprof.report.same_input.report_of`).

    Raises:
        OutputError: ``folder`` holds a report (of another trace, with ``trace``) and
            ``force`` is False, or cannot be written.
    """
    same = report_of(SUMMARY, {("trace", "path"): trace}) if trace is not None else None
    # every file a report run writes: one not written this time is removed on commit
    return FolderWriter(folder, force, REPORT_FILES, analysis_files(), same_input=same)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def commit_report(writer: FolderWriter, summary: Summary, page: str) -> None:
    """Stage ``summary.json``, ``report.html`` and ``plotly.min.js`` beside the outputs
    already staged in ``writer`` (:func:`stage_outputs`), then move them all into the
    folder (summary last).

    ``summary.files`` gets the SHA-256 of each staged output
    (:data:`launchprof.report.outputs.ANALYSIS_OUTPUTS`) and ``summary.run_id`` the
    first 16 hex digits of the SHA-256 of the summary's JSON without it; the page carries
    the run id in ``<meta name="launchprof-run">``. Both depend only on what is written,
    so the same trace still gives the same files byte for byte, and a folder whose files
    come from different runs is told apart (:func:`launchprof.api.report_folder.side_from_folder`).

    Raises:
        OutputError: a file cannot be written, or the folder is busy or holds a report
            (see :meth:`FolderWriter.commit`).
    """
    staged = set(writer.staged())
    summary.files = {name: _sha256(writer.staging / name) for name in output_names() if name in staged}
    summary.run_id = None
    summary.run_id = hashlib.sha256(summary.to_json().encode("utf-8")).hexdigest()[:16]
    head = '<meta charset="utf-8">'
    writer.stage(PAGE, page.replace(head, head + "\n" + RUN_META.format(summary.run_id), 1))
    writer.stage(SUMMARY, summary.to_json())
    stage_plotlyjs(writer)
    writer.commit(order=REPORT_ORDER)


def stage_outputs(writer: FolderWriter, texts: dict[str, str]) -> None:
    """Stage the outputs of a result (:func:`launchprof.report.outputs.render_outputs`:
    name -> text) in ``writer``, before :func:`commit_report`.

    Raises:
        OutputError: a file cannot be written.
    """
    for name, text in texts.items():
        writer.stage(name, text)


def write_report(analysis: AnalysisResult, folder: Path, force: bool = False, trace_path: str | None = None) -> Summary:
    """Write ``summary.json``, ``report.html`` and ``plotly.min.js`` into ``folder``, and
    the outputs of :data:`launchprof.report.outputs.ANALYSIS_OUTPUTS` (the step files that
    ``compare`` reads, ...), all at once (:func:`open_report_folder`, :func:`commit_report`).
    ``trace_path``: the trace as the summary names it (default the analysis'); a report
    of that same trace already in ``folder`` is replaced without ``force``, as
    ``launchprof analyze TRACE`` replaces its own (:func:`open_report_folder`). The runs
    without nsys (``profile --baseline-runs``) are the analysis' own
    (``analysis.diagnosis.baseline``: :func:`launchprof.api.traces.with_baseline`).
    ``analysis`` is finished (:func:`launchprof.analysis.finish.finish`): the page and
    the files show its :class:`~launchprof.analysis.result.Shown`.

    Raises:
        OutputError: the folder holds a report (of another trace, with ``trace_path``)
            and ``force`` is False, or cannot be written.
        ValueError: ``analysis`` is not finished (a bug, never a user error).
    """
    summary, page = render_files(analysis, trace_path)
    same = Path(trace_path) if trace_path is not None else None
    with open_report_folder(Path(folder), force, same) as writer:  # a str from the Python API too
        stage_outputs(writer, render_outputs(analysis))
        commit_report(writer, summary, page)
    return summary


def render_files(
    analysis: AnalysisResult,
    trace_path: str | None = None,
    device_figures: list[EmbeddedFigure] | None = None,
    workload: dict[str, Any] | None = None,
) -> tuple[Summary, str]:
    """The summary and the report page of :func:`write_report`, not yet written.

    Raises:
        ValueError: ``analysis`` is not finished (:func:`launchprof.analysis.finish.finish`).
    """
    summary = build_summary(analysis, trace_path)
    summary.workload = None if workload is None else Workload.model_validate(workload)
    extra_html = ""
    if summary.baseline is not None:
        extra_html = render("baseline.html.j2", b=summary.baseline)
    page = render_report(
        analysis,
        summary,
        diagnosis_html=render_diagnosis(analysis, summary.headline) + extra_html,
        device_figures=device_figures,
    )
    return summary, page
