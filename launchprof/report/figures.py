"""Plotly figures of an Analysis. Draws only: every number shown was computed in
:mod:`launchprof.analysis`. Trace strings go into figure JSON, which
:mod:`launchprof.report.html` embeds escaped."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from launchprof.analysis import Analysis, DeviceAnalysis, utilization_series
from launchprof.analysis.launches import GRAPH_LAUNCH_CALLS, KERNEL_LAUNCH_CALLS

TIMELINE_WINDOW_NS = 2_000_000
MAX_TIMELINE_BARS = 4_000


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(title=title, height=height, margin=dict(l=60, r=20, t=40, b=40), template="plotly_white")
    return fig


def timeline_window(device: DeviceAnalysis, window_ns: int = TIMELINE_WINDOW_NS) -> tuple[int, int]:
    """A representative window: ``window_ns`` long, starting at the activity nearest the
    middle of the device's span (steady state rather than start-up)."""
    f = device.figures
    middle = f.start_ns + f.span_ns // 2
    starts = device.activity["start"].to_numpy()
    i = int(np.searchsorted(starts, middle))
    lo = int(starts[min(i, len(starts) - 1)]) if len(starts) else f.start_ns
    return lo, lo + window_ns


def timeline(analysis: Analysis, device: DeviceAnalysis, window: tuple[int, int]) -> tuple[go.Figure, bool]:
    """GPU lanes per stream and CPU lanes per thread (launch calls) inside ``window``.

    Returns the figure and whether bars were dropped to stay under MAX_TIMELINE_BARS.
    """
    lo, hi = window
    trace = analysis.trace
    act = device.activity
    act = act.loc[(act["end"] > lo) & (act["start"] < hi)]
    api = trace.api
    api = api.loc[(api["end"] > lo) & (api["start"] < hi) & api["pid"].isin(act["pid"].unique())]
    downsampled = len(act) + len(api) > MAX_TIMELINE_BARS
    if downsampled:
        act = act.head(MAX_TIMELINE_BARS // 2)
        api = api.head(MAX_TIMELINE_BARS // 2)
    fig = go.Figure()
    t0 = lo
    for kind, rows in act.groupby(act["kind"].astype(str), sort=True):
        fig.add_trace(
            go.Bar(
                orientation="h",
                base=(rows["start"] - t0) / 1e3,
                x=(rows["end"] - rows["start"]) / 1e3,
                y=[
                    f"GPU {device.device_id} pid {p} stream {s}"
                    for p, s in zip(rows["pid"], rows["stream_id"], strict=False)
                ],
                name=kind,
                hovertemplate="%{y}<br>start %{base:.2f} us<br>%{x:.2f} us<extra>" + kind + "</extra>",
            )
        )
    call = api["call"].astype(str)
    for label, mask in (
        ("launch call", call.isin(KERNEL_LAUNCH_CALLS | GRAPH_LAUNCH_CALLS)),
        ("other CUDA API", ~call.isin(KERNEL_LAUNCH_CALLS | GRAPH_LAUNCH_CALLS)),
    ):
        rows = api.loc[mask]
        if rows.empty:
            continue
        fig.add_trace(
            go.Bar(
                orientation="h",
                base=(rows["start"] - t0) / 1e3,
                x=(rows["end"] - rows["start"]) / 1e3,
                y=[f"CPU pid {p} tid {t & 0xFFFFFF}" for p, t in zip(rows["pid"], rows["tid"], strict=False)],
                name=label,
                text=call[mask].tolist(),
                hovertemplate="%{text}<br>start %{base:.2f} us<br>%{x:.2f} us<extra></extra>",
            )
        )
    fig.update_layout(barmode="overlay", xaxis_title="time in window (us)")
    return _layout(fig, f"Timeline, {(hi - lo) / 1e6:.1f} ms window", 360), downsampled


def bubble_histogram(device: DeviceAnalysis) -> go.Figure:
    """Bar chart of the device's bubble-length histogram (from the analysis)."""
    hist = device.figures.bubbles.histogram
    labels = [f">= {lo / 1e3:g} us" if hi is None else f"{lo / 1e3:g}-{hi / 1e3:g} us" for lo, hi, _ in hist]
    fig = go.Figure(go.Bar(x=labels, y=[c for _, _, c in hist]))
    fig.update_layout(xaxis_title="bubble length", yaxis_title="bubbles")
    return _layout(fig, f"Bubble lengths, GPU {device.device_id}")


def utilization_over_time(device: DeviceAnalysis) -> go.Figure:
    """Line of the busy share per time bin (from :func:`utilization_series`)."""
    series: pd.DataFrame = utilization_series(device.activity)
    t0 = device.figures.start_ns
    fig = go.Figure(
        go.Scatter(x=(series["start_ns"] - t0) / 1e6, y=series["utilization"], mode="lines", line_shape="hv")
    )
    fig.update_layout(
        xaxis_title="time since first GPU activity (ms)", yaxis_title="utilization", yaxis_range=[0, 1.05]
    )
    return _layout(fig, f"GPU utilization over time, GPU {device.device_id}")
