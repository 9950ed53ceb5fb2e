"""Checks of option values shared by the commands (no Typer here: ``launchprof profile``
checks its options before Typer is imported, see :mod:`launchprof.entry`)."""

from __future__ import annotations

import math

from launchprof.errors import OptionError

MAX_BUBBLE_THRESHOLD_US = 1e9  # 1000 s: longer than any gap a threshold could sort


def bubble_threshold_ns(us: float) -> int:
    """``--bubble-threshold`` (us) in ns.

    Raises:
        OptionError: a value that is not a finite number of us in
            [0, :data:`MAX_BUBBLE_THRESHOLD_US`].
    """
    if not (math.isfinite(us) and 0 <= us <= MAX_BUBBLE_THRESHOLD_US):
        raise OptionError(
            f"--bubble-threshold must be a number of us from 0 to {MAX_BUBBLE_THRESHOLD_US:g}, not {us!r}"
        )
    return int(round(us * 1000))


def non_empty(option: str, value: str, what: str) -> str:
    """``value`` of ``option`` when it is not empty (an empty path is not the current folder).

    Raises:
        OptionError: an empty value.
    """
    if not value:
        raise OptionError(f"{option} needs {what}, not an empty word")
    return value


def step_text(step: str | None) -> str | None:
    """``--step`` as given; None when not given.

    Raises:
        OptionError: an empty or blank name.
    """
    if step is not None and not step.strip():
        raise OptionError("--step needs the text of an NVTX range (for example --step step)")
    return step


TRACE_SUFFIXES = (".sqlite.xz", ".sqlite", ".nsys-rep", ".qdstrm")


def trace_stem(name: str) -> str:
    """A trace file's name without its trace suffix (:data:`TRACE_SUFFIXES`, else the last
    one): ``run.v1.sqlite`` -> ``run.v1``, so that ``run.v1.sqlite`` and ``run.v2.sqlite``
    get report folders of their own (``name.split(".")[0]`` gave both ``run``); ``trace``
    for a name that is all suffix."""
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)] or "trace"
    stem, dot, _ = name.rpartition(".")
    return (stem if dot else name) or "trace"
