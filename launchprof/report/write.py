"""Write an analysis report folder: ``summary.json`` and ``report.html``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launchprof.analysis import Analysis
from launchprof.report import figures
from launchprof.report.diagnosis import render_diagnosis
from launchprof.report.html import (
    EmbeddedFigure,
    atomic_write_all,
    prepare_folder,
    render,
    write_plotlyjs,
)
from launchprof.report.schema import Summary
from launchprof.report.sides import write_step_files
from launchprof.report.summary import build_summary

REPORT_FILES = ("summary.json", "report.html")


def render_report(
    analysis: Analysis,
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


def write_report(
    analysis: Analysis,
    folder: Path,
    force: bool = False,
    trace_path: str | None = None,
    baseline: list[Any] | None = None,
    step_files: bool = True,
    device_figures: list[EmbeddedFigure] | None = None,
    workload: dict[str, Any] | None = None,
) -> Summary:
    """Write ``summary.json``, ``report.html`` and ``plotly.min.js`` into ``folder``, and
    the step files (``steps.csv`` ...) of :mod:`launchprof.report.sides` that ``compare``
    reads (unless ``step_files`` is False: the caller writes them). ``device_figures``:
    the page's device figures when already made (see :func:`render_report`).
    ``workload``: what ``profile`` knows of the run (``exit_code`` when it failed), or None.

    Raises:
        OutputError: the folder holds a report and ``force`` is False, or cannot be
            written.
    """
    summary, page = render_files(analysis, trace_path, baseline, device_figures, workload)
    write_rendered(folder, summary, page, force)
    if step_files:
        write_step_files(analysis, folder)
    return summary


def render_files(
    analysis: Analysis,
    trace_path: str | None = None,
    baseline: list[Any] | None = None,
    device_figures: list[EmbeddedFigure] | None = None,
    workload: dict[str, Any] | None = None,
) -> tuple[Summary, str]:
    """The summary and the report page of :func:`write_report`, not yet written."""
    summary = build_summary(analysis, trace_path)
    summary.workload = workload
    extra_html = ""
    if baseline is not None:
        from launchprof.baseline import baseline_section, nvtx_period_p50

        nvtx_period = nvtx_period_p50(analysis.trace.nvtx)
        summary.baseline = baseline_section(baseline, summary.steps, summary.recommendation, nvtx_period)
        extra_html = render("baseline.html.j2", b=summary.baseline)
    reasons = (summary.diagnosis or {}).get("reasons")
    page = render_report(
        analysis,
        summary,
        diagnosis_html=render_diagnosis(analysis, reasons, summary.headline) + extra_html,
        device_figures=device_figures,
    )
    return summary, page


def write_rendered(folder: Path, summary: Summary, page: str, force: bool = False) -> None:
    """Write ``summary.json``, ``report.html`` and ``plotly.min.js`` (from :func:`render_files`) into ``folder``.

    Raises:
        OutputError: as :func:`write_report`.
    """
    prepare_folder(folder, force, REPORT_FILES)
    write_plotlyjs(folder)
    # Both files or neither: a failed write never leaves a new summary beside an old page.
    atomic_write_all({folder / "summary.json": summary.to_json(), folder / "report.html": page})
