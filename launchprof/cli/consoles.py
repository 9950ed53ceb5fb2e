"""The terminal: rich consoles made on first use, and the one-line error.

Importing rich took 20-40 ms, which ``launchprof profile`` would otherwise spend before it
starts nsys, so :data:`out` and :data:`err` make their ``rich.console.Console`` only when
first printed to.

Every string printed through them is shown as text (:func:`terminal_text`): a kernel
name, an NVTX range or a file name holding an escape sequence (set the title, clear the
screen) or an emoji code (``:smile:``) is printed as written, not obeyed; no console
highlights, and every line that carries such a name is printed with ``markup=False``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from launchprof.text import escape_controls

if TYPE_CHECKING:
    from rich.console import Console

    from launchprof.errors import LaunchprofError


def _drop_output(console: Console) -> None:
    """``rich.console.Console.on_broken_pipe`` for launchprof: the reader of stdout has gone
    (``launchprof analyze X | head -1``): the rest of the output goes to ``/dev/null`` and
    the command goes on, so it ends with the exit status it would have had (rich's own
    handler exits 1 at once, silently: for ``compare`` a failed verification's status)."""
    import os
    import sys

    console.quiet = True
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no stdout to redirect: output is dropped all the same
        pass


def quiet_on_broken_pipe() -> None:
    """Make every rich Console (launchprof's, and Typer's help) drop its output once stdout
    is closed (:func:`_drop_output`) instead of exiting 1."""
    from rich.console import Console

    Console.on_broken_pipe = _drop_output  # type: ignore[method-assign,assignment]


# C0 controls but tab and newline, DEL and the C1 controls (ESC starts a terminal's commands).
def terminal_text(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``), so that
    the terminal shows it instead of obeying it (:func:`launchprof.text.escape_controls`)."""
    return escape_controls(text)


def make_console(**options: Any) -> Console:
    """A rich Console that prints strings as text (:func:`terminal_text`), with no emoji
    codes and no highlighting (``options`` may add others)."""
    from rich.console import Console

    class _TextConsole(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            super().print(*(terminal_text(o) if isinstance(o, str) else o for o in objects), **kwargs)

    return _TextConsole(**{"emoji": False, "highlight": False, **options})


class _LazyConsole:
    """A rich Console made on first use."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            quiet_on_broken_pipe()
            self._console = make_console(**self._options)
        return getattr(self._console, name)


err = cast("Console", _LazyConsole(stderr=True, highlight=False))
out = cast("Console", _LazyConsole(highlight=False, soft_wrap=True))


def terminal(json_out: bool, quiet: bool) -> Console:
    """Where a command's lines go: nowhere with ``-q``; stderr with ``--json`` (stdout
    holds the document alone); else stdout."""
    if quiet:
        return make_console(quiet=True)
    return err if json_out else out


def print_error(exc: LaunchprofError) -> int:
    """Print ``launchprof: error: ...`` on one line (stderr); return the exit code to use."""
    err.print(f"launchprof: error: {exc}", markup=False, soft_wrap=True)
    return exc.exit_code
