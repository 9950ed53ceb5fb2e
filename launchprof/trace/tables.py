"""The tables and columns of an nsys export that launchprof reads, as data: no import at
all, so the loader (:mod:`launchprof.trace.columns`, :mod:`launchprof.trace.activity`,
:mod:`launchprof.trace.loader`), the Arrow reader (:mod:`launchprof.trace.arrowdir`),
``profile``'s early path (its ``nsys export --tables``, :mod:`launchprof.commands.early`,
read in a thread that must not import pandas or numpy while another imports them) and
the tests' trace builder name the same ones.

The names are nsys's SQLite export schema (the same in its Arrow export; nsys's
documentation, "SQLite Schema Reference"): the CUPTI activity tables, ``StringIds``,
``NVTX_EVENTS``, ``TARGET_INFO_*``, ``PROCESSES`` and the export's metadata. A renamed
column of a numeric table is one entry here; a new table is an entry here, its frame in
the loader and its field of :class:`~launchprof.trace.model.Trace` (docs/architecture.md,
"Where to change").
"""

from __future__ import annotations

ACTIVITY_COLS = {
    "start": "start",
    "end": "end",
    "deviceId": "device_id",
    "streamId": "stream_id",
    "globalPid": "global_pid",
    "correlationId": "correlation_id",
}
KERNEL_COLS = {
    **ACTIVITY_COLS,
    "shortName": "name_id",
    "gridX": "grid_x",
    "gridY": "grid_y",
    "gridZ": "grid_z",
    "blockX": "block_x",
    "blockY": "block_y",
    "blockZ": "block_z",
    "graphNodeId": "graph_node_id",
}
MEMCPY_COLS = {**ACTIVITY_COLS, "bytes": "bytes", "copyKind": "copy_kind", "graphNodeId": "graph_node_id"}
MEMSET_COLS = {**ACTIVITY_COLS, "bytes": "bytes", "graphNodeId": "graph_node_id"}
GRAPH_TRACE_COLS = {**ACTIVITY_COLS, "graphId": "graph_id"}
API_COLS = {"start": "start", "end": "end", "globalTid": "tid", "correlationId": "correlation_id", "nameId": "name_id"}
ACTIVITY_REQUIRED = ("start", "end", "deviceId")
API_REQUIRED = ("start", "end", "nameId")
# (table, columns wanted -> names, columns required): the tables read as numbers.
NUMERIC_TABLES: tuple[tuple[str, dict[str, str], tuple[str, ...]], ...] = (
    ("CUPTI_ACTIVITY_KIND_KERNEL", KERNEL_COLS, ACTIVITY_REQUIRED),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", API_COLS, API_REQUIRED),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", MEMCPY_COLS, ACTIVITY_REQUIRED),
    ("CUPTI_ACTIVITY_KIND_MEMSET", MEMSET_COLS, ACTIVITY_REQUIRED),
    ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", GRAPH_TRACE_COLS, ACTIVITY_REQUIRED),
    ("CUPTI_ACTIVITY_KIND_DRIVER", API_COLS, API_REQUIRED),
)
# NVTX ranges and domain names: the columns read (a missing one reads NULL) and the
# event types kept (nsys ENUM_NSYS_EVENT_TYPE: 59 NvtxPushPopRange, 60 NvtxStartEndRange,
# 75 domain create).
NVTX_TABLE = "NVTX_EVENTS"
NVTX_COLS = ("start", "end", "eventType", "text", "textId", "globalTid", "domainId")
NVTX_RANGE_TYPES = (59, 60)
NVTX_DOMAIN_CREATE = 75
PID_MASK = 0xFFFFFF  # the pid bits of a globalPid or globalTid >> 24 (above them: host and VM ids)
# The column that names each row's process, by table (globalPid, or globalTid: the pid in
# bits 24-47 of both): what a load of one process keeps rows by (launchprof analyze
# --per-process; nsys's documentation, "SQLite Schema Reference", Serialized GlobalId).
PROCESS_COLUMNS = {
    **{table: "globalPid" for table, columns, _ in NUMERIC_TABLES if "globalPid" in columns},
    **{table: "globalTid" for table, columns, _ in NUMERIC_TABLES if "globalTid" in columns},
    NVTX_TABLE: "globalTid",
}
# The small tables the loader reads with SQL (launchprof.trace.loader): strings, NVTX events,
# GPUs, processes, streams, export metadata (the Arrow reader copies them row by row).
SQL_TABLES = frozenset(
    {
        "StringIds",
        NVTX_TABLE,
        "TARGET_INFO_GPU",
        "PROCESSES",
        "TARGET_INFO_CUDA_STREAM",
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
    }
)
# Every table the loader looks at, sorted (tables nsys did not write are simply absent).
LOADED_TABLES = tuple(sorted({table for table, _, _ in NUMERIC_TABLES} | SQL_TABLES))
