"""Kernel and launch-call durations of the steady steps (``Diagnosis.durations``) and
their log-spaced histogram (the report's duration chart)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from launchprof.analysis.stepdata import StepContext
from launchprof.analysis.timeline.callkinds import api_classes
from launchprof.analysis.timeline.core import Analysis
from launchprof.analysis.timeline.gaps import call_index


def duration_histogram(durations: pd.DataFrame, per_decade: int = 5) -> pd.DataFrame:
    """Log-spaced histogram of kernel and launch-call durations (``Diagnosis.durations``).

    Returns:
        DataFrame with ``low_ns``, ``high_ns`` (bin edges, ``per_decade`` bins a decade
        from 100 ns to 100 ms), ``kernels`` and ``launch_calls`` (counts per bin; values
        outside the range go to the first or last bin).
    """
    edges = np.logspace(2, 8, 6 * per_decade + 1)
    out = pd.DataFrame({"low_ns": edges[:-1], "high_ns": edges[1:]})
    for col, key in (("kernel_ns", "kernels"), ("launch_call_ns", "launch_calls")):
        v = durations[col].to_numpy(dtype=float) if col in durations else np.empty(0)
        out[key] = np.histogram(np.clip(v, edges[0], edges[-1] - 1), bins=edges)[0]
    return out


def launch_durations(ctx: StepContext, analysis: Analysis) -> pd.DataFrame:
    """The duration of each per-launch kernel of ``ctx`` (not a graph node) and of the
    launch call that submitted it, joined on (pid, correlation id); kernels without a
    launch call (:data:`~launchprof.analysis.timeline.callkinds.KERNEL_LAUNCH_CALLS`) are left out.

    Returns:
        DataFrame with ``kernel_ns`` and ``launch_call_ns`` (int64, ns), one row per
        kernel (``Diagnosis.durations``; :func:`duration_histogram` bins it).
    """
    k = ctx.kernels
    if k.empty:
        return pd.DataFrame({"kernel_ns": pd.Series(dtype="int64"), "launch_call_ns": pd.Series(dtype="int64")})
    api = analysis.trace.api
    is_call = api_classes(analysis.trace)["launch"].to_numpy()  # call in KERNEL_LAUNCH_CALLS
    per_launch = k["graph_node_id"].isna().to_numpy()
    every = bool(per_launch.all())
    # Per-launch kernels joined to their launch call on (pid, correlation id), as an inner
    # merge. When every call with a correlation id has a key of its own (call_index's keys
    # are as many as those calls) and every launch call has one, a kernel's launch call is
    # its submitting call (ctx.kernel_calls), if that is a launch call.
    keys, rows = analysis.trace.cached("call_index", lambda: call_index(api))
    has_key = api["correlation_id"].to_numpy() > 0
    if keys.size != int(has_key.sum()) or (is_call & ~has_key).any():
        return _durations_merged(k.loc[per_launch], api.loc[is_call])
    call = ctx.kernel_calls if every else ctx.kernel_calls[per_launch]  # last_call_rows of the kernels
    found = call >= 0
    found[found] = is_call[call[found]]
    kernel_ns = k["end"].to_numpy() - k["start"].to_numpy()
    if not (every and found.all()):  # else every kernel has its launch call: no copies
        call, kernel_ns = call[found], kernel_ns[per_launch][found]
    call_ns = api["end"].to_numpy()[call]
    call_ns -= api["start"].to_numpy()[call]
    return pd.DataFrame(
        {"kernel_ns": kernel_ns.astype(np.int64, copy=False), "launch_call_ns": call_ns.astype(np.int64, copy=False)}
    )


def _durations_merged(per_launch: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """:func:`launch_durations` by an inner merge (launch calls sharing a correlation key)."""
    cols = ["pid", "correlation_id", "start", "end"]
    j = per_launch[cols].merge(calls[cols], on=["pid", "correlation_id"], suffixes=("", "_call"))
    return pd.DataFrame(
        {
            "kernel_ns": (j["end"] - j["start"]).to_numpy(dtype=np.int64),
            "launch_call_ns": (j["end_call"] - j["start_call"]).to_numpy(dtype=np.int64),
        }
    )
