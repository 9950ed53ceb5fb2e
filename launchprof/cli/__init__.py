"""The ``launchprof`` command line: the console entry (:mod:`launchprof.cli.entry`), the
options and their defaults (:mod:`launchprof.cli.options`), the Typer app
(:mod:`launchprof.cli.typer_app`, imported only when a command line needs it) and the
consoles (:mod:`launchprof.cli.consoles`)."""

from __future__ import annotations

from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    if name == "app":  # Typer only when asked for: the fast path of `profile` starts nsys without it
        from launchprof.cli.typer_app import app

        return app
    if name == "main":
        from launchprof.cli.entry import main

        return main
    raise AttributeError(f"module 'launchprof.cli' has no attribute {name!r}")
