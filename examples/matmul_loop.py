"""A loop of large bf16 matrix products after an idle start: GPU-bound, graphs gain little.

Usage:  python examples/matmul_loop.py eager|graph [--steps N] [--size S] [--per-step K] [--idle SECONDS]

Each step multiplies K times (default 4) two S x S bf16 matrices (S = 8192: about 1.1 TFLOP,
about 1.6 ms each on an H200) into a preallocated output. Before the loop the program
allocates, warms up (one product; in graph mode also the capture of one step) and then
sleeps (default 1 s): the GPU is idle at the start of the run but busy in the steady
state, so a tool must judge the steady state, not the whole span. MODE:

  eager   one torch.matmul launch per product
  graph   the K products of one step captured once with torch.cuda.graph, one replay a step

Every step is an NVTX range ``step`` (domain ``launchprof``; see _step.py). At the end one
line ``RESULT {json}`` gives the wall time per step after the first tenth.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from _step import MARKER, step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("eager", "graph"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--per-step", type=int, default=4)
    parser.add_argument("--idle", type=float, default=1.0)
    a = parser.parse_args()
    torch.manual_seed(0)
    lhs = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
    rhs = torch.randn(a.size, a.size, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(lhs)

    def one_step() -> None:
        for _ in range(a.per_step):
            torch.matmul(lhs, rhs, out=out)

    torch.matmul(lhs, rhs, out=out)  # warm-up: cuBLAS handle and workspace
    graph = None
    if a.mode == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            one_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            one_step()
    torch.cuda.synchronize()
    time.sleep(a.idle)  # idle start-up: data loading, say

    timed_from = a.steps // 10
    t_start = time.perf_counter()
    for i in range(a.steps):
        if i == timed_from:
            t_start = time.perf_counter()
        with step():
            if graph is None:
                one_step()
            else:
                graph.replay()
    torch.cuda.synchronize()
    wall_s = time.perf_counter() - t_start
    timed = a.steps - timed_from
    flops = 2 * a.size**3 * a.per_step * timed
    result = {
        "workload": "matmul_loop",
        "mode": a.mode,
        "steps": a.steps,
        "size": a.size,
        "matmuls_per_step": a.per_step,
        "timed_steps": timed,
        "wall_ms": round(wall_s * 1e3, 3),
        "per_step_us": round(wall_s * 1e6 / timed, 2),
        "tflops": round(flops / wall_s / 1e12, 1),
        "marker": MARKER,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
