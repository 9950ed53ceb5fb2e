"""Programs whose graph holds what the eager run launches as many small repeats, unmarked.

Usage:  python examples/frameworks/captured_whole.py MODEL MODE [--steps N] [--reps R]

MODEL:
  lstm   an ``nn.LSTMCell`` (width 256, batch 8) unrolled over 32 time steps in Python:
         one step of the loop is one whole sequence (32 cells, then a linear head)
  bert   a Hugging Face ``BertModel`` (4 layers, width 256, random weights from a config)
         forward of a batch of 8 sequences of 64 tokens
MODE:
  eager  one launch per kernel
  graph  the whole step captured once with ``torch.cuda.graph`` and replayed: the same kernels

No step markers: the trace's steps are found from the kernels (eager) or the graph
launches (graph), as for a user's script that marks nothing. The traced loop is a
profiler region (``cudaProfilerStart/Stop``). Prints one ``RESULT`` line: ``step_us`` is
one whole sequence or forward, the median over ``--reps`` timed loops without a profiler.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_ns, profiled_region, report  # noqa: E402


def build(model: str) -> tuple[nn.Module, torch.Tensor, object]:
    torch.manual_seed(0)
    if model == "lstm":
        cell, head = nn.LSTMCell(256, 256).cuda(), nn.Linear(256, 16).cuda()
        x = torch.randn(32, 8, 256, device="cuda")

        def forward(inp: torch.Tensor) -> torch.Tensor:
            h = torch.zeros(8, 256, device="cuda")
            c = torch.zeros(8, 256, device="cuda")
            for t in range(inp.shape[0]):
                h, c = cell(inp[t], (h, c))
            return head(h)

        return nn.ModuleList([cell, head]), x, forward
    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024, vocab_size=30522
    )
    bert = BertModel(config).cuda().eval()
    ids = torch.randint(0, config.vocab_size, (8, 64), device="cuda")
    return bert, ids, lambda inp: bert(input_ids=inp).last_hidden_state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=("lstm", "bert"))
    parser.add_argument("mode", choices=("eager", "graph"))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--reps", type=int, default=5)
    a = parser.parse_args()
    _, static_in, forward = build(a.model)
    graph = None
    with torch.inference_mode():
        for _ in range(3):
            forward(static_in)  # type: ignore[operator]
        if a.mode == "graph":
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                forward(static_in)  # type: ignore[operator]
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                forward(static_in)  # type: ignore[operator]
    torch.cuda.synchronize()

    def loop() -> None:
        with torch.inference_mode():
            for _ in range(a.steps):
                if graph is not None:
                    graph.replay()
                else:
                    forward(static_in)  # type: ignore[operator]

    loop()
    t = median_ns(loop, a.reps)
    with profiled_region():
        loop()
    report(
        workload=f"captured_whole {a.model} {a.mode}",
        step="one whole sequence (32 LSTM cells and the head)" if a.model == "lstm" else "one BertModel forward",
        step_us=t / a.steps / 1e3,
        traced_steps=a.steps,
    )


if __name__ == "__main__":
    main()
