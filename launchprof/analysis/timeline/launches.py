"""Launch figures: how many launch calls, how long they take, graph activity.

API names are matched after removing nsys's ``_vNNNN`` suffix (``cudaLaunchKernel_v7000``
-> ``cudaLaunchKernel``). Runtime and driver names are both recognised, and so are their
per-thread default stream entry points (:func:`with_per_thread`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchprof.analysis.timeline.gaps import corr_key, key_order

# A program built with the per-thread default stream (nvcc --default-stream per-thread, or
# CUDA_API_PER_THREAD_DEFAULT_STREAM) calls the runtime's NAME_ptsz / NAME_ptds entry points,
# and nsys records them so: cudaLaunchKernel_ptsz_v7000, cudaStreamSynchronize_ptsz_v7000
# (recorded on an H200, tests/data/gpu/MANIFEST.md, per_thread_stream).
PER_THREAD_SUFFIXES = ("_ptsz", "_ptds")


def with_per_thread(names: Iterable[str]) -> frozenset[str]:
    """``names`` and their per-thread default stream entry points (each name with each of
    :data:`PER_THREAD_SUFFIXES`): the same call, on the calling thread's default stream."""
    return frozenset(n + suffix for n in names for suffix in ("", *PER_THREAD_SUFFIXES))


KERNEL_LAUNCH_CALLS = with_per_thread(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuLaunchCooperativeKernelMultiDevice",
        "cuLaunchGrid",
        "cuLaunchGridAsync",
    }
)
GRAPH_LAUNCH_CALLS = with_per_thread({"cudaGraphLaunch", "cuGraphLaunch"})
GRAPH_UPDATE_CALLS = frozenset({"cudaGraphExecUpdate", "cuGraphExecUpdate"})  # no stream: no per-thread form


def is_instantiate(call: str) -> bool:
    """True for cudaGraphInstantiate* / cuGraphInstantiate* (all variants)."""
    return call.startswith(("cudaGraphInstantiate", "cuGraphInstantiate"))


@dataclass(frozen=True)
class LaunchFigures:
    """Launch figures of a whole trace (all processes).

    Durations are ns, percentiles numpy-linear. ``kernels_shorter_than_launch_ratio`` is
    the share of per-launch kernels (joined to their launch call on (pid, correlation
    id)) whose GPU duration is below the CPU duration of that call; None when no kernel
    could be joined.
    """

    kernel_launch_calls: int
    launch_call_p50_ns: float | None
    launch_call_p90_ns: float | None
    launch_call_total_ns: int
    graph_launches: int
    graph_launch_call_p50_ns: float | None
    graph_instantiations: int
    graph_instantiate_p50_ns: float | None
    graph_exec_updates: int
    kernel_p50_ns: float | None
    kernels_in_graphs: int
    kernels_shorter_than_launch_ratio: float | None


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


# params: numpy columns of one table, passed apart so callers hand over views without building a
# frame (the calls' and the kernels')
def shorter_ratio_arrays(
    call_pid: np.ndarray,
    call_corr: np.ndarray,
    call_start: np.ndarray,
    call_end: np.ndarray,
    k_pid: np.ndarray,
    k_corr: np.ndarray,
    k_start: np.ndarray,
    k_end: np.ndarray,
) -> float | None:
    """Share of kernels (``k_*`` columns) shorter than the call that launched them (``call_*``
    columns), joined on (pid, correlation id) like an inner merge (None when nothing joins).

    Args:
        call_pid, call_corr, call_start, call_end: the launch calls' process, correlation
            id, start and end (ns), one value each.
        k_pid, k_corr, k_start, k_end: the same of the per-launch kernels.

    Returns:
        The share in [0, 1] (kernel end - start < call end - start), or None.
    """
    call_key = corr_key(call_pid, call_corr)
    if call_key.size > 1 and not (call_key[1:] > call_key[:-1]).all():
        order = key_order(call_key)
        call_key = call_key[order]
        if (call_key[1:] == call_key[:-1]).any():
            # Repeated (pid, correlation id) among launch calls: join every pair, as a merge does.
            cols = ["pid", "correlation_id", "start", "end"]
            launches = pd.DataFrame(dict(zip(cols, (call_pid, call_corr, call_start, call_end), strict=True)))
            per_launch = pd.DataFrame(dict(zip(cols, (k_pid, k_corr, k_start, k_end), strict=True)))
            joined = per_launch.merge(launches, on=["pid", "correlation_id"], suffixes=("", "_call"))
            if not len(joined):
                return None
            k_dur = joined["end"] - joined["start"]
            c_dur = joined["end_call"] - joined["start_call"]
            return float((k_dur < c_dur).mean())
        call_dur = (call_end - call_start)[order]
    else:  # already sorted and unique (one process, ids in call order): no sort
        call_dur = call_end - call_start
    k_key = corr_key(k_pid, k_corr)
    if call_key.size == 0 or k_key.size == 0:
        return None
    if k_key.size == call_key.size and (k_key == call_key).all():
        # Each kernel's call is the one at the same position (kernels in launch order).
        return float(np.count_nonzero((k_end - k_start) < call_dur) / k_key.size)
    pos = np.minimum(np.searchsorted(call_key, k_key), call_key.size - 1)
    found = call_key[pos] == k_key
    n_found = int(np.count_nonzero(found))
    if not n_found:
        return None
    if n_found == found.size:
        shorter = np.count_nonzero((k_end - k_start) < call_dur[pos])
    else:
        shorter = np.count_nonzero((k_end - k_start)[found] < call_dur[pos[found]])
    return float(shorter / n_found)


def launch_figures(api: pd.DataFrame, kernels: pd.DataFrame, graph_execs: pd.DataFrame) -> LaunchFigures:
    """Compute :class:`LaunchFigures` from the trace's ``api``, ``kernels`` and
    ``graph_execs`` frames (see :mod:`launchprof.trace.model`). Inputs are not modified."""
    call = api["call"] if isinstance(api["call"].dtype, pd.CategoricalDtype) else api["call"].astype("category")
    categories = [str(c) for c in call.cat.categories]
    codes = call.cat.codes.to_numpy()

    def calls_where(pred: Callable[[str], bool]) -> np.ndarray:
        # One flag per category (the last entry: a missing name, code -1), spread by code.
        table = np.array([pred(c) for c in categories] + [False], dtype=bool)
        return table[codes] if table.any() else np.zeros(len(codes), bool)

    dur = api["end"].to_numpy() - api["start"].to_numpy()
    is_launch = calls_where(KERNEL_LAUNCH_CALLS.__contains__)
    is_graph = calls_where(GRAPH_LAUNCH_CALLS.__contains__)
    is_inst = calls_where(is_instantiate)
    is_update = calls_where(GRAPH_UPDATE_CALLS.__contains__)
    graph_launches = int(is_graph.sum()) or int(len(graph_execs))
    in_graph = kernels["graph_node_id"].notna().to_numpy()
    per_launch = ~in_graph
    every = bool(per_launch.all())
    kernel_cols = [kernels[c].to_numpy() for c in ("pid", "correlation_id", "start", "end")]
    shorter = shorter_ratio_arrays(
        *(api[c].to_numpy()[is_launch] for c in ("pid", "correlation_id", "start", "end")),
        *(col if every else col[per_launch] for col in kernel_cols),
    )
    k_dur_all = kernel_cols[3] - kernel_cols[2]
    launch_dur = dur[is_launch]
    # Both percentiles from one partition (each is the same linear interpolation as alone).
    launch_p = [float(v) for v in np.percentile(launch_dur, [50, 90])] if launch_dur.size else [None, None]
    return LaunchFigures(
        kernel_launch_calls=int(is_launch.sum()),
        launch_call_p50_ns=launch_p[0],
        launch_call_p90_ns=launch_p[1],
        launch_call_total_ns=int(launch_dur.sum()),
        graph_launches=graph_launches,
        graph_launch_call_p50_ns=_pct(dur[is_graph], 50),
        graph_instantiations=int(is_inst.sum()),
        graph_instantiate_p50_ns=_pct(dur[is_inst], 50),
        graph_exec_updates=int(is_update.sum()),
        kernel_p50_ns=_pct(k_dur_all, 50),
        kernels_in_graphs=int(in_graph.sum()),
        kernels_shorter_than_launch_ratio=shorter,
    )
