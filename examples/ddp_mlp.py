"""Data-parallel training of a small MLP on several GPUs (DDP, NCCL), one NVTX step per
iteration - the multi-rank example for ``launchprof profile torchrun ...``.

Usage:  torchrun --nproc-per-node 2 examples/ddp_mlp.py [--steps N] [--batch B] [--width W]

Each rank trains the same small MLP on its own random batch; DDP all-reduces the
gradients with NCCL every step. The kernels are tiny (batch 8, width 512), so every rank
is launch-bound, and the NCCL all-reduce kernels show the cross-rank coupling. Rank 1
sleeps 2 ms in every 10th step to make a straggler the report should name. At the end
each rank prints one line ``RESULT {json}`` with its wall time per step.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from _step import MARKER, step
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=512)
    args = parser.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(args.width, args.width), nn.LayerNorm(args.width), nn.GELU()]
    model = DistributedDataParallel(nn.Sequential(*layers).cuda(), device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(args.batch, args.width, device="cuda", generator=gen)
    t0 = 0.0
    for i in range(args.steps):
        if i == args.steps // 10:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        with step():
            if rank == 1 and i % 10 == 5:
                time.sleep(0.002)  # the planted straggler
            opt.zero_grad(set_to_none=True)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
    torch.cuda.synchronize()
    timed = args.steps - args.steps // 10
    per_step_us = (time.perf_counter() - t0) / timed * 1e6
    print(
        "RESULT "
        + json.dumps(
            {
                "workload": "ddp_mlp",
                "rank": rank,
                "world": dist.get_world_size(),
                "timed_steps": timed,
                "per_step_us": round(per_step_us, 1),
                "marker": MARKER,
            }
        ),
        flush=True,
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
