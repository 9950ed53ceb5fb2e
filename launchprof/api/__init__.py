"""The Python API: ``launchprof.analyze(path)`` and ``launchprof.compare(before, after)``
for notebooks and scripts (:mod:`launchprof.api.traces`, :mod:`launchprof.api.compare_runs`).
Each is imported on first use: ``analyze`` does not load the comparison's modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launchprof.api.compare_runs import compare
    from launchprof.api.traces import TraceAnalysis, analyze, analyze_loaded, resolve_trace

__all__ = ["TraceAnalysis", "analyze", "analyze_loaded", "compare", "resolve_trace"]


def __getattr__(name: str) -> Any:
    if name == "compare":
        from launchprof.api.compare_runs import compare

        return compare
    if name in ("TraceAnalysis", "analyze", "analyze_loaded", "resolve_trace"):
        from launchprof.api import traces

        return getattr(traces, name)
    raise AttributeError(f"module 'launchprof.api' has no attribute {name!r}")
