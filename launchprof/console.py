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


class _LazyConsole:
    """A rich Console made on first use."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


err = cast("Console", _LazyConsole(stderr=True, highlight=False))
out = cast("Console", _LazyConsole(highlight=False, soft_wrap=True))


def print_error(exc: LaunchprofError) -> int:
    """Print ``launchprof: error: ...`` on one line (stderr); return the exit code to use."""
    err.print(f"launchprof: error: {exc}", markup=False, soft_wrap=True)
    return exc.exit_code
