"""Two processes launching small kernels on the same GPU at the same time.

Usage:  python examples/two_procs.py [--steps N] [--ops K] [--procs P]

The parent starts P (2) worker processes with multiprocessing's spawn method and waits.
Each worker runs its own per-launch loop on GPU 0: N steps (100) of K (16) tiny in-place
elementwise PyTorch operations on a 4096-element tensor, one kernel each, every step an
NVTX range ``step`` (domain ``launchprof``; see _step.py). The workers' kernels
interleave on the GPU (time-sliced between the two contexts), and each process numbers
its CUDA API calls from its own start, so their correlation ids overlap: a trace reader
must pair API calls and kernels by process as well as by correlation id.

Each worker prints one line ``RESULT {json}`` with its wall time per step.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time


def worker(rank: int, steps: int, ops: int, start: mp.Barrier) -> None:
    import torch
    from _step import MARKER, step

    x = torch.full((4096,), float(rank + 1), device="cuda")
    for _ in range(2):  # warm-up, outside any step
        x.mul_(1.0).add_(0.0)
    torch.cuda.synchronize()
    start.wait()  # both workers enter their loops together
    timed_from = steps // 10
    t_start = time.perf_counter()
    for i in range(steps):
        if i == timed_from:
            t_start = time.perf_counter()
        with step():
            for k in range(ops):
                if k % 2 == 0:
                    x.mul_(0.999)
                else:
                    x.add_(0.001)
    torch.cuda.synchronize()
    wall_s = time.perf_counter() - t_start
    timed = steps - timed_from
    result = {
        "workload": "two_procs",
        "rank": rank,
        "pid": os.getpid(),
        "steps": steps,
        "kernels_per_step": ops,
        "timed_steps": timed,
        "wall_ms": round(wall_s * 1e3, 3),
        "per_step_us": round(wall_s * 1e6 / timed, 2),
        "marker": MARKER,
    }
    print("RESULT " + json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--ops", type=int, default=16)
    parser.add_argument("--procs", type=int, default=2)
    a = parser.parse_args()
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(a.procs)
    procs = [ctx.Process(target=worker, args=(r, a.steps, a.ops, start)) for r in range(a.procs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise SystemExit(f"worker exit codes: {bad}")


if __name__ == "__main__":
    main()
