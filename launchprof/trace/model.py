"""The typed trace model: DataFrames in nanoseconds, nsys string ids kept as ids.

Columns (all times are int64 nanoseconds on the trace's own clock):

``kernels`` - one row per ``CUPTI_ACTIVITY_KIND_KERNEL`` row:
    ``start``, ``end``, ``device_id``, ``stream_id``, ``pid``, ``correlation_id``,
    ``name_id`` (StringIds id of the short name), ``grid_x``, ``grid_y``, ``grid_z``,
    ``block_x``, ``block_y``, ``block_z``, ``graph_node_id`` (nullable Int64; set when
    the kernel ran as a graph node).
``memops`` - memcpy and memset rows (``_MEMCPY``, ``_MEMSET``):
    ``start``, ``end``, ``device_id``, ``stream_id``, ``pid``, ``correlation_id``,
    ``kind`` (``"memcpy"`` or ``"memset"``), ``bytes``, ``copy_kind`` (nsys
    ``ENUM_CUDA_MEMCPY_OPER`` id, -1 for memsets), ``graph_node_id``.
``graph_execs`` - ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` rows (graph-level trace mode: one
    row per graph launch, no kernel rows): ``start``, ``end``, ``device_id``,
    ``stream_id``, ``pid``, ``correlation_id``, ``graph_id``.
``api`` - CUDA runtime and driver API calls (``CUPTI_ACTIVITY_KIND_RUNTIME``,
    ``_DRIVER``): ``start``, ``end``, ``tid`` (nsys globalTid), ``pid``,
    ``correlation_id``, ``name_id``, ``call`` (categorical: the function name with the
    nsys ``_vNNNN`` suffix removed, e.g. ``cudaLaunchKernel``).
``nvtx`` - NVTX push/pop and start/end ranges: ``start``, ``end``, ``tid``, ``pid``,
    ``text``, ``domain`` (domain name, ``""`` for the default domain).
``gpus`` - ``TARGET_INFO_GPU``: ``device_id``, ``name``.
``processes`` - ``PROCESSES`` where present: ``pid``, ``name``.
``cuda_streams`` - ``TARGET_INFO_CUDA_STREAM`` where present: ``stream_id``, ``pid``,
    ``flag`` (nsys ``ENUM_CUPTI_STREAM_TYPE``: 1 default, 2 non-blocking, 3 the NULL
    stream, i.e. the legacy default stream).

The process id of a globalTid/globalPid is ``(value >> 24) & 0xFFFFFF`` (the nsys
"Serialized GlobalId" layout); correlation ids are unique only within one process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class TraceSchema:
    """What the export holds: nsys version, schema version, tables and their columns."""

    nsys_version: str | None
    schema_version: str | None
    tables: dict[str, tuple[str, ...]]

    def has(self, table: str, column: str | None = None) -> bool:
        """Whether ``table`` (and ``column`` in it, if given) exists in the export."""
        cols = self.tables.get(table)
        if cols is None:
            return False
        return column is None or column in cols


@dataclass(frozen=True)
class Trace:
    """One nsys SQLite export, loaded. See the module docstring for the columns."""

    path: Path
    schema: TraceSchema
    kernels: pd.DataFrame
    memops: pd.DataFrame
    graph_execs: pd.DataFrame
    api: pd.DataFrame
    nvtx: pd.DataFrame
    gpus: pd.DataFrame
    processes: pd.DataFrame
    strings: pd.Series
    nvtx_domain_events: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    cuda_streams: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def has_cuda(self) -> bool:
        """True when the export has any CUDA activity or CUDA API table."""
        return any(
            self.schema.has(t)
            for t in (
                "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                "CUPTI_ACTIVITY_KIND_MEMSET",
                "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                "CUPTI_ACTIVITY_KIND_RUNTIME",
                "CUPTI_ACTIVITY_KIND_DRIVER",
            )
        )

    def string(self, string_id: int) -> str:
        """The StringIds text of ``string_id`` (``"<unknown #id>"`` for a dangling id)."""
        value = self.strings.get(string_id)
        return f"<unknown #{string_id}>" if value is None else str(value)

    def gpu_activity(self) -> pd.DataFrame:
        """Kernels, memops and graph-trace rows in one frame.

        Columns: ``start``, ``end``, ``device_id``, ``stream_id``, ``pid``,
        ``correlation_id``, ``kind`` (``kernel``/``memcpy``/``memset``/``graph``).
        Sorted by ``start``; a new frame (the trace's frames are not touched).
        """
        cols = ["start", "end", "device_id", "stream_id", "pid", "correlation_id"]
        parts = [self.kernels[cols].assign(kind="kernel")]
        if len(self.memops):
            parts.append(self.memops[cols + ["kind"]])
        if len(self.graph_execs):
            parts.append(self.graph_execs[cols].assign(kind="graph"))
        out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0].copy()
        out["kind"] = out["kind"].astype("category")
        return out.sort_values(["start", "end"], kind="stable", ignore_index=True)
