"""A user's Hugging Face ``generate()`` script as it is written: no step markers, no
profiler region, nothing added for launchprof (random weights from a config, nothing
downloaded).

Usage:  python examples/frameworks/hf_generate_plain.py ARCH MODE [--batch B] [--tokens T] [--calls N]

ARCH and MODE as in ``hf_decode.py`` (``gpt2`` or ``llama``; ``eager`` or
``static-graphs``; the model is built by its :func:`hf_decode.build`). The script runs one
warm-up ``generate(T)``, then N calls of ``generate(T)`` (greedy, every token generated),
and prints one ``RESULT`` line with the mean wall time of a call (CUDA-synchronised). That
figure includes each call's prompt prefill; the per-token truth without the profiler comes
from ``hf_decode.py`` run bare in the same device call (tests/data/frameworks/MANIFEST.md).

What ``launchprof profile`` can time without nsys here: neither markers nor a profiler
region, so the top-level ``torch.nn.Module`` calls (one ``LlamaForCausalLM`` /
``GPT2LMHeadModel`` forward per token; :mod:`launchprof.profiler_region`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_decode import build  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arch", choices=("gpt2", "llama"))
    parser.add_argument("mode", choices=("eager", "static-graphs"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--calls", type=int, default=4)
    a = parser.parse_args()
    model = build(a.arch)
    kwargs: dict[str, object] = {"do_sample": False, "pad_token_id": 0}
    if a.mode == "static-graphs":
        kwargs["cache_implementation"] = "static"
        kwargs["disable_compile"] = True
        model.forward = torch.compile(model.forward, backend="cudagraphs", dynamic=False)
    ids = torch.randint(1, 1000, (a.batch, a.prompt), device="cuda")
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=a.tokens, min_new_tokens=a.tokens, **kwargs)
        torch.cuda.synchronize()
        began = time.perf_counter_ns()
        for _ in range(a.calls):
            out = model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=a.tokens, min_new_tokens=a.tokens, **kwargs
            )
        torch.cuda.synchronize()
        took = time.perf_counter_ns() - began
    assert out.shape[1] == a.prompt + a.tokens, out.shape
    fields = {"workload": f"hf_generate_plain {a.arch} {a.mode}", "batch": a.batch, "tokens": a.tokens}
    print("RESULT " + json.dumps({**fields, "calls": a.calls, "call_us": took / a.calls / 1e3}, sort_keys=True))


if __name__ == "__main__":
    main()
