"""Reading the numeric columns of an nsys export's big tables, without pandas.

:class:`Reader` reads integer columns through the ADBC SQLite driver as Arrow record
batches (falling back to ``sqlite3``) into compact numpy columns; see
:mod:`launchprof.trace.loader`, which builds the DataFrames from them.

The big tables are read ahead by background threads: :mod:`launchprof.trace.readahead`
(a :class:`Reader` takes its columns from there when given ``read_ahead``). Importing
this module does not import pandas or pyarrow.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from launchprof.errors import TraceError
from launchprof.trace.tables import (
    NVTX_COLS,
    NVTX_DOMAIN_CREATE,
    NVTX_RANGE_TYPES,
    NVTX_TABLE,
    PID_MASK,
    PROCESS_COLUMNS,
)

# Rows per Arrow record batch asked of the ADBC driver.
BATCH_ROWS = 262_144
_INT32 = np.iinfo(np.int32)

Progress = Callable[[str], None]

# Columns narrowed to int32 when every value fits (ids that CUPTI keeps in 32 bits).
NARROW = {
    "device_id",
    "stream_id",
    "pid",
    "correlation_id",
    "name_id",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
}


class Column:
    """An int64 numpy column and its NULL mask (None when there is no NULL)."""

    __slots__ = ("values", "null")

    def __init__(self, values: np.ndarray, null: np.ndarray | None) -> None:
        self.values = values
        self.null = null if null is not None and null.any() else None


class WrongType(Exception):
    """A column holds a value of a type nsys never writes there."""


def narrow(values: np.ndarray) -> np.ndarray:
    """int32 when every value fits, else the int64 array unchanged."""
    if values.dtype == np.int32:
        return values
    if values.size == 0 or (values.min() >= _INT32.min and values.max() <= _INT32.max):
        return values.astype(np.int32)
    return values


def _fit(values: np.ndarray, narrowed: bool) -> np.ndarray:
    return narrow(values) if narrowed else values


def table_columns(con: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """The columns of every table of the export."""
    tables: dict[str, tuple[str, ...]] = {}
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for name in names:
        quoted = name.replace('"', '""')  # an SQL identifier: a table named a"b is not a syntax error
        tables[name] = tuple(r[1] for r in con.execute(f'PRAGMA table_info("{quoted}")'))
    return tables


def rowid_span(con: sqlite3.Connection, table: str) -> tuple[int, int] | None:
    """The least and greatest rowid of ``table``, or None for an empty table, a missing
    one, or one without rowids (a WITHOUT ROWID table, a view)."""
    try:
        # Two subqueries, not ``SELECT min(rowid), max(rowid)``: SQLite looks a lone min or
        # max up in the b-tree but scans the whole table for the pair (30 ms on 300k rows).
        lo, hi = con.execute(
            f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'
        ).fetchone()
    except sqlite3.Error:
        return None
    return (lo, hi) if type(lo) is int and type(hi) is int else None


def decode_text(raw: bytes) -> str:
    """SQLite text as str, invalid UTF-8 replaced by U+FFFD (the connections' text_factory)."""
    return raw.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Rows:
    """Which rows of the big tables (activity, CUDA API calls, NVTX events) a load keeps:
    all by default. ``pid``: those of one process (:func:`process_where`; ``launchprof
    analyze --per-process``). ``window``: those whose ``start`` lies in ``[begin, end)``,
    ns on the trace's own clock (an nsys export counts from the session's start, as the
    Nsight Systems timeline shows it; ``launchprof analyze --time-range``): each table
    is cut by its own rows' starts, so a call at the window's end whose kernel runs
    after it is kept without its kernel, as at the end of a recording (the NVTX
    domain-create events are kept whole: :func:`nvtx_select`)."""

    pid: int | None = None
    window: tuple[int, int] | None = None

    def where(self, table: str, columns: Sequence[str], timed: bool = True) -> str | None:
        """The SQL condition keeping these rows of ``table`` (``columns``: its columns, or
        those read, ``start`` among them), or None for all; ``timed=False``: of the
        process alone (:meth:`window_where` is the rest).

        Raises:
            TraceError: ``pid`` is given and ``columns`` lack the table's process column.
        """
        kept = []
        if self.pid is not None:
            kept.append(process_where(table, columns, self.pid))
        window = self.window_where() if timed else None
        if window is not None:
            kept.append(window)
        return " AND ".join(kept) if kept else None

    def window_where(self) -> str | None:
        """The SQL condition of a row starting in :attr:`window`, or None without one."""
        if self.window is None:
            return None
        begin, end = (int(t) for t in self.window)
        return f'"start" >= {begin} AND "start" < {end}'


ALL_ROWS = Rows()


_MAX_SECONDS = (2**63 - 1) / 1e9  # SQLite's largest integer, in seconds of ns


def window_ns(time_range: tuple[float, float]) -> tuple[int, int]:
    """A time range ``(begin, end)`` in seconds on the trace's clock as
    :attr:`Rows.window`: ns, rounded to the nearest.

    Raises:
        ValueError: a bound is not a finite number, ``begin`` is negative, ``end`` is
            not after ``begin`` once both are in ns, or ``end`` lies past the int64 ns
            of SQLite's integers (292 years).
    """
    seconds = [float(t) for t in time_range]
    ns = [round(t * 1e9) if math.isfinite(t) and abs(t) < _MAX_SECONDS else None for t in seconds]
    begin, end = ns
    if begin is None or end is None or begin < 0 or end <= begin:
        raise ValueError("a time range is START:END seconds, 0 <= START < END; got {:g}:{:g}".format(*seconds))
    return begin, end


def nvtx_select(tables: dict[str, tuple[str, ...]], rows: Rows = ALL_ROWS) -> str | None:
    """The query reading the NVTX ranges and domain-create events (columns
    :data:`NVTX_COLS`), of ``rows`` only (:meth:`Rows.where`; a time window keeps every
    domain-create event, which names the ranges of its domain wherever they are); None
    when the table or its ``start``/``eventType`` is missing.

    Raises:
        TraceError: ``rows.pid`` is given and the table has no ``globalTid``.
    """
    have = tables.get(NVTX_TABLE)
    if have is None or "start" not in have or "eventType" not in have:
        return None
    exprs = [f'"{c}"' if c in have else "NULL" for c in NVTX_COLS]
    types = ", ".join(str(t) for t in (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE))
    sql = f'SELECT {", ".join(exprs)} FROM "{NVTX_TABLE}" WHERE "eventType" IN ({types})'
    kept = rows.where(NVTX_TABLE, have, timed=False)
    sql = sql if kept is None else f"{sql} AND {kept}"
    window = rows.window_where()
    return sql if window is None else f'{sql} AND ("eventType" = {NVTX_DOMAIN_CREATE} OR ({window}))'


def plan(
    tables: dict[str, tuple[str, ...]], table: str, columns: dict[str, str], required: Sequence[str]
) -> tuple[list[str], list[bool]] | None:
    """The columns of ``table`` to read (those present) and which to narrow; None when the
    table is absent or lacks a required column."""
    have = tables.get(table)
    if have is None:
        return None
    present = [c for c in columns if c in have]
    if any(c not in present for c in required):
        return None
    return present, [columns[c] in NARROW for c in present]


def _concat_all(columns: Sequence[str], parts: list[list[tuple[np.ndarray, np.ndarray | None]]]) -> dict[str, Column]:
    """Concatenate each column's batches, releasing the batches column by column."""
    out = {}
    for i, c in enumerate(columns):
        out[c] = concat(parts[i])
        parts[i] = []
    return out


def concat(parts: list[tuple[np.ndarray, np.ndarray | None]]) -> Column:
    if not parts:
        return Column(np.empty(0, np.int64), None)
    values = np.concatenate([v for v, _ in parts]) if len(parts) > 1 else parts[0][0]
    if all(n is None for _, n in parts):
        return Column(values, None)
    null = np.concatenate([np.zeros(len(v), bool) if n is None else n for v, n in parts])
    return Column(values, null)


def _int64_values(arr: Any, narrowed: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """(int64 values copied out of the Arrow buffers, NULL mask or None) of an integer
    Arrow array; NULLs read 0. Read from the buffers directly: ``Array.to_numpy`` would
    import pandas. ``narrowed``: a batch without NULLs whose values fit int32 is copied
    out as int32 at once (:func:`narrow` of the int64 copy gives the same array; one
    allocation instead of two, benchmarks/README.md, "Reading in parts")."""
    import pyarrow as pa

    if arr.type != pa.int64():
        arr = arr.cast(pa.int64())
    n = len(arr)
    validity, data = arr.buffers()[:2]
    raw = np.frombuffer(data, dtype=np.int64, count=n, offset=arr.offset * 8)
    if not arr.null_count:
        if narrowed and (n == 0 or (raw.min() >= _INT32.min and raw.max() <= _INT32.max)):
            return raw.astype(np.int32), None
        return raw.copy(), None
    values = raw.copy()
    bits = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
    null = ~bits[arr.offset : arr.offset + n].astype(bool)
    values[null] = 0
    return values, null


def select(table: str, columns: Sequence[str], strict: bool, rows: Rows = ALL_ROWS) -> str:
    """The query reading ``columns`` of ``table``; ``strict=False`` turns non-integer values
    into NULL; ``rows``: only those rows (:meth:`Rows.where`).

    Raises:
        TraceError: ``rows.pid`` is given and ``columns`` lack the table's process column.
    """
    if strict:
        exprs = [f'"{c}"' for c in columns]
    else:
        exprs = [f'CASE WHEN typeof("{c}") = \'integer\' THEN "{c}" END' for c in columns]
    sql = f'SELECT {", ".join(exprs)} FROM "{table}"'
    kept = rows.where(table, columns)
    return sql if kept is None else f"{sql} WHERE {kept}"


def process_where(table: str, columns: Sequence[str], pid: int) -> str:
    """The SQL condition keeping the rows of process ``pid`` of ``table``: its process
    column (:data:`~launchprof.trace.tables.PROCESS_COLUMNS`, a globalPid or globalTid)
    holds the pid in bits 24-47 and the host and VM ids above (nsys's Serialized
    GlobalId). A ``pid`` above :data:`PID_MASK` is such a value, bits 24-63 (what
    :func:`~launchprof.trace.loader.gpu_processes` lists), and is matched whole, so two
    processes with one pid on two hosts or VMs stay apart; a plain pid is matched against
    the pid bits alone.

    Raises:
        TraceError: ``columns`` (the table's, or those read) lack its process column.
    """
    process = process_of(table, columns)
    pid = int(pid)
    return f"{process} = {pid}" if pid > PID_MASK else f"({process} & {PID_MASK}) = {pid}"


def process_of(table: str, columns: Sequence[str]) -> str:
    """The SQL expression of a row's process in ``table``: bits 24-63 of its process
    column (the host and VM bits above the 24-bit pid: nsys's Serialized GlobalId;
    :func:`process_where`).

    Raises:
        TraceError: ``columns`` lack the table's process column.
    """
    column = PROCESS_COLUMNS[table]
    if column not in columns:
        raise TraceError(f"{table} has no {column} column: its rows cannot be told apart by process")
    return f'("{column}" >> 24)'


def ro_uri(path: Path) -> str:
    """The SQLite URI that opens ``path`` read-only: its bytes percent-encoded (a file name
    need not be UTF-8 on Linux), and ``immutable=1`` for a WAL-mode file in a folder that
    cannot be written (a read-only mount) with no ``-wal`` file holding pages: SQLite would
    otherwise need to create the ``-shm`` file beside it, and fails ("unable to open")."""
    resolved = path.resolve()
    uri = f"file:{quote(os.fsencode(resolved))}?mode=ro"
    try:
        with resolved.open("rb") as fh:
            wal = fh.read(20)[18:20] == b"\x02\x02"  # header bytes 18-19: file format versions, 2 = WAL
    except OSError:
        return uri
    if wal and not os.access(resolved.parent, os.W_OK):
        wal_file = resolved.with_name(resolved.name + "-wal")
        if not (wal_file.exists() and wal_file.stat().st_size > 0):
            uri += "&immutable=1"
    return uri


class Reader:
    """Reads numeric columns of a table into :class:`Column` s (ADBC first, then sqlite3).

    ``con`` may be None in a prefetch thread, which reads through ADBC only. ``rows``:
    only those rows are read (:func:`select`; ``read_ahead`` reads them so too).
    """

    def __init__(
        self,
        path: Path,
        con: sqlite3.Connection | None,
        say: Progress,
        read_ahead: Callable[[str, Sequence[str], Sequence[bool]], dict[str, Column] | None] | None = None,
        rows: Rows = ALL_ROWS,
    ) -> None:
        self.path = path
        # Only these rows (select's rows): launchprof analyze --per-process, --time-range.
        self.rows = rows
        self.con = con
        self.say = say
        # read_ahead(table, columns, narrow): the columns when read ahead, else None
        # (launchprof.trace.readahead.take_prefetched).
        self.read_ahead = read_ahead
        self._adbc: Any = None
        self._adbc_failed = False

    def _adbc_connection(self) -> Any:
        if self._adbc is None and not self._adbc_failed:
            try:
                import adbc_driver_manager
                import adbc_driver_sqlite

                db = adbc_driver_sqlite.connect(ro_uri(self.path))
                self._adbc = (db, adbc_driver_manager.AdbcConnection(db))
            except Exception:  # the driver is missing or cannot open the file: use sqlite3
                self._adbc_failed = True
        return None if self._adbc is None else self._adbc[1]

    def close(self) -> None:
        if self._adbc is not None:
            db, conn = self._adbc
            conn.close()
            db.close()
            self._adbc = None

    def read(
        self, table: str, columns: Sequence[str], label: str, strict: bool, narrow: Sequence[bool]
    ) -> dict[str, Column]:
        """Read ``columns`` of ``table``. ``strict=False`` turns non-integer values into NULL;
        columns flagged in ``narrow`` are kept as int32 per batch while their values fit."""
        if strict and self.read_ahead is not None:
            found = self.read_ahead(table, columns, narrow)
            if found is not None:
                self.say(f"{label}: {len(next(iter(found.values())).values) if found else 0:,} rows (read ahead)")
                return found
        sql = select(table, columns, strict, self.rows)
        conn = self._adbc_connection()
        if conn is not None:
            try:
                return self._read_adbc(conn, sql, columns, label, narrow)
            except (sqlite3.DatabaseError, TraceError):
                raise
            except Exception:
                if strict:
                    raise WrongType() from None
                # Fall through to sqlite3 (e.g. a column NULL for a whole first batch).
        return self._read_sqlite(sql, columns, label, strict, narrow)

    def _read_adbc(
        self, conn: Any, sql: str, columns: Sequence[str], label: str, narrow: Sequence[bool]
    ) -> dict[str, Column]:
        import adbc_driver_manager
        import pyarrow as pa

        stmt = adbc_driver_manager.AdbcStatement(conn)
        try:
            stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
            stmt.set_sql_query(sql)
            stream, _ = stmt.execute_query()
            reader = pa.RecordBatchReader._import_from_c(stream.address)
            parts: list[list[tuple[np.ndarray, np.ndarray | None]]] = [[] for _ in columns]
            rows = 0
            for batch in reader:
                for i in range(len(columns)):
                    arr = batch.column(i)
                    if pa.types.is_null(arr.type):
                        parts[i].append((np.zeros(len(arr), np.int64), np.ones(len(arr), bool)))
                        continue
                    if not pa.types.is_integer(arr.type):
                        raise WrongType()
                    values, null = _int64_values(arr, narrow[i])
                    parts[i].append((_fit(values, narrow[i]), null))
                rows += batch.num_rows
                self.say(f"{label}: {rows:,} rows")
            reader.close()
        finally:
            stmt.close()
        return _concat_all(columns, parts)

    def _read_sqlite(
        self, sql: str, columns: Sequence[str], label: str, strict: bool, narrow: Sequence[bool]
    ) -> dict[str, Column]:
        assert self.con is not None
        cur = self.con.execute(sql)
        parts: list[list[tuple[np.ndarray, np.ndarray | None]]] = [[] for _ in columns]
        rows = 0
        while True:
            chunk = cur.fetchmany(BATCH_ROWS)
            if not chunk:
                break
            for i, col in enumerate(zip(*chunk, strict=True)):
                ok = np.fromiter((type(v) is int for v in col), bool, len(col))
                if strict and not ok.all() and any(v is not None for v, good in zip(col, ok, strict=True) if not good):
                    raise WrongType()
                try:
                    values = np.fromiter((v if type(v) is int else 0 for v in col), np.int64, len(col))
                except OverflowError:
                    values = np.fromiter(
                        (v if type(v) is int and -(2**63) <= v < 2**63 else 0 for v in col), np.int64, len(col)
                    )
                parts[i].append((_fit(values, narrow[i]), ~ok))
            rows += len(chunk)
            self.say(f"{label}: {rows:,} rows")
        return _concat_all(columns, parts)
