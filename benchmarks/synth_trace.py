"""Write a synthetic Nsight Systems SQLite export for benchmarks (seeded, deterministic).

The tables and columns are those of a real nsys 2025.3 export (schema 3.20.3) for the
tables launchprof reads: ``CUPTI_ACTIVITY_KIND_KERNEL``, ``_MEMCPY``, ``_RUNTIME``,
``NVTX_EVENTS``, ``StringIds``, ``PROCESSES``, ``TARGET_INFO_GPU``, ``META_DATA_EXPORT``.

The workload: ``processes`` processes (two per GPU), each running a training-like loop of
steps of ``kernels_per_step`` kernels spread over ``streams`` streams. Each step opens an
NVTX ``step`` range in domain ``launchprof``, copies its input (``cudaMemcpyAsync``),
then either launches its kernels one by one (``cudaLaunchKernel``, one correlation id
each) or, for every ``graph_every``-th step, replays a CUDA Graph (one
``cudaGraphLaunch``; its kernels carry ``graphNodeId`` and the launch's correlation id).
Correlation ids count from 1 in each process, so they overlap between processes, as in
real multi-process traces.

Times: launch calls last ~5 us (lognormal), CPU gaps between calls ~1 us (exponential)
with a ~40 us step-boundary pause, kernels ~3 us (lognormal, a long tail of ~200 us
kernels, 2 %), graph nodes separated by 0.1-0.3 us dispatch gaps. A kernel starts when
both its launch call has reached the GPU (call start + 2 us) and its stream is free.

Usage::

    python benchmarks/synth_trace.py OUT.sqlite --kernels 1000000 [--seed 1]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

PID_SHIFT = 24
BATCH = 200_000
T0_NS = 1_000_000_000

KERNEL_COLS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, "
    "cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, "
    "gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
    "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
    "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, "
    "sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER"
)
RUNTIME_COLS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, "
    "correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER"
)
MEMCPY_COLS = (
    "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
    "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
    "bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, "
    "dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, "
    "migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER, copyCount INTEGER"
)
NVTX_COLS = (
    "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, "
    "color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, "
    "uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
    "floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT"
)

KERNEL_NAMES = [
    "ampere_sgemm_128x64_nn",
    "vectorized_elementwise_kernel",
    "layer_norm_kernel",
    "softmax_warp_forward",
    "reduce_kernel",
    "gelu_kernel",
    "index_select_kernel",
    "adam_apply_kernel",
]
CALLS = ["cudaLaunchKernel_v7000", "cudaGraphLaunch_v10000", "cudaMemcpyAsync_v3020", "cudaGraphInstantiate_v12000"]


def gtid(pid: int, tid: int) -> int:
    """nsys serialized globalTid: pid in bits 24..47, tid in bits 0..23."""
    return (pid << PID_SHIFT) | (tid & 0xFFFFFF) | (1 << 56)


def gpid(pid: int) -> int:
    """nsys serialized globalPid."""
    return (pid << PID_SHIFT) | (1 << 56)


def _lognormal(rng: np.random.Generator, median_ns: float, sigma: float, n: int) -> np.ndarray:
    return np.maximum(rng.lognormal(np.log(median_ns), sigma, n), 200).astype(np.int64)


def _stream_schedule(arrive: np.ndarray, occupy: np.ndarray) -> np.ndarray:
    """Start times on one in-order stream: s_i = max(arrive_i, s_{i-1} + occupy_{i-1}).

    Vectorised with the identity s_i = C_i + max_{j<=i}(arrive_j - C_j), C = exclusive
    cumulative sum of ``occupy``."""
    c = np.concatenate([[0], np.cumsum(occupy[:-1])])
    return c + np.maximum.accumulate(arrive - c)


def _process(
    rng: np.random.Generator,
    n_kernels: int,
    kernels_per_step: int,
    streams: int,
    graph_every: int,
    kernel_ns: float = 3_000,
) -> dict:
    """Arrays for one process: its API calls, kernels, memcpys and NVTX step ranges."""
    steps = max(1, -(-n_kernels // kernels_per_step))
    k_step = np.repeat(np.arange(steps), kernels_per_step)[:n_kernels]
    k_pos = np.tile(np.arange(kernels_per_step), steps)[:n_kernels]
    is_graph_step = (np.arange(steps) % graph_every) == graph_every - 1 if graph_every > 0 else np.zeros(steps, bool)
    k_graph = is_graph_step[k_step]
    # Host calls, in order: per step one memcpy, then a launch per kernel or one graph launch.
    per_step_calls = np.where(is_graph_step, 2, 1 + np.bincount(k_step, minlength=steps))
    n_calls = int(per_step_calls.sum())
    call_step = np.repeat(np.arange(steps), per_step_calls)
    first_call = np.concatenate([[0], np.cumsum(per_step_calls)[:-1]])
    call_pos = np.arange(n_calls) - first_call[call_step]
    call_kind = np.where(call_pos == 0, 2, np.where(is_graph_step[call_step], 1, 0))  # index into CALLS
    dur = np.where(call_kind == 1, _lognormal(rng, 9_000, 0.3, n_calls), _lognormal(rng, 5_000, 0.35, n_calls))
    gap = rng.exponential(1_000, n_calls).astype(np.int64) + np.where(call_pos == 0, 40_000, 0)
    call_start = T0_NS + rng.integers(0, 50_000) + np.cumsum(gap + dur) - dur
    call_end = call_start + dur
    corr = np.arange(1, n_calls + 1, dtype=np.int64)
    # Kernels: the call submitting each kernel (its own launch, or the step's graph launch).
    kernel_call = np.where(k_graph, first_call[k_step] + 1, first_call[k_step] + 1 + k_pos)
    k_dur = _lognormal(rng, kernel_ns, 0.5, n_kernels)
    long = rng.random(n_kernels) < 0.02
    k_dur[long] = _lognormal(rng, 200_000, 0.3, int(long.sum()))
    dispatch = np.where(k_graph, rng.integers(100, 300, n_kernels), 0)
    arrive = call_start[kernel_call] + 2_000
    k_stream = 7 + (k_pos % streams) * 6
    k_start = np.empty(n_kernels, np.int64)
    for s in np.unique(k_stream):
        idx = np.flatnonzero(k_stream == s)
        k_start[idx] = _stream_schedule(arrive[idx], k_dur[idx] + dispatch[idx])
    mem_call = first_call
    mem_start = call_start[mem_call] + 1_500
    step_start = call_start[first_call] - 500
    last_call = first_call + per_step_calls - 1
    step_end = call_end[last_call] + 300
    name = k_pos % len(KERNEL_NAMES)
    return dict(
        call_start=call_start,
        call_end=call_end,
        call_kind=call_kind,
        corr=corr,
        k_start=k_start,
        k_end=k_start + k_dur,
        k_stream=k_stream,
        k_corr=corr[kernel_call],
        k_name=name,
        k_node=np.where(k_graph, 1000 + k_pos, -1),
        k_grid=np.where(name == 0, 132, 1 + (k_pos % 64)),
        mem_start=mem_start,
        mem_end=mem_start + _lognormal(rng, 1_500, 0.2, steps),
        mem_corr=corr[mem_call],
        step_start=step_start,
        step_end=step_end,
        graph_steps=int(is_graph_step.sum()),
    )


def _insert(con: sqlite3.Connection, table: str, ncols: int, columns: list) -> None:
    """executemany in batches; ``columns`` are numpy arrays or scalars (broadcast)."""
    n = max(len(c) for c in columns if isinstance(c, np.ndarray))
    sql = f'INSERT INTO "{table}" VALUES ({", ".join("?" * ncols)})'
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH)
        cols = []
        for c in columns:
            if isinstance(c, np.ndarray):
                vals = c[lo:hi].tolist()
                cols.append(vals)
            else:
                cols.append([c] * (hi - lo))
        con.executemany(sql, zip(*cols, strict=True))


def _nullable(values: np.ndarray) -> np.ndarray:
    """int array with -1 meaning NULL -> object array with None."""
    out = values.astype(object)
    out[values < 0] = None
    return out


def write_trace(
    path: Path,
    kernels: int,
    seed: int = 1,
    processes: int = 4,
    streams: int = 2,
    kernels_per_step: int = 50,
    graph_every: int = 5,
    progress: bool = False,
    kernel_ns: float = 3_000,
) -> dict:
    """Write the synthetic trace to ``path`` (replaced if present); returns its facts
    (kernel, call, graph-launch and step counts per process) for checking."""
    path = Path(path)
    if path.exists():
        path.unlink()
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-200000")
    con.execute("CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)")
    con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME ({RUNTIME_COLS})")
    con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY ({MEMCPY_COLS})")
    con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({KERNEL_COLS})")
    con.execute(f"CREATE TABLE NVTX_EVENTS ({NVTX_COLS})")
    con.execute("CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)")
    con.execute("CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT)")
    con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT)")
    strings = CALLS + KERNEL_NAMES + ["step"]
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(strings, start=1)))
    call_ids = np.arange(1, len(CALLS) + 1)
    name_ids = np.arange(len(CALLS) + 1, len(CALLS) + len(KERNEL_NAMES) + 1)
    con.executemany(
        "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
        [
            ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
            ("EXPORT_PRODUCT_VERSION", "2025.3.2.0"),
            ("EXPORT_SCHEMA_VERSION", "3.20.3"),
            ("EXPORT_PARAM_INPUT_FILE", "synthetic.nsys-rep"),
        ],
    )
    gpus = max(1, processes // 2)
    con.executemany("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?)", [(g, "Synthetic GPU") for g in range(gpus)])
    share = [kernels // processes + (1 if p < kernels % processes else 0) for p in range(processes)]
    facts: dict = {"kernels": kernels, "processes": []}
    for p, n in enumerate(share):
        if n == 0:
            continue
        t = time.perf_counter()
        pid = 4000 + p
        device = p % gpus
        d = _process(rng, n, kernels_per_step, streams, graph_every, kernel_ns)
        tid = gtid(pid, pid)
        con.execute("INSERT INTO PROCESSES VALUES (?, ?, ?)", (gpid(pid), pid, f"python3 worker{p}"))
        # One cudaGraphInstantiate (no correlation to GPU work) before the loop.
        inst = [
            (
                int(d["call_start"][0]) - 600_000,
                int(d["call_start"][0]) - 100_000,
                1,
                tid,
                0,
                int(call_ids[3]),
                0,
                None,
            )
        ]
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, ?)", inst)
        _insert(
            con,
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            8,
            [d["call_start"], d["call_end"], 1, tid, d["corr"], call_ids[d["call_kind"]], 0, None],
        )
        _insert(
            con,
            "CUPTI_ACTIVITY_KIND_KERNEL",
            28,
            [
                d["k_start"],
                d["k_end"],
                device,
                1,
                None,
                d["k_stream"],
                d["k_corr"],
                gpid(pid),
                name_ids[d["k_name"]],
                name_ids[d["k_name"]],
                None,
                1,
                0,
                32,
                d["k_grid"],
                1,
                1,
                128,
                1,
                1,
                0,
                0,
                0,
                0,
                np.arange(1, n + 1),
                0,
                _nullable(d["k_node"]),
                0,
            ],
        )
        _insert(
            con,
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            21,
            [
                d["mem_start"],
                d["mem_end"],
                device,
                1,
                None,
                7,
                d["mem_corr"],
                gpid(pid),
                65536,
                1,
                None,
                0,
                2,
                None,
                None,
                device,
                1,
                None,
                None,
                None,
                1,
            ],
        )
        domain_id = 1
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES (?, NULL, 75, ?, ?, ?)",
            (int(d["call_start"][0]) - 700_000, "launchprof", tid, domain_id),
        )
        _insert(
            con,
            "NVTX_EVENTS",
            20,
            [d["step_start"], d["step_end"], 59, None, None, None, "step", tid, None, None, domain_id] + [None] * 9,
        )
        facts["processes"].append(
            {
                "pid": pid,
                "device": device,
                "kernels": n,
                "api_calls": len(d["corr"]) + 1,
                "graph_launches": d["graph_steps"],
                "steps": len(d["step_start"]),
            }
        )
        if progress:
            print(f"  process {pid}: {n} kernels in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    con.commit()
    con.close()
    return facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("output", type=Path)
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--kernels-per-step", type=int, default=50)
    ap.add_argument("--graph-every", type=int, default=5, help="every Nth step is a graph replay (0: none)")
    ap.add_argument("--kernel-us", type=float, default=3.0, help="median kernel duration (us)")
    args = ap.parse_args()
    t = time.perf_counter()
    facts = write_trace(
        args.output,
        args.kernels,
        args.seed,
        args.processes,
        args.streams,
        args.kernels_per_step,
        args.graph_every,
        progress=True,
        kernel_ns=args.kernel_us * 1000,
    )
    size = args.output.stat().st_size / 2**20
    print(f"wrote {args.output}: {facts['kernels']} kernels, {size:.0f} MiB in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
