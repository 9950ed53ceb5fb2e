"""Build tiny nsys-shaped SQLite traces inside tests.

Only the tables launchprof reads are created, with the column names nsys uses. Two
flavours: ``"2025"`` (META_DATA_EXPORT, schema 3.20.3, kernels with graphNodeId) and
``"2022"`` (EXPORT_META_DATA, schema 3.0.0, no graphNodeId column, no MEMSET table).
Times are ns. Rows are dicts; missing keys get neutral defaults.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

PID_SHIFT = 24


def gtid(pid: int, tid: int | None = None) -> int:
    """An nsys serialized globalTid for (pid, tid): pid in bits 24..47."""
    return (pid << PID_SHIFT) | ((tid if tid is not None else pid) & 0xFFFFFF) | (1 << 56)


def gpid(pid: int) -> int:
    """An nsys serialized globalPid for pid."""
    return (pid << PID_SHIFT) | (1 << 56)


class TraceBuilder:
    """Collects rows and writes an SQLite file with :meth:`write`."""

    def __init__(self, flavour: str = "2025") -> None:
        self.flavour = flavour
        self.strings: dict[str, int] = {}
        self.kernels: list[dict[str, Any]] = []
        self.memcpys: list[dict[str, Any]] = []
        self.memsets: list[dict[str, Any]] = []
        self.graph_trace: list[dict[str, Any]] = []
        self.runtime: list[dict[str, Any]] = []
        self.nvtx: list[dict[str, Any]] = []
        self.gpus: list[tuple[int, str]] = [(0, "Test GPU")]
        self.cuda_streams: list[dict[str, Any]] = []
        self.processes: list[tuple[int, str]] = []  # (pid, name): a PROCESSES table when set
        self._corr: dict[int, int] = {}

    def sid(self, text: str) -> int:
        """StringIds id of ``text`` (added on first use)."""
        return self.strings.setdefault(text, len(self.strings) + 1)

    def next_corr(self, pid: int) -> int:
        self._corr[pid] = self._corr.get(pid, 0) + 1
        return self._corr[pid]

    def call(
        self, name: str, start: int, end: int, pid: int = 100, tid: int | None = None, corr: int | None = None
    ) -> int:
        """Add a CUDA API call; returns its correlation id."""
        corr = self.next_corr(pid) if corr is None else corr
        self.runtime.append(
            dict(
                start=start,
                end=end,
                eventClass=1,
                globalTid=gtid(pid, tid),
                correlationId=corr,
                nameId=self.sid(name),
                returnValue=0,
            )
        )
        return corr

    def kernel(
        self,
        start: int,
        end: int,
        corr: int,
        pid: int = 100,
        device: int = 0,
        stream: int = 7,
        name: str = "k",
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1),
        graph_node: int | None = None,
    ) -> None:
        self.kernels.append(
            dict(
                start=start,
                end=end,
                deviceId=device,
                contextId=1,
                streamId=stream,
                correlationId=corr,
                globalPid=gpid(pid),
                demangledName=self.sid(name),
                shortName=self.sid(name),
                gridX=grid[0],
                gridY=grid[1],
                gridZ=grid[2],
                blockX=block[0],
                blockY=block[1],
                blockZ=block[2],
                graphNodeId=graph_node,
            )
        )

    def launch(
        self,
        call_start: int,
        call_end: int,
        k_start: int,
        k_end: int,
        pid: int = 100,
        call: str = "cudaLaunchKernel_v7000",
        **kernel: Any,
    ) -> int:
        """A launch call and the kernel it submits; returns the correlation id."""
        corr = self.call(call, call_start, call_end, pid=pid)
        self.kernel(k_start, k_end, corr, pid=pid, **kernel)
        return corr

    def memcpy(
        self,
        start: int,
        end: int,
        corr: int,
        pid: int = 100,
        device: int = 0,
        stream: int = 7,
        nbytes: int = 4,
        copy_kind: int = 2,
    ) -> None:
        self.memcpys.append(
            dict(
                start=start,
                end=end,
                deviceId=device,
                contextId=1,
                streamId=stream,
                correlationId=corr,
                globalPid=gpid(pid),
                bytes=nbytes,
                copyKind=copy_kind,
            )
        )

    def memset(self, start: int, end: int, corr: int, pid: int = 100, device: int = 0, stream: int = 7) -> None:
        self.memsets.append(
            dict(
                start=start,
                end=end,
                deviceId=device,
                contextId=1,
                streamId=stream,
                correlationId=corr,
                globalPid=gpid(pid),
                bytes=4,
                value=0,
            )
        )

    def graph_exec(
        self, start: int, end: int, corr: int, pid: int = 100, device: int = 0, stream: int = 7, graph_id: int = 1
    ) -> None:
        self.graph_trace.append(
            dict(
                start=start,
                end=end,
                deviceId=device,
                contextId=1,
                streamId=stream,
                correlationId=corr,
                globalPid=gpid(pid),
                graphId=graph_id,
                graphExecId=graph_id,
            )
        )

    def range(
        self,
        text: str,
        start: int,
        end: int,
        pid: int = 100,
        tid: int | None = None,
        domain: str | None = None,
        event_type: int = 59,
    ) -> None:
        """An NVTX push/pop range (``event_type`` 60: a start/end range); ``domain`` adds a
        domain-create event on first use."""
        domain_id = 0
        if domain:
            known = [r for r in self.nvtx if r["eventType"] == 75 and r["text"] == domain]
            if known:
                domain_id = known[0]["domainId"]
            else:
                domain_id = 1 + sum(1 for r in self.nvtx if r["eventType"] == 75)
                self.nvtx.append(
                    dict(
                        start=0,
                        end=None,
                        eventType=75,
                        text=domain,
                        globalTid=gtid(pid, tid),
                        domainId=domain_id,
                        textId=None,
                    )
                )
        self.nvtx.append(
            dict(
                start=start,
                end=end,
                eventType=event_type,
                text=text,
                globalTid=gtid(pid, tid),
                domainId=domain_id,
                textId=None,
            )
        )

    def domain(self, name: str, pid: int = 100, tid: int | None = None) -> int:
        """An NVTX domain-create event (eventType 75) alone, with no range; returns its id."""
        domain_id = 1 + sum(1 for r in self.nvtx if r["eventType"] == 75)
        self.nvtx.append(
            dict(start=0, end=None, eventType=75, text=name, globalTid=gtid(pid, tid), domainId=domain_id, textId=None)
        )
        return domain_id

    def cuda_stream(self, stream: int, flag: int, pid: int = 100) -> None:
        """A TARGET_INFO_CUDA_STREAM row (flag: 1 default, 2 non-blocking, 3 NULL stream)."""
        self.cuda_streams.append(
            dict(streamId=stream, hwId=0, vmId=1, processId=pid, contextId=1, priority=0, flag=flag)
        )

    def write(self, path: Path) -> Path:
        con = sqlite3.connect(path)
        kernel_cols = [
            "start",
            "end",
            "deviceId",
            "contextId",
            "streamId",
            "correlationId",
            "globalPid",
            "demangledName",
            "shortName",
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
        ]
        if self.flavour == "2025":
            kernel_cols.append("graphNodeId")
            meta_table, schema_version, version = "META_DATA_EXPORT", "3.20.3", "2025.3.2.0"
        else:
            meta_table, schema_version, version = "EXPORT_META_DATA", "3.0.0", "2022.4.2.1"
        tables: list[tuple[str, list[str], list[dict[str, Any]]]] = [
            ("CUPTI_ACTIVITY_KIND_KERNEL", kernel_cols, self.kernels),
            (
                "CUPTI_ACTIVITY_KIND_MEMCPY",
                [
                    "start",
                    "end",
                    "deviceId",
                    "contextId",
                    "streamId",
                    "correlationId",
                    "globalPid",
                    "bytes",
                    "copyKind",
                ],
                self.memcpys,
            ),
            (
                "CUPTI_ACTIVITY_KIND_RUNTIME",
                ["start", "end", "eventClass", "globalTid", "correlationId", "nameId", "returnValue"],
                self.runtime,
            ),
            ("NVTX_EVENTS", ["start", "end", "eventType", "text", "globalTid", "domainId", "textId"], self.nvtx),
        ]
        if self.flavour == "2025":
            tables.append(
                (
                    "CUPTI_ACTIVITY_KIND_MEMSET",
                    [
                        "start",
                        "end",
                        "deviceId",
                        "contextId",
                        "streamId",
                        "correlationId",
                        "globalPid",
                        "bytes",
                        "value",
                    ],
                    self.memsets,
                )
            )
        if self.graph_trace:
            tables.append(
                (
                    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                    [
                        "start",
                        "end",
                        "deviceId",
                        "contextId",
                        "streamId",
                        "correlationId",
                        "globalPid",
                        "graphId",
                        "graphExecId",
                    ],
                    self.graph_trace,
                )
            )
        if self.cuda_streams:
            tables.append(
                (
                    "TARGET_INFO_CUDA_STREAM",
                    ["streamId", "hwId", "vmId", "processId", "contextId", "priority", "flag"],
                    self.cuda_streams,
                )
            )
        for name, cols, rows in tables:
            con.execute(f'CREATE TABLE "{name}" ({", ".join(cols)})')
            con.executemany(
                f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(cols))})', [[r.get(c) for c in cols] for r in rows]
            )
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in self.strings.items()])
        con.execute("CREATE TABLE TARGET_INFO_GPU (vmId, id, name)")
        con.executemany("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?)", self.gpus)
        if self.processes:
            con.execute("CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)")
            con.executemany("INSERT INTO PROCESSES VALUES (?, ?, ?)", [(gpid(p), p, n) for p, n in self.processes])
        con.execute(f"CREATE TABLE {meta_table} (name TEXT NOT NULL, value TEXT)")
        con.executemany(
            f"INSERT INTO {meta_table} VALUES (?, ?)",
            [("EXPORT_PRODUCT_VERSION", version), ("EXPORT_SCHEMA_VERSION", schema_version)],
        )
        con.commit()
        con.close()
        return path
