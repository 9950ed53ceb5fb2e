"""Reading an ``nsys export --type arrowdir`` folder as a :class:`~launchprof.trace.model.Trace`.

nsys (2024 and later) exports the tables of a report as one Arrow IPC file per table,
``TABLE.arrow``, with the SQLite export's table and column names. Writing them takes about
half as long as writing the SQLite export (H200 machine, nsys 2025.3.1, 360k kernels:
1.4-1.6 s vs 2.0-3.3 s), and reading them is a memory map. ``launchprof profile`` uses
this to analyse a recording while nsys is still writing its SQLite export
(:mod:`launchprof.commands.early`).

The same loader builds the frames as for a SQLite export
(:func:`launchprof.trace.loader.load_tables`): the big numeric tables
(:data:`~launchprof.trace.tables.NUMERIC_TABLES`) are read straight from Arrow into
numpy columns by :class:`ArrowReader`; the small tables the loader queries with SQL
(strings, NVTX events, GPUs, processes, streams, export metadata) are copied into an
in-memory SQLite database, every other table is created there empty, with its columns,
so that the loader sees the same schema. Only tables with at least one row are taken:
nsys's SQLite export creates a table only when it has data (``--lazy=true``, its
default), while the Arrow export writes every table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from launchprof.errors import TraceError
from launchprof.trace.columns import Column, Reader, WrongType, _fit, _int64_values
from launchprof.trace.footprint import check_fits
from launchprof.trace.model import Trace
from launchprof.trace.tables import LOADED_TABLES, NUMERIC_TABLES, SQL_TABLES

ARROW_SUFFIX = ".arrow"
NUMERIC = frozenset(table for table, _, _ in NUMERIC_TABLES)


def _open(path: Path) -> Any:
    """The Arrow table in ``path`` (IPC file format, else stream format), memory-mapped."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    source = pa.memory_map(str(path))
    try:
        return ipc.open_file(source).read_all()
    except pa.ArrowInvalid:
        return ipc.open_stream(pa.memory_map(str(path))).read_all()


def read_tables(folder: Path) -> dict[str, Any]:
    """``{table name: pyarrow.Table}`` of the ``*.arrow`` files in ``folder`` with at least one row.

    Raises:
        TraceError: ``folder`` is not a folder, holds no ``.arrow`` file, or one cannot be read.
    """
    if not folder.is_dir():
        raise TraceError(f"{folder} is not an nsys arrowdir export (not a folder)")
    files = sorted(folder.glob(f"*{ARROW_SUFFIX}"))
    if not files:
        raise TraceError(f"{folder} holds no .arrow file (not an nsys arrowdir export)")
    tables = {}
    for path in files:
        try:
            table = _open(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors: one message
            raise TraceError(f"cannot read {path} ({exc})") from None
        if table.num_rows:
            tables[path.name[: -len(ARROW_SUFFIX)]] = table
    return tables


class ArrowReader(Reader):
    """:class:`~launchprof.trace.columns.Reader` over Arrow tables: integer columns as
    int64 (int32 where ``narrow`` allows), NULLs masked; a non-integer column raises
    :class:`~launchprof.trace.columns.WrongType` (strict) or reads as NULL."""

    def __init__(self, folder: Path, tables: dict[str, Any], say: Callable[[str], None]) -> None:
        super().__init__(folder, None, say)
        self._tables = tables

    def read(
        self, table: str, columns: Sequence[str], label: str, strict: bool, narrow: Sequence[bool]
    ) -> dict[str, Column]:
        import pyarrow as pa

        data = self._tables[table]
        out = {}
        for name, narrowed in zip(columns, narrow, strict=True):
            arr = data.column(name).combine_chunks()
            n = len(arr)
            if pa.types.is_null(arr.type) or (not pa.types.is_integer(arr.type) and not strict):
                out[name] = Column(np.zeros(n, np.int64), np.ones(n, bool))
                continue
            if not pa.types.is_integer(arr.type):
                raise WrongType()
            values, null = _int64_values(arr)
            out[name] = Column(_fit(values, narrowed), null)
        self.say(f"{label}: {data.num_rows:,} rows")
        return out

    def close(self) -> None:
        self._tables = {}


def _sql_type(arrow_type: Any) -> str:
    import pyarrow as pa

    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return "INTEGER"
    if pa.types.is_floating(arrow_type):
        return "REAL"
    return "TEXT"


def _python(column: Any) -> list[Any]:
    """A column's values as Python objects (bool as int, as SQLite stores it)."""
    import pyarrow as pa

    if pa.types.is_boolean(column.type):
        column = column.cast(pa.int64())
    return column.to_pylist()  # type: ignore[no-any-return]


def memory_database(tables: dict[str, Any]) -> sqlite3.Connection:
    """An in-memory SQLite database with every table of ``tables`` (same columns), the
    rows of :data:`~launchprof.trace.tables.SQL_TABLES` copied in, the others empty."""
    con = sqlite3.connect(":memory:")
    for name, table in tables.items():
        cols = ", ".join(f'"{f.name}" {_sql_type(f.type)}' for f in table.schema)
        con.execute(f'CREATE TABLE "{name}" ({cols})')
        if name in SQL_TABLES:
            marks = ", ".join("?" for _ in table.schema)
            rows = zip(*(_python(table.column(i)) for i in range(table.num_columns)), strict=True)
            con.executemany(f'INSERT INTO "{name}" VALUES ({marks})', rows)
    return con


def load_arrowdir(
    folder: str | Path,
    path: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    memory_check: bool = True,
) -> Trace:
    """Load an ``nsys export --type arrowdir`` folder.

    Args:
        folder: the folder of ``TABLE.arrow`` files.
        path: the path recorded as the trace's (e.g. the SQLite export of the same report;
            default ``folder``).
        progress: as for :func:`~launchprof.trace.loader.load_trace`.
        memory_check: as for :func:`~launchprof.trace.loader.load_trace` (the rows
            counted from the Arrow files, which are memory-mapped, not read).

    Returns:
        A :class:`Trace` with the frames :func:`~launchprof.trace.loader.load_trace` makes
        from the SQLite export of the same report (tests/test_arrowdir.py compares them).

    Raises:
        TraceError: not an arrowdir export, or a table cannot be read.
        TraceTooLargeError: ``memory_check`` found the trace too large for the memory
            available.
    """
    from launchprof.trace.loader import load_tables

    folder = Path(folder)
    say = progress or (lambda _msg: None)
    tables = read_tables(folder)
    if memory_check:
        check_fits(
            (Path(path) if path is not None else folder).name, {t: tables[t].num_rows for t in NUMERIC if t in tables}
        )
    con = memory_database(tables)
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    reader = ArrowReader(folder, {k: v for k, v in tables.items() if k in NUMERIC}, say)
    try:
        return load_tables(Path(path) if path is not None else folder, con, reader, say)
    finally:
        reader.close()
        con.close()


__all__ = ["LOADED_TABLES", "ArrowReader", "load_arrowdir", "memory_database", "read_tables"]
