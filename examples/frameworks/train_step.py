"""One training step of a small Transformer encoder with AdamW: eager, or the whole step
(forward, backward, optimizer) captured as one CUDA graph with a capturable optimizer.

Usage:  python examples/frameworks/train_step.py MODE [--batch B] [--seq S] [--steps N] [--reps R]

The model: ``nn.TransformerEncoder`` of 4 layers, width 256, 4 heads, feed-forward 1024,
a linear head of 16 classes, fp32, batch B (8) of S (64) tokens; loss cross-entropy.
MODE:

  eager   ``zero_grad``, forward, loss, backward, ``AdamW.step()`` (foreach), one launch
          per kernel
  graph   the same step captured once with ``torch.cuda.graph`` after warm-up on a side
          stream, as in PyTorch's "whole network capture" example, with
          ``AdamW(capturable=True)`` (its step count lives on the GPU: a few more small
          kernels); each step copies its batch into static inputs and replays

Each step of the traced loop is an NVTX range ``step`` (:func:`_timing.step`:
``launchprof.step()`` when launchprof is installed, else ``torch.cuda.nvtx``). The truth
without the profiler: the median over ``--reps`` timed loops of N steps, divided by N.
The trace holds one loop of N steps (``cudaProfilerStart/Stop``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_ns, profiled_region, report, step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("eager", "graph"))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    a = parser.parse_args()
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)).cuda()
    head = nn.Linear(256, 16).cuda()
    params = list(model.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4, capturable=a.mode == "graph")
    loss_fn = nn.CrossEntropyLoss()
    xs = torch.randn(4, a.batch, a.seq, 256, device="cuda")
    ys = torch.randint(0, 16, (4, a.batch), device="cuda")
    static_x, static_y = xs[0].clone(), ys[0].clone()

    def body() -> None:
        opt.zero_grad(set_to_none=False)
        out = head(model(static_x).mean(dim=1))
        loss_fn(out, static_y).backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up (also creates the optimizer state before capture)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = None
    if a.mode == "graph":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()

    def one_step(i: int) -> None:
        static_x.copy_(xs[i % 4])
        static_y.copy_(ys[i % 4])
        if graph is not None:
            graph.replay()
        else:
            body()

    def loop(mark: bool) -> None:
        for i in range(a.steps):
            with step() if mark else contextlib.nullcontext():
                one_step(i)

    loop(False)
    t = median_ns(lambda: loop(False), a.reps)
    with profiled_region():
        loop(True)
    report(
        workload=f"train_step {a.mode}",
        batch=a.batch,
        step="one optimizer step",
        step_us=t / a.steps / 1e3,
        traced_steps=a.steps,
    )


if __name__ == "__main__":
    main()
