"""Reading Nsight Systems SQLite exports into a typed :class:`Trace`.

This is the only package that touches SQLite.
"""

from launchprof.trace.model import Trace, TraceSchema
from launchprof.trace.loader import load_trace

__all__ = ["Trace", "TraceSchema", "load_trace"]
