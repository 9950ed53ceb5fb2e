"""Greedy decoding with Hugging Face ``generate()`` (random weights from a config, nothing
downloaded): eager with a dynamic KV cache, or a static cache with the forward replayed as
CUDA graphs.

Usage:  python examples/frameworks/hf_decode.py ARCH MODE [--batch B] [--tokens T] [--prompt P] [--reps R] [--calls N]

ARCH: ``gpt2`` (GPT-2 small: 12 layers, width 768) or ``llama`` (a small Llama: 8 layers,
width 1024, grouped-query attention 16/4 heads, vocabulary 32000), both bf16. MODE:

  eager             ``generate()`` as is: dynamic cache (grows with ``cat`` every token),
                    one launch per kernel
  static-graphs     ``cache_implementation="static"`` (``index_copy_`` into a preallocated
                    cache) and the model's forward wrapped in
                    ``torch.compile(backend="cudagraphs")``: the same eager kernels,
                    captured and replayed (inputs copied into static buffers each replay);
                    HF's own compilation is turned off (``disable_compile=True``)
  static-compile    ``cache_implementation="static"`` with HF's own compile path (the
                    forward compiled by Inductor, ``mode="reduce-overhead"``): fused
                    Triton kernels, replayed as CUDA graphs

No NVTX ranges are added: one step is one token, found by launchprof from the trace.
Every token is generated (``min_new_tokens == max_new_tokens``; no early stop). The
truth without the profiler, per token: (median time of ``generate(T)`` - median time of
``generate(1)``) / (T - 1), which leaves out the prompt's prefill. The trace holds one
``generate(T)`` (``cudaProfilerStart/Stop``), after three untraced warm-up calls; with
``--calls N``, N consecutive ``generate(T)`` calls (the truth per token is the same).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import median_ns, profiled_region, report  # noqa: E402


def build(arch: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

    if arch == "gpt2":
        cfg = GPT2Config()  # GPT-2 small
    else:
        cfg = LlamaConfig(
            hidden_size=1024,
            intermediate_size=2816,
            num_hidden_layers=8,
            num_attention_heads=16,
            num_key_value_heads=4,
            vocab_size=32000,
            max_position_embeddings=2048,
        )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    return model.to(device="cuda", dtype=torch.bfloat16).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arch", choices=("gpt2", "llama"))
    parser.add_argument("mode", choices=("eager", "static-graphs", "static-compile"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1, help="generate(T) calls in the traced region")
    a = parser.parse_args()
    model = build(a.arch)
    kwargs: dict[str, object] = {"do_sample": False, "pad_token_id": 0}
    if a.mode != "eager":
        kwargs["cache_implementation"] = "static"
    if a.mode == "static-graphs":
        model.forward = torch.compile(model.forward, backend="cudagraphs", dynamic=False)
        kwargs["disable_compile"] = True
    ids = torch.randint(1, 1000, (a.batch, a.prompt), device="cuda", generator=None)
    mask = torch.ones_like(ids)

    def gen(n: int) -> torch.Tensor:
        with torch.inference_mode():
            return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, **kwargs)

    for _ in range(3):  # warm-up: cuBLAS handles, allocator, compilation and capture
        out = gen(a.tokens)
    assert out.shape[1] == a.prompt + a.tokens, out.shape
    t_full = median_ns(lambda: gen(a.tokens), a.reps)
    t_one = median_ns(lambda: gen(1), a.reps)
    with profiled_region():
        for _ in range(a.calls):
            gen(a.tokens)
    report(
        workload=f"hf_decode {a.arch} {a.mode}",
        batch=a.batch,
        tokens=a.tokens,
        calls=a.calls,
        step="one decoded token",
        step_us=(t_full - t_one) / (a.tokens - 1) / 1e3,
        generate_us=t_full / 1e3,
        generate_one_us=t_one / 1e3,
        traced_steps=a.calls * (a.tokens - 1),
    )


if __name__ == "__main__":
    main()
