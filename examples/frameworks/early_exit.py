"""Inference with a data-dependent branch (early exit), eager or one CUDA graph per path.

Usage:  python examples/frameworks/early_exit.py MODE [--batch B] [--steps N] [--reps R]

The model: 12 pre-norm residual MLP blocks (width 1024, hidden 4096, GELU), bf16, batch B
(16 rows), with two heads: an early-exit head after block 4 and the final head after
block 12. Each batch comes with a host-side flag from its loader ("easy" or "hard", a
seeded pattern, about two easy batches in three): an easy batch leaves through the
early-exit head, a hard one runs every block. The kernel sequence therefore changes from
step to step with the data, the case a single captured graph cannot replay. MODE:

  eager    one launch per kernel, the branch taken in Python
  graphs   one CUDA graph per path (``torch.cuda.graph``, both captured after warm-up on
           a side stream, sharing one memory pool); each step copies its batch into the
           static input and replays the graph of its path: the same kernels as eager

Each step of the traced loop is an NVTX range ``step`` (:func:`_timing.step`). The truth
without the profiler: the median over ``--reps`` timed loops of N steps, divided by N.
The trace holds one loop of N steps (``cudaProfilerStart/Stop``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_ns, profiled_region, report, step  # noqa: E402

EXIT_AFTER = 4


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class EarlyExit(nn.Module):
    def __init__(self, width: int = 1024, blocks: int = 12, classes: int = 100) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.exit_head = nn.Linear(width, classes)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor, easy: bool) -> torch.Tensor:
        for i, block in enumerate(self.blocks):
            x = block(x)
            if easy and i + 1 == EXIT_AFTER:
                return self.exit_head(x).softmax(dim=-1)
        return self.head(x).softmax(dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("eager", "graphs"))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--reps", type=int, default=5)
    a = parser.parse_args()
    torch.manual_seed(0)
    model = EarlyExit().to(device="cuda", dtype=torch.bfloat16).eval()
    rng = random.Random(0)
    flags = [rng.random() < 2 / 3 for _ in range(a.steps)]
    batches = torch.randn(4, a.batch, 1024, device="cuda", dtype=torch.bfloat16)
    static_in = batches[0].clone()
    graphs: dict[bool, torch.cuda.CUDAGraph] = {}
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for easy in (True, False, True, False):  # warm-up: cuBLAS handles, allocator
                model(static_in, easy)
        torch.cuda.current_stream().wait_stream(side)
        if a.mode == "graphs":
            pool = torch.cuda.graph_pool_handle()
            for easy in (False, True):
                graphs[easy] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[easy], pool=pool):
                    model(static_in, easy)
    torch.cuda.synchronize()

    def one_step(i: int) -> None:
        static_in.copy_(batches[i % 4])
        easy = flags[i]
        if graphs:
            graphs[easy].replay()
        else:
            model(static_in, easy)

    def loop(mark: bool) -> None:
        with torch.inference_mode():
            for i in range(a.steps):
                with step() if mark else contextlib.nullcontext():
                    one_step(i)

    loop(False)
    t = median_ns(lambda: loop(False), a.reps)
    with profiled_region():
        loop(True)
    report(
        workload=f"early_exit {a.mode}",
        batch=a.batch,
        step="one forward of a batch (early exit or full depth, by the batch's flag)",
        step_us=t / a.steps / 1e3,
        traced_steps=a.steps,
        easy_steps=sum(flags),
    )


if __name__ == "__main__":
    main()
