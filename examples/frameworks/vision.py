"""Image-classifier inference (torchvision or timm, random weights): eager, a manual
CUDA graph, or ``torch.compile(mode="reduce-overhead")``.

Usage:  python examples/frameworks/vision.py MODEL MODE [--batch B] [--steps N] [--reps R] [--emit-nvtx]

MODEL: ``resnet50`` (torchvision) or ``vit_small`` (timm ``vit_small_patch16_224``), bf16,
224x224 inputs. MODE:

  eager     one launch per kernel
  graph     the forward captured once with ``torch.cuda.graph`` (warm-up on a side
            stream), one replay a step; each step copies its input into the static input
  compile   ``torch.compile(model, mode="reduce-overhead")``: Inductor's fused kernels,
            replayed as CUDA graphs (``cudagraph_mark_step_begin`` every step)

Every step copies a new batch into the input buffer (one device-to-device copy) and runs
the forward. Each step of the traced loop is an NVTX range ``step`` (:func:`_timing.step`:
``launchprof.step()`` when launchprof is installed, else ``torch.cuda.nvtx``),
except with ``--emit-nvtx``: then there is no step range and the loop runs under
``torch.autograd.profiler.emit_nvtx()``, which gives every operator its own range
(``aten::...``), as a user who turned it on to see operator names would have it.

The truth without the profiler: the median over ``--reps`` timed loops of N steps,
divided by N. The trace holds one loop of N steps (``cudaProfilerStart/Stop``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_ns, profiled_region, report, step  # noqa: E402


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(weights=None)
    else:
        import timm

        model = timm.create_model("vit_small_patch16_224", pretrained=False)
    return model.to(device="cuda", dtype=torch.bfloat16).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=("resnet50", "vit_small"))
    parser.add_argument("mode", choices=("eager", "graph", "compile"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--emit-nvtx", action="store_true")
    a = parser.parse_args()
    model = build(a.model)
    batches = torch.randn(4, a.batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    static_in = batches[0].clone()
    forward = model
    graph = None
    with torch.inference_mode():
        if a.mode == "compile":
            forward = torch.compile(model, mode="reduce-overhead")
        for _ in range(3):  # warm-up: cuDNN/cuBLAS choices, allocator, compilation
            if a.mode == "compile":
                torch.compiler.cudagraph_mark_step_begin()
            static_out = forward(static_in)
        if a.mode == "graph":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = model(static_in)
    torch.cuda.synchronize()

    def one_step(i: int) -> None:
        static_in.copy_(batches[i % 4])
        if graph is not None:
            graph.replay()
        else:
            if a.mode == "compile":
                torch.compiler.cudagraph_mark_step_begin()
            forward(static_in)

    def loop(mark: bool) -> None:
        with torch.inference_mode():
            for i in range(a.steps):
                with step() if mark else contextlib.nullcontext():
                    one_step(i)

    loop(False)
    t = median_ns(lambda: loop(False), a.reps)
    emit = torch.autograd.profiler.emit_nvtx() if a.emit_nvtx else contextlib.nullcontext()
    with emit, profiled_region():
        loop(not a.emit_nvtx)
    del static_out
    report(
        workload=f"vision {a.model} {a.mode}" + (" emit_nvtx" if a.emit_nvtx else ""),
        batch=a.batch,
        step="one forward of a batch",
        step_us=t / a.steps / 1e3,
        traced_steps=a.steps,
    )


if __name__ == "__main__":
    main()
