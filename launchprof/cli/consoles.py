"""The terminal: rich consoles made on first use, and the one-line error.

Importing rich took 20-40 ms, which ``launchprof profile`` would otherwise spend before it
starts nsys, so :data:`out` and :data:`err` make their ``rich.console.Console`` only when
first printed to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

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


class _LazyConsole:
    """A rich Console made on first use."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            quiet_on_broken_pipe()
            self._console = Console(**self._options)
        return getattr(self._console, name)


err = cast("Console", _LazyConsole(stderr=True, highlight=False))
out = cast("Console", _LazyConsole(highlight=False, soft_wrap=True))


def print_error(exc: LaunchprofError) -> int:
    """Print ``launchprof: error: ...`` on one line (stderr); return the exit code to use."""
    err.print(f"launchprof: error: {exc}", markup=False, soft_wrap=True)
    return exc.exit_code
