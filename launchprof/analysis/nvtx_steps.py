"""Steps of a trace without GPU work, from its NVTX ranges alone (the host steps).

A CPU-only workload marked with ``launchprof.step()`` has no GPU step to judge, but its
ranges still say how many steps ran and how long each took on the host. This module
measures them (summary.json's ``nvtx_steps``), and the profiled period that the runs
without nsys are held against when the trace has no GPU step
(:func:`launchprof.analysis.baseline.nvtx_period_p50` reads these same ranges).

Which ranges are the steps: a name given (``--step``) is read as the GPU step finder
reads it (:func:`launchprof.analysis.steps.nvtx.named_ranges`: text, else
``domain:text``). Without a name the rules differ on purpose: the GPU finder
(:func:`launchprof.analysis.steps.nvtx.nvtx_candidates`) takes the range text whose
ranges hold the most GPU work, and rejects libraries' ranges and texts repeated fewer
than three times; a trace without GPU work has no work to weigh, so here the steps are
the marker's text (``step``, in any domain), else the text repeated most often.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.steps.nvtx import named_ranges
from launchprof.defaults import STEP_NAME


@dataclass(frozen=True)
class NvtxSteps:
    """The ranges named ``name`` on the thread holding most of them.

    Attributes:
        name: the NVTX text.
        pid, tid: the thread.
        table: one row per range, by start: ``step`` (0-based), ``start``, ``end``,
            ``duration_ns`` (end - start), ``period_ns`` (next start - start; NaN for the
            last); ns in the trace's clock.
    """

    name: str
    pid: int
    tid: int
    table: pd.DataFrame

    def to_dict(self) -> dict[str, Any]:
        """The summary's ``nvtx_steps`` section: ``name``, ``pid``, ``tid``, ``count``,
        ``period_p50_ns``, ``period_p90_ns``, ``duration_p50_ns``, ``total_ns`` (first
        start to last end); periods are None with fewer than two ranges."""
        t = self.table
        periods = t["period_ns"].dropna().to_numpy(dtype=np.float64)
        durations = t["duration_ns"].to_numpy(dtype=np.float64)
        return {
            "name": self.name,
            "pid": self.pid,
            "tid": self.tid,
            "count": len(t),
            "period_p50_ns": float(np.percentile(periods, 50)) if len(periods) else None,
            "period_p90_ns": float(np.percentile(periods, 90)) if len(periods) else None,
            "duration_p50_ns": float(np.percentile(durations, 50)) if len(durations) else None,
            "total_ns": int(t["end"].max() - t["start"].min()) if len(t) else 0,
        }


def nvtx_steps(nvtx: pd.DataFrame, name: str | None = None) -> NvtxSteps | None:
    """The host steps: the NVTX ranges named ``name`` (:func:`~launchprof.analysis.steps.nvtx.named_ranges`;
    default ``step``, launchprof's marker; else the text repeated most often, at least
    twice; module docstring: why not the GPU finder's rule) on the thread that has most
    of them (then the lowest pid, tid), or None when there is no such range.

    Args:
        nvtx: the trace's NVTX ranges (columns ``start``, ``end``, ``tid``, ``pid``,
            ``text``; ns).
    """
    if nvtx.empty:
        return None
    texts = nvtx["text"]
    if name is None:
        name = STEP_NAME
        if not (texts == name).any():
            counts = texts.value_counts()
            counts = counts[counts >= 2]
            if counts.empty:
                return None
            name = str(sorted(counts.index[counts == counts.max()])[0])
    ranges = named_ranges(nvtx, name)[["start", "end", "pid", "tid"]]
    if ranges.empty:
        return None
    (pid, tid), _ = max(ranges.groupby(["pid", "tid"]).size().items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))
    mine = ranges.loc[(ranges["pid"] == pid) & (ranges["tid"] == tid)].sort_values(["start", "end"])
    start = mine["start"].to_numpy(dtype=np.int64)
    end = mine["end"].to_numpy(dtype=np.int64)
    period = np.full(len(start), np.nan)
    period[:-1] = np.diff(start)
    table = pd.DataFrame(
        {"step": np.arange(len(start)), "start": start, "end": end, "duration_ns": end - start, "period_ns": period}
    )
    return NvtxSteps(name=name, pid=int(pid), tid=int(tid), table=table)
