"""Small pieces several commands share: the options as frozen objects (how a trace is
analysed: :class:`AnalysisOptions`; how two sides are compared: :class:`CompareOptions`;
what ``profile`` does around the analysis: :class:`ProfileOptions`), the document on
stdout, opening a page."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from launchprof.defaults import COMPARE_FAILING, DEFAULT_BUBBLE_THRESHOLD_NS
from launchprof.malloc import MallocTuning

if TYPE_CHECKING:  # profile imports this module before nsys starts: no rich then
    from rich.console import Console

    from launchprof.trace.columns import Rows

# compare's --min-effect default as a fraction (the smallest change of a step the verdict
# counts: docs/reference.md, "compare").
DEFAULT_MIN_EFFECT = 0.05


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
        time_range: only the rows starting in ``[start, end)`` seconds of the trace's clock
            (``--time-range``: :func:`launchprof.api.analyze`'s ``time_range``), or None: all.
        memory_check: refuse rows too many for the memory available (the whole trace,
            or the window's) before reading them (:func:`launchprof.api.analyze`'s
            ``memory_check``); False: ``--no-memory-check``.
    """

    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS
    step: str | None = None
    nsys: str | None = None
    memory: MallocTuning | None = None
    time_range: tuple[float, float] | None = None
    memory_check: bool = True

    def window(self) -> Rows:
        """The rows of :attr:`time_range` (all without one)."""
        from launchprof.trace.columns import ALL_ROWS, Rows, window_ns  # numpy: not on profile's fast path

        return ALL_ROWS if self.time_range is None else Rows(window=window_ns(self.time_range))

    def within(self) -> str:
        """`` starting in START-END s (--time-range)`` for a message about the rows read
        (:func:`launchprof.text.window_text`), or ""."""
        from launchprof.text import window_text

        window = self.window().window
        return "" if window is None else f" starting in {window_text(window)} s (--time-range)"


@dataclass(frozen=True)
class CompareOptions:
    """How ``compare`` and ``check`` compare two sides, as the command line gave it.

    Attributes:
        how: how each side's trace is analysed (:class:`AnalysisOptions`).
        min_effect: the smallest change of the step that counts (``--min-effect``, a
            fraction: 0.05 is 5 %).
        failing: the verdicts that exit 1 (``--fail-on``:
            :func:`launchprof.cli.options.compare_fail_on`; default every verdict but
            ``verified``).
    """

    how: AnalysisOptions = field(default_factory=AnalysisOptions)
    min_effect: float = DEFAULT_MIN_EFFECT
    failing: frozenset[str] = frozenset(COMPARE_FAILING)


@dataclass(frozen=True)
class ProfileOptions:
    """What ``profile`` does around recording and analysing, as the command line gave it.

    Attributes:
        nsys_args: nsys's own options (``--nsys-arg``), added to its command line.
        baseline_runs: runs of the workload without nsys after the traced one
            (``--baseline-runs``; 0: none).
        open_report: open the report in the browser (``--open``).
        workload_stdout: where the workload's (and nsys's) standard output goes, in the
            traced run and the runs without nsys (``--json`` sends it to stderr); None: ours.
    """

    nsys_args: tuple[str, ...] = ()
    baseline_runs: int = 0
    open_report: bool = False
    workload_stdout: IO[Any] | None = None


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
