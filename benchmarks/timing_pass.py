"""What timing the steps costs: each eager workload's step bare against the same step
inside ``launchprof.step()`` with step times recorded (``LAUNCHPROF_STEP_TIMES``: what
``launchprof profile``'s run without nsys does), interleaved in one process.

Usage (on a GPU machine, from the repository root):

    PYTHONPATH=. python benchmarks/timing_pass.py [--rounds 8] [--steps 20] [--json OUT]

Workloads (random weights, nothing downloaded): ResNet-50 bf16 batch 1 forward
(torchvision), the 4-layer Transformer training step of examples/frameworks/train_step.py
built inline, a small Llama (8 layers, width 1024) greedy ``generate()`` whose forward is
wrapped in ``launchprof.step()`` (one step a token, how a user marks a decode loop), and a
CuPy loop of 60 small elementwise kernels a step (not PyTorch). Each round times ``--steps``
steps bare, then the same steps marked (their order alternates by round), the GPU drained
at both ends (``perf_counter_ns``); per workload it prints the median step of each, their
ratio, and the ratio's lowest and highest round. The figures are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LAUNCHPROF_STEP_TIMES", os.path.join(tempfile.mkdtemp(), "times.steps"))

import launchprof  # noqa: E402  (after the variable: the marker reads it once, at import)


def _resnet() -> tuple[Callable[[], None], Callable[[], None]]:
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda().to(torch.bfloat16).eval()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        with torch.inference_mode():
            model(x)

    return step, torch.cuda.synchronize


def _train() -> tuple[Callable[[], None], Callable[[], None]]:
    import torch

    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(8, 64, 256, device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    return step, torch.cuda.synchronize


def _llama() -> tuple[Callable[[], None], Callable[[], None]]:
    import torch

    # The small Llama of the corpus' decode workload, built by that workload's own code.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "frameworks"))
    from hf_decode import build

    model = build("llama")
    ids = torch.randint(1, 1000, (1, 16), device="cuda")
    plain = model.forward
    marked = launchprof.step()(plain)
    state = {"marked": False}

    def forward(*args: Any, **kwargs: Any) -> Any:
        return (marked if state["marked"] else plain)(*args, **kwargs)

    model.forward = forward  # type: ignore[method-assign]

    def step() -> None:  # one generate() of 8 tokens: a "step" here is 8 tokens
        with torch.inference_mode():
            model.generate(input_ids=ids, max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)

    step.state = state  # type: ignore[attr-defined]
    return step, torch.cuda.synchronize


def _cupy() -> tuple[Callable[[], None], Callable[[], None]]:
    import cupy as cp

    x = cp.random.standard_normal(4096, dtype=cp.float32)

    def step() -> None:
        y = x
        for _ in range(20):
            y = cp.tanh(y * 1.01 + 0.1)
        y.sum()

    return step, cp.cuda.Device().synchronize


WORKLOADS = {"resnet50_b1": _resnet, "train_step": _train, "llama_generate_8": _llama, "cupy_60_kernels": _cupy}


def _loop(step: Callable[[], None], sync: Callable[[], None], n: int, marked: bool) -> float:
    """The mean step of ``n`` steps (ns), the GPU drained at both ends."""
    state = getattr(step, "state", None)
    sync()
    t0 = time.perf_counter_ns()
    if state is not None:  # the marker sits inside the workload (generate()'s forward)
        state["marked"] = marked
        for _ in range(n):
            step()
    elif marked:
        for _ in range(n):
            with launchprof.step():
                step()
    else:
        for _ in range(n):
            step()
    sync()
    return (time.perf_counter_ns() - t0) / n


def measure(name: str, rounds: int, steps: int) -> dict[str, Any]:
    step, sync = WORKLOADS[name]()
    for _ in range(3):  # warm-up: cuBLAS/cuDNN handles, allocator, kernel caches
        step()
    bare, marked, ratios = [], [], []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {m: _loop(step, sync, steps, m) for m in order}
        bare.append(got[False])
        marked.append(got[True])
        ratios.append(got[True] / got[False])
    return {
        "workload": name,
        "rounds": rounds,
        "steps_per_round": steps,
        "bare_step_us": statistics.median(bare) / 1e3,
        "timed_step_us": statistics.median(marked) / 1e3,
        "ratio_p50": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "bare_spread": max(bare) / min(bare),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    a = parser.parse_args()
    rows = []
    for name in a.only:
        try:
            rows.append(measure(name, a.rounds, a.steps))
            print(json.dumps(rows[-1]), flush=True)
        except Exception as exc:  # one workload's failure leaves the others' figures
            print(f"{name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    print("| workload | bare step | timed step | timed / bare p50 | lowest-highest round | bare's own spread |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['workload']} | {r['bare_step_us']:,.1f} us | {r['timed_step_us']:,.1f} us | {r['ratio_p50']:.3f} "
            f"| {r['ratio_min']:.3f}-{r['ratio_max']:.3f} | {r['bare_spread']:.3f} |"
        )


if __name__ == "__main__":
    main()
