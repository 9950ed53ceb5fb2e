"""A decode-like loop whose sequence grows each step, served by a pool of CUDA Graphs.

Usage:  python examples/decode_buckets.py [graph|eager] [--steps N] [--start L0] [--buckets 16,32,64,128]

One token at a time: step t attends over the L = L0 + t positions written so far (a
KV cache), then runs a small MLP; the result is the next step's input. The attention's
shape grows by one every step, so one CUDA Graph cannot serve the loop. The ``graph``
mode keeps a pool of graphs, one per padded-length bucket: step t uses the smallest
bucket >= L, attends over the bucket's length and masks the padded tail (positions >= L)
with a device-side length, so one graph serves every L in its bucket. A bucket's graph
is captured the first time a step needs it, inside that step (that step is slow; the
others only copy the new position and replay). ``eager`` runs the same arithmetic
unpadded, with the shapes changing every step.

Per step, outside the graph: one fill of the device-side position (a tiny kernel).
Every step is an NVTX range ``step`` (domain ``launchprof``; see _step.py). At the end
one line ``RESULT {json}`` gives the wall time per step and the step of each capture.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch
from _step import MARKER, step

WIDTH = 256
LAYERS = 2


class Decoder:
    """A toy decoder with a fixed-size KV cache and static input/output tensors."""

    def __init__(self, max_len: int) -> None:
        g = torch.Generator(device="cuda").manual_seed(0)

        def weight(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, device="cuda", generator=g) / math.sqrt(shape[0])

        self.layers = [
            {name: weight(WIDTH, WIDTH) for name in ("q", "k", "v", "o", "up", "down")} for _ in range(LAYERS)
        ]
        self.k_cache = torch.zeros(LAYERS, max_len, WIDTH, device="cuda")
        self.v_cache = torch.zeros(LAYERS, max_len, WIDTH, device="cuda")
        self.x = torch.randn(1, WIDTH, device="cuda", generator=g)  # static input token
        self.pos = torch.zeros(1, dtype=torch.long, device="cuda")  # where the token goes

    def forward(self, span: int) -> None:
        """One token over the first `span` cache positions; positions > pos are masked."""
        x = self.x
        keep = torch.arange(span, device="cuda") <= self.pos  # [span]
        for i, w in enumerate(self.layers):
            q, k, v = x @ w["q"], x @ w["k"], x @ w["v"]
            self.k_cache[i].index_copy_(0, self.pos, k)
            self.v_cache[i].index_copy_(0, self.pos, v)
            scores = (q @ self.k_cache[i, :span].T) / math.sqrt(WIDTH)
            scores = scores.masked_fill(~keep, float("-inf"))
            x = x + torch.softmax(scores, dim=-1) @ self.v_cache[i, :span] @ w["o"]
            x = x + torch.nn.functional.silu(x @ w["up"]) @ w["down"]
        self.x.copy_(torch.tanh(x))  # the next step's input


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="graph", choices=("graph", "eager"))
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--start", type=int, default=8)
    parser.add_argument("--buckets", default="16,32,64,128")
    a = parser.parse_args()
    buckets = sorted(int(b) for b in a.buckets.split(","))
    if a.start + a.steps > buckets[-1]:
        raise SystemExit(f"start + steps must be <= the largest bucket ({buckets[-1]})")
    model = Decoder(buckets[-1])
    graphs: dict[int, torch.cuda.CUDAGraph] = {}
    captured_at: dict[int, int] = {}
    with torch.no_grad():
        for span in [a.start, *buckets]:  # warm-up of every shape, outside any step
            model.forward(span)
        torch.cuda.synchronize()
        timed_from = a.steps // 10
        t_start = time.perf_counter()
        for t in range(a.steps):
            if t == timed_from:
                t_start = time.perf_counter()
            length = a.start + t + 1  # positions 0 .. start + t
            with step():
                model.pos.fill_(length - 1)
                if a.mode == "eager":
                    model.forward(length)
                    continue
                bucket = next(b for b in buckets if b >= length)
                if bucket not in graphs:
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        model.forward(bucket)
                    graphs[bucket] = graph
                    captured_at[bucket] = t
                graphs[bucket].replay()
        torch.cuda.synchronize()
    wall_s = time.perf_counter() - t_start
    timed = a.steps - timed_from
    result = {
        "workload": "decode_buckets",
        "mode": a.mode,
        "steps": a.steps,
        "start": a.start,
        "buckets": buckets,
        "captured_at_step": {str(b): s for b, s in sorted(captured_at.items())},
        "timed_steps": timed,
        "wall_ms": round(wall_s * 1e3, 3),
        "per_step_us": round(wall_s * 1e6 / timed, 2),
        "marker": MARKER,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
