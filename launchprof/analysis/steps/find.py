"""Finding the steps: NVTX ranges, else graph launches, else the inferred kernel
sequence (the package docstring says how each is chosen)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import kind_in
from launchprof.analysis.steps.graph import graph_launch_steps
from launchprof.analysis.steps.inferred import inferred_steps
from launchprof.analysis.steps.link import link_calls
from launchprof.analysis.steps.model import Steps, no_steps
from launchprof.analysis.steps.nvtx import check_step_name, nvtx_candidates, nvtx_steps
from launchprof.analysis.steps.table import mark_warmup, step_table
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis


def _busiest(device: DeviceAnalysis) -> int:
    act = device.activity
    pids = act["pid"].to_numpy()
    kernels = pids[kind_in(act["kind"], ("kernel",))]
    values = kernels if kernels.size else pids
    if values.size and values.min() == values.max():  # one process: no counting needed
        return int(values[0])
    return int(pd.Series(values).value_counts().index[0])


def find_steps(
    analysis: Analysis,
    step_name: str | None = None,
    template: Sequence[str] | None = None,
    device_id: int | None = None,
    pid: int | None = None,
) -> Steps:
    """Find the steps of the busiest device (or ``device_id``).

    Args:
        analysis: from :func:`launchprof.analyze`.
        step_name: NVTX range text to use as the step (``--step``).
        template: kernel names of one step, in order (e.g. the kernels of one graph
            launch of a converted run); forces inferred steps of that length aligned on
            the template's first occurrence.
        device_id: the device to analyse; default the one with the most kernels.
        pid: the process whose steps to find (one rank, :mod:`launchprof.analysis.ranks`);
            default the busiest process. Only that process's GPU activity is used.

    Returns:
        :class:`Steps` (``source == "none"`` with a reason when no step is found).
        Without ``template``, computed once per (step_name, device, process) for an
        analysis (shared: read it, do not modify it); when the busiest device runs a
        single process, its steps are that process's (the same result the cross-rank
        view finds for it).

    Raises:
        StepError: ``step_name`` was given and no such NVTX range exists.
    """
    if template is not None:
        return _find_steps(analysis, step_name, template, device_id, pid)
    if device_id is None and pid is None and analysis.devices:
        busiest = max(analysis.devices, key=lambda d: (d.figures.kernels, -d.device_id))
        if len(busiest.processes) == 1:  # the same device and process, so the same steps
            device_id, pid = busiest.device_id, busiest.processes[0].pid
    key = ("steps", step_name, device_id, pid)
    found: Steps = analysis.cached(key, lambda: _find_steps(analysis, step_name, None, device_id, pid))
    return found


def forget_other_steps(analysis: Analysis, kept: Steps) -> None:
    """Drop the steps :func:`find_steps` found for ``analysis`` other than ``kept`` (once
    the cross-rank view has its per-rank figures: the steps of each rank, with a step per
    activity row, are not read again; found again if asked for). On the 10M-kernel trace
    of 4 ranks, ~150 MiB less held through the diagnosis (benchmarks/README.md)."""
    analysis.forget(lambda key, value: isinstance(key, tuple) and key[:1] == ("steps",) and value is not kept)


def _find_steps(
    analysis: Analysis,
    step_name: str | None = None,
    template: Sequence[str] | None = None,
    device_id: int | None = None,
    pid: int | None = None,
) -> Steps:
    """:func:`find_steps`, computed."""
    devices = [d for d in analysis.devices if device_id is None or d.device_id == device_id]
    if pid is not None:
        devices = _only_pid(devices, pid)
    if not devices:
        if template is None:
            check_step_name(analysis, step_name)  # a mistyped --step is an error with or without GPU work
        return no_steps("no GPU activity in this trace", None, None)
    device = max(devices, key=lambda d: (d.figures.kernels, -d.device_id))
    pid = _busiest(device)
    act = device.activity
    link = link_calls(analysis, act)
    ranges, rejected = (None, ()) if template is not None else nvtx_candidates(analysis, device, link, step_name)
    found, skipped = (None, "") if ranges is None else nvtx_steps(analysis, act, link, pid, ranges, step_name)
    if found is None and template is None:
        found = graph_launch_steps(analysis, act, link, pid)
    if found is None:
        found = inferred_steps(analysis, device, pid, template)
    if found is None:
        return no_steps(
            "no NVTX step ranges, no graph launches and no repeating kernel sequence", device.device_id, pid, len(act)
        )
    if found.source != "nvtx":
        found = dataclasses.replace(found, reason=skipped + found.reason)
    activity_step, pid = found.activity_step, found.pid
    n_steps = int(activity_step.max()) + 1 if (activity_step >= 0).any() else 0
    if found.cpu_start is not None and found.source == "nvtx":
        n_steps = len(found.cpu_start)
    if n_steps == 0:
        return no_steps(f"{found.reason}, but none of them holds GPU work", device.device_id, pid, len(act))
    table = step_table(
        analysis, device, link, pid, activity_step, n_steps, found.api_step, found.cpu_start, found.cpu_end
    )
    table, warmup = mark_warmup(table)
    return Steps(
        found.source,
        found.name,
        found.reason + (_rejected_text(rejected) if found.source != "nvtx" else ""),
        device.device_id,
        pid,
        table,
        pd.Series(activity_step.astype(np.int32), index=act.index, name="step", copy=False),  # int32: half the memory
        warmup,
        rejected,
    )


def _rejected_text(rejected: tuple[tuple[str, str], ...], shown: int = 3) -> str:
    """``"; NVTX ranges not taken as the step: 'a' (why), ..."`` (empty when none)."""
    if not rejected:
        return ""
    items = [f"{label!r} ({why})" for label, why in rejected[:shown]]
    more = f" and {len(rejected) - shown} more" if len(rejected) > shown else ""
    return "; NVTX ranges not taken as the step: " + ", ".join(items) + more


def _only_pid(devices: list[DeviceAnalysis], pid: int) -> list[DeviceAnalysis]:
    """The devices where ``pid`` has GPU activity, reduced to that activity (index kept)
    and to that process's figures."""
    out = []
    for d in devices:
        figures = [p.figures for p in d.processes if p.pid == pid]
        if figures:
            out.append(dataclasses.replace(d, figures=figures[0], activity=d.activity.loc[d.activity["pid"] == pid]))
    return out
