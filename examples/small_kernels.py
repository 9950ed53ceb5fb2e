"""Many tiny kernels a step, launched one by one or as a CUDA Graph (cuda-python).

Usage:  python examples/small_kernels.py MODE [--steps N] [--n ELEMENTS] [--rounds R]

Each step runs R rounds of three elementwise kernels over one float buffer of n elements
(``lp_scale``: x *= a, ``lp_shift``: x += b, ``lp_relu``: x = max(x, 0)), so 3*R kernels a
step (36 by default). With n = 4096 each kernel lasts about a microsecond, far less than
the CPU needs to launch it: the loop is launch-bound. MODE chooses how the step is issued:

  launch         one cuLaunchKernel per kernel, on a created (non-blocking) stream
  graph          stream capture once, instantiate once, one cudaGraphLaunch per step
  reinstantiate  capture + instantiate + launch + destroy every step (the churn case)
  update         two buffers used in turn: re-capture every step and cudaGraphExecUpdate
                 the one executable graph instead of instantiating a new one
  legacy         like launch, but on the legacy default stream (stream 0)
  alloc          like launch, but cudaMalloc/cudaFree of the buffer inside every step
  big            like launch with n = 4,000,000 (kernels of ~10 us: GPU-bound)
  big-graph      like graph with n = 4,000,000

Before the loop one warm-up pass of the step's kernels runs outside any step range
(it loads the module), then the stream is synchronized. Every step is an NVTX range
``step`` (domain ``launchprof``; see _step.py). The kernels are compiled with NVRTC and
launched with the driver API (cuda-python has no cudaLaunchKernel); streams, memory and
graphs use the runtime API. At the end one line ``RESULT {json}`` gives the wall time of
the steps after the first tenth (no per-step synchronization), per step.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import time

from _step import MARKER, step
from cuda.bindings import driver, nvrtc, runtime

SOURCE = r"""
extern "C" __global__ void lp_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
extern "C" __global__ void lp_shift(float* x, float b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += b;
}
extern "C" __global__ void lp_relu(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = fmaxf(x[i], 0.0f);
}
"""
MODES = ("launch", "graph", "reinstantiate", "update", "legacy", "alloc", "big", "big-graph")
BLOCK = 256


def check(result):
    """Unpack a cuda-python result tuple; raise on any error code."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if err:
        raise RuntimeError(f"CUDA call failed: {err!r}")
    return values[0] if len(values) == 1 else (tuple(values) or None)


def compile_kernels(names: list[str]) -> dict[str, object]:
    """NVRTC-compile SOURCE for this GPU and return {name: CUfunction}."""
    check(runtime.cudaFree(0))  # create the primary context and make it current
    prop = check(runtime.cudaGetDeviceProperties(0))
    arch = f"--gpu-architecture=sm_{prop.major}{prop.minor}".encode()
    prog = check(nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"small_kernels.cu", 0, [], []))
    (err,) = nvrtc.nvrtcCompileProgram(prog, 1, [arch])
    if err:
        log = b" " * check(nvrtc.nvrtcGetProgramLogSize(prog))
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.decode(errors="replace"))
    cubin = b" " * check(nvrtc.nvrtcGetCUBINSize(prog))
    check(nvrtc.nvrtcGetCUBIN(prog, cubin))
    module = check(driver.cuModuleLoadData(cubin))
    return {name: check(driver.cuModuleGetFunction(module, name.encode())) for name in names}


class Args:
    """Kernel arguments packed once as the void** array cuLaunchKernel takes."""

    def __init__(self, *values: ctypes._SimpleCData) -> None:
        self.values = values  # keep the storage alive
        self.pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        self.address = ctypes.addressof(self.pointers)


def step_kernels(fn: dict, buffer: int, n: int, rounds: int) -> list[tuple[object, Args]]:
    """The (function, arguments) list of one step over one buffer."""
    ptr, count = ctypes.c_void_p(buffer), ctypes.c_int(n)
    scale = Args(ptr, ctypes.c_float(0.999), count)
    shift = Args(ptr, ctypes.c_float(0.001), count)
    relu = Args(ptr, count)
    return [(fn["lp_scale"], scale), (fn["lp_shift"], shift), (fn["lp_relu"], relu)] * rounds


def launch_all(kernels, n: int, stream) -> None:
    grid = (n + BLOCK - 1) // BLOCK
    for function, args in kernels:
        (err,) = driver.cuLaunchKernel(function, grid, 1, 1, BLOCK, 1, 1, 0, stream, args.address, 0)
        if err:
            raise RuntimeError(f"cuLaunchKernel failed: {err!r}")


def capture(kernels, n: int, stream):
    """Record the launches of one step into a new cudaGraph_t by stream capture."""
    mode = runtime.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal
    check(runtime.cudaStreamBeginCapture(stream, mode))
    launch_all(kernels, n, stream)
    return check(runtime.cudaStreamEndCapture(stream))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--n", type=int, default=None, help="elements (4096; 4,000,000 for big*)")
    parser.add_argument("--rounds", type=int, default=12, help="3 kernels a round")
    a = parser.parse_args()
    mode = a.mode
    n = a.n or (4_000_000 if mode.startswith("big") else 4096)
    fn = compile_kernels(["lp_scale", "lp_shift", "lp_relu"])
    nbytes = n * 4
    stream = 0 if mode == "legacy" else check(runtime.cudaStreamCreateWithFlags(runtime.cudaStreamNonBlocking))
    buf_a = check(runtime.cudaMalloc(nbytes))
    buf_b = check(runtime.cudaMalloc(nbytes))
    for buf in (buf_a, buf_b):
        check(runtime.cudaMemset(buf, 0, nbytes))
    check(runtime.cudaDeviceSynchronize())
    seq_a = step_kernels(fn, int(buf_a), n, a.rounds)
    seq_b = step_kernels(fn, int(buf_b), n, a.rounds)
    launch_all(seq_a, n, stream)  # warm-up pass, outside any step
    check(runtime.cudaStreamSynchronize(stream))

    graph_exec = None
    if mode in ("graph", "big-graph", "update"):
        graph = capture(seq_a, n, stream)
        graph_exec = check(runtime.cudaGraphInstantiate(graph, 0))
        check(runtime.cudaGraphUpload(graph_exec, stream))
        check(runtime.cudaGraphDestroy(graph))
        check(runtime.cudaStreamSynchronize(stream))

    timed_from = a.steps // 10
    t_start = time.perf_counter()
    for i in range(a.steps):
        if i == timed_from:
            t_start = time.perf_counter()
        with step():
            if mode in ("launch", "legacy", "big"):
                launch_all(seq_a, n, stream)
            elif mode in ("graph", "big-graph"):
                check(runtime.cudaGraphLaunch(graph_exec, stream))
            elif mode == "reinstantiate":
                graph = capture(seq_a, n, stream)
                exec_now = check(runtime.cudaGraphInstantiate(graph, 0))
                check(runtime.cudaGraphLaunch(exec_now, stream))
                check(runtime.cudaGraphExecDestroy(exec_now))  # freed once the launch completes
                check(runtime.cudaGraphDestroy(graph))
            elif mode == "update":
                graph = capture(seq_a if i % 2 == 0 else seq_b, n, stream)
                info = check(runtime.cudaGraphExecUpdate(graph_exec, graph))
                if info.result != runtime.cudaGraphExecUpdateResult.cudaGraphExecUpdateSuccess:
                    raise RuntimeError(f"cudaGraphExecUpdate: {info.result!r}")
                check(runtime.cudaGraphDestroy(graph))
                check(runtime.cudaGraphLaunch(graph_exec, stream))
            elif mode == "alloc":
                buf = check(runtime.cudaMalloc(nbytes))
                launch_all(step_kernels(fn, int(buf), n, a.rounds), n, stream)
                check(runtime.cudaFree(buf))  # cudaFree waits for the device
    check(runtime.cudaStreamSynchronize(stream))
    wall_s = time.perf_counter() - t_start
    timed = a.steps - timed_from
    result = {
        "workload": "small_kernels",
        "mode": mode,
        "n": n,
        "steps": a.steps,
        "kernels_per_step": 3 * a.rounds,
        "timed_steps": timed,
        "wall_ms": round(wall_s * 1e3, 3),
        "per_step_us": round(wall_s * 1e6 / timed, 2),
        "marker": MARKER,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
