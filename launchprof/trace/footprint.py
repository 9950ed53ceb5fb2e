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

What the process may use (:func:`available_bytes`): the kernel's ``MemAvailable``
(``/proc/meminfo``: free memory plus what it can reclaim without swapping), and, inside a
memory cgroup with a limit (a container, a Slurm job), the limit less the group's usage
when that is lower (cgroup v2 ``memory.max`` - ``memory.current``; v1
``memory.limit_in_bytes`` - ``memory.usage_in_bytes``; the group's reclaimable file cache,
``inactive_file`` of its ``memory.stat``, counted as free in both). Swap is not counted:
an analysis that swaps takes many times as long. Unknown (not Linux): no check.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from launchprof.errors import TraceTooLargeError
from launchprof.trace.tables import NUMERIC_TABLES

# Below the measured need (module docstring; benchmarks/README.md, "What a whole trace needs in memory").
BASE_BYTES = 120 << 20  # a process that imports what analyze imports: 121 MiB peak
BYTES_PER_ROW = 120  # per row of the big tables: 152-174 bytes measured on the traces it was fitted on


def _size(n: int) -> str:
    """``n`` bytes as ``1.4 GiB`` (or ``171 MiB`` below a GiB)."""
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def table_rows(con: sqlite3.Connection) -> dict[str, int]:
    """The rows of each big table of the export open on ``con`` (its rowid span; tables
    that are absent, empty or without rowids count 0)."""
    present = {
        name
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        if any(name == table for table, _, _ in NUMERIC_TABLES)
    }
    rows = {}
    for table, _, _ in NUMERIC_TABLES:
        if table not in present:
            continue
        try:
            lo, hi = con.execute(
                f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'
            ).fetchone()
        except sqlite3.Error:  # a WITHOUT ROWID table, or a view
            continue
        if type(lo) is int and type(hi) is int and hi >= lo:
            rows[table] = hi - lo + 1
    return rows


def needed_bytes(rows: dict[str, int]) -> int:
    """The low end of the peak memory of analysing a whole trace with these table rows
    (module docstring), bytes."""
    return BASE_BYTES + BYTES_PER_ROW * sum(rows.values())


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def _stat_value(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _cgroup_headroom(proc_cgroup: Path, root: Path) -> int | None:
    """The memory cgroup's limit less its usage (reclaimable file cache counted free), or
    None without a limit (module docstring)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, group = line.split(":", 2)
        if controllers == "":  # cgroup v2
            folder = root / group.lstrip("/")
            limit, usage, stat, cache = "memory.max", "memory.current", "memory.stat", "inactive_file"
        elif "memory" in controllers.split(","):  # cgroup v1
            folder = root / "memory" / group.lstrip("/")
            limit, usage, stat, cache = (
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "memory.stat",
                "total_inactive_file",
            )
        else:
            continue
        most, used = _read_int(folder / limit), _read_int(folder / usage)
        if most is None or used is None or most >= 1 << 60:  # "max", or v1's unlimited (2**63 - a page)
            continue
        return max(0, most - used + _stat_value(folder / stat, cache))
    return None


def available_bytes(proc: Path = Path("/proc"), cgroups: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory this process may still use without swapping, bytes (module docstring),
    or None where it is not known (not Linux)."""
    available = None
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    headroom = _cgroup_headroom(proc / "self" / "cgroup", cgroups)
    if headroom is not None:
        available = headroom if available is None else min(available, headroom)
    return available


def shortfall(rows: dict[str, int]) -> tuple[int, int, int] | None:
    """``(rows, need, available)`` when analysing a whole trace with these big-table rows
    (:func:`table_rows`) needs more memory than this process may use
    (:func:`needed_bytes` above :func:`available_bytes`), else None (it fits, or the
    memory is not known)."""
    available = available_bytes()
    if available is None:
        return None
    need = needed_bytes(rows)
    return None if need <= available else (sum(rows.values()), need, available)


def check_fits(name: str, rows: dict[str, int]) -> None:
    """Refuse the whole trace ``name`` (a file name, for the message) whose big tables
    hold ``rows`` when its analysis needs more memory than this process may use.

    Raises:
        TraceTooLargeError: :func:`shortfall`: the message gives the need and what is
            available, the bounded ways (``--per-process``, ``--time-range``), and how to
            try anyway (``launchprof analyze --no-memory-check``).
    """
    short = shortfall(rows)
    if short is None:
        return
    count, need, available = short
    raise TraceTooLargeError(
        f"{name}: analysing the whole trace ({count:,} rows of GPU activity and CUDA calls) needs at least "
        f"{_size(need)} and {_size(available)} is available; analyse it in parts with --per-process (one "
        "process at a time) or --time-range START:END (one window), or try anyway (launchprof analyze "
        "--no-memory-check)"
    )
