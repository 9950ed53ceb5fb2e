"""Timing helpers the framework workloads share: the per-step wall time without nsys.

Each workload times its own loop with ``time.perf_counter_ns`` after ``torch.cuda.
synchronize()`` on both ends (CUDA-synchronised wall clock over a timed loop after
warm-up) and prints one line ``RESULT {json}`` with ``step_us`` (per step, the median of
``--reps`` timed loops) and what one step is. The same line is printed under nsys; the
corpus (tests/data/frameworks/MANIFEST.md) records both.

``profiled_region()`` wraps the part of the run that a trace should hold:
``torch.cuda.profiler.start()/stop()`` (``cudaProfilerStart/Stop``), which nsys honours
with ``--capture-range=cudaProfilerApi`` and which cost nothing without it.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator

import torch


def wall_ns(fn: Callable[[], object]) -> int:
    """Wall time of ``fn()`` in ns, with the GPU drained before and after."""
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter_ns() - t0


def median_ns(fn: Callable[[], object], reps: int) -> float:
    """Median over ``reps`` runs of :func:`wall_ns`."""
    return float(statistics.median(wall_ns(fn) for _ in range(max(reps, 1))))


@contextlib.contextmanager
def profiled_region() -> Iterator[None]:
    """The region a ``--capture-range=cudaProfilerApi`` trace records."""
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    try:
        yield
    finally:
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


def step() -> contextlib.AbstractContextManager[object]:
    """One step's NVTX range ``step``: ``launchprof.step()`` when launchprof is importable
    (domain ``launchprof``; it also writes the step's times for ``profile --baseline-runs``
    and ``check``), else ``torch.cuda.nvtx.range("step")`` (default domain)."""
    try:
        import launchprof

        return launchprof.step()  # type: ignore[no-any-return]
    except ImportError:
        return torch.cuda.nvtx.range("step")


def report(**fields: object) -> None:
    """Print the ``RESULT {json}`` line (sorted keys)."""
    print("RESULT " + json.dumps(fields, sort_keys=True), flush=True)
