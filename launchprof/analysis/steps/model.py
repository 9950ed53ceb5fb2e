"""The result of the step finder: :class:`Steps`, and the figures read from it for the
summary (:func:`step_stats`, :func:`no_gpu_work_note`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.errors import LaunchprofError


class StepError(LaunchprofError):
    """The steps asked for (``--step NAME``) are not in the trace."""


@dataclass(frozen=True)
class Steps:
    """Steps of one device.

    Attributes:
        source: ``"nvtx"``, ``"graph-launch"``, ``"inferred"`` or ``"none"``.
        name: the NVTX range text, or a description of the inferred step.
        reason: one sentence on how the steps were found (or why none were).
        device_id, pid: the device and the process whose steps these are.
        table: one row per step, in time order, columns (ns unless said):
            ``step`` (0..n-1), ``cpu_start``, ``cpu_end`` (the step on the CPU: NVTX
            range, or first launch call to next step's), ``gpu_start``, ``gpu_end``
            (first activity start, last activity end), ``kernels``, ``memops``,
            ``busy_ns`` (union inside the step), ``bubbles``, ``bubble_ns`` (gaps inside
            the step >= threshold), ``host_wait_ns`` (gaps inside the step, and the gap
            after it up to the next step's first activity - the window of its
            ``period_ns`` - whose next activity's submitting call ended after the gap began),
            ``lead_gap_ns`` (idle from the previous step's last activity to this step's
            first; 0 for the first step), ``period_ns`` (next step's gpu_start - this
            one's; NaN for the last), ``launch_calls``, ``launch_call_ns``,
            ``graph_launches``, ``sync_calls``, ``alloc_calls``, ``instantiations``,
            ``exec_updates``, ``captures``, ``api_ns`` (time in CUDA API calls),
            ``cpu_ns`` (cpu_end - cpu_start), ``warmup`` (bool).
        activity_step: step index of each row of the device's ``activity`` (-1: none), int32.
        warmup: number of warm-up steps (the first ``warmup`` rows of ``table``).
        rejected: NVTX range labels (``domain:text``) that were not taken as the step,
            each with the reason (:func:`step_range_rejection`), in label order.
    """

    source: str
    name: str | None
    reason: str
    device_id: int | None
    pid: int | None
    table: pd.DataFrame
    activity_step: pd.Series = field(repr=False)
    warmup: int = 0
    rejected: tuple[tuple[str, str], ...] = ()

    @functools.cached_property
    def steady(self) -> pd.DataFrame:
        """The steady-state steps: ``table`` without warm-up steps and without the last
        step (its period is unknown). Computed once (read it, do not modify it)."""
        warm = self.table["warmup"].to_numpy(dtype=bool)
        if int((~warm).sum()) <= 1:
            return self.table.loc[~warm]
        # One selection, not two in a row: a copy of a 50k-step table is ~7 ms.
        return self.table.loc[~warm & self.table["period_ns"].notna().to_numpy()]

    @functools.cached_property
    def _stats(self) -> dict[str, Any]:
        """:func:`step_stats`, computed once (read it through that function, which copies it)."""
        return _step_stats(self)

    @property
    def count(self) -> int:
        return int(len(self.table))


@dataclass(frozen=True)
class Assignment:
    """The steps one source found, before the step table is built.

    Attributes:
        source, name, reason: as in :class:`Steps`.
        pid: the process whose steps these are.
        activity_step: step index of each row of the device's activity (-1: none).
        api_step: step index of each row of ``trace.api`` when the source assigns calls
            to steps itself (NVTX ranges); None: by the time of their start.
        cpu_start, cpu_end: the steps on the CPU (None: from the calls, see
            :func:`~launchprof.analysis.steps.table.step_table`).
    """

    source: str
    name: str
    reason: str
    pid: int
    activity_step: np.ndarray
    api_step: np.ndarray | None = None
    cpu_start: np.ndarray | None = None
    cpu_end: np.ndarray | None = None


def no_steps(reason: str, device_id: int | None, pid: int | None, n: int = 0) -> Steps:
    return Steps(
        "none",
        None,
        reason,
        device_id,
        pid,
        pd.DataFrame(columns=["step", "warmup", "period_ns"]),
        pd.Series(np.full(n, -1, dtype=np.int32), name="step", copy=False),
        0,
    )


def no_gpu_work_note(steps: Steps) -> str | None:
    """A note on the steps that hold no GPU work (an NVTX range around CPU work only):
    they have no GPU start, so neither they nor the step before each has a step period,
    and they are left out of the steady state; None when every step holds GPU work."""
    table = steps.table
    if table.empty or "gpu_start" not in table:
        return None
    empty = table["step"].to_numpy()[table["gpu_start"].isna().to_numpy()]
    if not empty.size:
        return None
    shown = ", ".join(map(str, empty[:10].tolist())) + (", ..." if empty.size > 10 else "")
    note = (
        f"{empty.size} of {len(table)} steps ({steps.name}) hold no GPU work (steps {shown}): they, and the step "
        "before each, have no step period and are left out of the steady state"
    )
    if not steps.steady["period_ns"].notna().any():
        note += "; no steady step is left, so the whole trace is judged as one window"
    return note


def step_stats(steps: Steps) -> dict[str, Any]:
    """Steady-state distribution figures of ``steps`` for the summary (ns, counts).

    Returns a dict with ``source``, ``name``, ``reason``, ``count``, ``warmup``,
    ``steady``, ``device_id``, ``pid``, ``rejected_ranges`` (``[{"range", "reason"}]``:
    :attr:`Steps.rejected`), and for the steady steps ``kernels_per_step_p50``, ``memops_per_step_p50``,
    ``period_p50_ns``, ``period_p90_ns``, ``period_mean_ns``, ``period_std_ns``,
    ``busy_p50_ns``, ``bubble_ns_p50``, ``host_wait_p50_ns``, ``launch_calls_p50``,
    ``launch_call_ns_p50``, ``sync_calls_p50``, ``alloc_calls_p50``,
    ``graph_launches_p50``, ``api_ns_p50``, ``cpu_ns_p50`` (numpy linear percentiles).
    """
    computed = steps._stats  # once per Steps: the summary and the comparison side both read them
    return {**computed, "rejected_ranges": [dict(r) for r in computed["rejected_ranges"]]}


def _step_stats(steps: Steps) -> dict[str, Any]:
    s = steps.steady
    out: dict[str, Any] = {
        "source": steps.source,
        "name": steps.name,
        "reason": steps.reason,
        "count": steps.count,
        "warmup": steps.warmup,
        "steady": int(len(s)),
        "device_id": steps.device_id,
        "pid": steps.pid,
        "rejected_ranges": [{"range": label, "reason": why} for label, why in steps.rejected],
    }

    def pct(col: str, q: float) -> float | None:
        v = s[col].dropna().to_numpy(dtype=float) if col in s else np.empty(0)
        return float(np.percentile(v, q)) if v.size else None

    for col, key in (
        ("kernels", "kernels_per_step_p50"),
        ("memops", "memops_per_step_p50"),
        ("period_ns", "period_p50_ns"),
        ("busy_ns", "busy_p50_ns"),
        ("bubble_ns", "bubble_ns_p50"),
        ("host_wait_ns", "host_wait_p50_ns"),
        ("launch_calls", "launch_calls_p50"),
        ("launch_call_ns", "launch_call_ns_p50"),
        ("sync_calls", "sync_calls_p50"),
        ("alloc_calls", "alloc_calls_p50"),
        ("graph_launches", "graph_launches_p50"),
        ("api_ns", "api_ns_p50"),
        ("cpu_ns", "cpu_ns_p50"),
    ):
        out[key] = pct(col, 50)
    out["period_p90_ns"] = pct("period_ns", 90)
    period = s["period_ns"].dropna().to_numpy(dtype=float) if "period_ns" in s else np.empty(0)
    out["period_mean_ns"] = float(period.mean()) if period.size else None
    out["period_std_ns"] = float(period.std(ddof=1)) if period.size > 1 else None
    return out
