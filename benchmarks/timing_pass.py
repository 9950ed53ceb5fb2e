"""What timing the steps costs: each eager workload's step bare, against the same step while
``launchprof profile``'s run without nsys times it (step markers, or the top-level module
calls of a workload without markers), under a CUPTI kernel-only trace, and under nsys.

Usage (on a GPU machine, from the repository root, launchprof importable, nsys on PATH):

    python benchmarks/timing_pass.py [--rounds 3] [--steps 10] [--loops 3] [--json OUT]

Every (round, mode) is one fresh process that builds all workloads and times each one:
``--loops`` loops of ``--steps`` steps after 3 warm-up steps, the GPU drained at both ends
of a loop (``perf_counter_ns``), the median loop's step kept; one bare process before the
rounds warms the machine and is not counted. Modes, their order rotated by round (a
machine's drift falls on all of them):

  bare      the loop as written
  markers   each step inside ``launchprof.step()`` with ``LAUNCHPROF_STEP_TIMES`` set
            (what the run without nsys does to a marked workload; the Llama marks its
            forward, one step a token, as a user marks a decode loop)
  modules   no markers; the process runs through ``launchprof/profiler_region.py`` with
            ``LAUNCHPROF_MODULE_CALLS`` (what the run without nsys does to a PyTorch
            workload with neither markers nor a profiler region)
  cupti     CUPTI activity records of kernels only (``cupti-python``:
            ``activity_enable(CONCURRENT_KERNEL)``, no API callbacks), enabled before
            the workloads are built
  nsys      under ``nsys profile`` with launchprof's flags (``--trace=cuda,nvtx
            --sample=none --cpuctxsw=none --cuda-graph-trace=node``), no export

Workloads (random weights, nothing downloaded): ResNet-50 bf16 batch 1 forward
(torchvision), a 4-layer Transformer encoder training step (AdamW), a small Llama
(8 layers, width 1024; ``examples/frameworks/hf_decode.py``'s ``build``) greedy
``generate()`` of 8 tokens a step, and a CuPy loop of 60 small elementwise kernels a step
(not PyTorch: no module calls to time). Per workload and mode it prints the median over
rounds of (mode's step / bare step of the same round), with the lowest and highest round,
and the bare step's own spread over rounds. Figures: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = ("bare", "markers", "modules", "cupti", "nsys")
NSYS_FLAGS = ["--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node"]


def _resnet(marked: bool) -> Callable[[], None]:
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda().to(torch.bfloat16).eval()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        with torch.inference_mode():
            model(x)

    return step


def _train(marked: bool) -> Callable[[], None]:
    import torch

    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 4).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(8, 64, 256, device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    return step


def _llama(marked: bool) -> Callable[[], None]:
    import torch

    sys.path.insert(0, str(ROOT / "examples" / "frameworks"))
    from hf_decode import build

    model = build("llama")
    if marked:  # the marker inside generate(): one step a token
        import launchprof

        model.forward = launchprof.step()(model.forward)  # type: ignore[method-assign]
    ids = torch.randint(1, 1000, (1, 16), device="cuda")

    def step() -> None:
        with torch.inference_mode():
            model.generate(input_ids=ids, max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)

    step.inner_marker = True  # type: ignore[attr-defined]
    return step


def _cupy(marked: bool) -> Callable[[], None]:
    import cupy as cp

    x = cp.random.standard_normal(4096, dtype=cp.float32)

    def step() -> None:
        y = x
        for _ in range(20):
            y = cp.tanh(y * 1.01 + 0.1)
        y.sum()

    return step


WORKLOADS: dict[str, Callable[[bool], Callable[[], None]]] = {
    "resnet50_b1": _resnet,
    "train_step": _train,
    "llama_generate_8": _llama,
    "cupy_60_kernels": _cupy,
}


def _sync() -> None:
    import torch

    torch.cuda.synchronize()
    try:
        import cupy

        cupy.cuda.Device().synchronize()
    except ImportError:
        pass


def _cupti_on() -> Any:
    """Kernel activity records only, drained into a counter (cupti-python)."""
    from cupti import cupti

    seen = {"records": 0}

    def requested() -> tuple[int, int]:
        return 8 * 1024 * 1024, 0

    def completed(activities: list[Any]) -> None:
        seen["records"] += len(activities)

    cupti.activity_register_callbacks(requested, completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
    return cupti, seen


def worker(mode: str, names: list[str], steps: int, loops: int) -> None:
    """Time each workload in this process and print one JSON line per workload."""
    cupti = _cupti_on() if mode == "cupti" else None
    marked = mode == "markers"
    import launchprof

    for name in names:
        try:
            step = WORKLOADS[name](marked)
            outer = marked and not getattr(step, "inner_marker", False)
            for _ in range(3):
                step()
            took = []
            for _ in range(loops):
                _sync()
                t0 = time.perf_counter_ns()
                for _ in range(steps):
                    if outer:
                        with launchprof.step():
                            step()
                    else:
                        step()
                _sync()
                took.append((time.perf_counter_ns() - t0) / steps)
            print("ROW " + json.dumps({"workload": name, "mode": mode, "step_ns": statistics.median(took)}), flush=True)
        except Exception as exc:  # one workload's failure leaves the others' figures
            print(f"{name} ({mode}): failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    if cupti is not None:
        cupti[0].activity_flush_all(1)
        print(f"cupti records: {cupti[1]['records']}", file=sys.stderr, flush=True)


def _command(mode: str, args: list[str], out: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ}
    me = [sys.executable, str(Path(__file__).resolve())]
    if mode == "markers":
        env["LAUNCHPROF_STEP_TIMES"] = str(out / "markers.steps")
    if mode == "modules":
        from launchprof import profiler_region

        env["LAUNCHPROF_STEP_TIMES"] = str(out / "modules.steps")
        env[profiler_region.MODULE_CALLS_ENV] = "1"
        me = [sys.executable, str(Path(profiler_region.__file__).resolve()), str(Path(__file__).resolve())]
    cmd = [*me, "--worker", mode, *args]
    if mode == "nsys":
        cmd = ["nsys", "profile", *NSYS_FLAGS, "--force-overwrite=true", "-o", str(out / "nsys"), *cmd]
    return cmd, env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--loops", type=int, default=3)
    parser.add_argument("--modes", nargs="*", default=list(MODES))
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    a = parser.parse_args()
    inner = ["--steps", str(a.steps), "--loops", str(a.loops), "--only", *a.only]
    if a.worker:
        worker(a.worker, a.only, a.steps, a.loops)
        return
    rows: list[dict[str, Any]] = []
    out = Path(tempfile.mkdtemp(prefix="timing_pass_"))
    # One bare process first, its figures dropped: the first process of a fresh machine
    # ran about 1.5x slower (GPU clocks and caches warming; 2026-12-03, an H200).
    for r in range(-1, a.rounds):
        order = ["bare"] if r < 0 else a.modes[r % len(a.modes) :] + a.modes[: r % len(a.modes)]
        for mode in order:
            cmd, env = _command(mode, inner, out)
            began = time.perf_counter()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            for line in done.stdout.splitlines():
                if line.startswith("ROW ") and r >= 0:
                    rows.append({**json.loads(line[4:]), "round": r})
            tail = " | ".join(done.stderr.strip().splitlines()[-2:])[:300]
            print(f"round {r} {mode}: rc {done.returncode}, {time.perf_counter() - began:.1f} s {tail}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(
        "| workload | bare step | "
        + " | ".join(f"{m} / bare (lowest-highest round)" for m in a.modes[1:])
        + " | bare's own spread |"
    )
    print("| --- | --- |" + " --- |" * (len(a.modes) - 1) + " --- |")
    for name in a.only:
        bare = {x["round"]: x["step_ns"] for x in rows if x["workload"] == name and x["mode"] == "bare"}
        if not bare:
            continue
        cells = []
        for mode in a.modes[1:]:
            ratios = [
                x["step_ns"] / bare[x["round"]]
                for x in rows
                if x["workload"] == name and x["mode"] == mode and x["round"] in bare
            ]
            cells.append(f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})" if ratios else "-")
        spread = max(bare.values()) / min(bare.values())
        print(
            f"| {name} | {statistics.median(bare.values()) / 1e3:,.1f} us | " + " | ".join(cells) + f" | {spread:.3f} |"
        )


if __name__ == "__main__":
    main()
