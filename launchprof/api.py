"""The Python API: ``launchprof.analyze(path)`` for notebooks and scripts."""

from __future__ import annotations

import dataclasses
import lzma
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from launchprof.analysis import Analysis, analyze_trace
from launchprof.analysis.diagnose import diagnose
from launchprof.analysis.steps import find_steps
from launchprof.analysis.timeline import DEFAULT_BUBBLE_THRESHOLD_NS
from launchprof.errors import TraceError
from launchprof.nsys.export import export_sqlite
from launchprof.trace import load_trace
from launchprof.trace.model import Trace

TRACE_SUFFIXES = (".sqlite", ".sqlite.xz", ".nsys-rep")


def _decompress_xz(path: Path, folder: Path) -> Path:
    target = folder / path.name[: -len(".xz")]
    try:
        with lzma.open(path) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (lzma.LZMAError, EOFError) as exc:
        raise TraceError(f"{path} is not a valid .xz file ({exc})") from None
    return target


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


def analyze(
    path: str | Path,
    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS,
    nsys: str | None = None,
    progress: Callable[[str], None] | None = None,
    step: str | None = None,
    steps_found: Callable[[Analysis], None] | None = None,
) -> Analysis:
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
        steps_found: optional callback given the analysis once its steps are found,
            before the diagnosis (the command line starts writing the step files then).

    Returns:
        :class:`~launchprof.analysis.Analysis`: figures per device/process/stream in
        ``devices``, launch figures in ``launches``, the DataFrames in ``trace``
        (documented in :mod:`launchprof.trace.model`), and ``extra["steps"]``, a
        :class:`~launchprof.analysis.steps.Steps`; ``extra["diagnosis"]`` and
        ``extra["recommendation"]`` (:mod:`launchprof.analysis.diagnose`).

    Raises:
        TraceError: the file is missing or not an nsys SQLite export.
        NsysError: a ``.nsys-rep`` needs nsys and it is missing or failed.
        StepError: ``step`` names an NVTX range that is not in the trace.

    With several ranks (device, process pairs with GPU work) or NCCL kernels,
    ``extra["ranks"]`` holds the cross-rank view, a
    :class:`~launchprof.analysis.ranks.CrossRank`.
    """
    sqlite = resolve_trace(path, nsys)
    if sqlite.name.endswith(".xz"):
        with tempfile.TemporaryDirectory(prefix="launchprof-") as tmp:
            if progress:
                progress("decompressing")
            trace = load_trace(_decompress_xz(sqlite, Path(tmp)), progress=progress)
    else:
        trace = load_trace(sqlite, progress=progress)
    trace = dataclasses.replace(trace, path=Path(path))
    return analyze_loaded(trace, bubble_threshold_ns, progress, step, steps_found)


def analyze_loaded(
    trace: Trace,
    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS,
    progress: Callable[[str], None] | None = None,
    step: str | None = None,
    steps_found: Callable[[Analysis], None] | None = None,
) -> Analysis:
    """:func:`analyze` of a trace already loaded (:func:`~launchprof.trace.load_trace`,
    :func:`~launchprof.trace.arrowdir.load_arrowdir`); same arguments, result and errors
    (but for the file's)."""
    if progress:
        progress("analysing")
    analysis = analyze_trace(trace, bubble_threshold_ns)
    if step is not None:
        analysis.extra["step_name"] = step  # the summary's nvtx_steps of a trace without GPU work use it
    from launchprof.analysis.ranks import rank_view

    # Several ranks (processes with GPU work) or NCCL kernels: the cross-rank view.
    ranks = rank_view(analysis, step_name=step)
    if ranks is not None:
        analysis.extra["ranks"] = ranks
    if progress:
        progress("finding steps")
    analysis.extra["steps"] = find_steps(analysis, step_name=step)
    if steps_found is not None:
        steps_found(analysis)
    analysis.extra["diagnosis"], analysis.extra["recommendation"] = diagnose(analysis)
    return analysis
