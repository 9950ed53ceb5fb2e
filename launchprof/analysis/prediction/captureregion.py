"""The capture region of a step: the run of kernel launches a CUDA Graph's capture would
hold, found per steady step from the program's structure alone (where its launches and
synchronizing calls are, not how fast the host ran), and the share of the CPU steps that
lies outside it (what a graph keeps). :mod:`launchprof.analysis.prediction.expect` predicts the graph
step from them; the ``sync-in-step`` finding judges a step's syncs by the same launch share
(:data:`CYCLE_LAUNCH_SHARE`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from launchprof.analysis.stepdata import StepContext

# In a synchronizing step, the capture region is the shortest stretch of the launches
# between two syncs that holds this share of them: a decode step's forward, without the
# few launches of the loop around it (greedy sampling, the stopping check). Set on the
# three HF generate() pairs of tests/data/frameworks (0.9 and 0.95 missed GPT-2 b1's
# truth); held to later recordings of the same programs (MANIFEST.md, stability).
CYCLE_LAUNCH_SHARE = 0.8


def capture_region(ctx: StepContext, synchronizing: bool) -> pd.DataFrame:
    """Per steady step, the region a capture would hold and the CPU step around it, from
    the program's structure alone (where its launches and syncs are), not from how fast
    the host ran: every thread's calls of the process merged by start (PyTorch launches
    the backward pass from its autograd threads).

    The region is one run of kernel launches: for a step that synchronizes, runs are cut
    after each synchronizing call (a capture cannot hold one; a decode step's forward
    lies between two) and, for steps the user marked, at the step's edges; the region
    is the shortest stretch of consecutive launches holding :data:`CYCLE_LAUNCH_SHARE`
    of its run's (the forward without the few launches
    of the loop around it), in the run with the most launches, wherever the step's edge
    falls in it (an inferred step starts at any kernel of the cycle); for other steps the
    run is the step, all its launches. The region spans from the start of its first
    launch call to the end of its last: what a graph removes (the launch calls, Python and
    dispatch between them). Everything else of the CPU step is what it keeps.

    Not modelled: host work of the program's own *between* a step's launches (NumPy in the
    middle of a step) counts as removed, as a capture that holds it runs it only once. No
    threshold told it apart: on the corpus the longest stretch without calls inside a
    PyTorch forward is 45-290 times the median one (dispatch's own tail), and on a host
    that a burner preempts 2,000-16,000 times.

    Returns:
        DataFrame, one row per steady step: ``step``, ``calls`` (traced calls),
        ``launch_calls`` (kernel launches), ``cpu_ns`` (the step's first call start to the
        next step's; for the last steady step its period), ``region_ns`` (span of the
        region, ns; NaN without launches), ``region_launches`` (of its run).
    """
    cols = ["step", "calls", "launch_calls", "cpu_ns", "region_ns", "region_launches"]
    calls = ctx.calls
    if calls.empty:
        return pd.DataFrame(columns=cols)
    calls = calls.sort_values("start", kind="stable")
    start = calls["start"].to_numpy(dtype=np.int64)
    end = calls["end"].to_numpy(dtype=np.int64)
    step = calls["step"].to_numpy()
    launch = calls["launch"].to_numpy(dtype=bool)
    sync = calls["sync"].to_numpy(dtype=bool)
    steps = ctx.steady["step"].to_numpy()
    per = pd.DataFrame({"step": steps})
    per["calls"] = calls.groupby("step").size().reindex(steps, fill_value=0).to_numpy(dtype=float)
    per["launch_calls"] = pd.Series(launch).groupby(step).sum().reindex(steps, fill_value=0).to_numpy(dtype=float)
    first_call = pd.Series(start).groupby(step).min()
    nxt = first_call.shift(-1).where(np.r_[np.diff(first_call.index.to_numpy()) == 1, False])
    per["cpu_ns"] = (nxt - first_call).reindex(steps).to_numpy(dtype=float)
    if "period_ns" in ctx.steady:  # the last step (no next call): its period on the GPU instead
        per["cpu_ns"] = per["cpu_ns"].fillna(pd.Series(ctx.steady["period_ns"].to_numpy(dtype=float)))
    region = _regions(start, end, step, launch, sync, synchronizing, marked=ctx.steps.source != "inferred")
    per["region_ns"] = region["span"].reindex(steps).to_numpy(dtype=float)
    per["region_launches"] = region["launches"].reindex(steps).to_numpy(dtype=float)
    return per


# params: numpy columns of one table, passed apart so callers hand over views without building a
# frame
def _regions(
    start: np.ndarray,
    end: np.ndarray,
    step: np.ndarray,
    launch: np.ndarray,
    sync: np.ndarray,
    synchronizing: bool,
    marked: bool = False,
) -> pd.DataFrame:
    """Per step (index), its region (:func:`capture_region`): ``start``, ``end``, ``span``
    (ns) and ``launches`` (of its run); empty without kernel launches. ``marked``: the
    steps are the user's (NVTX, graph launches), so a run also ends at a step's edge."""
    if not launch.any():
        return pd.DataFrame(columns=["start", "end", "span", "launches"], dtype=float)
    edge = step[1:] != step[:-1]
    edge = (sync[:-1] | edge if marked else sync[:-1]) if synchronizing else edge
    run = (np.cumsum(np.r_[True, edge]) - 1)[launch]
    # The region of a run: the shortest stretch of consecutive launches holding ``share``
    # of the run's launches (all of them for a step that does not synchronize).
    share = CYCLE_LAUNCH_SHARE if synchronizing else 1.0
    first = np.r_[0, np.flatnonzero(np.diff(run)) + 1]  # each run's first launch (position)
    count = np.diff(np.r_[first, run.size])
    need = np.maximum(np.ceil(share * count).astype(np.int64), 1)
    ls, le = start[launch], end[launch]
    owner = np.repeat(np.arange(first.size), count)
    last = np.arange(run.size) + need[owner] - 1  # a window from each launch
    ok = last < (first + count)[owner]
    span = np.where(ok, le[np.minimum(last, run.size - 1)] - ls, np.iinfo(np.int64).max)
    at = pd.Series(span).groupby(owner).idxmin().to_numpy()
    per_run = pd.DataFrame(
        {"step": step[launch][at], "start": ls[at], "end": ls[at] + span[at], "span": span[at], "launches": count}
    )
    return per_run.sort_values(["step", "launches"], kind="stable").groupby("step").tail(1).set_index("step")


def kept_share(region: pd.DataFrame) -> float:
    """The share of the CPU steps that lies outside their capture regions
    (:func:`capture_region`): summed over the steps with both figures, so host work done
    once in several steps (a loop body found as several repeats of its kernels) counts in
    full, in [0, 1]."""
    both = region.dropna(subset=["cpu_ns", "region_ns"])
    cpu = float(both["cpu_ns"].sum())
    if cpu <= 0:
        return 0.0
    kept = (both["cpu_ns"] - both["region_ns"]).clip(lower=0).sum()
    return min(float(kept) / cpu, 1.0)
