"""A loop whose host time is mostly NumPy, not CUDA calls: a CUDA graph gains almost nothing.

Usage:  python examples/frameworks/numpy_pipeline.py MODE [--steps N] [--warmup W] [--reps R]

Each step builds a float32 batch of 64 rows of 1024 on the CPU with NumPy (a seeded
``Generator``'s normal draws, a cumulative sum, a sort, a low-pass through ``rfft`` /
``irfft``, a per-row normalisation: about 2 ms of one core), copies it to the GPU and runs
8 small residual layers ``x + gelu(linear(x))`` (width 1024, bf16, after one cast of the
float32 batch): about 25 kernels and one host-to-device copy, no other sync. MODE:

  eager   the batch copied from pageable memory into a preallocated device input
          (``copy_``, which waits for the copy), then one launch per kernel
  graph   the GPU part - the copy from a static pinned host buffer into the static device
          input and the layers - captured once with ``torch.cuda.graph`` after warm-up
          on a side stream; each step writes its NumPy batch into the pinned buffer
          (after an event says the previous replay's copy has read it) and replays

Each step of the traced loop is an NVTX range ``step`` (:func:`_timing.step`). The truth
without the profiler: the median over ``--reps`` timed loops of N steps, divided by N;
``prep_us`` is the NumPy part alone, timed the same way. The trace holds one loop of N
steps (``cudaProfilerStart/Stop``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_ns, profiled_region, report, step  # noqa: E402

ROWS, WIDTH, KEEP = 64, 1024, 128  # batch shape; rfft bins kept by the low-pass


def prep(rng: np.random.Generator) -> np.ndarray:
    """One batch: random walks, sorted per row, low-passed, normalised (float32, C order)."""
    x = np.cumsum(rng.standard_normal((ROWS, WIDTH), dtype=np.float32), axis=1, dtype=np.float32)
    x.sort(axis=1)
    f = np.fft.rfft(x, axis=1)
    f[:, KEEP:] = 0
    x = np.fft.irfft(f, n=WIDTH, axis=1).astype(np.float32)
    x -= x.mean(axis=1, keepdims=True)
    x /= x.std(axis=1, keepdims=True) + 1e-6
    return x


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("eager", "graph"))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5)
    a = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    lins = [torch.nn.Linear(WIDTH, WIDTH).to("cuda", torch.bfloat16) for _ in range(8)]

    def model(x: torch.Tensor) -> torch.Tensor:  # a cast, then 8 residual layers of 3 kernels
        x = x.to(torch.bfloat16)
        for lin in lins:
            x = x + torch.nn.functional.gelu(lin(x))
        return x

    host = torch.empty(ROWS, WIDTH, pin_memory=True)  # the graph's static pinned buffer
    host_np = host.numpy()
    static_in = torch.empty(ROWS, WIDTH, device="cuda")
    done = torch.cuda.Event()  # graph mode: the last replay (its copy has read `host`)
    graph = None
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(max(a.warmup, 1)):  # warm-up: cuBLAS handles, allocator
                np.copyto(host_np, prep(rng))
                static_in.copy_(host, non_blocking=True)
                model(static_in)
                side.synchronize()
        torch.cuda.current_stream().wait_stream(side)
        if a.mode == "graph":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_in.copy_(host, non_blocking=True)
                model(static_in)
            done.record()
    torch.cuda.synchronize()

    def one_step() -> None:
        batch = prep(rng)
        if graph is not None:
            done.synchronize()  # the previous replay's copy has read the pinned buffer
            np.copyto(host_np, batch)
            graph.replay()
            done.record()
        else:
            static_in.copy_(torch.from_numpy(batch))  # pageable: returns once copied
            model(static_in)

    def loop(mark: bool) -> None:
        with torch.inference_mode():
            for _ in range(a.steps):
                with step() if mark else contextlib.nullcontext():
                    one_step()

    loop(False)
    t = median_ns(lambda: loop(False), a.reps)
    t_prep = median_ns(lambda: [prep(rng) for _ in range(a.steps)], a.reps)
    with profiled_region():
        loop(True)
    report(
        workload=f"numpy_pipeline {a.mode}",
        batch=ROWS,
        step="NumPy preprocessing of one batch, its copy to the GPU and 8 small layers",
        step_us=t / a.steps / 1e3,
        prep_us=t_prep / a.steps / 1e3,
        traced_steps=a.steps,
    )


if __name__ == "__main__":
    main()
