"""A CuPy loop of small kernels, eager or replayed as one CUDA graph captured by CuPy.

Usage:  python examples/frameworks/cupy_loop.py MODE [--steps N] [--reps R] [--kernels K]

One step runs K (default 30) small elementwise kernels (``cupy.ElementwiseKernel``,
launched through the driver API, ``cuLaunchKernel``) on a 64k-float array on one
non-default stream. MODE:

  eager  one launch per kernel
  graph  the step captured once (``Stream.begin_capture`` / ``end_capture``) and replayed
         with ``Graph.launch``: the same kernels

Each step of the traced loop is a ``launchprof.step()`` range; the traced loop is a
profiler region (``cudaProfilerStart/Stop`` through CuPy's runtime). Prints one
``RESULT`` line: ``step_us`` is the median over ``--reps`` timed loops without a profiler,
divided by the steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import cupy as cp

import launchprof


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("eager", "graph"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--kernels", type=int, default=30)
    a = parser.parse_args()
    axpb = cp.ElementwiseKernel("float32 x, float32 a, float32 b", "float32 y", "y = a * x + b", "axpb")
    stream = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(1 << 16, dtype=cp.float32)
    y = cp.empty_like(x)

    def body() -> None:
        for k in range(a.kernels):
            src, dst = (x, y) if k % 2 == 0 else (y, x)
            axpb(src, cp.float32(0.999), cp.float32(0.001), dst)

    graph = None
    with stream:
        body()  # compile and warm up
        if a.mode == "graph":
            stream.begin_capture()
            body()
            graph = stream.end_capture()
    stream.synchronize()

    def one() -> None:
        with stream:
            if graph is not None:
                graph.launch(stream)
            else:
                body()

    def loop(mark: bool) -> None:
        for _ in range(a.steps):
            if mark:
                with launchprof.step():
                    one()
            else:
                one()
        stream.synchronize()

    def timed() -> int:
        stream.synchronize()
        t0 = time.perf_counter_ns()
        loop(False)
        return time.perf_counter_ns() - t0

    loop(False)
    t = statistics.median(timed() for _ in range(a.reps))
    cp.cuda.runtime.profilerStart()
    loop(True)
    cp.cuda.runtime.profilerStop()
    print(
        "RESULT "
        + json.dumps(
            {
                "workload": f"cupy_loop {a.mode}",
                "step": f"{a.kernels} elementwise kernels",
                "step_us": t / a.steps / 1e3,
                "traced_steps": a.steps,
            },
            sort_keys=True,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
