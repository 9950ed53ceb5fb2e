"""The Python API: ``launchprof.analyze(path)`` and ``launchprof.compare(before, after)``
for notebooks and scripts (:mod:`launchprof.api.traces`, :mod:`launchprof.api.compare_runs`)."""

from __future__ import annotations

from launchprof.api.compare_runs import compare
from launchprof.api.traces import TraceAnalysis, analyze, analyze_loaded, resolve_trace

__all__ = ["TraceAnalysis", "analyze", "analyze_loaded", "compare", "resolve_trace"]
