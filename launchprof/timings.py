"""Phase times of one ``launchprof profile`` run, for benchmarks (benchmarks/profile_overhead.py).

With ``LAUNCHPROF_TIMINGS=FILE`` in the environment, :func:`mark` records the wall-clock
time (``time.time()``, seconds) of each phase and :func:`dump` appends them to FILE as one
JSON object per run (``{"main": t, "nsys_start": t, ...}``); without it both do nothing.
"""

from __future__ import annotations

import json
import os
import time

TIMINGS_ENV = "LAUNCHPROF_TIMINGS"
_marks: dict[str, float] = {}


def mark(phase: str) -> None:
    """Record ``time.time()`` for ``phase`` (only when ``$LAUNCHPROF_TIMINGS`` is set)."""
    if os.environ.get(TIMINGS_ENV):
        _marks[phase] = time.time()


def dump() -> None:
    """Append the recorded phases to ``$LAUNCHPROF_TIMINGS`` (errors ignored: a benchmark aid)."""
    path = os.environ.get(TIMINGS_ENV)
    if not path or not _marks:
        return
    mark("exit")
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(_marks) + "\n")
    except OSError:
        pass
