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

Dtypes: times, ``tid``, ``bytes`` and graph ids are int64; ``device_id``, ``stream_id``,
``pid``, ``correlation_id``, ``name_id`` and the grid/block sizes of kernels are int32
when every value of the table's column fits (int64 otherwise: CUPTI's correlation ids are
unsigned 32-bit); a NULL id reads as -1 (``pid`` 0 when the
globalPid is missing). ``Trace.gpu_activity()``'s ``kind`` is categorical.

The process of a globalTid/globalPid is ``value >> 24`` (the nsys "Serialized GlobalId"
layout: host and VM ids above the 24-bit pid, the 24-bit tid below): the pid itself for
the host's own processes, a larger number when host or VM bits are set, so that two
processes with one pid on two hosts or VMs stay apart; correlation ids are unique only
within one process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# The columns of Trace.gpu_activity() besides its ``kind``.
ACTIVITY_COLUMNS = ("start", "end", "device_id", "stream_id", "pid", "correlation_id")


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
    # (start, end) ns of the trace's clock when only the rows starting in that window were
    # read (launchprof.trace.columns.Rows, analyze --time-range), else None: the whole trace.
    window: tuple[int, int] | None = None
    # Values derived from the frames, computed once (see cached); not copied by
    # dataclasses.replace, which makes a Trace with a fresh one.
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, computed once per ``key`` for this Trace (a lookup derived from
        its frames, e.g. the API calls by correlation key, shared by the analysis stages).
        The value is shared: read it, do not modify it."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]

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

    def gpu_activity(self, device_id: int | None = None) -> pd.DataFrame:
        """Kernels, memops and graph-trace rows in one frame.

        Columns: ``start``, ``end``, ``device_id``, ``stream_id``, ``pid``,
        ``correlation_id``, ``kind`` (``kernel``/``memcpy``/``memset``/``graph``).
        Sorted by ``start``; a new frame (the trace's frames are not touched).
        ``device_id``: that device's rows only, made without the whole frame: the rows,
        order and ``kind`` categories of selecting them from it.
        """
        cols = list(ACTIVITY_COLUMNS)
        kinds = ["graph", "kernel", "memcpy", "memset"]  # sorted: categories stay alphabetical
        sources: list[tuple[pd.DataFrame, np.ndarray]] = [
            (self.kernels, np.ones(len(self.kernels), np.int8)),
        ]
        used = {1} if len(self.kernels) else set()  # the kinds present (codes into ``kinds``)
        if len(self.memops):
            memop_codes = np.where(text(self.memops["kind"]) == "memset", 3, 2).astype(np.int8)
            sources.append((self.memops, memop_codes))
            used.update(np.unique(memop_codes).tolist())
        if len(self.graph_execs):
            sources.append((self.graph_execs, np.zeros(len(self.graph_execs), np.int8)))
            used.add(0)
        if device_id is not None:
            sources = [_device_rows(f, codes, device_id) for f, codes in sources]
        # When each source is sorted and the sources do not overlap in start (memsets
        # before the first kernel, say), their concatenation in start order is sorted:
        # the same rows in the same order as the sort below gives, without it.
        in_order = sorted(sources, key=lambda src: int(src[0]["start"].iat[0]) if len(src[0]) else -np.inf)
        present = [f for f, _ in in_order if len(f)]
        presorted = (
            len(present) > 1
            and all(
                int(a["start"].iat[-1]) < int(b["start"].iat[0]) for a, b in zip(present[:-1], present[1:], strict=True)
            )
            and all(_sorted_by_start_end(f["start"].to_numpy(), f["end"].to_numpy()) for f in present)
        )
        if presorted:
            sources = in_order
        data: dict[str, np.ndarray] = {}
        for c in cols:
            arrays = [f[c].to_numpy() for f, _ in sources]
            dtype = np.result_type(*arrays) if arrays else np.int64
            data[c] = np.concatenate(arrays).astype(dtype, copy=False) if len(arrays) > 1 else arrays[0]
        codes = np.concatenate([k for _, k in sources]) if len(sources) > 1 else sources[0][1]
        if not presorted and not _sorted_by_start_end(data["start"], data["end"]):
            order = np.lexsort((data["end"], data["start"]))
            for c in cols:  # one column at a time: at most one extra column in memory
                data[c] = data[c][order]
            codes = codes[order]
            del order
        out = pd.DataFrame(data, copy=False)
        remap = np.full(len(kinds), -1, np.int8)
        remap[sorted(used)] = np.arange(len(used), dtype=np.int8)
        out["kind"] = pd.Categorical.from_codes(remap[codes], categories=[kinds[i] for i in sorted(used)])
        return out


def _device_rows(frame: pd.DataFrame, codes: np.ndarray, device_id: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The rows of ``frame`` (and their kind codes) on one device."""
    on = frame["device_id"].to_numpy() == device_id
    if on.all():
        return frame, codes
    rows = np.flatnonzero(on)
    return pd.DataFrame({c: frame[c].to_numpy()[rows] for c in ACTIVITY_COLUMNS}, copy=False), codes[rows]


def _sorted_by_start_end(start: np.ndarray, end: np.ndarray) -> bool:
    """Whether rows are sorted by (start, end)."""
    ds = np.diff(start)
    low = ds.min() if ds.size else 1
    if low != 0:
        return bool(low > 0)
    return bool((np.diff(end)[ds == 0] >= 0).all())


def text(values: pd.Series) -> pd.Series:
    """``values.astype(str)`` as an object-dtype Series, cheap for a categorical column
    (``api["call"]``, ``gpu_activity()["kind"]``): the categories are turned into text
    once and spread by code, instead of building one Arrow string per row (pandas 3's
    default ``str`` dtype). Missing values read ``"nan"``, as with ``astype(str)``.
    Same index as ``values``; a new Series.
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        names = np.array([str(c) for c in values.cat.categories] + ["nan"], dtype=object)
        return pd.Series(names[values.cat.codes.to_numpy()], index=values.index, dtype=object, name=values.name)
    return pd.Series(values.astype(str).to_numpy(dtype=object), index=values.index, dtype=object, name=values.name)
