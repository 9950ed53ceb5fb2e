"""Load an nsys SQLite export into a :class:`~launchprof.trace.model.Trace`.

Reads only the columns the analysis uses, detects the export's schema (nsys 2022.4
writes ``EXPORT_META_DATA`` and schema 3.0; nsys 2025.3 writes ``META_DATA_EXPORT`` and
schema 3.20) and tolerates missing tables and columns: a missing activity table gives
an empty frame, a missing optional column a column of NULLs, and each omission is
recorded in ``Trace.notes``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from launchprof.errors import TraceError
from launchprof.trace.model import Trace, TraceSchema

SQLITE_MAGIC = b"SQLite format 3\x00"
_VERSION_SUFFIX = re.compile(r"_v\d+$")
# nsys ENUM_NSYS_EVENT_TYPE: 59 NvtxPushPopRange, 60 NvtxStartEndRange, 75 domain create.
NVTX_RANGE_TYPES = (59, 60)
NVTX_DOMAIN_CREATE = 75

_ACTIVITY_COLS = {
    "start": "start",
    "end": "end",
    "deviceId": "device_id",
    "streamId": "stream_id",
    "globalPid": "global_pid",
    "correlationId": "correlation_id",
}
_KERNEL_COLS = {
    **_ACTIVITY_COLS,
    "shortName": "name_id",
    "gridX": "grid_x",
    "gridY": "grid_y",
    "gridZ": "grid_z",
    "blockX": "block_x",
    "blockY": "block_y",
    "blockZ": "block_z",
    "graphNodeId": "graph_node_id",
}


def pid_of(global_id: pd.Series) -> pd.Series:
    """Process id of an nsys serialized globalTid/globalPid: ``(id >> 24) & 0xFFFFFF``."""
    values = global_id.fillna(0).astype("int64").to_numpy()
    return pd.Series((values >> 24) & 0xFFFFFF, index=global_id.index, dtype="int64")


def _connect(path: Path) -> sqlite3.Connection:
    if not path.exists():
        raise TraceError(f"no such file: {path}")
    if path.is_dir():
        raise TraceError(f"{path} is a directory, not an nsys .sqlite export")
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror}") from None
    if head != SQLITE_MAGIC:
        raise TraceError(f"{path} is not an SQLite file (expected an nsys .sqlite export)")
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"{path} is a damaged SQLite file ({exc})") from None
    con.text_factory = lambda b: b.decode("utf-8", errors="replace")
    return con


def _schema(con: sqlite3.Connection) -> TraceSchema:
    tables: dict[str, tuple[str, ...]] = {}
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    for name in names:
        cols = tuple(r[1] for r in con.execute(f'PRAGMA table_info("{name}")'))
        tables[name] = cols
    meta: dict[str, str] = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables and {"name", "value"} <= set(tables[table]):
            meta.update({str(k): str(v) for k, v in con.execute(f"SELECT name, value FROM {table}")})
    return TraceSchema(
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        tables=tables,
    )


def _select(
    con: sqlite3.Connection,
    schema: TraceSchema,
    table: str,
    columns: dict[str, str],
    required: tuple[str, ...],
    notes: list[str],
    where: str = "",
) -> pd.DataFrame | None:
    """SELECT the wanted columns present in ``table``; None when the table is absent."""
    if not schema.has(table):
        return None
    present = [c for c in columns if schema.has(table, c)]
    missing_required = [c for c in required if c not in present]
    if missing_required:
        notes.append(f"{table} lacks column(s) {', '.join(missing_required)}: table skipped")
        return None
    sql_cols = ", ".join(f'"{c}"' for c in present)
    try:
        frame = pd.read_sql_query(f'SELECT {sql_cols} FROM "{table}" {where}', con)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
        raise TraceError(f"cannot read table {table}: {exc}") from None
    frame = frame.rename(columns={c: columns[c] for c in present})
    for col in columns.values():
        if col not in frame.columns:
            frame[col] = pd.NA
    return frame


def _clean_intervals(frame: pd.DataFrame, table: str, notes: list[str]) -> pd.DataFrame:
    """Drop rows without start/end or with end < start, and exact duplicate rows."""
    start = pd.to_numeric(frame["start"], errors="coerce")
    end = pd.to_numeric(frame["end"], errors="coerce")
    bad = start.isna() | end.isna() | (end < start)
    if bad.any():
        notes.append(f"{table}: {int(bad.sum())} row(s) without a valid start/end skipped")
    frame = frame.loc[~bad].copy()
    frame["start"] = start[~bad].astype("int64")
    frame["end"] = end[~bad].astype("int64")
    dup = frame.duplicated()
    if dup.any():
        notes.append(f"{table}: {int(dup.sum())} duplicate row(s) skipped")
        frame = frame.loc[~dup]
    return frame


def _int(frame: pd.DataFrame, cols: list[str], fill: int = -1) -> None:
    for col in cols:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").fillna(fill).astype("int64")


def _activity(
    con: sqlite3.Connection,
    schema: TraceSchema,
    table: str,
    columns: dict[str, str],
    notes: list[str],
    extra_int: list[str] | None = None,
) -> pd.DataFrame | None:
    frame = _select(con, schema, table, columns, ("start", "end", "deviceId"), notes)
    if frame is None:
        return None
    frame = _clean_intervals(frame, table, notes)
    frame["pid"] = pid_of(pd.to_numeric(frame.pop("global_pid"), errors="coerce"))
    _int(frame, ["device_id", "stream_id", "correlation_id"] + (extra_int or []))
    return frame


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})


def _load_kernels(con, schema, notes) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    cols = [
        "start",
        "end",
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
        "graph_node_id",
    ]
    frame = _activity(
        con,
        schema,
        "CUPTI_ACTIVITY_KIND_KERNEL",
        _KERNEL_COLS,
        notes,
        extra_int=["name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"],
    )
    if frame is None:
        out = _empty({c: c for c in cols})
        out["graph_node_id"] = out["graph_node_id"].astype("Int64")
        return out
    frame["graph_node_id"] = pd.to_numeric(frame["graph_node_id"], errors="coerce").astype("Int64")
    return frame[cols].reset_index(drop=True)


def _load_memops(con, schema, notes) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    cols = [
        "start",
        "end",
        "device_id",
        "stream_id",
        "pid",
        "correlation_id",
        "kind",
        "bytes",
        "copy_kind",
        "graph_node_id",
    ]
    parts = []
    for table, kind, extra in (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy", {"bytes": "bytes", "copyKind": "copy_kind"}),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset", {"bytes": "bytes"}),
    ):
        spec = {**_ACTIVITY_COLS, **extra, "graphNodeId": "graph_node_id"}
        frame = _activity(con, schema, table, spec, notes, extra_int=["bytes"])
        if frame is None:
            continue
        frame["kind"] = kind
        if "copy_kind" not in frame:
            frame["copy_kind"] = -1
        _int(frame, ["copy_kind"])
        frame["graph_node_id"] = pd.to_numeric(frame["graph_node_id"], errors="coerce").astype("Int64")
        parts.append(frame[cols])
    if not parts:
        out = _empty({c: c for c in cols})
        out["kind"] = out["kind"].astype("object")
        out["graph_node_id"] = out["graph_node_id"].astype("Int64")
        return out
    return pd.concat(parts, ignore_index=True)


def _load_graph_execs(con, schema, notes) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    cols = ["start", "end", "device_id", "stream_id", "pid", "correlation_id", "graph_id"]
    spec = {**_ACTIVITY_COLS, "graphId": "graph_id"}
    frame = _activity(con, schema, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", spec, notes, ["graph_id"])
    if frame is None:
        return _empty({c: c for c in cols})
    return frame[cols].reset_index(drop=True)


def _load_api(con, schema, strings: pd.Series, notes) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    spec = {"start": "start", "end": "end", "globalTid": "tid", "correlationId": "correlation_id", "nameId": "name_id"}
    parts = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        frame = _select(con, schema, table, spec, ("start", "end", "nameId"), notes)
        if frame is not None:
            parts.append(_clean_intervals(frame, table, notes))
    cols = ["start", "end", "tid", "pid", "correlation_id", "name_id", "call"]
    if not parts:
        out = _empty({c: c for c in cols[:-1]})
        out["call"] = pd.Categorical([])
        return out
    frame = pd.concat(parts, ignore_index=True)
    _int(frame, ["tid", "correlation_id", "name_id"])
    frame["pid"] = pid_of(frame["tid"])
    unique_ids = frame["name_id"].unique()
    names = {int(i): _VERSION_SUFFIX.sub("", str(strings.get(int(i), f"<unknown #{i}>"))) for i in unique_ids}
    frame["call"] = pd.Categorical(frame["name_id"].map(names))
    return frame.sort_values("start", kind="stable", ignore_index=True)[cols]


def _load_nvtx(con, schema, strings: pd.Series, notes) -> tuple[pd.DataFrame, int]:  # type: ignore[no-untyped-def]
    cols = ["start", "end", "tid", "pid", "text", "domain"]
    spec = {
        "start": "start",
        "end": "end",
        "eventType": "event_type",
        "text": "text",
        "textId": "text_id",
        "globalTid": "tid",
        "domainId": "domain_id",
    }
    frame = _select(con, schema, "NVTX_EVENTS", spec, ("start", "eventType"), notes)
    if frame is None:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols}), 0
    etype = pd.to_numeric(frame["event_type"], errors="coerce")
    domains = frame.loc[etype == NVTX_DOMAIN_CREATE]
    domain_names = {
        int(d): str(t) for d, t in zip(domains["domain_id"].fillna(0), domains["text"], strict=False) if t is not None
    }
    ranges = frame.loc[etype.isin(NVTX_RANGE_TYPES)].copy()
    ranges = ranges.loc[ranges["end"].notna()]
    ranges = _clean_intervals(ranges, "NVTX_EVENTS", notes)
    text_ids = pd.to_numeric(ranges["text_id"], errors="coerce")
    registered = text_ids.map(lambda i: strings.get(int(i)) if pd.notna(i) else None)
    ranges["text"] = ranges["text"].where(ranges["text"].notna(), registered).fillna("").astype(str)
    _int(ranges, ["tid", "domain_id"], fill=0)
    ranges["pid"] = pid_of(ranges["tid"])
    ranges["domain"] = ranges["domain_id"].map(lambda d: domain_names.get(int(d), "")).astype(str)
    return ranges[cols].reset_index(drop=True), int(len(domains))


def _load_strings(con: sqlite3.Connection, schema: TraceSchema) -> pd.Series:
    if not schema.has("StringIds", "id") or not schema.has("StringIds", "value"):
        return pd.Series(dtype="object")
    frame = pd.read_sql_query("SELECT id, value FROM StringIds", con)
    return pd.Series(frame["value"].to_numpy(), index=frame["id"].to_numpy())


def _load_small(con, schema: TraceSchema, table: str, spec: dict[str, str]) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    frame = _select(con, schema, table, spec, tuple(spec)[:1], [])
    if frame is None:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in spec.values()})
    return frame


def load_trace(path: str | Path, progress: Callable[[str], None] | None = None) -> Trace:
    """Load an nsys SQLite export.

    Args:
        path: the ``.sqlite`` file written by ``nsys export --type sqlite``.
        progress: optional callback given a short description before each table.

    Returns:
        A :class:`Trace` (frames described in :mod:`launchprof.trace.model`).

    Raises:
        TraceError: the file is missing, a directory, not SQLite, or damaged.
    """
    path = Path(path)
    say = progress or (lambda _msg: None)
    con = _connect(path)
    notes: list[str] = []
    try:
        try:
            schema = _schema(con)
            say("strings")
            strings = _load_strings(con, schema)
            say("kernels")
            kernels = _load_kernels(con, schema, notes)
            say("memory operations")
            memops = _load_memops(con, schema, notes)
            graph_execs = _load_graph_execs(con, schema, notes)
            say("CUDA API calls")
            api = _load_api(con, schema, strings, notes)
            say("NVTX ranges")
            nvtx, domain_events = _load_nvtx(con, schema, strings, notes)
            gpus = _load_small(con, schema, "TARGET_INFO_GPU", {"id": "device_id", "name": "name"})
            processes = _load_small(con, schema, "PROCESSES", {"pid": "pid", "name": "name"})
            cuda_streams = _load_small(
                con, schema, "TARGET_INFO_CUDA_STREAM", {"streamId": "stream_id", "processId": "pid", "flag": "flag"}
            )
        except sqlite3.DatabaseError as exc:
            raise TraceError(f"{path} could not be read ({exc}); is it truncated?") from None
    finally:
        con.close()
    if schema.has("CUPTI_ACTIVITY_KIND_KERNEL") and "graph_node_id" in kernels:
        pass
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


__all__ = ["load_trace", "pid_of", "np"]
