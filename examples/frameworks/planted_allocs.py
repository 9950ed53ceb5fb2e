"""A hand-written decode-style loop with three planted lines a CUDA Graph trips over, for
source-line checks: a buffer made inside the step (``torch.zeros``), a cache grown with
``torch.cat`` every step (as a decoder without a static KV cache does) and an ``.item()``
read back each step.

Usage:  python examples/frameworks/planted_allocs.py [--steps N] [--width W]

Each step (``launchprof.step()``) runs a small MLP on the GPU; the cache gains one row of
``16 x width`` floats a step, so its size - and the grid of the copy kernel that
concatenates - changes every step, and once it outgrows the allocator's cached blocks
the step calls ``cudaMalloc``. Prints one ``RESULT`` line with the mean step time
(perf_counter over the timed steps, CUDA-synchronised).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

import launchprof


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=1024)
    a = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(a.width, a.width), nn.GELU()) for _ in range(4)]).cuda().eval()
    x = torch.randn(8, a.width, device="cuda")
    cache = torch.zeros(1, 16 * a.width, device="cuda")
    stopped = 0
    began = 0
    with torch.no_grad():
        for i in range(a.steps):
            if i == 10:
                torch.cuda.synchronize()
                began = time.perf_counter_ns()
            with launchprof.step():
                h = torch.zeros(8, a.width, device="cuda")  # planted zeros
                h = model(x) + h
                cache = torch.cat([cache, h[:1].repeat(1, 16)], dim=0)  # planted cat
                if cache[-1, 0].item() > 1e9:  # planted sync
                    stopped += 1
    torch.cuda.synchronize()
    took = time.perf_counter_ns() - began
    print("RESULT " + json.dumps({"step_us": took / (a.steps - 10) / 1e3, "steps": a.steps, "rows": cache.shape[0]}))


if __name__ == "__main__":
    main()
