"""Launch figures: how many launch calls, how long they take, graph activity.

API names are matched after removing nsys's ``_vNNNN`` suffix (``cudaLaunchKernel_v7000``
-> ``cudaLaunchKernel``). Runtime and driver names are both recognised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchprof.analysis.timeline import corr_key

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


def _shorter_ratio(launches: pd.DataFrame, per_launch: pd.DataFrame) -> float | None:
    """Share of ``per_launch`` kernels shorter than the call that launched them, joined
    on (pid, correlation id) like an inner merge (None when nothing joins)."""
    call_key = corr_key(launches["pid"].to_numpy(), launches["correlation_id"].to_numpy())
    order = np.argsort(call_key, kind="stable")
    call_key = call_key[order]
    if call_key.size > 1 and (call_key[1:] == call_key[:-1]).any():
        # Repeated (pid, correlation id) among launch calls: join every pair, as a merge does.
        joined = per_launch[["pid", "correlation_id", "start", "end"]].merge(
            launches[["pid", "correlation_id", "start", "end"]], on=["pid", "correlation_id"], suffixes=("", "_call")
        )
        if not len(joined):
            return None
        k_dur = joined["end"] - joined["start"]
        c_dur = joined["end_call"] - joined["start_call"]
        return float((k_dur < c_dur).mean())
    call_dur = (launches["end"] - launches["start"]).to_numpy()[order]
    k_key = corr_key(per_launch["pid"].to_numpy(), per_launch["correlation_id"].to_numpy())
    if call_key.size == 0 or k_key.size == 0:
        return None
    pos = np.minimum(np.searchsorted(call_key, k_key), call_key.size - 1)
    found = call_key[pos] == k_key
    if not found.any():
        return None
    k_dur = (per_launch["end"] - per_launch["start"]).to_numpy()[found]
    return float((k_dur < call_dur[pos[found]]).mean())


def launch_figures(api: pd.DataFrame, kernels: pd.DataFrame, graph_execs: pd.DataFrame) -> LaunchFigures:
    """Compute :class:`LaunchFigures` from the trace's ``api``, ``kernels`` and
    ``graph_execs`` frames (see :mod:`launchprof.trace.model`). Inputs are not modified."""
    call = api["call"] if isinstance(api["call"].dtype, pd.CategoricalDtype) else api["call"].astype("category")
    categories = [str(c) for c in call.cat.categories]
    codes = call.cat.codes.to_numpy()

    def calls_where(pred: Callable[[str], bool]) -> np.ndarray:
        wanted = [i for i, c in enumerate(categories) if pred(c)]
        return np.isin(codes, wanted) if wanted else np.zeros(len(codes), bool)

    dur = (api["end"] - api["start"]).to_numpy()
    is_launch = calls_where(KERNEL_LAUNCH_CALLS.__contains__)
    is_graph = calls_where(GRAPH_LAUNCH_CALLS.__contains__)
    is_inst = calls_where(is_instantiate)
    is_update = calls_where(GRAPH_UPDATE_CALLS.__contains__)
    graph_launches = int(is_graph.sum()) or int(len(graph_execs))
    join_cols = ["pid", "correlation_id", "start", "end"]
    shorter = _shorter_ratio(
        api[join_cols].loc[is_launch], kernels[join_cols].loc[kernels["graph_node_id"].isna().to_numpy()]
    )
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
        graph_exec_updates=int(is_update.sum()),
        kernel_p50_ns=_pct(k_dur_all, 50),
        kernels_in_graphs=int(kernels["graph_node_id"].notna().sum()),
        kernels_shorter_than_launch_ratio=shorter,
    )
