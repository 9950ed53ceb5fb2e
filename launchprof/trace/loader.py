"""Load an nsys SQLite export into a :class:`~launchprof.trace.model.Trace`.

Reads only the columns the analysis uses, detects the export's schema (nsys 2022.4
writes ``EXPORT_META_DATA`` and schema 3.0; nsys 2025.3 writes ``META_DATA_EXPORT`` and
schema 3.20) and tolerates missing tables and columns: a missing activity table gives
an empty frame, a missing optional column a column of NULLs, and each omission is
recorded in ``Trace.notes``.

Reading: the large numeric tables (kernels, memory operations, graph trace, CUDA API
calls: :mod:`launchprof.trace.activity`) are read through the ADBC SQLite driver into
Arrow record batches and converted batch by batch into compact numpy columns (int64
times, int32 small ids), which is ~5x faster and ~3x leaner than
``pandas.read_sql_query`` (benchmarks/bench_analyze.py). Those tables are read by
background threads (a table of millions of rows in parts, one thread each) while the
strings and NVTX ranges are read (SQLite releases the GIL):
:mod:`launchprof.trace.readahead`. When a column holds values of the wrong type (text
where nsys writes integers), the table is read again with SQLite converting such values
to NULL, and the affected rows are counted in the notes. Strings
(``StringIds``, NVTX text, process and GPU names) are read with the ``sqlite3`` module,
decoding invalid UTF-8 with U+FFFD replacement.

Cleaning (:mod:`launchprof.trace.activity`), each step noted: rows whose
``start``/``end``/``deviceId`` is NULL or not an integer, or whose end precedes start, are
skipped; exact duplicate rows are skipped.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchprof.errors import TraceError
from launchprof.text import seconds_text, window_text
from launchprof.trace.activity import load_api, load_graph_execs, load_kernels, load_memops
from launchprof.trace.columns import (
    ALL_ROWS,
    Reader,
    Rows,
    decode_text,
    nvtx_select,
    process_of,
    ro_uri,
    table_columns,
)
from launchprof.trace.footprint import check_fits, table_rows
from launchprof.trace.model import Trace, TraceSchema
from launchprof.trace.pids import pid_array, plain_pids
from launchprof.trace.readahead import forget_prefetch, prefetch, take_prefetched, take_prefetched_rows
from launchprof.trace.tables import (
    NUMERIC_TABLES,
    NVTX_DOMAIN_CREATE,
    NVTX_RANGE_TYPES,
    NVTX_TABLE,
    PID_MASK,
    PROCESS_COLUMNS,
)

SQLITE_MAGIC = b"SQLite format 3\x00"


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise TraceError(f"no such file: {path}")
    if path.is_dir():
        raise TraceError(f"{path} is a directory, not an nsys .sqlite export")
    if not path.is_file():  # a FIFO or device: reading it could block for ever
        raise TraceError(f"{path} is not a regular file (expected an nsys .sqlite export)")
    try:
        with path.open("rb") as fh:
            head = fh.read(20)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror}") from None
    if len(head) == 0:
        raise TraceError(f"{path} is empty (0 bytes), not an nsys .sqlite export")
    if head[:16] != SQLITE_MAGIC:
        raise TraceError(f"{path} is not an SQLite file (expected an nsys .sqlite export)")
    try:
        con = sqlite3.connect(ro_uri(path), uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        if head[18:20] == b"\x02\x02" and isinstance(exc, sqlite3.OperationalError):
            raise TraceError(
                f"cannot open {path}: a WAL-mode SQLite file whose -wal file cannot be read here without "
                f"write access to its folder ({exc}); copy it with its -wal file to a writable folder"
            ) from None
        raise TraceError(f"{path} is a damaged SQLite file ({exc})") from None
    con.text_factory = decode_text
    return con


def _schema(con: sqlite3.Connection) -> TraceSchema:
    tables = table_columns(con)
    meta: dict[str, str] = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables and {"name", "value"} <= set(tables[table]):
            meta.update({str(k): str(v) for k, v in con.execute(f"SELECT name, value FROM {table}")})
    return TraceSchema(
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        tables=tables,
    )


def _load_nvtx(
    con: sqlite3.Connection,
    schema: TraceSchema,
    strings: pd.Series,
    notes: list[str],
    read_ahead: Callable[[str], list[tuple[Any, ...]] | None] | None = None,
    kept: Rows = ALL_ROWS,
) -> tuple[pd.DataFrame, int]:
    """NVTX ranges (and the number of domain-create events), of the rows ``kept`` only
    (:class:`~launchprof.trace.columns.Rows`); ``read_ahead(sql)``: the rows of the query when read ahead
    (:func:`~launchprof.trace.readahead.take_prefetched_rows`), or None."""
    cols = ["start", "end", "tid", "pid", "text", "domain"]
    empty = pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    table = NVTX_TABLE
    if not schema.has(table):
        return empty, 0
    if kept.pid is not None and PROCESS_COLUMNS[table] not in schema.tables[table]:
        notes.append(
            f"{table} has no {PROCESS_COLUMNS[table]} column: its ranges cannot be told apart by process, skipped"
        )
        return empty, 0
    sql = nvtx_select(schema.tables, kept)
    if sql is None:
        notes.append(f"{table} lacks column(s) start or eventType: NVTX ranges skipped")
        return empty, 0
    rows = read_ahead(sql) if read_ahead is not None else None  # read by a background thread, or now
    if rows is None:
        rows = con.execute(sql).fetchall()
    notes.extend(_ranges_cut(con, schema, kept))
    domain_names, n_domains, ranges = _split_events(rows, kept)
    valid = [r for r in ranges if type(r[0]) is int and type(r[1]) is int and r[1] >= r[0]]
    n_bad = len(ranges) - len(valid)
    if n_bad:
        notes.append(f"{table}: {n_bad} NVTX range(s) without a valid start/end skipped")
    lookup = _string_lookup(strings)

    def text_of(text: object, text_id: object) -> str:
        if isinstance(text, str):
            return text
        if type(text_id) is int:
            value = lookup(text_id)
            return f"<unknown #{text_id}>" if value is None else str(value)
        return "" if text is None else str(text)

    n = len(valid)
    tid = np.fromiter((r[5] if type(r[5]) is int else 0 for r in valid), np.int64, n)
    out = pd.DataFrame(
        {
            "start": np.fromiter((r[0] for r in valid), np.int64, n),
            "end": np.fromiter((r[1] for r in valid), np.int64, n),
            "tid": tid,
            "pid": pid_array(tid),
            "text": [text_of(r[3], r[4]) for r in valid],
            "domain": [domain_names.get(r[6], "") if type(r[6]) is int else "" for r in valid],
        }
    )
    # Only ranges sharing their start can be duplicates: compare rows only when some do.
    start = out["start"].to_numpy()
    if n > 1 and not (start[1:] > start[:-1]).all() and np.unique(start).size < n:
        dup = out.duplicated()
        if dup.any():
            notes.append(f"{table}: {int(dup.sum())} duplicate NVTX range(s) skipped")
            out = out.loc[~dup.to_numpy()]
    return out.reset_index(drop=True), n_domains


def _split_events(rows: list[tuple[Any, ...]], kept: Rows) -> tuple[dict[int, str], int, list[tuple[Any, ...]]]:
    """The NVTX query's rows as (domain names by id, domain-create events in ``kept``'s
    window, range rows). Plain Python over the fetched tuples (no per-row pandas calls);
    eventType compares as a number: 59.0 is a range as 59 is."""
    domain_names: dict[int, str] = {}
    n_domains = 0
    ranges = []
    begin, end = kept.window if kept.window is not None else (-math.inf, math.inf)
    for row in rows:
        etype = row[2]
        if etype == NVTX_DOMAIN_CREATE:
            # kept wherever they are (their names), counted in the window only: a window
            # without ranges is not a trace whose nsys lost them (timeline.core's check)
            n_domains += isinstance(row[0], (int, float)) and begin <= row[0] < end
            d, t = row[6], row[3]
            if type(d) is int and t is not None:
                domain_names[d] = str(t)
        elif etype in NVTX_RANGE_TYPES:
            ranges.append(row)
    return domain_names, n_domains, ranges


def _string_lookup(strings: pd.Series) -> Callable[[int], Any]:
    """``strings.get`` (the StringIds value of an id, None when absent), through a dict
    made on first use when the ids are unique."""
    found: list[Callable[[int], Any]] = []

    def get(string_id: int) -> Any:
        if not found:
            unique = strings.index.is_unique
            found.append(
                dict(zip(strings.index.tolist(), strings.tolist(), strict=True)).get if unique else strings.get
            )
        return found[0](string_id)

    return get


def _load_strings(con: sqlite3.Connection, schema: TraceSchema, notes: list[str]) -> pd.Series:
    if not schema.has("StringIds", "id") or not schema.has("StringIds", "value"):
        if schema.has("CUPTI_ACTIVITY_KIND_KERNEL") or schema.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            notes.append("StringIds table missing: kernel and API names are shown as ids")
        return pd.Series(dtype="object")
    rows = con.execute("SELECT id, value FROM StringIds WHERE typeof(id) = 'integer'").fetchall()
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    values = np.array(["" if r[1] is None else str(r[1]) for r in rows], dtype=object)
    strings = pd.Series(values, index=ids, dtype="object")
    duplicated = strings.index.duplicated(keep="first")
    if duplicated.any():  # nsys writes each id once; an edited file may not: the first row stands
        notes.append(f"StringIds holds {int(duplicated.sum())} id(s) more than once: the first row of each is used")
        strings = strings[~duplicated]
    return strings


def _load_small(con: sqlite3.Connection, schema: TraceSchema, table: str, spec: dict[str, str]) -> pd.DataFrame:
    """A small table (GPUs, processes): integer key column and a text column."""
    cols = list(spec)
    key = cols[0]
    empty = pd.DataFrame({c: pd.Series(dtype="object") for c in spec.values()})
    if not all(schema.has(table, c) for c in cols):
        return empty
    sel = ", ".join(f'"{c}"' for c in cols)
    rows = con.execute(f'SELECT {sel} FROM "{table}" WHERE typeof("{key}") = \'integer\'').fetchall()
    return pd.DataFrame({spec[c]: [r[i] for r in rows] for i, c in enumerate(cols)}, dtype=object)


def _load_int_table(con: sqlite3.Connection, schema: TraceSchema, table: str, spec: dict[str, str]) -> pd.DataFrame:
    """A small table of integer columns (e.g. TARGET_INFO_CUDA_STREAM); rows with a
    non-integer value in any column are skipped. Empty (typed int64) when the table or a
    column is missing."""
    empty = pd.DataFrame({c: pd.Series(dtype="int64") for c in spec.values()})
    if not all(schema.has(table, c) for c in spec):
        return empty
    cols = ", ".join(f'"{c}"' for c in spec)
    typed = " AND ".join(f"typeof(\"{c}\") = 'integer'" for c in spec)
    rows = con.execute(f'SELECT {cols} FROM "{table}" WHERE {typed}').fetchall()
    if not rows:
        return empty
    return pd.DataFrame(rows, columns=list(spec.values()), dtype="int64")


def _ranges_cut(con: sqlite3.Connection, schema: TraceSchema, kept: Rows) -> list[str]:
    """A note when NVTX ranges began before ``kept``'s window and end in or after it: they
    are left out (:class:`~launchprof.trace.columns.Rows`), and a step cut by the
    window's start with them."""
    have = schema.tables[NVTX_TABLE]
    if kept.window is None or "end" not in have:
        return []
    begin = int(kept.window[0])
    process = kept.where(NVTX_TABLE, have, timed=False)
    types = ", ".join(str(t) for t in NVTX_RANGE_TYPES)
    sql = f'SELECT count(*) FROM "{NVTX_TABLE}" WHERE "eventType" IN ({types}) AND "start" < ? AND "end" > ?'
    n = con.execute(sql + (f" AND {process}" if process else ""), (begin, begin)).fetchone()[0]
    if not n:
        return []
    return [
        f"{n} NVTX range(s) began before the time range and end in or after its start: left out, as a step "
        "cut by it (--time-range)"
    ]


def load_trace(
    path: str | Path, progress: Callable[[str], None] | None = None, rows: Rows = ALL_ROWS, memory_check: bool = True
) -> Trace:
    """Load an nsys SQLite export.

    Args:
        path: the ``.sqlite`` file written by ``nsys export --type sqlite``.
        progress: optional callback given a short description before each table and
            a running row count while large tables are read (``"kernels: 262,144 rows"``).
        rows: load only these rows of the activity, CUDA API and NVTX tables
            (:class:`~launchprof.trace.columns.Rows`), with a note saying so. ``rows.pid``:
            one process's, a pid or a ``globalPid >> 24`` value of :func:`gpu_processes`,
            which tells apart processes with one pid on two hosts or VMs
            (:func:`~launchprof.trace.columns.process_where`; ``launchprof analyze
            --per-process``); ``rows.window``: those starting in a time range
            (``launchprof analyze --time-range``). The memory is that of the rows kept;
            the tables are read ahead as for the whole trace, each query keeping them.
        memory_check: refuse a trace whose ``rows`` need more memory to analyse than
            this process can have, before any of them is read
            (:func:`~launchprof.trace.footprint.check_fits`: counted exactly, a scan of
            each table, only when the whole trace would not fit); False: try anyway.

    Returns:
        A :class:`Trace` (frames described in :mod:`launchprof.trace.model`).

    Raises:
        TraceError: the file is missing, a directory, empty, not SQLite, or damaged
            (e.g. truncated).
        TraceTooLargeError: ``memory_check`` found the rows too many for the memory
            available.
    """
    path = Path(path)
    say = progress or (lambda _msg: None)
    con = _connect(path)
    if memory_check:
        try:
            check_fits(path.name, table_rows(con), lambda: table_rows(con, exact=True, kept=rows), rows)
        except BaseException:
            con.close()
            raise
    # The big tables, read by background threads (launchprof.trace.readahead); checked just above.
    prefetch(path, rows, memory_check=False)
    reader = Reader(
        path,
        con,
        say,
        read_ahead=lambda table, cols, narrow: take_prefetched(path, table, cols, narrow, rows),
        rows=rows,
    )
    try:
        trace = load_tables(path, con, reader, say, nvtx_read_ahead=lambda sql: take_prefetched_rows(path, sql, rows))
        elsewhere = [_gpu_work_outside(con, rows)] if rows.window is not None and not _has_gpu_rows(trace) else []
    finally:
        reader.close()
        con.close()
        forget_prefetch(path, rows)
    if rows == ALL_ROWS:
        return trace
    return replace(trace, window=rows.window, notes=(*trace.notes, *rows_notes(rows), *elsewhere))


def _has_gpu_rows(trace: Trace) -> bool:
    return bool(len(trace.kernels) or len(trace.memops) or len(trace.graph_execs))


def gpu_work_outside(path: str | Path, kept: Rows) -> str:
    """For a window without GPU work (``kept.window``; of ``kept.pid``'s process, when
    given): where the GPU work of the SQLite export ``path`` is instead
    (:func:`_gpu_work_outside`).

    Raises:
        TraceError: as :func:`load_trace`.
    """
    con = _connect(Path(path))
    try:
        return _gpu_work_outside(con, kept)
    finally:
        con.close()


def _gpu_work_outside(con: sqlite3.Connection, kept: Rows) -> str:
    """Where the GPU work is, for a window (``kept.window``) without it: the first and
    last start of the kernels, memory operations and graph launches (of ``kept.pid``'s
    process, when given), and the last start before the window and the first after it -
    a scan of each table, on this path only - or that there is none."""
    tables = table_columns(con)
    begin, end = (int(t) for t in kept.window or (0, 0))
    found: list[tuple[Any, ...]] = []
    for table, _, _ in NUMERIC_TABLES:
        if PROCESS_COLUMNS.get(table) != "globalPid" or "start" not in tables.get(table, ()):
            continue
        own = kept.where(table, tables[table], timed=False) if kept.pid is not None else None
        found.append(
            con.execute(
                f'SELECT min("start"), max("start"), max(CASE WHEN "start" < {begin} THEN "start" END), '
                f'min(CASE WHEN "start" >= {end} THEN "start" END) FROM "{table}"' + (f" WHERE {own}" if own else "")
            ).fetchone()
        )

    def pick(i: int, best: Callable[..., int]) -> int | None:
        values = [row[i] for row in found if type(row[i]) is int]
        return best(values) if values else None

    whose = "the trace" if kept.pid is None else f"process {kept.pid & PID_MASK}"
    first, last = pick(0, min), pick(1, max)
    if first is None or last is None:
        return f"{whose} holds no GPU work at all (no kernel, memcpy, memset or graph launch)"
    near = [f"the last before it at {seconds_text(b)} s" for b in [pick(2, max)] if b is not None]
    near += [f"the first after it at {seconds_text(a)} s" for a in [pick(3, min)] if a is not None]
    return (
        f"no GPU work starts in the time range; {whose}'s starts in {window_text((first, last + 1))} s of its clock"
        + (f", {' and '.join(near)}" if near else "")
    )


def rows_notes(rows: Rows) -> list[str]:
    """The notes of a load of ``rows`` only: what was read, and the option that asked."""
    notes = []
    if rows.pid is not None:
        notes.append(f"only the rows of process {rows.pid & PID_MASK} were read (--per-process)")
    if rows.window is not None:
        within = window_text(rows.window)
        notes.append(f"only the rows starting in {within} s of the trace's clock were read (--time-range)")
    return notes


def gpu_processes(path: str | Path, rows: Rows = ALL_ROWS) -> list[int]:
    """The processes with GPU work in the SQLite export ``path`` (among ``rows``: those
    of its time window, when given): the ``globalPid >> 24`` values (the pid in the low
    24 bits, the host and VM ids above: :func:`~launchprof.trace.columns.process_of`) of
    the rows of its activity tables (kernels, memory operations, graph launches),
    ascending - what ``launchprof analyze --per-process`` loads one at a time
    (:func:`load_trace`'s ``rows.pid``; they are shown as
    :func:`~launchprof.trace.pids.shown_pids` says).

    Raises:
        TraceError: as :func:`load_trace`; an activity table without ``globalPid``.
    """
    path = Path(path)
    con = _connect(path)
    pids: set[int] = set()
    try:
        tables = table_columns(con)
        for table, _, _ in NUMERIC_TABLES:
            if PROCESS_COLUMNS.get(table) != "globalPid" or table not in tables:
                continue
            pid = process_of(table, tables[table])
            kept = rows.where(table, tables[table])
            sql = f'SELECT DISTINCT {pid} FROM "{table}"' + (f" WHERE {kept}" if kept else "")
            pids.update(int(r[0]) for r in con.execute(sql) if r[0] is not None)
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path} could not be read ({exc}); is it truncated?") from None
    finally:
        con.close()
    return sorted(pids)


def load_tables(
    path: Path,
    con: sqlite3.Connection,
    reader: Reader,
    say: Callable[[str], None],
    nvtx_read_ahead: Callable[[str], list[tuple[Any, ...]] | None] | None = None,
) -> Trace:
    """The :class:`Trace` of an export: the small tables through ``con`` (SQL), the big
    numeric ones through ``reader`` (:class:`~launchprof.trace.columns.Reader`); ``path``
    is recorded as the trace's path. Shared by :func:`load_trace` and
    :func:`launchprof.trace.arrowdir.load_arrowdir`. ``nvtx_read_ahead(sql)``: the NVTX
    query's rows when read ahead, else None (then ``con`` is asked).

    Raises:
        TraceError: a table cannot be read.
    """
    notes: list[str] = []
    try:
        schema = _schema(con)
        say("strings")
        strings = _load_strings(con, schema, notes)
        say("kernels")
        kernels = load_kernels(reader, schema, notes)
        say("memory operations")
        memops = load_memops(reader, schema, notes)
        graph_execs = load_graph_execs(reader, schema, notes)
        say("CUDA API calls")
        api = load_api(reader, schema, strings, notes)
        say("NVTX ranges")
        nvtx, domain_events = _load_nvtx(con, schema, strings, notes, nvtx_read_ahead, reader.rows)
        gpus = _load_small(con, schema, "TARGET_INFO_GPU", {"id": "device_id", "name": "name"})
        processes = _load_small(con, schema, "PROCESSES", {"pid": "pid", "name": "name"})
        cuda_streams = _load_int_table(
            con, schema, "TARGET_INFO_CUDA_STREAM", {"streamId": "stream_id", "processId": "pid", "flag": "flag"}
        )
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path} could not be read ({exc}); is it truncated?") from None
    plain_pids([kernels, memops, graph_execs, api, nvtx], notes)
    return Trace(
        path=path,
        schema=schema,
        kernels=kernels,
        memops=memops,
        graph_execs=graph_execs,
        api=api,
        nvtx=nvtx,
        gpus=gpus,
        processes=processes,
        cuda_streams=cuda_streams,
        strings=strings,
        nvtx_domain_events=domain_events,
        notes=tuple(notes),
    )


__all__ = ["gpu_processes", "load_trace"]
