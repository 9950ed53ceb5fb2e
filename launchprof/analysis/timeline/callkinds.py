"""Classes of CUDA API calls, by name (nsys ``_vNNNN`` suffix already removed).

Sources: CUDA Runtime and Driver API references (synchronous/stream-ordered semantics);
the CUDA C++ Programming Guide, "CUDA Graphs", "Prohibited and Unhandled Operations", for
the calls that break stream capture (docs/metrics.md, "Capture breakers").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from launchprof.analysis.timeline.launches import (
    GRAPH_LAUNCH_CALLS,
    GRAPH_UPDATE_CALLS,
    KERNEL_LAUNCH_CALLS,
    with_per_thread,
)
from launchprof.trace.model import Trace

# The calls that take a stream (synchronize, copy, set, capture) also in their per-thread
# default stream forms (launches.with_per_thread).
SYNC_CALLS = with_per_thread(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaThreadSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
# Synchronous copies: return only when the copy is done (host-side blocking).
SYNC_COPY_CALLS = with_per_thread(
    {
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cudaMemset",
        "cuMemcpy",
        "cuMemcpyDtoH",
        "cuMemcpyHtoD",
        "cuMemcpyDtoD",
    }
)
ALLOC_CALLS = frozenset(
    {
        "cudaMalloc",
        "cudaFree",
        "cudaMallocHost",
        "cudaHostAlloc",
        "cudaFreeHost",
        "cudaMallocManaged",
        "cudaMallocPitch",
        "cudaMalloc3D",
        "cuMemAlloc",
        "cuMemFree",
        "cuMemAllocHost",
        "cuMemFreeHost",
        "cuMemHostAlloc",
        "cuMemAllocManaged",
        "cuMemAllocPitch",
    }
)
# Calls that make a stream wait for work queued on another (an event recorded there), by
# name prefix: the per-thread default stream's are cudaStreamWaitEvent_ptsz. Not a sync:
# the host does not wait (stepmix.critical_paths reads them as dependencies).
EVENT_WAIT_PREFIXES = ("cudaStreamWaitEvent", "cuStreamWaitEvent")
CAPTURE_CALLS = with_per_thread(
    {"cudaStreamBeginCapture", "cudaStreamEndCapture", "cuStreamBeginCapture", "cuStreamEndCapture"}
)


def api_classes(trace: Trace) -> pd.DataFrame:
    """:func:`classify` of ``trace.api["call"]``, computed once per trace (shared: read it,
    do not modify it)."""
    return trace.cached("api_classes", lambda: classify(trace.api["call"]))  # type: ignore[no-any-return]


def classify(calls: pd.Series) -> pd.DataFrame:
    """Boolean class columns for a Series of API call names.

    Returns:
        DataFrame aligned with ``calls``: ``launch``, ``graph_launch``, ``instantiate``,
        ``exec_update``, ``sync`` (synchronize calls and synchronous copies/memsets),
        ``alloc``, ``capture``.
    """
    if isinstance(calls.dtype, pd.CategoricalDtype):
        # Classify each category once, then spread by code (no per-row strings).
        per_category = classify(pd.Series(calls.cat.categories.astype(str), dtype=object))
        codes = calls.cat.codes.to_numpy().astype(np.intp)  # converted once, not per column
        # One flag per category plus a False at the end, which code -1 (missing) picks.
        return pd.DataFrame(
            {col: np.append(per_category[col].to_numpy(dtype=bool), False)[codes] for col in per_category},
            index=calls.index,
        )
    c = calls.astype(str)
    return pd.DataFrame(
        {
            "launch": c.isin(KERNEL_LAUNCH_CALLS),
            "graph_launch": c.isin(GRAPH_LAUNCH_CALLS),
            "instantiate": c.str.startswith(("cudaGraphInstantiate", "cuGraphInstantiate")),
            "exec_update": c.isin(GRAPH_UPDATE_CALLS),
            "sync": c.isin(SYNC_CALLS | SYNC_COPY_CALLS),
            "alloc": c.isin(ALLOC_CALLS),
            "capture": c.isin(CAPTURE_CALLS),
        },
        index=calls.index,
    )
