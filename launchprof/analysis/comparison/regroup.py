"""A side's steps joined ``k`` to one: :func:`regroup` (when a report folder's steps are a
fraction of the other side's and the trace is not at hand to cut them again) and
:func:`unprofiled_times` (a side's figures without the profiler for steps ``k`` times its
own).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from launchprof.analysis.comparison.side import STEP_COLUMNS, SideData

# Columns summed when steps are joined by regroup(); the others are handled one by one.
_ADDITIVE = (
    "kernels",
    "graph_kernels",
    "graph_execs",
    "memops",
    "busy_ns",
    "bubbles",
    "bubble_ns",
    "host_wait_ns",
    "launch_calls",
    "launch_call_ns",
    "graph_launches",
    "sync_calls",
    "alloc_calls",
    "instantiations",
    "exec_updates",
    "captures",
    "api_ns",
)


def unprofiled_times(side: SideData, k: int) -> SideData:
    """``side`` with its figures without the profiler for steps ``k`` times its own (its
    steps re-cut or joined ``k`` to one: :func:`regroup`, or a trace's re-cut steps): the
    step without the profiler (``step_ns``, ``low_ns``, ``high_ns``), the expected eager
    step and the runs' periods times ``k``. For a trace BEFORE re-cut this way, the steps
    without the profiler are its old steps' times ``k``, not a new estimate."""
    if k <= 1:
        return side
    swp = side.step_without_profiler
    if swp:
        swp = {
            key: (v * k if key in ("step_ns", "low_ns", "high_ns") and v is not None else v) for key, v in swp.items()
        }
    # Each period times k (a run's mean when the runs timed a region, one step's otherwise):
    # the mean holds; joining k consecutive ones would mix runs and could leave none.
    periods = None if side.unprofiled_periods is None else np.asarray(side.unprofiled_periods, dtype=float) * k
    eager = side.expected_eager_step_ns * k if side.expected_eager_step_ns else side.expected_eager_step_ns
    return dataclasses.replace(
        side, step_without_profiler=swp, unprofiled_periods=periods, expected_eager_step_ns=eager
    )


def regroup(side: SideData, k: int) -> SideData:
    """Join each ``k`` consecutive steps of ``side.table`` into one step.

    Sums the counts and durations (:data:`_ADDITIVE`), counts the gaps between the
    joined steps that reach the bubble threshold as bubbles, takes the first start and
    the last end, and recomputes ``period_ns``; a joined step is warm-up when any part
    is; an incomplete last group is dropped. Kernel counts per step are multiplied by
    ``k``. The phase is arbitrary (the trace is not at hand to align it), so this is an
    approximation and the result says so in ``notes``.
    """
    if side.table is None or k <= 1:
        return side
    t = side.table
    group = (t["step"].to_numpy() // k).astype(np.int64)
    full = pd.Series(group).map(pd.Series(group).value_counts()) == k
    t = t.loc[full.to_numpy()].assign(_g=group[full.to_numpy()])
    inner_lead = t["lead_gap_ns"].where(t["step"] % k != 0, 0)
    extra_bubble = inner_lead.where(inner_lead >= side.bubble_threshold_ns, 0)
    g = t.assign(_xb=extra_bubble, _xn=(extra_bubble > 0).astype(np.int64)).groupby("_g", sort=True)
    out = g[list(_ADDITIVE)].sum()
    out["bubble_ns"] += g["_xb"].sum()
    out["bubbles"] += g["_xn"].sum()
    out["gpu_start"], out["gpu_end"] = g["gpu_start"].min(), g["gpu_end"].max()
    out["cpu_start"], out["cpu_end"] = g["cpu_start"].min(), g["cpu_end"].max()
    out["lead_gap_ns"] = g["lead_gap_ns"].first()
    out["warmup"] = g["warmup"].any()
    out["period_ns"] = out["gpu_start"].shift(-1) - out["gpu_start"]
    out["cpu_ns"] = out["cpu_end"] - out["cpu_start"]
    out = out.reset_index(drop=True)
    out["step"] = np.arange(len(out))
    kernels = None if side.kernels is None else side.kernels.assign(per_step=side.kernels["per_step"] * k)
    return dataclasses.replace(
        side,
        table=out.loc[:, list(STEP_COLUMNS)],
        kernels=kernels,
        step_reason=f"{side.step_reason}; every {k} consecutive steps joined into one",
        notes=side.notes
        + (
            f"{side.path}: its steps hold 1/{k} of the other side's kernels; every {k} consecutive steps "
            f"were joined into one without the trace to align them (approximate; compare traces for exact steps)",
        ),
    )
