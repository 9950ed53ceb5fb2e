"""Reading ahead: the big tables of an export read by background threads while the caller
imports pandas and sets up (:mod:`launchprof.trace.columns` reads; this module runs the
reads in threads and hands their columns over).

SQLite does its work with the GIL released, so the big tables (kernels, CUDA API calls,
memory operations, graph launches) are read by background threads, each with its own
connection, and a table of millions of rows is read in parts (rowid ranges, one thread
each, joined in rowid order: :func:`row_ranges`). :func:`prefetch` starts them (the
``analyze`` command does so before it imports pandas, so the reading overlaps the
imports; :func:`~launchprof.trace.loader.load_trace` does so itself otherwise) and the
loader takes each table's columns with :func:`take_prefetched`, waiting for the threads
when they are not done. A read ahead that fails for any reason leaves the table to the
loader's own read (which reports the error). Importing this module does not import
pandas or pyarrow (the threads import pyarrow, the ADBC driver and nothing else).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launchprof.errors import TraceError
from launchprof.trace.columns import (
    ALL_ROWS,
    Column,
    Reader,
    Rows,
    concat,
    decode_text,
    nvtx_select,
    plan,
    ro_uri,
    rowid_span,
    select,
    table_columns,
)
from launchprof.trace.footprint import shortfall, table_rows
from launchprof.trace.tables import NUMERIC_TABLES

# A table is read in parts (rowid ranges, each by its own thread) when it holds at least
# this many rows a part; benchmarks/README.md, "Reading in parts".
ROWS_PER_PART = 2_000_000


def read_threads() -> int:
    """The CPUs this process may run on (the most parts a table is read in)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def row_ranges(con: sqlite3.Connection, table: str, threads: int) -> list[tuple[int, int] | None]:
    """The rowid ranges a table is read in: up to ``threads`` ranges of at least
    :data:`ROWS_PER_PART` rowids each, in rowid order (the order of a plain scan of a rowid
    table, so the joined parts hold the rows a single read gives, in its order); ``[None]``
    (one read of the whole table) for a smaller table or one without rowids."""
    span = rowid_span(con, table)
    if span is None:
        return [None]
    lo, hi = span
    parts = min(threads, (hi - lo + 1) // ROWS_PER_PART)
    if parts < 2:
        return [None]
    bounds = [lo + (hi - lo + 1) * i // parts for i in range(parts + 1)]
    return [(a, b - 1) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _join_parts(columns: Sequence[str], parts: list[dict[str, Column]]) -> dict[str, Column]:
    """The columns of a table read in parts, joined in part order (each part's columns
    released as it is joined)."""
    out = {}
    for c in columns:
        # An empty part (a range of deleted rowids) reads int64: left out, it cannot widen
        # the others' int32 columns.
        kept = [(p[c].values, p[c].null) for p in parts if len(p[c].values)]
        out[c] = concat(kept) if kept else parts[0][c]
        for p in parts:
            del p[c]
    return out


class _Prefetch:
    """Background reads of one file's big tables (one thread per table, or per part of a
    table read in parts)."""

    def __init__(self, path: Path, stamp: tuple[int, int], rows: Rows = ALL_ROWS) -> None:
        self.path = path
        self.stamp = stamp
        self.rows = rows  # only these rows (launchprof.trace.columns.select)
        self.lock = threading.Lock()
        self.done: dict[tuple[Any, ...], threading.Event] = {}
        self.results: dict[tuple[Any, ...], Any] = {}
        # A table read in parts: each part's columns (None until read or when it failed),
        # and how many parts are still being read.
        self.parts: dict[tuple[Any, ...], list[dict[str, Column] | None]] = {}
        self.left: dict[tuple[Any, ...], int] = {}

    def start(self, tables: dict[str, tuple[str, ...]], con: sqlite3.Connection) -> None:
        for table, columns, required in NUMERIC_TABLES:
            planned = plan(tables, table, columns, required)
            if planned is None:
                continue
            key = (table, tuple(planned[0]), tuple(planned[1]))
            ranges = row_ranges(con, table, read_threads())
            self.parts[key] = [None] * len(ranges)
            self.left[key] = len(ranges)
            self.done[key] = done = threading.Event()  # last: a table without it is read by the loader
            try:
                for i, rows in enumerate(ranges):
                    threading.Thread(
                        target=self._read, args=(key, i, rows), name=f"launchprof-read-{table}-{i}", daemon=True
                    ).start()
            except RuntimeError:  # no thread to be had: the loader reads this table itself
                self.left[key] = -1
                done.set()
        try:
            sql = nvtx_select(tables, self.rows)
        except TraceError:  # no globalTid to tell processes apart: the loader says so
            sql = None
        if sql is not None:  # the NVTX rows too (Python tuples: the loader cleans them)
            rows_key = ("rows", sql)
            self.done[rows_key] = done = threading.Event()
            try:
                threading.Thread(
                    target=self._read_rows, args=(rows_key,), name="launchprof-read-nvtx", daemon=True
                ).start()
            except RuntimeError:
                done.set()

    def _read(self, key: tuple[Any, ...], part: int, rows: tuple[int, int] | None) -> None:
        """Read one part of a table (its rows ``rows``, a rowid range, or all when None);
        the thread finishing the last part joins them in rowid order."""
        table, columns, narrowed = key
        reader = Reader(self.path, None, lambda _msg: None)
        result = None
        try:
            conn = reader._adbc_connection()
            if conn is not None:
                sql = select(table, columns, strict=True, rows=self.rows)
                if rows is not None:
                    sql += " AND" if self.rows.where(table, columns) is not None else " WHERE"
                    sql += f" rowid BETWEEN {rows[0]} AND {rows[1]}"
                result = reader._read_adbc(conn, sql, columns, table, narrowed)
        except BaseException:  # noqa: BLE001 - any failure: the loader reads the table itself
            result = None
        finally:
            reader.close()
            self._part_done(key, part, result)

    def _part_done(self, key: tuple[Any, ...], part: int, result: dict[str, Column] | None) -> None:
        with self.lock:
            parts = self.parts[key]
            parts[part] = result
            self.left[key] -= 1
            last = self.left[key] == 0
        if not last:
            return
        try:
            if all(p is not None for p in parts):
                joined = parts[0] if len(parts) == 1 else _join_parts(key[1], parts)  # type: ignore[arg-type]
                with self.lock:
                    self.results[key] = joined
        except BaseException:  # noqa: BLE001 - e.g. out of memory: the loader reads the table itself
            pass
        finally:
            with self.lock:
                self.parts.pop(key, None)
            self.done[key].set()

    def _read_rows(self, key: tuple[Any, ...]) -> None:
        try:
            con = sqlite3.connect(ro_uri(self.path), uri=True)
            try:
                con.text_factory = decode_text
                rows = con.execute(key[1]).fetchall()
            finally:
                con.close()
            with self.lock:
                self.results[key] = rows
        except BaseException:  # noqa: BLE001 - any failure: the loader reads the rows itself
            pass
        finally:
            self.done[key].set()


# Keyed by (the file's resolved path, the rows read).
_PENDING: dict[tuple[str, Rows], _Prefetch] = {}
_PENDING_LOCK = threading.Lock()


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def prefetch(path: str | os.PathLike[str], rows: Rows = ALL_ROWS, memory_check: bool = True) -> None:
    """Start reading the big tables of the SQLite export ``path`` (``rows`` of them only:
    :class:`~launchprof.trace.columns.Rows`) in background threads (module docstring). Does nothing when
    ``path`` is not a readable SQLite file or is already being read so, and, with
    ``memory_check``, when the whole trace is too large for the memory available
    (:func:`~launchprof.trace.footprint.shortfall`: the loader counts ``rows`` and
    refuses them, or reads them itself); never raises."""
    p = Path(path)
    key = str(p.resolve()) if p.exists() else None
    stamp = _stamp(p)
    if key is None or stamp is None or not p.is_file():
        return
    try:
        # Imported here, not in the threads: two threads importing the same modules (the
        # caller importing pandas, which imports pyarrow) could deadlock on import locks.
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_sqlite  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return
    try:
        con = sqlite3.connect(ro_uri(Path(key)), uri=True)
        try:
            if memory_check and shortfall(table_rows(con)) is not None:
                return  # the whole trace would not fit: the loader counts these rows first
            with _PENDING_LOCK:
                if (key, rows) in _PENDING:
                    return
                job = _Prefetch(p, stamp, rows)
                _PENDING[key, rows] = job
            job.start(table_columns(con), con)
        finally:
            con.close()
    except Exception:  # noqa: BLE001 - not SQLite, damaged: the loader will say so
        return


def take_prefetched(
    path: Path, table: str, columns: Sequence[str], narrow: Sequence[bool], rows: Rows = ALL_ROWS
) -> dict[str, Column] | None:
    """The prefetched columns of ``table`` (its ``rows``; waiting for its thread), or None
    when they were not prefetched with the same columns, the read failed, or the file
    changed since."""
    return _take(path, rows, (table, tuple(columns), tuple(narrow)))  # type: ignore[no-any-return]


def take_prefetched_rows(path: Path, sql: str, rows: Rows = ALL_ROWS) -> list[tuple[Any, ...]] | None:
    """The rows of ``sql`` read ahead (waiting for its thread), or None as for
    :func:`take_prefetched`."""
    return _take(path, rows, ("rows", sql))  # type: ignore[no-any-return]


def _take(path: Path, rows: Rows, wanted: tuple[Any, ...]) -> Any:
    try:
        key = str(path.resolve())
    except OSError:
        return None
    job = _PENDING.get((key, rows))
    if job is None:
        return None
    event = job.done.get(wanted)
    if event is None:
        return None
    event.wait()
    with job.lock:
        result = job.results.pop(wanted, None)
    return result if _stamp(path) == job.stamp else None


def forget_prefetch(path: str | os.PathLike[str], rows: Rows = ALL_ROWS) -> None:
    """Drop what is left of the prefetch of ``path``'s ``rows`` (after loading them)."""
    try:
        key = str(Path(path).resolve())
    except OSError:
        return
    with _PENDING_LOCK:
        _PENDING.pop((key, rows), None)
