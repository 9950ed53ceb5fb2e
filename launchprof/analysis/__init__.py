"""Pure analyses over a :class:`~launchprof.trace.Trace`: DataFrames in, dataclasses out.

In the order they run (docs/architecture.md, "Data flow"): :mod:`.timeline` (the figures
of one trace), :mod:`.steps` (the steps found, their table), :mod:`.ranks` (several ranks),
:mod:`.diagnosis` (verdict and findings), :mod:`.prediction` (what a graph would give,
convert or not), :mod:`.finish` (what the outputs show: :mod:`.result`); and
:mod:`.comparison` for ``compare``. Shared: :mod:`.arrays` (numpy kernels),
:mod:`.stepdata` (the steady steps' context the diagnosis reads), :mod:`.baseline` (the
runs without nsys), :mod:`.nvtx_steps` (a trace without GPU work), :mod:`.headline`.
"""

from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis, analyze_trace, utilization_series

__all__ = ["Analysis", "DeviceAnalysis", "analyze_trace", "utilization_series"]
