"""Small pieces several commands share: how a trace is analysed (:class:`AnalysisOptions`),
the document on stdout, opening a page."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from launchprof.defaults import DEFAULT_BUBBLE_THRESHOLD_NS
from launchprof.malloc import MallocTuning


@dataclass(frozen=True)
class AnalysisOptions:
    """How a trace is analysed, as the command line gave it: one frozen object handed down
    instead of the same values in each call (``analyze`` of one trace or many).

    Attributes:
        bubble_threshold_ns: idle gaps at least this long are bubbles (``--bubble-threshold``, ns).
        step: the NVTX range text of a step (``--step``), or None.
        nsys: the nsys executable (``--nsys``, for a .nsys-rep), or None: from PATH.
        memory: the malloc settings of loading and analysing
            (:class:`~launchprof.malloc.MallocTuning`), or None: left alone.
    """

    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS
    step: str | None = None
    nsys: str | None = None
    memory: MallocTuning | None = None


def print_document(text: str) -> None:
    """``--json``: the document alone on stdout."""
    sys.stdout.write(text)
    sys.stdout.flush()


def open_page(page: Path, err: Console) -> None:
    """Open ``page`` in the default browser; say so on ``err`` when there is none (a
    machine without a display): the page is written either way."""
    import webbrowser

    uri = page.resolve().as_uri()
    if not webbrowser.open(uri):
        err.print(f"launchprof: no browser to open here; the page is {uri}", markup=False, soft_wrap=True)
