"""The activity tables of an nsys export as frames: kernels, memory operations (memcpy and
memset), graph launches (the graph trace) and CUDA API calls (runtime and driver), read
from their numeric columns by a :class:`~launchprof.trace.columns.Reader` (absent optional
columns as NULLs, values of the wrong type as missing), renamed, cleaned (rows whose
``start``/``end``/``deviceId`` is NULL or not an integer, or whose end precedes start, or
that start before 0, skipped; exact duplicate rows skipped; each step noted) and put in the
column order of :mod:`launchprof.trace.model`. :func:`launchprof.trace.loader.load_tables`
reads the other tables and makes the :class:`~launchprof.trace.model.Trace`.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from launchprof.errors import TraceError
from launchprof.trace.columns import NARROW, Column, Reader, WrongType, narrow
from launchprof.trace.model import TraceSchema
from launchprof.trace.pids import pid_array
from launchprof.trace.tables import (
    ACTIVITY_REQUIRED,
    API_COLS,
    API_REQUIRED,
    GRAPH_TRACE_COLS,
    KERNEL_COLS,
    MEMCPY_COLS,
    MEMSET_COLS,
)

# nsys's version suffix of a CUDA API name: cudaLaunchKernel_v7000, cudaLaunchKernel_ptsz_v7000;
# a driver call's per-thread form puts it before the stream suffix (cuMemcpyHtoD_v2_ptds in
# cuda.h): removed there too, so each call has one name whatever its version.
_VERSION_SUFFIX = re.compile(r"_v\d+(?=(?:_ptsz|_ptds)?$)")

# Columns that older nsys exports lack (2022.4 has no graphNodeId): absent without a note.
_OPTIONAL_BY_VERSION = {"graphNodeId", "graphId"}


# params: one table's read: the reader, the schema notes, the table's column lists
def _read_numeric(
    reader: Reader,
    schema: TraceSchema,
    table: str,
    columns: dict[str, str],
    required: tuple[str, ...],
    notes: list[str],
    label: str,
) -> dict[str, Column] | None:
    """The wanted columns of ``table`` (renamed); absent optional columns are all-NULL.

    Returns None when the table is absent or lacks a required column (noted)."""
    if not schema.has(table):
        return None
    present = [c for c in columns if schema.has(table, c)]
    missing_required = [c for c in required if c not in present]
    if missing_required:
        notes.append(f"{table} lacks column(s) {', '.join(missing_required)}: table skipped")
        return None
    narrowed = [columns[c] in NARROW for c in present]
    try:
        try:
            raw = reader.read(table, present, label, strict=True, narrow=narrowed)
        except WrongType:
            raw = reader.read(table, present, label, strict=False, narrow=narrowed)
            notes.append(f"{table}: values of the wrong type (not integers) read as missing")
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"cannot read table {table} of {reader.path} ({exc}); is the file truncated?") from None
    except Exception as exc:  # ADBC reports SQLite errors as its own exception classes
        raise TraceError(f"cannot read table {table} of {reader.path} ({exc}); is the file truncated?") from None
    n = len(next(iter(raw.values())).values) if raw else 0
    absent = [c for c in columns if c not in present and c not in _OPTIONAL_BY_VERSION]
    if absent:
        notes.append(f"{table} lacks column(s) {', '.join(absent)}: read as missing")
    out = {columns[c]: raw[c] for c in present}
    for c, name in columns.items():
        if c not in present:
            out[name] = Column(np.zeros(n, np.int64), np.ones(n, bool))
    return out


def _valid_rows(cols: dict[str, Column], required: Sequence[str], table: str, notes: list[str]) -> np.ndarray | None:
    """Mask of rows with non-NULL required columns, start >= 0 and end >= start; None when
    all are valid."""
    n = len(cols["start"].values)
    bad = np.zeros(n, bool)
    for name in required:
        if cols[name].null is not None:
            bad |= cols[name].null
    bad |= cols["end"].values < cols["start"].values
    bad |= cols["start"].values < 0  # nsys's clock starts at 0 or later: a damaged or edited row
    if not bad.any():
        return None
    what = " or ".join(["end < start", "start < 0"] + [f"missing {r}" for r in required])
    notes.append(f"{table}: {int(bad.sum())} row(s) with {what} skipped")
    return ~bad


def _frame(
    cols: dict[str, Column], keep: np.ndarray | None, fills: dict[str, int], nullable: Sequence[str] = ()
) -> pd.DataFrame:
    """DataFrame of ``cols`` (rows in ``keep``), NULLs filled per ``fills`` (-1 default)."""
    data: dict[str, Any] = {}
    for name, col in cols.items():
        values = col.values if keep is None else col.values[keep]
        null = None if col.null is None else (col.null if keep is None else col.null[keep])
        if name in nullable:
            data[name] = pd.arrays.IntegerArray(
                values, null if null is not None else np.zeros(len(values), bool), copy=False
            )
            continue
        if null is not None:
            values = np.where(null, fills.get(name, -1), values)
        if name == "global_pid":
            data["pid"] = pid_array(values)
            continue
        data[name] = narrow(values) if name in NARROW else values
    return pd.DataFrame(data, copy=False)


def _dedup(frame: pd.DataFrame, table: str, notes: list[str]) -> pd.DataFrame:
    """Drop exact duplicate rows, keeping the first (noted).

    Only rows sharing their ``start`` with another row can be duplicates, so only those
    are compared (a stable sort finds them; nsys tables are nearly sorted, so it is fast).
    """
    start = frame["start"].to_numpy()
    if start.size < 2:
        return frame
    step = np.diff(start)
    low = step.min()
    if low > 0:  # strictly increasing (the usual case): no two rows share a start
        return frame
    order = np.arange(start.size) if low == 0 else np.argsort(start, kind="stable")
    s = start[order]
    eq = s[1:] == s[:-1]
    if not eq.any():
        return frame
    cand = np.zeros(start.size, bool)
    cand[1:] |= eq
    cand[:-1] |= eq
    rows = np.sort(order[cand])
    dup_local = frame.iloc[rows].duplicated().to_numpy()
    if not dup_local.any():
        return frame
    keep = np.ones(start.size, bool)
    keep[rows[dup_local]] = False
    notes.append(f"{table}: {int(dup_local.sum())} duplicate row(s) skipped")
    return frame.loc[keep].reset_index(drop=True)


# params: one table's read: the reader, the schema notes, the table's column lists
def _activity(
    reader: Reader,
    schema: TraceSchema,
    table: str,
    columns: dict[str, str],
    notes: list[str],
    label: str,
    nullable: Sequence[str] = (),
) -> pd.DataFrame | None:
    cols = _read_numeric(reader, schema, table, columns, ACTIVITY_REQUIRED, notes, label)
    if cols is None:
        return None
    keep = _valid_rows(cols, ("start", "end", "device_id"), table, notes)
    frame = _frame(cols, keep, {"global_pid": 0}, nullable)
    return _dedup(frame, table, notes)


_KERNEL_ORDER = [
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


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64") for c in columns})


def load_kernels(reader: Reader, schema: TraceSchema, notes: list[str]) -> pd.DataFrame:
    frame = _activity(
        reader, schema, "CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLS, notes, "kernels", nullable=("graph_node_id",)
    )
    if frame is None:
        out = _empty(_KERNEL_ORDER)
        out["graph_node_id"] = out["graph_node_id"].astype("Int64")
        return out
    if len(frame) == 0 and reader.rows.window is None:  # a window without kernels gets its own note (loader)
        notes.append("CUPTI_ACTIVITY_KIND_KERNEL holds no kernel with a valid start/end")
    return frame if list(frame.columns) == _KERNEL_ORDER else frame[_KERNEL_ORDER]


_MEMOP_ORDER = [
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


def load_memops(reader: Reader, schema: TraceSchema, notes: list[str]) -> pd.DataFrame:
    parts = []
    for table, kind, spec in (
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy", MEMCPY_COLS),
        ("CUPTI_ACTIVITY_KIND_MEMSET", "memset", MEMSET_COLS),
    ):
        frame = _activity(reader, schema, table, spec, notes, "memory operations", nullable=("graph_node_id",))
        if frame is None:
            continue
        frame["kind"] = kind
        if "copy_kind" not in frame:
            frame["copy_kind"] = np.int64(-1)
        parts.append(frame[_MEMOP_ORDER])
    if not parts:
        out = _empty(_MEMOP_ORDER)
        out["graph_node_id"] = out["graph_node_id"].astype("Int64")
        out["kind"] = out["kind"].astype("object")
        return out
    out = pd.concat(parts, ignore_index=True)
    out["kind"] = out["kind"].astype("object")
    return out


def load_graph_execs(reader: Reader, schema: TraceSchema, notes: list[str]) -> pd.DataFrame:
    cols = ["start", "end", "device_id", "stream_id", "pid", "correlation_id", "graph_id"]
    frame = _activity(reader, schema, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", GRAPH_TRACE_COLS, notes, "graph launches")
    if frame is None:
        return _empty(cols)
    return frame[cols]


def call_names(name_id: np.ndarray, strings: pd.Series) -> pd.Categorical:
    """Categorical of API function names (``_vNNNN`` removed) for StringIds ids: one value
    per ``name_id``, ``<unknown #ID>`` for an id missing from ``strings`` (the StringIds
    table: values indexed by id)."""
    # Distinct ids: StringIds ids are small, so a table marked by id finds them without a sort.
    lo, hi = (int(name_id.min()), int(name_id.max())) if name_id.size else (0, -1)
    small = name_id.size > 0 and hi - lo < max(1 << 16, 4 * name_id.size)
    if small:
        base = min(lo, 0)  # a table from id 0 (ids are >= 0): rows index it without a shift
        offset = name_id if base == 0 else name_id - base
        seen = np.zeros(hi - base + 1, bool)
        seen[offset] = True
        ids = np.flatnonzero(seen) + base
    else:
        ids = np.unique(name_id)
    names = [
        _VERSION_SUFFIX.sub("", str(strings.get(int(i)))) if int(i) in strings.index else f"<unknown #{int(i)}>"
        for i in ids
    ]
    categories, name_code = np.unique(np.asarray(names, dtype=object), return_inverse=True)
    if small:  # each row's code, from a table indexed by id
        table = np.zeros(seen.size, np.int32)
        table[ids - base] = name_code
        codes = table[offset]
    else:
        codes = (name_code[np.searchsorted(ids, name_id)] if len(ids) else np.empty(0, np.int64)).astype(np.int32)
    # The codes are in range by construction: no validation pass.
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(list(categories)), validate=False)


def load_api(reader: Reader, schema: TraceSchema, strings: pd.Series, notes: list[str]) -> pd.DataFrame:
    parts = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        cols = _read_numeric(reader, schema, table, API_COLS, API_REQUIRED, notes, "CUDA API calls")
        if cols is None:
            continue
        keep = _valid_rows(cols, ("start", "end", "name_id"), table, notes)
        frame = _frame(cols, keep, {"tid": 0})
        parts.append(_dedup(frame, table, notes))
    out_cols = ["start", "end", "tid", "pid", "correlation_id", "name_id", "call"]
    if not parts:
        out = _empty(out_cols[:-1])
        out["call"] = pd.Categorical([])
        return out
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    frame["pid"] = pid_array(frame["tid"].to_numpy())
    frame["call"] = call_names(frame["name_id"].to_numpy(), strings)
    start = frame["start"].to_numpy()
    if start.size > 1 and (start[1:] < start[:-1]).any():
        order = np.argsort(start, kind="stable")
        frame = frame.take(order)
    return frame[out_cols].reset_index(drop=True)
