"""The step marker the examples share: one NVTX push/pop range named ``step`` per iteration.

launchprof finds the iterations of a loop by NVTX ranges named ``step`` in the NVTX domain
``launchprof``. This helper uses ``launchprof.step()`` when launchprof is importable, else
``torch.cuda.nvtx`` (default domain), else marks nothing and says so once on stderr.

    from _step import step
    for i in range(steps):
        with step():
            ...  # launch the work of one iteration

Like ``launchprof.step()``, it honours ``LAUNCHPROF_STEP_TIMES=<file>``: each step's
``time.perf_counter_ns()`` at start and end is kept in memory and appended to that file
once at exit, one line ``step START_NS END_NS`` per step (``launchprof profile
--baseline-runs N`` sets it for its runs without nsys).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator

DOMAIN = "launchprof"
NAME = "step"


def _pick() -> tuple[str, Callable[[], object], Callable[[], object]]:
    try:
        import torch

        return (
            "torch.cuda.nvtx (default domain)",
            lambda: torch.cuda.nvtx.range_push(NAME),
            lambda: torch.cuda.nvtx.range_pop(),
        )
    except ImportError:
        print("step marker: neither launchprof nor torch importable, steps are not marked", file=sys.stderr)
        return ("none", lambda: None, lambda: None)


try:
    import launchprof

    _STEP: object = launchprof.step  # marks and times the steps itself (a marker per step)
    MARKER, _push, _pop = "launchprof.step (domain launchprof)", (lambda: None), (lambda: None)
except ImportError:
    _STEP = None
    MARKER, _push, _pop = _pick()
TIMES_PATH = None if _STEP is not None else (os.environ.get("LAUNCHPROF_STEP_TIMES") or None)
_times: list[tuple[int, int]] = []


def _write_times() -> None:
    if TIMES_PATH and _times:
        with open(TIMES_PATH, "a", encoding="utf-8") as fh:
            fh.write("".join(f"{NAME} {a} {b}\n" for a, b in _times))


if TIMES_PATH:
    atexit.register(_write_times)


@contextlib.contextmanager
def step() -> Iterator[None]:
    """Mark one iteration as an NVTX range ``step`` (and time it, see the module docstring)."""
    if _STEP is not None:
        with _STEP(NAME):  # type: ignore[operator]
            yield
        return
    start = time.perf_counter_ns() if TIMES_PATH else 0
    _push()
    try:
        yield
    finally:
        _pop()
        if TIMES_PATH:
            _times.append((start, time.perf_counter_ns()))
