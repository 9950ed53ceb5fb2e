"""How a name from a trace or the file system is shown: as text, never obeyed.

A kernel name, an NVTX range or a file name can hold control characters: an escape
sequence (set the terminal's title, clear the screen), a NUL, a bell. The terminal
(:mod:`launchprof.cli.consoles`) and the pages (:mod:`launchprof.report.html`, every
``{{ }}`` of a template) write each as its escape, ``\\x1b``; tab and line feed stay as they
are (a carriage return is escaped: on a terminal it writes over the line). A count a step
reads the same on both (:func:`count_text`), and a duration in a sentence of the analysis
(:func:`us_text`).
"""

from __future__ import annotations

import re

# C0 controls but tab and line feed; DEL; the C1 controls (U+0080-U+009F).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with each control character (module docstring) written as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


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
