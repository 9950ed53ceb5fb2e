"""Small-batch inference of a residual MLP in PyTorch: eager, CUDA Graph, and the usual traps.

Usage:  python examples/torch_mlp.py MODE [--steps N] [--batch B] [--width W] [--blocks K]

The model is K residual blocks x = x + SiLU(LayerNorm(Linear(x))) and a final Linear,
width W (256), batch B (4): each kernel lasts a few microseconds, so eager PyTorch is
launch-bound. Every step first copies the step's input into one static input tensor
(one device-to-device copy), then runs the model. MODE:

  eager               one launch per kernel
  graph               torch.cuda.graph captured once (warm-up on a side stream), one
                      replay per step
  capture-every-step  a new torch.cuda.graph is captured and replayed every step
  item                eager, plus out.sum().item() every step (a reduction, a copy to
                      the host and a synchronization inside the step)
  dynamic             eager, the batch size changes between steps (1, 2, 4, 8, 16,
                      chosen by a seeded generator), as with variable-size requests
  branchy             eager, data-dependent control flow: each batch comes with a host-side
                      "difficulty" flag from its loader; easy batches exit after half the
                      blocks through a separate small head, hard batches run every block, so
                      the kernel sequence differs between steps

Every step is an NVTX range ``step`` (domain ``launchprof``; see _step.py). Before the
loop the model runs twice outside any step, full and early-exit (warm-up: cuBLAS
handles, allocator). At the
end one line ``RESULT {json}`` gives the wall time per step after the first tenth.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter

import torch
from _step import MARKER, step
from torch import nn

MODES = ("eager", "graph", "capture-every-step", "item", "dynamic", "branchy")
DYNAMIC_BATCHES = (1, 2, 4, 8, 16)


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.norm(self.linear(x)))


class ResidualMLP(nn.Module):
    def __init__(self, width: int, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.head = nn.Linear(width, width)
        self.early_head = nn.Linear(width, width // 2)

    def forward(self, x: torch.Tensor, depth: int | None = None) -> torch.Tensor:
        for block in self.blocks[:depth]:
            x = block(x)
        if depth is not None and depth < len(self.blocks):
            return self.early_head(x)
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--blocks", type=int, default=8)
    a = parser.parse_args()
    torch.manual_seed(0)
    rng = random.Random(0)
    model = ResidualMLP(a.width, a.blocks).cuda().eval()
    batches = DYNAMIC_BATCHES if a.mode == "dynamic" else (a.batch,)
    # a few input batches per size, already on the GPU, and one static input per size
    data = {b: torch.randn(4, b, a.width, device="cuda") for b in batches}
    static_in = {b: torch.zeros(b, a.width, device="cuda") for b in batches}
    x = static_in[a.batch] if a.batch in static_in else None
    seen: Counter[str] = Counter()

    with torch.no_grad():
        for b in batches:  # warm-up, outside any step
            for _ in range(2):
                model(static_in[b])
                model(static_in[b], depth=a.blocks // 2)
        graph = None
        if a.mode == "graph":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = model(x)
        torch.cuda.synchronize()

        timed_from = a.steps // 10
        t_start = time.perf_counter()
        for i in range(a.steps):
            if i == timed_from:
                t_start = time.perf_counter()
            with step():
                if a.mode == "dynamic":
                    b = rng.choice(DYNAMIC_BATCHES)
                    seen[f"batch={b}"] += 1
                    static_in[b].copy_(data[b][i % 4])
                    out = model(static_in[b])
                    continue
                x.copy_(data[a.batch][i % 4])
                if a.mode == "eager":
                    out = model(x)
                elif a.mode == "graph":
                    graph.replay()
                elif a.mode == "capture-every-step":
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        out = model(x)
                    graph.replay()
                elif a.mode == "item":
                    out = model(x)
                    seen["sum>0"] += int(out.sum().item() > 0)
                elif a.mode == "branchy":
                    hard = rng.random() < 0.5  # the loader's flag for this batch
                    seen["hard" if hard else "easy"] += 1
                    out = model(x, depth=None if hard else a.blocks // 2)
        torch.cuda.synchronize()
    wall_s = time.perf_counter() - t_start
    timed = a.steps - timed_from
    result = {
        "workload": "torch_mlp",
        "mode": a.mode,
        "steps": a.steps,
        "batch": a.batch,
        "width": a.width,
        "blocks": a.blocks,
        "timed_steps": timed,
        "wall_ms": round(wall_s * 1e3, 3),
        "per_step_us": round(wall_s * 1e6 / timed, 2),
        "counts": dict(sorted(seen.items())),
        "marker": MARKER,
        "torch": torch.__version__,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
