"""Whether a whole trace can be analysed in the memory this process may use, known before
any row is read: the check that turns an out-of-memory kill (or a machine swapping for
minutes) into one line naming the bounded ways to analyse the trace.

The need is estimated from the rows of the big tables (:data:`~launchprof.trace.tables.NUMERIC_TABLES`:
kernels, memory operations, graph launches, CUDA runtime and driver calls), counted by
their rowid span (two b-tree look-ups a table; an nsys export numbers its rows without
holes, a trimmed copy may count high):

    need = :data:`BASE_BYTES` + :data:`BYTES_PER_ROW` x rows

Both constants sit below what ``launchprof analyze`` measured (peak RSS of the command,
fresh processes, ``benchmarks/memory_need.py``; figures in benchmarks/README.md, "What a
whole trace needs in memory"), so that a refused trace would not have fitted: a trace
that needs more than the estimate still starts and may still run out, as before.
:data:`BASE_BYTES` is the peak of a process that only imports what ``analyze`` imports
(121 MiB; the smallest real traces peaked at 150-154 MiB). :data:`BYTES_PER_ROW` was
fitted on synthetic traces of 4 processes (``benchmarks/synth_trace.py``, 1M, 3M and 10M
kernels: 152-174 bytes a row above the base, two runs each) and set at 120, below the lowest of them;
traces it was not fitted on stayed above it: one process (204-232 bytes), eight (146-147),
launch-bound (161-168), one stream of 400-kernel steps (138-143), and the bundled real traces
(tests/test_footprint.py checks those).

What the process can have (:func:`shortfall`): the anonymous memory it holds already
(:func:`resident_bytes`: its imports, rows read ahead) plus what it may still take
(:func:`available_bytes`): the kernel's ``MemAvailable`` (``/proc/meminfo``: free
memory plus what it can reclaim without swapping), and, inside memory cgroups with
limits (a container, a Slurm job, whose limit is often on a parent of the process's own
group), the least of each limit less its group's usage when that is lower (cgroup v2
``memory.max`` - ``memory.current``; v1 ``memory.limit_in_bytes`` -
``memory.usage_in_bytes``; the group's file cache, ``active_file`` and
``inactive_file`` of its ``memory.stat``, counted as free: the kernel reclaims it before
it kills for memory). Swap is not counted: an analysis that swaps takes many times as
long. Unknown (not Linux): no check. The rows are counted by rowid span; when the
whole trace does not fit, the rows to be read are counted exactly (``count(*)`` of the
whole tables, or of one process's or one window's rows: ``launchprof analyze
--per-process``, ``--time-range``), so that neither holes in the rowids (a trimmed copy)
nor a part that fits is refused, and a part that does not fit is.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from launchprof.errors import TraceTooLargeError
from launchprof.text import window_text
from launchprof.trace.columns import ALL_ROWS, Rows, rowid_span, table_columns
from launchprof.trace.tables import NUMERIC_TABLES, PID_MASK

# Below the measured need (module docstring; benchmarks/README.md, "What a whole trace needs in memory").
BASE_BYTES = 120 << 20  # a process that imports what analyze imports: 121 MiB peak
BYTES_PER_ROW = 120  # per row of the big tables: 152-174 bytes measured on the traces it was fitted on


def _size(n: int) -> str:
    """``n`` bytes as ``1.4 GiB`` (or ``171 MiB`` below a GiB)."""
    return f"{n / (1 << 30):,.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def table_rows(con: sqlite3.Connection, exact: bool = False, kept: Rows = ALL_ROWS) -> dict[str, int]:
    """The rows of each big table of the export open on ``con``: its rowid span (two
    b-tree look-ups; a table with holes in its rowids counts high; the whole table,
    whatever ``kept`` says), or, ``exact``, ``count(*)`` of the rows ``kept`` keeps (a
    scan of the table: :meth:`~launchprof.trace.columns.Rows.where`). Tables that are
    absent, empty or without rowids count 0.

    Raises:
        TraceError: ``kept.pid`` is given and a table lacks its process column.
    """
    columns = table_columns(con) if exact else {}  # the tables (not views) and their columns
    rows = {}
    for table, _, _ in NUMERIC_TABLES:
        if not exact:
            span = rowid_span(con, table)
            if span is not None and span[1] >= span[0]:
                rows[table] = span[1] - span[0] + 1
            continue
        if table not in columns:
            continue
        where = kept.where(table, columns[table]) if kept != ALL_ROWS else None
        try:
            rows[table] = int(
                con.execute(f'SELECT count(*) FROM "{table}"' + (f" WHERE {where}" if where else "")).fetchone()[0]
            )
        except sqlite3.Error:  # a missing table
            continue
    return rows


def needed_bytes(rows: dict[str, int]) -> int:
    """The low end of the peak memory of a process analysing a whole trace with these
    table rows (module docstring), bytes."""
    return BASE_BYTES + BYTES_PER_ROW * sum(rows.values())


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


def _read_int(path: Path) -> int | None:
    try:
        words = path.read_text().split()
    except (OSError, UnicodeDecodeError):
        return None
    return _number(words[0]) if words else None


def _stat_sum(path: Path, keys: tuple[str, ...]) -> int:
    """The sum of ``keys``' values in a ``memory.stat`` file (0 for those missing)."""
    total = 0
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name in keys:
                total += _number(value) or 0
    except (OSError, UnicodeDecodeError):
        pass
    return total


# Per cgroup version: the files of the limit, the usage and the stat, and the stat's
# file cache (active and inactive: the kernel reclaims both before it kills for memory).
_V2 = ("memory.max", "memory.current", "memory.stat", ("active_file", "inactive_file"))
_V1 = ("memory.limit_in_bytes", "memory.usage_in_bytes", "memory.stat", ("total_active_file", "total_inactive_file"))


def _headroom(folder: Path, files: tuple[str, str, str, tuple[str, ...]]) -> int | None:
    """One cgroup's limit less its usage, its file cache counted free; None without a limit."""
    limit, usage, stat, cache = files
    most, used = _read_int(folder / limit), _read_int(folder / usage)
    if most is None or used is None or most >= 1 << 60:  # "max", or v1's unlimited (2**63 - a page)
        return None
    return max(0, most - used + _stat_sum(folder / stat, cache))


def _cgroup_headroom(proc_cgroup: Path, root: Path) -> int | None:
    """The least headroom (limit less usage, file cache counted free) of the memory
    cgroup of this process and of each cgroup above it up to the hierarchy's root (a
    limit is often set on a parent: a Slurm job's, a container's); where the process's
    own path is not there (a container that sees its cgroup as the root), the root's.
    None without any limit."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, group = fields
        if controllers == "":  # cgroup v2
            top, files = root, _V2
        elif "memory" in controllers.split(","):  # cgroup v1
            top, files = root / "memory", _V1
        else:
            continue
        folder = top / group.strip().lstrip("/")
        folders = [top]
        if folder.is_dir() and folder != top and top in folder.parents:
            folders = [folder, *folder.parents[: folder.parents.index(top) + 1]]
        found = [h for f in folders if (h := _headroom(f, files)) is not None]
        return min(found) if found else None
    return None


def resident_bytes(proc: Path = Path("/proc")) -> int:
    """This process's anonymous resident memory now (``/proc/self/statm``: resident less
    shared, the pages no file backs), bytes; 0 where unknown. Its file-backed pages (the
    libraries) are page cache, which :func:`available_bytes` already counts as free."""
    try:
        fields = (proc / "self" / "statm").read_text().split()
        return max(0, int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def available_bytes(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory this process may still take without swapping, bytes (module
    docstring), or None where it is not known (not Linux)."""
    available = None
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = _number(line.split(":", 1)[1].strip().split(" ")[0])
                available = None if available is None else available * 1024
    except (OSError, UnicodeDecodeError):
        pass
    headroom = _cgroup_headroom(proc / "self" / "cgroup", cgroups)
    if headroom is not None:
        available = headroom if available is None else min(available, headroom)
    return available


def shortfall(rows: dict[str, int]) -> tuple[int, int, int] | None:
    """``(rows, need, room)`` when a process analysing a whole trace with these
    big-table rows (:func:`table_rows`) would need more memory than it can have
    (:func:`needed_bytes` above ``room``: what it holds now, :func:`resident_bytes`, plus
    what it may still take, :func:`available_bytes`; in a memory cgroup, the limit less
    what the group's other processes hold), else None (it fits, or the memory
    is not known)."""
    available = available_bytes()
    if available is None:
        return None
    need, room = needed_bytes(rows), available + resident_bytes()
    return None if need <= room else (sum(rows.values()), need, room)


def check_fits(
    name: str, rows: dict[str, int], exact: Callable[[], dict[str, int]] | None = None, kept: Rows = ALL_ROWS
) -> None:
    """Refuse the trace ``name`` (a file name, for the message), whose big tables hold
    ``rows``, when analysing the rows ``kept`` of it needs more memory than this process
    can have (:func:`shortfall`). ``exact``: those rows counted exactly
    (``table_rows(con, exact=True, kept=kept)``), asked for only when ``rows`` (the
    whole tables, counted high by holes in their rowids) do not fit, so that neither a
    hole nor a part of a trace (``kept``: one process, one window) is refused when it
    fits.

    Raises:
        TraceTooLargeError: the message gives the need and the room, the bounded ways
            (``launchprof analyze --per-process``, ``--time-range``), and how to try
            anyway (``--no-memory-check``; ``memory_check=False`` in Python).
    """
    short = shortfall(rows)
    if short is not None and exact is not None:
        short = shortfall(exact())
    if short is None:
        return
    count, need, room = short
    if room < BASE_BYTES:  # no part of the trace would do: launchprof alone needs more
        raise TraceTooLargeError(
            f"{name}: this process can have {_size(room)} of memory, less than launchprof itself takes "
            f"({_size(BASE_BYTES)}) before reading any of the trace's {count:,} rows; free memory or raise the "
            "limit, or try anyway (launchprof analyze --no-memory-check; memory_check=False in Python)"
        )
    if kept == ALL_ROWS:
        what = "the whole trace"
        parts = (
            "analyse it in parts (launchprof analyze --per-process: one process at a time; --time-range "
            "START:END: one window)"
        )
    else:
        what = " and ".join(
            ([f"the rows of process {kept.pid & PID_MASK}"] if kept.pid is not None else [])
            + ([f"the rows starting in {window_text(kept.window)} s"] if kept.window is not None else [])
        )
        parts = "read a shorter --time-range" if kept.window is not None else "read one window of it (--time-range)"
    raise TraceTooLargeError(
        f"{name}: analysing {what} ({count:,} rows of GPU activity and CUDA calls) needs at least {_size(need)} "
        f"of memory and this process can have {_size(room)}; {parts}, or try anyway (launchprof analyze "
        "--no-memory-check; memory_check=False in Python)"
    )
