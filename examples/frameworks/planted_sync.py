"""A training-style loop with one planted host sync a step, for source-line checks.

Usage:  python examples/frameworks/planted_sync.py [--steps N] [--width W]

Each step (``launchprof.step()``) runs a small MLP forward and backward on the GPU, then
reads the loss back with ``.item()`` (the planted sync, the line marked below) to decide
whether to log it - the pattern a graph capture cannot hold. Prints one ``RESULT`` line
with the mean step time (perf_counter over the timed steps, CUDA-synchronised).
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
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--width", type=int, default=512)
    a = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(a.width, a.width), nn.GELU()) for _ in range(6)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(32, a.width, device="cuda")
    logged = 0
    torch.cuda.synchronize()
    began = 0
    for i in range(a.steps):
        if i == 10:
            torch.cuda.synchronize()
            began = time.perf_counter_ns()
        with launchprof.step():
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            if loss.item() > 1e9:  # planted sync
                logged += 1
    torch.cuda.synchronize()
    took = time.perf_counter_ns() - began
    print("RESULT " + json.dumps({"step_us": took / (a.steps - 10) / 1e3, "steps": a.steps, "logged": logged}))


if __name__ == "__main__":
    main()
