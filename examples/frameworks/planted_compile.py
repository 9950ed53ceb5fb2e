"""A loop compiled with ``torch.compile(mode="reduce-overhead")`` whose step, in one mode,
keeps running statistics by changing an input in place - which makes Inductor run it
without CUDA Graphs - for checking the ``cudagraph-skip`` finding and its source line.

Usage:  python examples/frameworks/planted_compile.py {mutate,fixed,eager,default} [--steps N] [--width W]

``mutate``: the compiled step updates ``stats`` (an argument) in place (the planted line,
marked below; Inductor logs "skipping cudagraphs due to mutated inputs"). ``fixed``: the new
statistics returned and assigned by the caller (one CUDA Graph). ``eager``: the fixed step,
not compiled; ``default``: ``torch.compile(mode="default")`` of it (fused kernels, no graph).
Each step is marked with ``launchprof.step()``. Prints one ``RESULT`` line with the mean
step time (perf_counter over the timed steps, CUDA-synchronised).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

import launchprof


class Block(nn.Module):
    def __init__(self, width: int, layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.nn.functional.gelu(layer(x)) + x
        return x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["mutate", "fixed", "eager", "default"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=12)
    a = parser.parse_args()
    torch.manual_seed(0)
    model = Block(a.width, a.layers).cuda().eval()

    def step_mutate(x: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
        h = model(x)
        stats.mul_(0.9).add_(h.mean(0), alpha=0.1)  # planted mutation
        return h.sum(1)

    def step_fixed(x: torch.Tensor, stats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = model(x)
        return h.sum(1), stats * 0.9 + h.mean(0) * 0.1

    if a.mode == "eager":
        compiled = step_fixed
    elif a.mode == "default":
        compiled = torch.compile(step_fixed, mode="default")
    else:
        compiled = torch.compile(step_mutate if a.mode == "mutate" else step_fixed, mode="reduce-overhead")
    x = torch.randn(16, a.width, device="cuda")
    stats = torch.zeros(a.width, device="cuda")
    began = 0
    with torch.no_grad():
        for i in range(a.steps):
            if i == 20:
                torch.cuda.synchronize()
                began = time.perf_counter_ns()
            with launchprof.step():
                if a.mode in ("mutate", "fixed"):
                    torch.compiler.cudagraph_mark_step_begin()
                if a.mode == "mutate":
                    compiled(x, stats)
                else:
                    _, new = compiled(x, stats)
                    stats = new.clone()
    torch.cuda.synchronize()
    took = time.perf_counter_ns() - began
    print("RESULT " + json.dumps({"mode": a.mode, "step_us": took / (a.steps - 20) / 1e3, "steps": a.steps}))


if __name__ == "__main__":
    main()
