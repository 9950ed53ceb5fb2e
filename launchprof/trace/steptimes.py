"""The step-times files of runs without nsys (``LAUNCHPROF_STEP_TIMES``): one line per
step, ``NAME START_NS END_NS``, written by the step markers (:mod:`launchprof.marker`) and
by :mod:`launchprof.profiler_region`; read back here, for the report's ``baseline``
section (:mod:`launchprof.analysis.baseline`) and for ``compare`` of report folders."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from launchprof.defaults import STEP_DOMAIN
from launchprof.errors import LaunchprofError
from launchprof.profiler_region import MODULE_PREFIX, REGION_NAME
from launchprof.trace.columns import ro_uri
from launchprof.trace.tables import NVTX_DOMAIN_CREATE, NVTX_TABLE


class StepTimesError(LaunchprofError):
    """A step-times file is malformed."""


def read_step_times(path: Path, name: str | None = None) -> np.ndarray:
    """The ``(start_ns, end_ns)`` rows of a ``LAUNCHPROF_STEP_TIMES`` file, in start order
    (int64, shape (steps, 2)); empty when the file is missing or empty. ``name``: only the
    steps of that name (the profiled run's step ranges: ``step``, or ``--step NAME``); a
    workload marking several kinds of steps would otherwise count them all.

    Each line is ``NAME START_NS END_NS`` (:mod:`launchprof.marker`; NAME may hold spaces).

    Raises:
        StepTimesError: the file is not UTF-8 text, or a line does not end with two integer
            times that fit in 64 bits.
    """
    if not path.is_file():
        return np.empty((0, 2), dtype=np.int64)
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise StepTimesError(f"{path}: not a step-times file (not UTF-8 text at byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.rsplit(maxsplit=2)
        try:
            if len(parts) != 3:
                raise ValueError
            row = (int(parts[1]), int(parts[2]))
            if not all(-(2**63) <= t < 2**63 for t in row):  # ns in an int64, as perf_counter_ns gives
                raise ValueError
        except ValueError:
            raise StepTimesError(f"{path}:{number}: expected 'NAME START_NS END_NS', got {line[:80]!r}") from None
        if name is None or parts[0] == name:
            rows.append(row)
    times = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return times[np.argsort(times[:, 0], kind="stable")]


def region_step_times(path: Path) -> np.ndarray:
    """The profiler-region rows of one run's step-times file (:func:`read_step_times`)."""
    return read_step_times(path, REGION_NAME)


def module_step_times(path: Path) -> dict[str, np.ndarray]:
    """The top-level module calls of one run's step-times file
    (:mod:`launchprof.profiler_region`): per line name (``module NAME``), its
    ``(start_ns, end_ns)`` rows in start order (:func:`read_step_times`)."""
    if not path.is_file():
        return {}
    names = set()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith(MODULE_PREFIX):
            names.add(line.rsplit(maxsplit=2)[0])
    return {name: read_step_times(path, name) for name in sorted(names)}


SyncEvent = tuple[int, list[list[Any]]]  # perf_counter ns, stack [[file, line, function], ...]


def sources_file(steps_file: Path) -> Path:
    """Where a run without nsys writes its synchronizing calls (``LAUNCHPROF_SOURCES``,
    :mod:`launchprof.source_hooks`): beside its step times, ``baseline-I.sources``."""
    return steps_file.with_suffix(".sources")


def _frame(f: Any) -> bool:
    """Whether ``f`` is one stack frame as the collector writes it: [file, line, function]."""
    return (
        isinstance(f, list)
        and len(f) == 3
        and isinstance(f[0], str)
        and type(f[1]) is int
        and 0 <= f[1] < 2**31
        and isinstance(f[2], str)
    )


@dataclass(frozen=True)
class RunSources:
    """What one run without nsys wrote about its source (:mod:`launchprof.source_hooks`):
    ``syncs``, its synchronizing calls (``(t_ns, stack)``); ``skips``, Inductor's reasons
    for running a compiled function without CUDA Graphs (``(reason, stack)``, in the order
    met); ``unavailable``, why the run could not collect the calls (its torch has no
    ``set_sync_debug_mode``), else None; ``allocs``, the caching allocator's allocations
    (``(t_ns, kind, size_bytes, stack)``, kind ``alloc`` or ``segment_alloc``: a
    ``cudaMalloc``), written by an allocation run."""

    syncs: list[SyncEvent] = field(default_factory=list)
    skips: list[tuple[str, list[list[Any]]]] = field(default_factory=list)
    unavailable: str | None = None
    allocs: list[tuple[int, str, int, list[list[Any]]]] = field(default_factory=list)


def read_sources(path: Path) -> RunSources:
    """One run's ``baseline-I.sources`` (one JSON line each, :class:`RunSources`). A missing
    file gives nothing; a line that is not such an event (a run killed mid-line, a frame
    whose file or function is not text or whose line is not an integer, a reason that is
    not text) is skipped. An event without ``kind`` is a synchronizing call (the first
    collector wrote no kind)."""
    if not path.is_file():
        return RunSources()
    with path.open(encoding="utf-8", errors="replace") as lines:  # line by line: a run may write 100 MB
        return _parse_sources(lines)


def _parse_sources(lines: Any) -> RunSources:
    """:func:`read_sources` of an iterable of lines."""
    out = RunSources()
    unavailable = None
    for line in lines:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line nested too deep to parse
            continue
        if not isinstance(doc, dict):
            continue
        if "unavailable" in doc:
            unavailable = str(doc["unavailable"])
            continue
        t, stack, kind = doc.get("t"), doc.get("stack"), doc.get("kind", "sync")
        if not (type(t) is int and isinstance(stack, list) and all(_frame(f) for f in stack)):
            continue
        if kind == "sync":
            out.syncs.append((t, stack))
        elif kind == "cudagraph-skip" and isinstance(doc.get("reason"), str):
            out.skips.append((doc["reason"], stack))
        elif kind in ("alloc", "segment_alloc") and type(doc.get("size")) is int and 0 < doc["size"] < 2**63:
            out.allocs.append((t, kind, doc["size"], stack))
    return dataclasses.replace(out, unavailable=unavailable)


def read_sync_events(path: Path) -> tuple[list[SyncEvent], str | None]:
    """The synchronizing calls one run wrote and why it could not collect them, if so:
    ``(events, unavailable)`` of :func:`read_sources`."""
    run = read_sources(path)
    return run.syncs, run.unavailable


ALLOCATION_RUN = "allocations-1.steps"  # the allocation run's step times; its .sources beside


def run_files(folder: Path, runs: int) -> list[Path]:
    """Where baseline run ``i`` (1-based) writes its step times: ``FOLDER/baseline-I.steps``."""
    return [folder / f"baseline-{i}.steps" for i in range(1, runs + 1)]


def timed_sources(sqlite: Path) -> frozenset[str] | None:
    """What a run of this trace's workload without nsys can time, read from the trace:
    ``"markers"`` when it created the NVTX domain of :func:`launchprof.step`
    (:data:`~launchprof.defaults.STEP_DOMAIN`; the markers write step times), and
    ``"profiler-region"`` when it called ``cudaProfilerStart`` or ``cuProfilerStart``
    (:mod:`launchprof.profiler_region` times those regions of a Python workload), and
    ``"pytorch"`` when a kernel of PyTorch's own (a name holding ``at::native::``) ran
    (that module times the top-level module calls of a PyTorch workload). Small queries
    (the domain-creation rows of ``NVTX_EVENTS`` and the ``StringIds`` table: nsys interns
    a call's name only when the call was traced); empty when none is there, None when the
    file cannot be read as a trace."""
    found = set()
    try:
        con = sqlite3.connect(ro_uri(sqlite), uri=True)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if (
                NVTX_TABLE in tables
                and con.execute(
                    f'SELECT 1 FROM "{NVTX_TABLE}" WHERE eventType = ? AND text = ? LIMIT 1',
                    (NVTX_DOMAIN_CREATE, STEP_DOMAIN),
                ).fetchone()
            ):
                found.add("markers")
            if (
                "StringIds" in tables
                and con.execute(
                    "SELECT 1 FROM StringIds WHERE value LIKE 'cudaProfilerStart%' OR value LIKE 'cuProfilerStart%' "
                    "LIMIT 1"
                ).fetchone()
            ):
                found.add("profiler-region")
            if (
                "StringIds" in tables
                and con.execute("SELECT 1 FROM StringIds WHERE value LIKE '%at::native::%' LIMIT 1").fetchone()
            ):
                found.add("pytorch")
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return frozenset(found)
