"""Steps: one iteration of the user's loop, found in the trace and projected onto the GPU.

Three sources, in order of preference (docs/metrics.md, "Step"):

1. ``nvtx``: NVTX ranges. By default launchprof's own marker (range ``step`` in domain
   ``launchprof``, see :mod:`launchprof.marker`); ``step_name`` picks ranges by text;
   otherwise the one repeating range text that covers the most GPU work, among the
   ranges that can be the user's step (:func:`step_range_rejection`: not a library's
   own range, repeated at least 3 times, and holding at least half of the GPU work that
   the ranges' threads submit between the first range's start and the last one's end).
   A GPU activity
   belongs to the range, on the thread that submitted it, that contains the start of the
   submitting API call (joined on (pid, correlation id)). Calls on the process's other
   threads, which carry no step range (PyTorch's autograd threads launch the backward
   pass), go to the step range that contains their start in time.
2. ``graph-launch``: without NVTX, each ``cudaGraphLaunch`` of the busiest process is one
   step (a graph is the captured step).
3. ``inferred``: without either, the shortest period ``p`` of the busiest process's
   kernel sequence (kernel name and launch configuration) over a window in the middle
   of the trace, accepted when at least 90 % of kernels match the kernel ``p`` later.
   A ``template`` (kernel name ids of one step, e.g. from the graph of a converted run)
   fixes the period and phase instead.

Warm-up: the leading steps (at most a quarter of them) whose period, GPU duration or CPU
time exceeds 1.5x the median of the second half of the steps, whose kernel count differs
from the most common one, or that capture or instantiate a graph. The 1.5x factor is a heuristic: start-up costs (module
loading, library handles, allocator growth, capture, instantiation) are typically
several times a steady step.
"""

from launchprof.analysis.steps.find import find_steps
from launchprof.analysis.steps.model import StepError, Steps, no_gpu_work_note, step_stats
from launchprof.analysis.steps.nvtx import LIBRARY_DOMAINS, LIBRARY_TEXT, library_range, step_range_rejection

__all__ = [
    "LIBRARY_DOMAINS",
    "LIBRARY_TEXT",
    "StepError",
    "Steps",
    "find_steps",
    "library_range",
    "no_gpu_work_note",
    "step_range_rejection",
    "step_stats",
]
