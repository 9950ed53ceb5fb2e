"""Reading Nsight Systems SQLite exports into a typed :class:`Trace`.

This is the only package that touches SQLite.
"""

from launchprof.trace.loader import load_trace
from launchprof.trace.model import Trace, TraceSchema

__all__ = ["Trace", "TraceSchema", "load_trace"]
