"""``index.html`` of a reports folder: every report and comparison in it, linked, with
its verdict and key figures.

Rewritten after each ``analyze``, ``profile`` and ``compare`` in the parent folder of the
output folder when launchprof owns it (:func:`owns`: ``reports/`` of the current folder,
where the default output folders go, or a folder already holding its index); never in
another parent (``-o ~/x`` leaves the home folder alone). It lists the immediate
sub-folders (not hidden ones: staging folders) that hold a ``summary.json`` (a report), a
``compare.json`` (a comparison) or a ``combined.json`` (a multi-trace run, linked to its
``combined.html``), sorted by folder name.
An ``index.html`` that launchprof did not write is never overwritten.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launchprof.report.html import atomic_write, render
from launchprof.report.outputs import COMBINED_FILES, COMPARE_FILES, INDEX_FILE, PAGE, SUMMARY

INDEX_MARKER = '<meta name="generator" content="launchprof index">'


@dataclass(frozen=True)
class ReportRow:
    """One report folder. Numbers are None when the summary lacks them."""

    folder: str
    page: str | None
    trace: str
    kernels: int | None
    utilization: float | None
    cpu_bound_ratio: float | None
    step_source: str | None
    period_p50_ns: float | None
    kernels_per_step: float | None
    verdict: str | None
    predicted_speedup: float | None
    problem: str | None = None
    # The verdict's own figures, over the steady steps (launchprof.analysis.headline).
    steady_busy_ratio: float | None = None
    steady_host_wait_ratio: float | None = None
    action: str | None = None
    expected_speedup: float | None = None
    nvtx_steps: int | None = None


@dataclass(frozen=True)
class CompareRow:
    """One comparison folder."""

    folder: str
    page: str | None
    before: str
    after: str
    verdict: str | None
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    before_period_ns: float | None
    after_period_ns: float | None
    problem: str | None = None
    unprofiled: float | None = None  # the speedup without nsys (compare's headline)
    unprofiled_range: tuple[float, float] | None = None
    unprofiled_source: str | None = None  # measured, runs or estimate


@dataclass(frozen=True)
class MultiRow:
    """One multi-trace run (``analyze`` with several traces: ``combined.json``)."""

    folder: str
    page: str | None
    traces: int | None
    failed: int | None
    problem: str | None = None


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(d: Any, *keys: str) -> float | None:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def _report_row(folder: Path) -> ReportRow:
    page = PAGE if (folder / PAGE).exists() else None
    s = _load(folder / SUMMARY)
    if s is None:
        return ReportRow(
            folder.name, page, "", None, None, None, None, None, None, None, None, "unreadable summary.json"
        )
    listed = s.get("devices")
    devices = [d for d in listed if isinstance(d, dict)] if isinstance(listed, list) else []
    busiest = max(devices, key=lambda d: d.get("kernels") or 0) if devices else {}
    steps = _dict(s.get("steps"))
    diagnosis = _dict(s.get("diagnosis"))
    verdict = diagnosis.get("verdict") if isinstance(diagnosis.get("verdict"), str) else None
    kernels = _num(busiest, "kernels")
    head = _dict(s.get("headline"))  # a summary written before there was one: no steady figures
    nvtx = _num(head.get("nvtx_steps"), "count")
    return ReportRow(
        folder=folder.name,
        page=page,
        trace=str(_dict(s.get("trace")).get("path", "")),
        kernels=None if kernels is None else int(kernels),
        utilization=_num(busiest, "utilization"),
        cpu_bound_ratio=_num(busiest, "cpu_bound_ratio"),
        step_source=steps.get("source") if isinstance(steps.get("source"), str) else None,
        period_p50_ns=_num(steps, "period_p50_ns"),
        kernels_per_step=_num(steps, "kernels_per_step_p50"),
        verdict=verdict,
        predicted_speedup=_num(s, "recommendation", "predicted_speedup"),
        steady_busy_ratio=_num(head, "gpu_busy_ratio"),
        steady_host_wait_ratio=_num(head, "host_wait_ratio"),
        action=head.get("action") if isinstance(head.get("action"), str) else None,
        expected_speedup=_num(head, "expected_speedup"),
        nvtx_steps=None if nvtx is None else int(nvtx),
    )


def _compare_row(folder: Path) -> CompareRow:
    page = "compare.html" if (folder / "compare.html").exists() else None
    c = _load(folder / COMPARE_FILES[0])
    if c is None:
        return CompareRow(folder.name, page, "", "", None, None, None, None, None, "unreadable compare.json")
    source = c.get("speedup_unprofiled_source")
    return CompareRow(
        folder=folder.name,
        page=page,
        before=str(_dict(c.get("before")).get("path", "")),
        after=str(_dict(c.get("after")).get("path", "")),
        verdict=c.get("verdict") if isinstance(c.get("verdict"), str) else None,
        speedup=_num(c, "speedup"),
        speedup_ci=_pair(c.get("speedup_ci")),
        before_period_ns=_num(c, "before", "period_p50_ns"),
        after_period_ns=_num(c, "after", "period_p50_ns"),
        unprofiled=_num(c, "speedup_unprofiled"),
        unprofiled_range=_pair(c.get("speedup_unprofiled_ci")),
        unprofiled_source=source if isinstance(source, str) else None,
    )


def _pair(value: Any) -> tuple[float, float] | None:
    """A ``[low, high]`` of compare.json as floats, or None."""
    if not isinstance(value, list) or len(value) != 2:
        return None
    try:
        return float(value[0]), float(value[1])
    except (TypeError, ValueError):
        return None


def _multi_row(folder: Path) -> MultiRow:
    page = "combined.html" if (folder / "combined.html").exists() else None
    c = _load(folder / COMBINED_FILES[0])
    if c is None:
        return MultiRow(folder.name, page, None, None, "unreadable combined.json")
    reports = c.get("reports")
    failed = _num(c, "failed")
    return MultiRow(
        folder.name, page, len(reports) if isinstance(reports, list) else None, None if failed is None else int(failed)
    )


def collect(root: Path) -> tuple[list[ReportRow], list[CompareRow], list[MultiRow]]:
    """Reports, comparisons and multi-trace runs in the immediate sub-folders of ``root``,
    by folder name."""
    reports: list[ReportRow] = []
    comparisons: list[CompareRow] = []
    multi: list[MultiRow] = []
    try:
        # Hidden folders are left out: a run's staging folder (report.folder) holds a summary.json too.
        folders = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)
    except OSError:
        return reports, comparisons, multi
    for folder in folders:
        if (folder / SUMMARY).is_file():
            reports.append(_report_row(folder))
        if (folder / COMPARE_FILES[0]).is_file():
            comparisons.append(_compare_row(folder))
        if (folder / COMBINED_FILES[0]).is_file():
            multi.append(_multi_row(folder))
    return reports, comparisons, multi


DEFAULT_ROOT = "reports"  # the folder the commands' default output folders are made in


def owns(root: Path) -> bool:
    """Whether ``root`` is a reports folder launchprof keeps an index in: ``reports/`` of
    the current folder (where the default output folders go), or a folder whose
    ``index.html`` launchprof wrote."""
    try:
        if root.resolve() == (Path.cwd() / DEFAULT_ROOT).resolve():
            return True
        head = (root / INDEX_FILE).read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return False
    return INDEX_MARKER in head


def write_index(root: Path) -> Path | None:
    """Write ``root/index.html`` listing the reports and comparisons under ``root``.

    Returns the path written, or None when ``root/index.html`` exists and was not
    written by launchprof (it is left alone).

    Raises:
        OutputError: the file cannot be written.
    """
    target = root / INDEX_FILE
    if target.exists():
        try:
            head = target.read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            return None
        if INDEX_MARKER not in head:
            return None
    reports, comparisons, multi = collect(root)
    atomic_write(
        target,
        render("index.html.j2", marker=INDEX_MARKER, reports=reports, comparisons=comparisons, multi=multi),
    )
    return target
