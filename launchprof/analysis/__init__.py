"""Pure analyses over a :class:`~launchprof.trace.Trace`: DataFrames in, dataclasses out."""

from launchprof.analysis.core import Analysis, DeviceAnalysis, analyze_trace, utilization_series

__all__ = ["Analysis", "DeviceAnalysis", "analyze_trace", "utilization_series"]
