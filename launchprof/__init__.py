"""launchprof: is a GPU program starved by kernel-launch overhead, what would a CUDA Graph
gain, and did the conversion deliver?

Public API: :func:`analyze` (a trace -> :class:`~launchprof.analysis.Analysis`),
:func:`compare` (two runs -> :class:`~launchprof.analysis.verify.Comparison`).
"""

from launchprof.analysis import Analysis
from launchprof.api import analyze
from launchprof.compare_runs import compare

__version__ = "0.1.0"
__all__ = ["Analysis", "analyze", "compare", "__version__"]
