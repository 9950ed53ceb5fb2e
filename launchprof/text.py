"""How a name from a trace or the file system is shown: as text, never obeyed.

A kernel name, an NVTX range or a file name can hold control characters: an escape
sequence (set the terminal's title, clear the screen), a NUL, a bell. The terminal
(:mod:`launchprof.cli.consoles`) and the pages (:mod:`launchprof.report.html`, every
``{{ }}`` of a template) write each as its escape, ``\\x1b``; tab and line feed stay as they
are (a carriage return is escaped: on a terminal it writes over the line).

The numbers of the terminal and the pages are written here too, once for both: a count a
step (:func:`count_text`), a duration in a sentence of the analysis or a terminal line
(:func:`us_text`), the pages' table figures (:func:`fmt_us`, :func:`page_us`,
:func:`fmt_ms`, :func:`fmt_pct`, :func:`fmt_num`), a chart's duration labels
(:func:`duration_label`, :func:`bin_label`), seconds of the trace's clock
(:func:`seconds_text`, :func:`window_text`) and what the whole-trace figures cover (:func:`scope_text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# C0 controls but tab and line feed; DEL; the C1 controls (U+0080-U+009F).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with each control character (module docstring) written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def seconds_text(ns: int) -> str:
    """``ns`` nanoseconds as seconds, every digit kept and trailing zeros dropped
    (``5_800_000_000`` -> ``"5.8"``), as a user would have typed them."""
    whole, frac = divmod(int(ns), 1_000_000_000)
    return f"{whole}.{frac:09d}".rstrip("0").rstrip(".") if frac else str(whole)


def window_text(window_ns: Sequence[int]) -> str:
    """A time window ``(start, end)`` in ns as ``START-END`` seconds (:func:`seconds_text`):
    how notes, messages, labels and folder names write ``analyze --time-range``'s window."""
    start, end = window_ns
    return f"{seconds_text(start)}-{seconds_text(end)}"


def scope_text(time_range_ns: Sequence[int] | None) -> str:
    """What a report's whole-trace figures cover: ``whole trace (incl. start-up)``, or for
    a trace read in a window (``analyze --time-range``; summary.json's
    ``trace.time_range_ns``) ``time range START-END s``."""
    return "whole trace (incl. start-up)" if time_range_ns is None else f"time range {window_text(time_range_ns)} s"


def count_text(x: float) -> str:
    """A count a step as the terminal and the pages show it: two significant digits below
    10, else whole with thousands separators (``0.061``, ``1``, ``120``, ``5,700``)."""
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


def one_line(text: str) -> str:
    """A name from the program's source (a file, a function, Inductor's reason) kept on one
    line - of the terminal, or of a ``#`` comment in the page's code: a line break written as
    ``\\n`` (it could fake a line of launchprof's, or end the comment)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def us_text(ns: float | None) -> str:
    """A duration in ns as the analysis' sentences (reasons, findings, checks) write it:
    microseconds, one decimal, thousands separators (``"1,234.5 us"``); ``"-"`` for None."""
    return "-" if ns is None else f"{ns / 1e3:,.1f} us"


def fmt_us(ns: float | None) -> str:
    """ns -> ``"12.34 us"`` (``"-"`` for None)."""
    return "-" if ns is None else f"{ns / 1e3:,.2f} us"


def fmt_ms(ns: float | None) -> str:
    """ns -> ``"12.345 ms"`` (``"-"`` for None)."""
    return "-" if ns is None else f"{ns / 1e6:,.3f} ms"


def fmt_pct(ratio: float | None) -> str:
    """0..1 -> ``"12.3 %"`` (``"-"`` for None)."""
    return "-" if ratio is None else f"{ratio * 100:.1f} %"


def fmt_num(n: int | None) -> str:
    """A count with thousands separators: ``10801`` -> ``"10,801"`` (``"-"`` for None)."""
    return "-" if n is None else f"{n:,}"


def page_us(ns: float | None) -> str:
    """ns -> ``"12.34 µs"`` for a page (``"-"`` for None); the terminal keeps ``us``."""
    return "-" if ns is None else f"{ns / 1e3:,.2f} µs"


def duration_label(ns: float) -> str:
    """A short duration label with a fitting unit: ``500 ns``, ``20 µs``, ``1.5 ms``, ``2 s``."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:g} {unit}"
    return f"{ns:g} ns"


def bin_label(low_ns: float) -> str:
    """A bin's start with two significant digits and its unit: ``630 ns``, ``2.5 µs``, ``1.6 ms``."""
    value, unit = (low_ns, "ns") if low_ns < 1e3 else (low_ns / 1e3, "µs") if low_ns < 1e6 else (low_ns / 1e6, "ms")
    return f"{float(f'{value:.2g}'):g} {unit}"
