"""What the critical path of a several-stream step costs (launchprof.analysis.prediction.stepmix.longest_chain),
against the plain walk it replaced.

Usage:  python benchmarks/critical_path_speed.py [--repeats N]

Synthetic steps (seeded): kernels launched 1 us apart on S streams, each running 0.1-5 us
from 100 ns after its launch, W stream-wait-event calls at random launches. The plain walk
keeps every wait's per-stream record in one list and checks each kernel against all of
them (kernels x waits x streams); ``longest_chain`` keeps each stream's records in order
and finds the one a kernel may wait for by a binary search (kernels x streams x
log(waits)). Both give the same path (checked here). Prints the best of N runs of each,
per step; ``critical_paths`` walks at most 256 steps of a trace.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from launchprof.analysis.prediction.stepmix import longest_chain

SHAPES = [(200, 10, 2), (3_000, 300, 3), (20_000, 2_000, 4)]


def plain_walk(
    launch: np.ndarray, start: np.ndarray, end: np.ndarray, stream: np.ndarray, waits: np.ndarray
) -> tuple[float, float]:
    """The walk before: every wait appends each stream's (path end, kernels, traced end)."""
    order = np.argsort(launch, kind="stable")
    wait_pos = np.sort(np.searchsorted(launch[order], waits, side="left"))
    last: dict[Any, tuple[float, int, float]] = {}
    deps: list[tuple[float, int, float]] = []
    w = 0
    for i, j in enumerate(order):
        while w < len(wait_pos) and wait_pos[w] <= i:
            deps.extend(last.values())
            w += 1
        s = stream[j]
        base = last.get(s, (0.0, 0, 0.0))[:2]
        for d in deps:
            if d[2] <= start[j] and d[0] > base[0]:
                base = d[:2]
        ended = max(last[s][2], float(end[j])) if s in last else float(end[j])
        last[s] = (base[0] + float(end[j] - start[j]), base[1] + 1, ended)
    best = max(last.values(), key=lambda v: v[0])
    return best[0], float(best[1])


def step(kernels: int, waits: int, streams: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    launch = np.arange(kernels, dtype=np.int64) * 1000
    stream = rng.integers(0, streams, kernels)
    start = launch + 100
    end = start + rng.integers(100, 5000, kernels)
    at = np.sort(rng.choice(launch, waits, replace=False)) + 10
    return launch, start, end, stream, at


def best_of(fn: Any, args: tuple[np.ndarray, ...], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    a = parser.parse_args()
    print("| kernels | waits | streams | longest_chain | plain walk | same path |")
    print("| ---: | ---: | ---: | ---: | ---: | --- |")
    for kernels, waits, streams in SHAPES:
        args = step(kernels, waits, streams)
        fast, got = best_of(longest_chain, args, a.repeats)
        plain, want = best_of(plain_walk, args, 1 if kernels > 5_000 else a.repeats)
        print(f"| {kernels:,} | {waits:,} | {streams} | {fast * 1e3:,.1f} ms | {plain * 1e3:,.1f} ms | {got == want} |")


if __name__ == "__main__":
    main()
