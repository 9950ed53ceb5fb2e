"""What a command returns to the command line: its exit status, and whether the process
may leave at once (:func:`launchprof.cli.entry.main`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outcome:
    """A command's result. ``code``: the exit status. ``quick_exit``: the command holds
    nothing left to tear down (files written and closed, children reaped), so the process
    may flush its output and end with ``os._exit`` instead of freeing its objects one by
    one (``analyze`` of one trace, ``profile``)."""

    code: int
    quick_exit: bool = False
