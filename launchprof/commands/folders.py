"""Names and folders of a command's output: a trace's stem, the default folders of
``profile``, ``check`` and ``compare``, and claiming a folder before anything runs."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from launchprof.errors import OutputError
from launchprof.report.outputs import analysis_files

TRACE_SUFFIXES = (".sqlite.xz", ".sqlite", ".nsys-rep", ".qdstrm")


def trace_stem(name: str) -> str:
    """A trace file's name without its trace suffix (:data:`TRACE_SUFFIXES`, else the last
    one): ``run.v1.sqlite`` -> ``run.v1``, so that ``run.v1.sqlite`` and ``run.v2.sqlite``
    get report folders of their own (``name.split(".")[0]`` gave both ``run``); ``trace``
    for a name that is all suffix, or whose stem is ``.`` or ``..``."""
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return _folder_name(name[: -len(suffix)])
    stem, dot, _ = name.rpartition(".")
    return _folder_name(stem if dot else name)


def _folder_name(stem: str) -> str:
    """``stem`` as a folder name under ``reports/``; ``trace`` when it would name no folder
    of its own (empty, ``.`` or ``..``: ``...sqlite`` once wrote its report into the
    current folder, replacing a user's files there)."""
    return "trace" if stem in ("", ".", "..") or "/" in stem else stem


def default_name(before: Path, after: Path) -> str:
    """``compare-<before stem>-vs-<after stem>`` (folder name for a report folder)."""

    def stem(p: Path) -> str:
        return p.resolve().name if p.is_dir() else trace_stem(p.name)

    return f"compare-{stem(before)}-vs-{stem(after)}"


# What nsys writes into a profile run's folder, beside the report.
NSYS_FILES = ("trace.nsys-rep", "trace.sqlite", "trace.qdstrm")


def trace_files() -> tuple[str, ...]:
    """What a ``profile`` run writes into its folder: nsys's files, the analysis report's
    (:func:`launchprof.report.outputs.analysis_files`), the first run without nsys;
    ``profile`` never overwrites any of them."""
    return (*NSYS_FILES, *analysis_files(), "baseline-1.steps")


def default_folder(label: str, root: Path = Path("reports"), now: datetime | None = None) -> Path:
    """``reports/<label>-<UTC time>``, with ``-2``, ``-3``... appended if it exists."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in label)[:100] or "workload"  # names end at 255 bytes
    base = root / f"{safe}-{stamp}"
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    return folder


def claim_default_folder(label: str, root: Path = Path("reports")) -> Path:
    """Create and return a new :func:`default_folder`; two runs started in the same second
    get two folders (the creation itself is the check: ``mkdir`` without ``exist_ok``).

    Raises:
        OutputError: the folder cannot be created.
    """
    for _ in range(1000):
        folder = default_folder(label, root)
        try:
            folder.mkdir(parents=True)
            return folder
        except FileExistsError:
            continue  # another run took it between the check and the creation
        except OSError as exc:
            raise OutputError(f"cannot create {folder}: {exc.strerror or exc}") from None
    raise OutputError(f"cannot find a free folder name for {label} under {root}")


def claim_folder(folder: Path) -> bool:
    """Create ``folder``; refuse one that already holds a trace or report (never overwrite).
    True when this call created it."""
    existed = folder.exists()
    if existed and not folder.is_dir():
        raise OutputError(f"{folder} exists and is not a folder")
    taken = [name for name in trace_files() if (folder / name).exists()]
    if taken:
        raise OutputError(f"{folder} already holds {taken[0]}; choose another --output (profile never overwrites)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {folder}: {exc.strerror or exc}") from None
    _check_writable(folder)
    return not existed


def _check_writable(folder: Path) -> None:
    """Create and remove a file in ``folder``: a folder nsys cannot write into (read-only,
    another user's) is refused before the workload runs, not after.

    Raises:
        OutputError: the file cannot be created.
    """
    probe = folder / f".launchprof-write-check-{os.getpid()}"
    try:
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise OutputError(f"cannot write into {folder}: {exc.strerror or exc}") from None
