"""Launch figures: how many launch calls, how long they take, graph activity.

API names are matched after removing nsys's ``_vNNNN`` suffix (``cudaLaunchKernel_v7000``
-> ``cudaLaunchKernel``). Runtime and driver names are both recognised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

KERNEL_LAUNCH_CALLS = frozenset(
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
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
GRAPH_UPDATE_CALLS = frozenset({"cudaGraphExecUpdate", "cuGraphExecUpdate"})


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


def launch_figures(api: pd.DataFrame, kernels: pd.DataFrame, graph_execs: pd.DataFrame) -> LaunchFigures:
    """Compute :class:`LaunchFigures` from the trace's ``api``, ``kernels`` and
    ``graph_execs`` frames (see :mod:`launchprof.trace.model`). Inputs are not modified."""
    call = api["call"].astype(str)
    dur = (api["end"] - api["start"]).to_numpy()
    is_launch = call.isin(KERNEL_LAUNCH_CALLS).to_numpy()
    is_graph = call.isin(GRAPH_LAUNCH_CALLS).to_numpy()
    is_inst = call.map(is_instantiate).to_numpy(dtype=bool) if len(call) else np.zeros(0, bool)
    graph_launches = int(is_graph.sum()) or int(len(graph_execs))
    launches = api.loc[is_launch, ["pid", "correlation_id", "start", "end"]]
    per_launch = kernels.loc[kernels["graph_node_id"].isna(), ["pid", "correlation_id", "start", "end"]]
    joined = per_launch.merge(launches, on=["pid", "correlation_id"], suffixes=("", "_call"))
    shorter = None
    if len(joined):
        k_dur = joined["end"] - joined["start"]
        c_dur = joined["end_call"] - joined["start_call"]
        shorter = float((k_dur < c_dur).mean())
    k_dur_all = (kernels["end"] - kernels["start"]).to_numpy()
    return LaunchFigures(
        kernel_launch_calls=int(is_launch.sum()),
        launch_call_p50_ns=_pct(dur[is_launch], 50),
        launch_call_p90_ns=_pct(dur[is_launch], 90),
        launch_call_total_ns=int(dur[is_launch].sum()),
        graph_launches=graph_launches,
        graph_launch_call_p50_ns=_pct(dur[is_graph], 50),
        graph_instantiations=int(is_inst.sum()),
        graph_instantiate_p50_ns=_pct(dur[is_inst], 50),
        graph_exec_updates=int(call.isin(GRAPH_UPDATE_CALLS).sum()),
        kernel_p50_ns=_pct(k_dur_all, 50),
        kernels_in_graphs=int(kernels["graph_node_id"].notna().sum()),
        kernels_shorter_than_launch_ratio=shorter,
    )
