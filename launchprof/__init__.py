"""launchprof: is a GPU program starved by kernel-launch overhead, what would a CUDA Graph
gain, and did the conversion deliver?

Public API: :func:`analyze` (a trace -> :class:`~launchprof.api.TraceAnalysis`: ``verdict``,
``recommendation``, ``steps``, ``summary``; shown as the report card in Jupyter),
:func:`compare` (two runs -> :class:`~launchprof.analysis.comparison.verify.Comparison`) and
:func:`step` (mark one iteration of a workload with an NVTX range). ``analyze``,
``compare``, ``Analysis`` and ``step`` are imported on first use, so ``import launchprof``
inside a profiled workload (for :func:`step`) does not load pandas or plotly, and the
command line does not load ``nvtx`` (and numpy) before it starts nsys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launchprof.analysis import Analysis
    from launchprof.api import TraceAnalysis, analyze
    from launchprof.api.compare_runs import compare
    from launchprof.marker import step

__version__ = "0.1.0"
__all__ = ["Analysis", "TraceAnalysis", "analyze", "compare", "step", "__version__"]


def __dir__() -> list[str]:
    return sorted(__all__)  # the lazily imported names too (dir() showed none of them)


def __getattr__(name: str) -> Any:
    if name == "step":  # imported on first use too: the CLI starts nsys without loading nvtx (and numpy)
        from launchprof.marker import step

        return step
    if name == "analyze":
        from launchprof.api import analyze

        return analyze
    if name == "compare":
        from launchprof.api.compare_runs import compare

        return compare
    if name == "TraceAnalysis":
        from launchprof.api import TraceAnalysis

        return TraceAnalysis
    if name == "Analysis":
        from launchprof.analysis import Analysis

        return Analysis
    raise AttributeError(f"module 'launchprof' has no attribute {name!r}")
