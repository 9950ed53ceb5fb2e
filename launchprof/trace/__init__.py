"""Reading Nsight Systems SQLite exports into a typed :class:`Trace`.

This is the only package that touches SQLite. ``load_trace``, ``Trace`` and
``TraceSchema`` are imported on first use, so :mod:`launchprof.trace.readahead` can be
imported (to start reading a trace) before pandas is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launchprof.trace.loader import load_trace
    from launchprof.trace.model import Trace, TraceSchema

__all__ = ["Trace", "TraceSchema", "load_trace"]


def __getattr__(name: str) -> Any:
    if name == "load_trace":
        from launchprof.trace.loader import load_trace

        return load_trace
    if name in ("Trace", "TraceSchema"):
        from launchprof.trace import model

        return getattr(model, name)
    raise AttributeError(f"module 'launchprof.trace' has no attribute {name!r}")
