"""A small MLP step in JAX, dispatched op by op or compiled with ``jax.jit``.

Usage:  python examples/frameworks/jax_loop.py {eager,jit} [--steps N] [--width W]

``eager`` runs the step under ``jax.disable_jit()`` (each operation dispatched on its own:
many small kernels a step); ``jit`` compiles the same step with ``jax.jit`` (XLA fuses it
and may replay it as a CUDA graph of its own). Each step is marked with
``launchprof.step()`` and ends with ``block_until_ready()``. Prints one ``RESULT`` line
with the mean step time over the timed steps (perf_counter, after 20 warm-up steps).
Set ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` to keep JAX from taking most of the GPU's
memory (this script sets it when unset).
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import launchprof  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["eager", "jit"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    a = parser.parse_args()
    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, a.layers + 1)
    weights = [jax.random.normal(k, (a.width, a.width)) * 0.05 for k in keys[:-1]]
    x = jax.random.normal(keys[-1], (16, a.width))

    def step(x: jax.Array) -> jax.Array:
        h = x
        for w in weights:
            h = jax.nn.gelu(h @ w) + h
        return h * 0.5 + x * 0.5

    fn = jax.jit(step) if a.mode == "jit" else step
    began = 0
    for i in range(a.steps):
        if i == 20:
            began = time.perf_counter_ns()
        with launchprof.step():
            if a.mode == "eager":
                with jax.disable_jit():
                    x = fn(x).block_until_ready()
            else:
                x = fn(x).block_until_ready()
    took = time.perf_counter_ns() - began
    print("RESULT " + json.dumps({"mode": a.mode, "step_us": took / (a.steps - 20) / 1e3, "steps": a.steps}))


if __name__ == "__main__":
    main()
