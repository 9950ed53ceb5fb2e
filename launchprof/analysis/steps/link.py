"""Which API call submitted each GPU activity, and the step an activity inherits from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from launchprof.analysis.timeline.core import Analysis
from launchprof.analysis.timeline.gaps import call_index, last_call_rows


@dataclass(frozen=True)
class Link:
    """The submitting API call of each row of a device's activity.

    Attributes:
        call_row: row position in ``trace.api`` of the last call with the row's (pid,
            correlation id) and a correlation id > 0 (-1: none), as
            :func:`~launchprof.analysis.timeline.gaps.last_call_rows`.
        unique: no two calls share a (pid, correlation id) (correlation id > 0), and the
            ids and pids fit the 32 bits of :func:`~launchprof.analysis.timeline.gaps.corr_key`: then
            ``call_row`` is the only call of each row's pair.
    """

    call_row: np.ndarray
    unique: bool


def link_calls(analysis: Analysis, activity: pd.DataFrame) -> Link:
    api = analysis.trace.api
    keys, rows = analysis.trace.cached("call_index", lambda: call_index(api))
    corr = activity["correlation_id"].to_numpy()
    call_row = call_rows(api, activity["pid"].to_numpy(), corr, (keys, rows))
    api_corr = api["correlation_id"].to_numpy()
    fits = all(c.size == 0 or int(c.max()) < 2**32 for c in (corr, api_corr)) and all(
        p.size == 0 or (int(p.min()) >= -(2**31) and int(p.max()) < 2**31)
        for p in (activity["pid"].to_numpy(), api["pid"].to_numpy())
    )
    return Link(call_row, fits and keys.size == int((api_corr > 0).sum()))


def call_rows(api: pd.DataFrame, pid: np.ndarray, corr: np.ndarray, index: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """:func:`~launchprof.analysis.timeline.gaps.last_call_rows` (same result), by direct
    addressing where it can: per process (a handful), a table from correlation id to call
    row, when the ids are dense (they count up from 1 in a process) and every pid and
    correlation id fits the 32 bits of a :func:`~launchprof.analysis.timeline.gaps.corr_key`."""
    keys, rows = index
    fits = (
        keys.size > 0
        and corr.size > 0
        and int(corr.max()) < 2**32
        and int(pid.min()) >= -(2**31)
        and int(pid.max()) < 2**31
    )
    if not fits:
        return last_call_rows(api, pid, corr, index)
    if keys[0] >> 32 == keys[-1] >> 32:  # one process (keys are sorted by pid first)
        heads, key_pid = np.zeros(1, dtype=np.int64), keys[:1] >> 32
    else:
        key_pid = keys >> 32
        heads = np.flatnonzero(np.r_[True, key_pid[1:] != key_pid[:-1]])
    ends = np.r_[heads[1:], keys.size]
    if heads.size > 8:
        return last_call_rows(api, pid, corr, index)
    out = np.full(corr.size, -1, dtype=np.int64)
    for p, a, b in zip(key_pid[heads], heads, ends, strict=True):
        key_corr = keys[a:b] - (int(p) << 32)  # the correlation ids, ascending (all > 0)
        top = int(key_corr[-1])
        if top > 4 * (b - a) + 2**16:  # sparse ids: a table would be mostly empty
            return last_call_rows(api, pid, corr, index)
        table = np.full(top + 1, -1, dtype=np.int64)  # entry 0 stays -1: no call has id 0
        table[key_corr] = rows[a:b]
        if int(corr.min()) > 0 and int(corr.max()) <= top:
            found = table[corr]
        else:
            found = table[np.where((corr > 0) & (corr <= top), corr, 0)]
        if heads.size == 1 and int(pid.min()) == int(pid.max()) == int(p):
            return found
        out = np.where(pid == p, found, out)
    return out


def activity_from_api(link: Link, activity: pd.DataFrame, api: pd.DataFrame, api_step: np.ndarray) -> np.ndarray:
    """Step of each activity row: that of the last call with its (pid, correlation id)
    among the calls with a step and a correlation id > 0 (-1: none)."""
    if api_step.size == 0:
        return np.full(len(activity), -1, dtype=np.int64)
    if link.unique:  # each pair has one call: its step, or none
        return np.where(link.call_row >= 0, api_step[np.maximum(link.call_row, 0)], -1)
    keyed = pd.DataFrame(
        {"pid": api["pid"].to_numpy(), "correlation_id": api["correlation_id"].to_numpy(), "step": api_step}
    )
    keyed = keyed.loc[(keyed["step"] >= 0) & (keyed["correlation_id"] > 0)]
    keyed = keyed.drop_duplicates(["pid", "correlation_id"], keep="last")
    merged = activity[["pid", "correlation_id"]].merge(keyed, on=["pid", "correlation_id"], how="left")
    return merged["step"].fillna(-1).to_numpy(dtype=np.int64)
