"""A PyTorch step that forks onto a second CUDA stream and joins again, eager or replayed
as one CUDA graph.

Usage:  python examples/frameworks/torch_streams.py MODE [--steps N] [--reps R]

One step on a 4096-float vector: 2 elementwise kernels on the main stream (the head);
the side stream waits for them (``wait_stream``: an event); then 6 kernels on the main
stream and 12 on the side stream, launched in turn (the side branch is the longer); the
main stream waits for the side one; 2 more kernels on the main stream (the tail). The
critical path is the head, the side branch and the tail: 16 of the step's 22 kernels.
MODE:

  eager  every kernel launched every step
  graph  the step captured once with ``torch.cuda.graph`` (the capture follows the fork
         and the join) and replayed: the same kernels

Each step of the traced loop is a ``launchprof.step()`` range. Prints one ``RESULT``
line: ``step_us`` is the median over ``--reps`` timed loops without a profiler, divided by
the steps.
"""

from __future__ import annotations

import argparse
import json

import torch
from _timing import median_ns, step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("eager", "graph"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    a = parser.parse_args()
    side = torch.cuda.Stream()
    x = torch.randn(4096, device="cuda")
    left, right = torch.empty_like(x), torch.empty_like(x)

    def body() -> None:
        x.mul_(0.5).add_(1.0)  # head
        side.wait_stream(torch.cuda.current_stream())
        torch.mul(x, 1.0, out=left)
        with torch.cuda.stream(side):
            torch.mul(x, 1.0, out=right)
        for k in range(11):
            if k < 5:
                left.mul_(0.99)
            with torch.cuda.stream(side):
                right.mul_(0.98)
        torch.cuda.current_stream().wait_stream(side)
        torch.add(left, right, out=x).mul_(0.5)  # tail

    for _ in range(3):  # warm up on the side stream, as torch.cuda.graph asks
        body()
    torch.cuda.synchronize()
    graph = None
    if a.mode == "graph":
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
        torch.cuda.synchronize()
    one = graph.replay if graph is not None else body

    def loop() -> None:
        for _ in range(a.steps):
            one()

    per_step = median_ns(loop, a.reps) / a.steps / 1e3
    torch.cuda.synchronize()
    for _ in range(a.steps):  # the traced loop: marked steps
        with step():
            one()
    torch.cuda.synchronize()
    print("RESULT " + json.dumps({"mode": a.mode, "step_us": round(per_step, 3), "steps": a.steps, "kernels": 22}))


if __name__ == "__main__":
    main()
