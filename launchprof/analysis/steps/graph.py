"""Graph-launch steps: without NVTX step ranges, each ``cudaGraphLaunch`` of the process
starts a step (a graph is the captured step)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import last_at_or_before
from launchprof.analysis.steps.link import Link, activity_from_api
from launchprof.analysis.steps.model import Assignment
from launchprof.analysis.timeline.callkinds import api_classes
from launchprof.analysis.timeline.core import Analysis


def graph_launch_steps(analysis: Analysis, act: pd.DataFrame, link: Link, pid: int) -> Assignment | None:
    """The steps of process ``pid`` cut at its graph launch calls, projected onto the
    device's activity ``act`` through each activity's submitting call; None without a
    graph launch."""
    api = analysis.trace.api
    graph = np.flatnonzero((api["pid"].to_numpy() == pid) & api_classes(analysis.trace)["graph_launch"].to_numpy())
    if not len(graph):
        return None
    # A step runs from one graph launch call to the next: the eager launches around the
    # graph (input copies, post-processing) are the step's too, so their GPU time is the
    # step's work, not idle time (docs/metrics.md, "Step").
    cpu_start = api["start"].to_numpy()[graph]
    api_step = np.where(api["pid"].to_numpy() == pid, last_at_or_before(cpu_start, api["start"].to_numpy()), -1)
    reason = (
        f"no NVTX step ranges: each of the {len(graph)} graph launches of pid {pid} starts a step "
        "(with the calls up to the next one)"
    )
    return Assignment(
        "graph-launch", "cudaGraphLaunch", reason, pid, activity_from_api(link, act, api, api_step), None, cpu_start
    )
