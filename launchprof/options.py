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


def output_folder(option: str, value: str) -> str:
    """``--output`` as given, refused when it is ``-``: launchprof writes a folder, never a
    stream (``--json`` puts the document on stdout).

    Raises:
        OptionError: ``-``.
    """
    if value == "-":
        raise OptionError(
            f"{option} - would make a folder named '-': launchprof writes a report folder; "
            "use --json for the document on stdout"
        )
    return value


# The verdicts of launchprof.analysis.diagnose (README: Diagnosis), for ``analyze --fail-on``.
ANALYZE_VERDICTS = ("launch-bound", "sync-bound", "host-bound", "gpu-bound", "no-gpu-work")


def analyze_fail_on(text: str | None) -> frozenset[str]:
    """The verdicts of ``analyze --fail-on`` (comma separated; ``none`` or None: no verdict).

    Raises:
        OptionError: an unknown verdict (the message lists the known ones).
    """
    if text is None:
        return frozenset()
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words == ["none"]:
        return frozenset()
    unknown = [w for w in words if w not in ANALYZE_VERDICTS]
    if unknown or not words:
        raise OptionError(
            f"--fail-on takes verdicts separated by commas ({', '.join(ANALYZE_VERDICTS)}) or 'none', not {text!r}"
        )
    return frozenset(words)


def min_gain(pct: float | None) -> float | None:
    """``--min-gain`` (percent) as a speedup factor (25 -> 1.25); None when not given.

    Raises:
        OptionError: not a finite number >= 0.
    """
    if pct is None:
        return None
    if not (math.isfinite(pct) and pct >= 0):
        raise OptionError(f"--min-gain must be a percentage >= 0 (25 for 1.25x), not {pct!r}")
    return 1 + pct / 100


def options_after_target(words: list[str], options: set[str] | frozenset[str]) -> list[str]:
    """The words after a ``profile`` TARGET that are launchprof options (``--open``,
    ``--output=DIR``, ...): they go to the workload, which is rarely what was meant."""
    found = []
    for word in words:
        name = word.partition("=")[0] if word.startswith("--") else word
        if name in options and name not in found:
            found.append(name)
    return found
