"""Measure launch and graph costs on the current GPU with cuda-python.

Everything runs on device 0, on one created non-blocking stream, with three NVRTC-compiled
kernels of one block: ``lp_empty`` (does nothing), ``lp_stamp`` (writes %globaltimer at
its start and end), ``lp_spin`` (busy-waits a given number of ns to keep the GPU busy
while the host queues work behind it). Host times come from ``time.perf_counter_ns``
around single cuda-python calls, so they include the Python binding's own cost: a C++
program pays somewhat less per call. GPU times come from CUDA events and %globaltimer.
A run takes a few seconds.
"""

from __future__ import annotations

import ctypes
import platform
import time
from datetime import datetime, timezone
from typing import Any

from . import model
from .store import SCHEMA, CalibrationError

SOURCE = r"""
__device__ __forceinline__ unsigned long long lp_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void lp_empty(int* unused) {}
extern "C" __global__ void lp_stamp(unsigned long long* out, int i) {
    if (threadIdx.x == 0) {
        out[2 * i] = lp_now();
        out[2 * i + 1] = lp_now();
    }
}
extern "C" __global__ void lp_spin(unsigned long long ns) {
    unsigned long long t0 = lp_now();
    while (lp_now() - t0 < ns) {}
}
"""

LAUNCH_BATCHES = 10  # x LAUNCH_PER_BATCH host-timed launches
LAUNCH_PER_BATCH = 100
BACK_TO_BACK = 200  # kernels (or graph nodes) queued behind one spin kernel
BACK_TO_BACK_REPEATS = 5
SPIN_NS = 20_000_000  # 20 ms: longer than the host needs to queue BACK_TO_BACK launches
GRAPH_LAUNCHES = 50  # one-node graphs launched back to back behind one spin kernel
NODE_COUNTS = (1, 4, 16, 64, 256)
GRAPH_REPEATS = 7

METHOD = {
    "launch_cpu_ns": "host time of one cuLaunchKernel of an empty 1-block kernel "
    "(perf_counter_ns around the cuda-python call), batches of 100 then a sync",
    "stream_kernel_interval_ns": "(CUDA event after - event before) / 200 for 200 back-to-back "
    "1-block kernels queued behind a spin kernel on one stream",
    "stream_kernel_gap_ns": "%globaltimer: next kernel's first read - previous kernel's last read, "
    "same 200 kernels (dispatch gap plus kernel prologue/epilogue)",
    "graph_node_interval_ns": "as stream_kernel_interval_ns, the 200 kernels captured as one graph",
    "graph_node_gap_ns": "as stream_kernel_gap_ns, inside the 200-node graph",
    "graph_launch_cpu_ns": "host time of one cudaGraphLaunch of the uploaded 200-node graph, "
    "queued behind a spin kernel",
    "graph_launch_interval_ns": "(CUDA event after - event before) / 50 for 50 uploaded one-node graphs "
    "(a stamp kernel each) launched back to back behind a spin kernel",
    "graph_launch_gap_ns": "as stream_kernel_gap_ns, between the kernels of those 50 graph launches "
    "(compare with graph_node_gap_ns: the difference is what starting the next graph costs the GPU)",
    "by_nodes.capture_ns": "host time of BeginCapture + N launches + EndCapture, by node count",
    "by_nodes.instantiate_ns": "host time of cudaGraphInstantiate, by node count; fit = intercept + slope*N",
    "by_nodes.update_ns": "host time of cudaGraphExecUpdate with a same-topology graph whose kernel "
    "arguments differ, by node count",
    "by_nodes.reinstantiate_ns": "host time of cudaGraphInstantiate of that same new graph, by node count",
    "by_nodes.first_launch_cpu_ns": "host time of the first cudaGraphLaunch after instantiation (it uploads "
    "the graph), by node count",
    "by_nodes.launch_cpu_ns": "host time of a later cudaGraphLaunch on an idle stream, by node count",
}


def _modules() -> tuple[Any, Any, Any]:
    try:
        from cuda.bindings import driver, nvrtc, runtime
    except ImportError:
        raise CalibrationError(
            "cuda-python is not installed; calibration needs it: pip install 'launchprof[gpu]'"
        ) from None
    return driver, nvrtc, runtime


def _check(result: Any) -> Any:
    err, *values = result if isinstance(result, tuple) else (result,)
    if err:
        raise CalibrationError(f"CUDA call failed: {err!r}")
    return values[0] if len(values) == 1 else (tuple(values) or None)


class _Args:
    """Kernel arguments packed as the void** array cuLaunchKernel takes."""

    def __init__(self, *values: Any) -> None:
        self.values = values
        self.pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        self.address = ctypes.addressof(self.pointers)


class _Gpu:
    """Device 0, its compiled kernels, one stream and a stamp buffer."""

    def __init__(self) -> None:
        self.driver, self.nvrtc, self.rt = _modules()
        rt = self.rt
        err, count = rt.cudaGetDeviceCount()
        if err or count < 1:
            why = getattr(err, "name", None) or str(err) if err else f"{count} devices"
            raise CalibrationError(f"no CUDA GPU visible (cudaGetDeviceCount: {why})")
        _check(rt.cudaSetDevice(0))
        _check(rt.cudaFree(0))
        self.prop = _check(rt.cudaGetDeviceProperties(0))
        self.functions = self._compile()
        self.stream = _check(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking))
        self.stamps = [_check(rt.cudaMalloc(2 * 8 * BACK_TO_BACK)) for _ in range(2)]
        self.dummy = _check(rt.cudaMalloc(64))
        self.empty_args = _Args(ctypes.c_void_p(int(self.dummy)))
        self.events = [_check(rt.cudaEventCreate()) for _ in range(2)]

    def _compile(self) -> dict[str, Any]:
        nvrtc, driver = self.nvrtc, self.driver
        arch = f"--gpu-architecture=sm_{self.prop.major}{self.prop.minor}".encode()
        prog = _check(nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"calibrate.cu", 0, [], []))
        (err,) = nvrtc.nvrtcCompileProgram(prog, 1, [arch])
        if err:
            log = b" " * _check(nvrtc.nvrtcGetProgramLogSize(prog))
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CalibrationError("NVRTC failed: " + log.decode(errors="replace").replace("\n", " "))
        cubin = b" " * _check(nvrtc.nvrtcGetCUBINSize(prog))
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
        module = _check(driver.cuModuleLoadData(cubin))
        names = ("lp_empty", "lp_stamp", "lp_spin")
        return {n: _check(driver.cuModuleGetFunction(module, n.encode())) for n in names}

    def launch(self, name: str, args: _Args) -> None:
        (err,) = self.driver.cuLaunchKernel(self.functions[name], 1, 1, 1, 32, 1, 1, 0, self.stream, args.address, 0)
        if err:
            raise CalibrationError(f"cuLaunchKernel failed: {err!r}")

    def sync(self) -> None:
        _check(self.rt.cudaStreamSynchronize(self.stream))

    def stamp_args(self, buffer_index: int, count: int) -> list[_Args]:
        ptr = ctypes.c_void_p(int(self.stamps[buffer_index]))
        return [_Args(ptr, ctypes.c_int(i)) for i in range(count)]

    def read_stamps(self, buffer_index: int, count: int) -> tuple[list[int], list[int]]:
        host = (ctypes.c_uint64 * (2 * count))()
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        _check(self.rt.cudaMemcpy(ctypes.addressof(host), self.stamps[buffer_index], 16 * count, kind))
        return list(host[0::2]), list(host[1::2])

    def capture(self, launches: list[tuple[str, _Args]]) -> Any:
        rt = self.rt
        _check(rt.cudaStreamBeginCapture(self.stream, rt.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal))
        for name, args in launches:
            self.launch(name, args)
        return _check(rt.cudaStreamEndCapture(self.stream))

    def elapsed_ns(self) -> float:
        return float(_check(self.rt.cudaEventElapsedTime(*self.events))) * 1e6


def _identity(gpu: _Gpu) -> dict[str, Any]:
    rt = gpu.rt
    name = gpu.prop.name
    name = name.decode(errors="replace").rstrip("\x00") if isinstance(name, bytes) else str(name)
    driver_api = _check(rt.cudaDriverGetVersion())
    driver_version = f"cuda{driver_api}"
    try:  # the display driver's version (e.g. 580.159.04) when NVML is reachable
        from cuda.bindings import nvml

        nvml.init_v2()
        driver_version = str(nvml.system_get_driver_version())
    except Exception:  # noqa: BLE001 - any NVML failure falls back to the CUDA version
        pass
    return {
        "name": name,
        "compute_capability": f"{gpu.prop.major}.{gpu.prop.minor}",
        "multiprocessors": int(gpu.prop.multiProcessorCount),
        "driver_version": driver_version,
        "cuda_driver_api": int(driver_api),
        "cuda_runtime": int(_check(rt.cudaRuntimeGetVersion())),
    }


def _launch_cpu(gpu: _Gpu) -> list[int]:
    clock = time.perf_counter_ns
    samples = []
    for _ in range(LAUNCH_BATCHES):
        for _ in range(LAUNCH_PER_BATCH):
            t0 = clock()
            gpu.launch("lp_empty", gpu.empty_args)
            samples.append(clock() - t0)
        gpu.sync()
    return samples


def _back_to_back(gpu: _Gpu, as_graph: bool) -> dict[str, list[int]]:
    """Intervals and gaps of BACK_TO_BACK stamp kernels queued behind a spin kernel."""
    rt = gpu.rt
    spin = _Args(ctypes.c_uint64(SPIN_NS))
    stamps = gpu.stamp_args(0, BACK_TO_BACK)
    exec_ = None
    if as_graph:
        graph = gpu.capture([("lp_stamp", s) for s in stamps])
        exec_ = _check(rt.cudaGraphInstantiate(graph, 0))
        _check(rt.cudaGraphUpload(exec_, gpu.stream))
        _check(rt.cudaGraphDestroy(graph))
        gpu.sync()
    out: dict[str, list[int]] = {"interval_ns": [], "gap_ns": [], "queue_ns": [], "launch_cpu_ns": []}
    clock = time.perf_counter_ns
    for _ in range(BACK_TO_BACK_REPEATS):
        gpu.launch("lp_spin", spin)
        t0 = clock()
        _check(rt.cudaEventRecord(gpu.events[0], gpu.stream))
        if exec_ is None:
            for s in stamps:
                gpu.launch("lp_stamp", s)
        else:
            t_launch = clock()
            _check(rt.cudaGraphLaunch(exec_, gpu.stream))
            out["launch_cpu_ns"].append(clock() - t_launch)
        _check(rt.cudaEventRecord(gpu.events[1], gpu.stream))
        out["queue_ns"].append(clock() - t0)
        gpu.sync()
        out["interval_ns"].append(round(gpu.elapsed_ns() / BACK_TO_BACK))
        starts, ends = gpu.read_stamps(0, BACK_TO_BACK)
        out["gap_ns"].extend(model.gaps_ns(starts, ends))
        out.setdefault("stamps", []).extend(starts + ends)
    if exec_ is not None:
        _check(rt.cudaGraphExecDestroy(exec_))
    return out


def _graph_back_to_back(gpu: _Gpu) -> dict[str, list[int]]:
    """Intervals and gaps of GRAPH_LAUNCHES one-node graphs queued behind a spin kernel."""
    rt = gpu.rt
    spin = _Args(ctypes.c_uint64(SPIN_NS))
    execs = []
    for stamp in gpu.stamp_args(0, GRAPH_LAUNCHES):
        graph = gpu.capture([("lp_stamp", stamp)])
        exec_ = _check(rt.cudaGraphInstantiate(graph, 0))
        _check(rt.cudaGraphUpload(exec_, gpu.stream))
        _check(rt.cudaGraphDestroy(graph))
        execs.append(exec_)
    gpu.sync()
    out: dict[str, list[int]] = {"interval_ns": [], "gap_ns": [], "queue_ns": []}
    clock = time.perf_counter_ns
    for _ in range(BACK_TO_BACK_REPEATS):
        gpu.launch("lp_spin", spin)
        t0 = clock()
        _check(rt.cudaEventRecord(gpu.events[0], gpu.stream))
        for exec_ in execs:
            _check(rt.cudaGraphLaunch(exec_, gpu.stream))
        _check(rt.cudaEventRecord(gpu.events[1], gpu.stream))
        out["queue_ns"].append(clock() - t0)
        gpu.sync()
        out["interval_ns"].append(round(gpu.elapsed_ns() / GRAPH_LAUNCHES))
        starts, ends = gpu.read_stamps(0, GRAPH_LAUNCHES)
        out["gap_ns"].extend(model.gaps_ns(starts, ends))
    for exec_ in execs:
        _check(rt.cudaGraphExecDestroy(exec_))
    return out


def _graph_costs(gpu: _Gpu) -> dict[str, dict[int, list[int]]]:
    """Capture, instantiate, update, re-instantiate and launch cost by node count."""
    rt = gpu.rt
    clock = time.perf_counter_ns
    keys = ("capture_ns", "instantiate_ns", "update_ns", "reinstantiate_ns", "first_launch_cpu_ns", "launch_cpu_ns")
    costs: dict[str, dict[int, list[int]]] = {k: {} for k in keys}
    ok = rt.cudaGraphExecUpdateResult.cudaGraphExecUpdateSuccess
    for nodes in NODE_COUNTS:
        first = [("lp_stamp", s) for s in gpu.stamp_args(0, nodes)]
        second = [("lp_stamp", s) for s in gpu.stamp_args(1, nodes)]  # other pointer
        for k in keys:
            costs[k][nodes] = []
        for _ in range(GRAPH_REPEATS):
            t0 = clock()
            graph = gpu.capture(first)
            t1 = clock()
            exec_ = _check(rt.cudaGraphInstantiate(graph, 0))
            t2 = clock()
            _check(rt.cudaGraphLaunch(exec_, gpu.stream))
            t3 = clock()
            gpu.sync()
            t_launch = clock()
            _check(rt.cudaGraphLaunch(exec_, gpu.stream))  # a later launch, on an idle stream
            costs["launch_cpu_ns"][nodes].append(clock() - t_launch)
            gpu.sync()
            other = gpu.capture(second)
            t4 = clock()
            info = _check(rt.cudaGraphExecUpdate(exec_, other))
            t5 = clock()
            if info.result != ok:
                raise CalibrationError(f"cudaGraphExecUpdate did not apply: {info.result!r}")
            exec_other = _check(rt.cudaGraphInstantiate(other, 0))
            t6 = clock()
            costs["capture_ns"][nodes].append(t1 - t0)
            costs["instantiate_ns"][nodes].append(t2 - t1)
            costs["first_launch_cpu_ns"][nodes].append(t3 - t2)
            costs["update_ns"][nodes].append(t5 - t4)
            costs["reinstantiate_ns"][nodes].append(t6 - t5)
            for handle in (exec_, exec_other):
                _check(rt.cudaGraphExecDestroy(handle))
            for handle in (graph, other):
                _check(rt.cudaGraphDestroy(handle))
    return costs


def run_calibration() -> dict[str, Any]:
    """Measure this machine's GPU 0 and return the result document (schema SCHEMA)."""
    t_begin = time.perf_counter()
    gpu = _Gpu()
    # one untimed round of everything: module loading, first-launch costs
    gpu.launch("lp_empty", gpu.empty_args)
    for s in gpu.stamp_args(0, 4):
        gpu.launch("lp_stamp", s)
    gpu.sync()
    launch = _launch_cpu(gpu)
    stream = _back_to_back(gpu, as_graph=False)
    graph = _back_to_back(gpu, as_graph=True)
    graphs = _graph_back_to_back(gpu)
    by_nodes = _graph_costs(gpu)

    nodes = list(NODE_COUNTS)
    medians_by_nodes = {k: [model.median(v[n]) for n in nodes] for k, v in by_nodes.items()}
    fits = {
        k: model.linear_fit(nodes, medians_by_nodes[k]).as_dict()
        for k in ("capture_ns", "instantiate_ns", "update_ns", "reinstantiate_ns", "launch_cpu_ns")
    }
    medians = {
        "launch_cpu_ns": model.median(launch),
        "stream_kernel_interval_ns": model.median(stream["interval_ns"]),
        "stream_kernel_gap_ns": model.median(stream["gap_ns"]),
        "graph_node_interval_ns": model.median(graph["interval_ns"]),
        "graph_node_gap_ns": model.median(graph["gap_ns"]),
        "graph_launch_cpu_ns": model.median(graph["launch_cpu_ns"]),
        "graph_launch_interval_ns": model.median(graphs["interval_ns"]),
        "graph_launch_gap_ns": model.median(graphs["gap_ns"]),
    }
    queue_ns = max(stream["queue_ns"] + graphs["queue_ns"])
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "units": "ns",
        "device": _identity(gpu),
        "software": {"python": platform.python_version(), "cuda_bindings": _bindings_version()},
        "method": METHOD,
        "medians": medians,
        "by_nodes": {"nodes": nodes, **medians_by_nodes},
        "fits": fits,
        "checks": {
            "globaltimer_resolution_ns": model.resolution_ns(stream.pop("stamps") + graph.pop("stamps")),
            "spin_ns": SPIN_NS,
            "max_queue_ns": queue_ns,
            "back_to_back": queue_ns < SPIN_NS,
        },
        "samples": {
            "launch_cpu_ns": launch,
            "stream": stream,
            "graph": graph,
            "graph_launches": graphs,
            "by_nodes": {k: {str(n): v[n] for n in nodes} for k, v in by_nodes.items()},
        },
    }
    result["duration_s"] = round(time.perf_counter() - t_begin, 3)
    return result


def _bindings_version() -> str:
    try:
        from importlib.metadata import version

        return version("cuda-bindings")
    except Exception:  # noqa: BLE001
        return "unknown"
