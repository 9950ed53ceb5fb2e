"""Reading a report folder back as one side of a comparison (``launchprof compare`` of
report folders): ``summary.json``, the step files (:mod:`launchprof.report.stepfiles`)
and the step times of the runs without nsys (:mod:`launchprof.trace.steptimes`). No page
renderer (jinja2, plotly) is imported: ``launchprof.compare`` reads folders without it.

A folder without step files (written by an older launchprof) still compares, from the step
statistics in ``summary.json``, and the comparison says so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.comparison.side import (
    KERNEL_KEY,
    OPTIONAL_STEP_COLUMNS,
    SAMPLE_COLUMNS,
    STEP_COLUMNS,
    SideData,
    representative_step,
    steady_rows,
)
from launchprof.defaults import DEFAULT_BUBBLE_THRESHOLD_NS
from launchprof.errors import LaunchprofError
from launchprof.report.outputs import PAGE, SUMMARY
from launchprof.report.stepfiles import STEP_FILES


class ReportFolderError(LaunchprofError):
    """A report folder given to ``compare`` cannot be read."""


def _read_csv(
    path: Path, columns: tuple[str, ...], notes: list[str], optional: tuple[str, ...] = (), nan: tuple[str, ...] = ()
) -> pd.DataFrame | None:
    """The ``columns`` of a step file (None: absent or unreadable, said in ``notes``);
    columns of ``optional`` missing from the file read as 0, those of ``nan`` as NaN
    (files written before the column existed)."""
    if not path.exists():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        notes.append(f"{path} could not be read ({exc}); ignored")
        return None
    frame = frame.assign(**{c: 0 for c in optional if c not in frame.columns})
    frame = frame.assign(**{c: np.nan for c in nan if c not in frame.columns})
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        notes.append(f"{path} lacks columns {', '.join(missing)}; ignored")
        return None
    return frame.loc[:, list(columns)]


def _opt(d: dict[str, Any] | None, key: str) -> float | None:
    if not d:
        return None
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and np.isfinite(v) else None


def side_from_folder(folder: Path) -> SideData:
    """Read a report folder (``summary.json`` and, when present, the step files).

    Raises:
        ReportFolderError: no ``summary.json``, it is not a launchprof summary, or its
            figures or step files are damaged (wrong types, unreadable numbers); the
            message leaves out the folder: the caller names it.
    """
    try:
        return _side_from_folder(folder)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise ReportFolderError(f"its summary.json or step files are damaged ({type(exc).__name__}: {exc})") from None


def _check_one_run(folder: Path, summary: dict[str, Any]) -> None:
    """Refuse a folder whose files are not all of one run: ``summary.json`` lists the
    SHA-256 of the step files written with it (``files``) and ``report.html`` carries its
    ``run_id`` (:func:`launchprof.report.write.commit_report`). A summary without them
    (an older launchprof) is not checked.

    A step file that is missing is not an error (the comparison then uses the summary's
    step statistics, as for an older report).

    Raises:
        ReportFolderError: a step file is not the one written with the summary, or the
            page is another run's.
    """
    import hashlib
    import re

    files, run_id = summary.get("files"), summary.get("run_id")
    if not isinstance(files, dict) or not isinstance(run_id, str):
        return
    for name in STEP_FILES:
        path = folder / name
        if not path.exists():  # copied without it: compared from summary.json, as an older report
            continue
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ReportFolderError(f"its {name} cannot be read: {exc.strerror or exc}") from None
        if digest != files.get(name):
            raise ReportFolderError(
                f"its {name} is not of the run that wrote summary.json (run {run_id}): the folder mixes two runs' "
                "files; write the report again"
            )
    try:
        with (folder / PAGE).open("rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return
    found = re.search(r'<meta name="launchprof-run" content="([0-9a-f]+)">', head)
    if found is not None and found.group(1) != run_id:
        raise ReportFolderError(
            f"its report.html is of run {found.group(1)}, its summary.json of run {run_id}: the folder mixes two runs' "
            "files; write the report again"
        )


def _baseline_periods(
    folder: Path, section: Any, table: pd.DataFrame | None, step_name: str | None, notes: list[str]
) -> np.ndarray | None:
    """The pooled step periods of the folder's runs without nsys (``baseline-*.steps``,
    every file of a run that wrote one, the steps named ``step_name``, or for source
    ``module-calls`` the calls of the section's ``module``), pooled as the summary took
    them (:func:`~launchprof.analysis.baseline.pooled_periods`: each run's first period
    left out, or a module's later half of calls); None when the summary has no baseline,
    or fewer than two periods are left.

    Runs slower than the trace (``slower_than_traced``) give None, with a note. A host
    that ran ahead of the GPU in those runs (``host_ahead_of_gpu``: its steps took
    less host time than the GPU's work, as a graph replay or GPU-bound work does) does not
    show the step's pace; the step is then GPU-bound, nsys does not slow the GPU's work,
    and the steady periods under nsys (``table``) stand for the unprofiled ones (said in
    ``notes``)."""
    from launchprof.analysis.baseline import pooled_periods
    from launchprof.trace.steptimes import StepTimesError, read_step_times

    if not isinstance(section, dict) or not section.get("runs"):
        return None
    if section.get("slower_than_traced"):
        notes.append(
            f"{folder}: its runs without nsys were slower than its trace (different paces): not used as the step "
            "without nsys"
        )
        return None
    if section.get("host_ahead_of_gpu"):
        if table is None:
            return None
        steady = steady_rows(table)["period_ns"].to_numpy(dtype=float)
        notes.append(
            f"{folder}: the host ran ahead of the GPU in the runs without nsys (GPU-bound steps): the step periods "
            "under nsys stand for the ones without it (nsys does not slow the GPU's work)"
        )
        return steady if steady.size >= 2 else None
    if section.get("source") == "profiler-region":
        return _region_periods(folder, section, notes)
    source = "module-calls" if section.get("source") == "module-calls" else "step-markers"
    if source == "module-calls":  # the outermost calls of the module that matched the steps
        step_name = section.get("module")
        if not isinstance(step_name, str):
            return None
    runs = []
    for path in sorted(folder.glob("baseline-*.steps")):
        try:
            runs.append(read_step_times(path, step_name))
        except (StepTimesError, OSError) as exc:
            notes.append(f"{path}: not read ({exc}); left out")
    pooled = pooled_periods(runs, source)
    return pooled.astype(float) if pooled.size >= 2 else None


def _region_periods(folder: Path, section: dict[str, Any], notes: list[str]) -> np.ndarray | None:
    """One step time per run without nsys of a workload without step markers: the run's
    profiler regions (:mod:`launchprof.profiler_region`) divided by the steps found inside the
    trace's regions (``region_steps``); None with fewer than two runs."""
    from launchprof.trace.steptimes import StepTimesError, region_step_times

    steps = section.get("region_steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 0 < steps < 2**31:
        notes.append(
            f"{folder}: its baseline section has no usable region_steps ({steps!r}); no step time without nsys"
        )
        return None
    values = []
    for path in sorted(folder.glob("baseline-*.steps")):
        try:
            regions = region_step_times(path)
        except (StepTimesError, OSError) as exc:
            notes.append(f"{path}: not read ({exc}); left out")
            continue
        total = int((regions[:, 1] - regions[:, 0]).sum())
        if total > 0:
            values.append(total / steps)
    notes.append(
        f"{folder}: no step markers: the step time without nsys is the workload's profiler region "
        f"(torch.cuda.profiler.start() to stop(), GPU drained at both ends) divided by the {steps} steps found "
        "inside that region of the trace, one figure per run"
    )
    return np.array(values, dtype=float) if len(values) >= 2 else None


def _read_summary(folder: Path) -> dict[str, Any]:
    """The folder's ``summary.json``, checked to be a launchprof summary of the same run
    as its step files (:func:`_check_one_run`).

    Raises:
        ReportFolderError: no summary.json, not JSON, not a launchprof summary, or files of two runs.
    """
    summary_path = folder / SUMMARY
    if not summary_path.is_file():
        raise ReportFolderError("a folder without summary.json; give a trace or a launchprof report folder")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportFolderError(f"its summary.json is not readable JSON ({exc})") from None
    if not isinstance(summary, dict) or not str(summary.get("schema", "")).startswith("launchprof.summary/"):
        raise ReportFolderError("its summary.json is not a launchprof summary (no 'schema': 'launchprof.summary/...')")
    _check_one_run(folder, summary)
    return summary


def _read_step_files(
    folder: Path, notes: list[str]
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """``steps.csv``, ``step_kernels.csv`` and ``step_timeline.csv`` of ``folder`` (each
    None when absent or unreadable, said in ``notes``)."""
    table = _read_csv(folder / "steps.csv", STEP_COLUMNS, notes, OPTIONAL_STEP_COLUMNS)
    if table is not None:
        table = table.assign(warmup=table["warmup"].astype(str).str.lower().eq("true"))
    else:
        notes.append(
            f"{folder}: no steps.csv (report written by an older launchprof): per-step distributions unavailable, "
            "the step statistics of summary.json are used"
        )
    kernels = _read_csv(
        folder / "step_kernels.csv", (*KERNEL_KEY, "per_step", "gpu_ns_per_step"), notes, nan=("gpu_ns_per_step",)
    )
    sample = _read_csv(folder / "step_timeline.csv", SAMPLE_COLUMNS, notes)
    if kernels is not None:
        kernels = kernels.assign(name=kernels["name"].astype(str))
    if sample is not None:
        sample = sample.assign(name=sample["name"].astype(str))
    return table, kernels, sample


def _side_from_folder(folder: Path) -> SideData:
    summary = _read_summary(folder)
    stats = summary.get("steps") or {}
    launches = summary.get("launches") or {}
    devices = summary.get("devices") or []
    notes: list[str] = []
    table, kernels, sample = _read_step_files(folder, notes)
    inst = int(launches.get("graph_instantiations") or 0)
    inst_p50 = _opt(launches, "graph_instantiate_p50_ns")
    if inst and inst_p50 is not None and inst > 1:
        notes.append(f"{folder}: instantiation time estimated as {inst} x the median instantiate call")
    threshold = (
        devices[0].get("bubbles", {}).get("threshold_ns", DEFAULT_BUBBLE_THRESHOLD_NS)
        if devices
        else DEFAULT_BUBBLE_THRESHOLD_NS
    )
    marker = str(stats.get("name") or "step").rpartition(":")[2] if stats.get("source") == "nvtx" else "step"
    unprofiled = _baseline_periods(folder, summary.get("baseline"), table, marker, notes)
    rec = summary.get("recommendation")
    rep = representative_step(steady_rows(table)) if table is not None and sample is not None else None
    return SideData(
        path=str(folder),
        origin="report",
        step_source=str(stats.get("source") or "none"),
        step_name=stats.get("name"),
        step_reason=str(stats.get("reason") or "no steps in summary.json"),
        table=table,
        stats=dict(stats),
        kernels=kernels,
        sample=sample,
        sample_step=rep,
        bubble_threshold_ns=int(threshold),
        graph_instantiations=inst,
        instantiate_ns=int(round(inst * (inst_p50 or 0.0))),
        exec_updates=int(launches.get("graph_exec_updates") or 0),
        graph_launches=int(launches.get("graph_launches") or 0),
        predicted_speedup=_opt(rec, "predicted_speedup"),
        unprofiled_periods=unprofiled,
        expected_eager_step_ns=_opt((rec or {}).get("expected") if isinstance(rec, dict) else None, "eager_step_ns"),
        step_without_profiler=_unprofiled_step(rec),
        predicted_step_ns=_opt(rec, "predicted_step_ns"),
        break_even_iterations=_opt(rec, "break_even_iterations"),
        notes=tuple(notes),
    )


def _unprofiled_step(rec: Any) -> dict[str, Any] | None:
    """The summary's ``recommendation.step_without_profiler`` when it is well formed (three
    positive finite figures and a source), else None."""
    got = rec.get("step_without_profiler") if isinstance(rec, dict) else None
    if not isinstance(got, dict):
        return None
    keys = ("step_ns", "low_ns", "high_ns")
    ok = all(isinstance(got.get(k), (int, float)) and math.isfinite(got[k]) and got[k] > 0 for k in keys)
    return {**{k: float(got[k]) for k in keys}, "source": str(got.get("source"))} if ok else None
