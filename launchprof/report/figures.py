"""The plotly figures of report.html and combined.html, built as plain data
(:mod:`launchprof.report.plainfig`: the same JSON as plotly's figure objects, without
building them): report.html's of an Analysis, combined.html's of the ranks of many traces
(compare.html's: :mod:`launchprof.report.compare_figures`).
Draws only: every number shown was computed in :mod:`launchprof.analysis`. Trace
strings go into figure JSON, which :mod:`launchprof.report.html` embeds escaped; on the
report page, strings plotly itself renders as pseudo-HTML (hover text) are HTML-escaped
here as well."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from launchprof.analysis import Analysis, DeviceAnalysis
from launchprof.analysis.result import UTILIZATION_BINS, AnalysisResult
from launchprof.analysis.timeline.launches import GRAPH_LAUNCH_CALLS, KERNEL_LAUNCH_CALLS
from launchprof.report.html import EmbeddedFigure, embed
from launchprof.report.plainfig import MODEBAR_PX, Figure, bar, heatmap, scatter, titled
from launchprof.text import duration_label, fmt_ms
from launchprof.trace.model import text

if TYPE_CHECKING:  # types only: report.html's figures need none of these modules
    from launchprof.analysis.ranks import CrossRank

TIMELINE_WINDOW_NS = 2_000_000
MAX_TIMELINE_BARS = 4_000

# One colour per kind of bar on the report page (colour-blind safe "tab10" picks).
COLORS = {
    "kernel": "#1f77b4",
    "memcpy": "#2ca02c",
    "memset": "#9467bd",
    "graph": "#17becf",
    "launch call": "#d62728",
    "other CUDA API": "#bbbbbb",
    "host-wait gap": "rgba(214, 39, 40, 0.35)",
    "other gap": "rgba(127, 127, 127, 0.45)",
}
_LAUNCH_CALLS = KERNEL_LAUNCH_CALLS | GRAPH_LAUNCH_CALLS


def _layout(fig: Figure, title: str, height: int = 320, legend: bool = False) -> Figure:
    fig.update_layout(
        showlegend=legend,
        **titled(title, left=10, right=20, top=50 if legend else 20, bottom=45),
        height=height + MODEBAR_PX,
        template="plotly_white",
        font=dict(family="system-ui, sans-serif", size=12),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    )
    fig.update_layout(yaxis=dict(automargin=True))
    return fig


def timeline_window(device: DeviceAnalysis, window_ns: int = TIMELINE_WINDOW_NS) -> tuple[int, int]:
    """A representative window: ``window_ns`` long, starting at the median GPU activity
    (by count, not by time), so that it falls where most of the work is (the steady
    state) rather than in a long start-up pause in the middle of the span."""
    starts = device.activity["start"].to_numpy()
    if not len(starts):
        return device.figures.start_ns, device.figures.start_ns + window_ns
    lo = int(np.sort(starts)[len(starts) // 2])
    return lo, lo + window_ns


# params: one trace of plotly bars: the figure, its lane, the bars' columns and hover texts
def _bars(fig: Figure, name: str, lane: list[str], start: pd.Series, end: pd.Series, t0: int, hover: list[str]) -> None:
    """Horizontal bars [start, end) (ns) drawn in us from ``t0``; ``hover`` is escaped HTML."""
    fig.add_trace(
        bar(
            orientation="h",
            base=((start - t0) / 1e3).to_numpy(),
            x=((end - start) / 1e3).to_numpy(),
            y=lane,
            name=name,
            marker=dict(color=COLORS[name], line=dict(width=0)),
            customdata=hover,
            textposition="none",
            hovertemplate="%{customdata}<br>start %{base:.2f} µs, %{x:.2f} µs<extra>" + name + "</extra>",
        )
    )


def timeline(analysis: Analysis, device: DeviceAnalysis, window: tuple[int, int]) -> tuple[Figure, bool]:
    """Lanes inside ``window``: the CUDA API calls of each CPU thread (launch calls
    apart), the device's idle gaps (host-wait or not, as the analysis classed them) and
    the activity of each GPU stream.

    Returns the figure and whether bars were dropped to stay under MAX_TIMELINE_BARS.
    """
    lo, hi = window
    act, api, gaps, downsampled = _window_rows(analysis, device, window)
    several_pids = device.activity["pid"].nunique() > 1
    fig = Figure()
    cpu_lanes = _api_bars(fig, api, lo, several_pids)
    gap_lane = _gap_bars(fig, gaps, device, window)
    stream_lanes = _activity_bars(fig, analysis, act, device, lo, several_pids)
    order = sorted(set(cpu_lanes)) + [gap_lane] + sorted(set(stream_lanes), key=_stream_key)
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        hovermode="closest",
        xaxis=dict(title=dict(text="time since the window start (µs)"), range=[0, (hi - lo) / 1e3], showgrid=True),
        yaxis=dict(categoryorder="array", categoryarray=order, autorange="reversed"),
    )
    title = f"Timeline of a {duration_label(hi - lo)} window: CPU API calls, GPU idle gaps, GPU streams"
    return _layout(fig, title, 150 + 42 * len(order), legend=True), downsampled


def _window_rows(
    analysis: Analysis, device: DeviceAnalysis, window: tuple[int, int]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, bool]:
    """The device's activity, the CUDA API calls of its processes and its idle gaps that
    overlap ``window``, cut to MAX_TIMELINE_BARS in all (the earliest of each: half
    activity, a quarter each API calls and gaps) when there are more; and whether they were."""
    lo, hi = window
    act = device.activity
    act = act.loc[(act["end"] > lo) & (act["start"] < hi)]
    api = analysis.trace.api
    api = api.loc[(api["end"] > lo) & (api["start"] < hi) & api["pid"].isin(act["pid"].unique())]
    gaps = device.figures.gaps
    gaps = gaps.loc[(gaps["end"] > lo) & (gaps["start"] < hi)]
    downsampled = len(act) + len(api) + len(gaps) > MAX_TIMELINE_BARS
    if downsampled:
        act = act.head(MAX_TIMELINE_BARS // 2)
        api = api.head(MAX_TIMELINE_BARS // 4)
        gaps = gaps.head(MAX_TIMELINE_BARS // 4)
    return act, api, gaps, downsampled


def _api_bars(fig: Figure, api: pd.DataFrame, t0: int, several_pids: bool) -> list[str]:
    """Bars of the CUDA API calls ``api``, launch calls apart, one lane per CPU thread;
    returns the lane of each call."""
    cpu_lanes = [
        f"CPU pid {p} tid {t & 0xFFFFFF}" if several_pids else f"CPU thread {t & 0xFFFFFF}"
        for p, t in zip(api["pid"], api["tid"], strict=False)
    ]
    call = text(api["call"])
    is_launch = call.isin(_LAUNCH_CALLS).to_numpy()
    for label, mask in (("other CUDA API", ~is_launch), ("launch call", is_launch)):
        if mask.any():
            rows = api.loc[mask]
            names = [html.escape(c) for c in call[mask]]
            lanes = [lane for lane, m in zip(cpu_lanes, mask, strict=False) if m]
            _bars(fig, label, lanes, rows["start"], rows["end"], t0, names)
    return cpu_lanes


def _gap_bars(fig: Figure, gaps: pd.DataFrame, device: DeviceAnalysis, window: tuple[int, int]) -> str:
    """Bars of the idle ``gaps`` (host-wait or other), cut to ``window``, in one lane; returns the lane."""
    lo, hi = window
    gap_lane = f"GPU {device.device_id} idle"
    for label, flag in (("host-wait gap", True), ("other gap", False)):
        rows = gaps.loc[gaps["host_wait"] == flag]
        if len(rows):
            hover = [f"idle {(e - s) / 1e3:,.2f} µs" for s, e in zip(rows["start"], rows["end"], strict=False)]
            lanes = [gap_lane] * len(rows)
            _bars(fig, label, lanes, rows["start"].clip(lower=lo), rows["end"].clip(upper=hi), lo, hover)
    return gap_lane


def _activity_bars(
    fig: Figure, analysis: Analysis, act: pd.DataFrame, device: DeviceAnalysis, t0: int, several_pids: bool
) -> list[str]:
    """Bars of the GPU activity ``act`` by kind, one lane per stream (kernels hovered by
    name); returns the lane of each row."""
    kinds = text(act["kind"])
    lanes = [
        f"GPU {device.device_id} stream {s}" + (f" (pid {p})" if several_pids else "")
        for p, s in zip(act["pid"], act["stream_id"], strict=False)
    ]
    for kind in ("memcpy", "memset", "graph", "kernel"):
        mask = (kinds == kind).to_numpy()
        if not mask.any():
            continue
        rows = act.loc[mask]
        hover = _kernel_names(analysis, rows) if kind == "kernel" else [kind] * len(rows)
        kind_lanes = [lane for lane, m in zip(lanes, mask, strict=False) if m]
        _bars(fig, kind, kind_lanes, rows["start"], rows["end"], t0, hover)
    return lanes


def _stream_key(lane: str) -> tuple[int, str]:
    parts = lane.split()
    return (int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0, lane)


def _kernel_names(analysis: Analysis, rows: pd.DataFrame) -> list[str]:
    """Kernel short names (escaped) of activity ``rows``, found by (pid, correlation id,
    start) in the trace's kernel table."""
    k = analysis.trace.kernels
    if len(rows):  # only kernels starting inside the window can match (the key holds the start)
        k = k.loc[(k["start"] >= rows["start"].min()) & (k["start"] <= rows["start"].max())]
    keys = pd.MultiIndex.from_arrays([k["pid"], k["correlation_id"], k["start"]])
    name_ids = pd.Series(k["name_id"].to_numpy(), index=keys)
    name_ids = name_ids[~name_ids.index.duplicated()]
    wanted = pd.MultiIndex.from_arrays([rows["pid"], rows["correlation_id"], rows["start"]])
    found = name_ids.reindex(wanted)
    return [html.escape(analysis.trace.string(int(i))) if pd.notna(i) else "kernel" for i in found.to_numpy()]


def bubble_histogram(device: DeviceAnalysis) -> Figure:
    """Bar chart of the device's bubble-length histogram (from the analysis), from the
    threshold bin to the last non-empty bin, with the count on each bar."""
    hist = device.figures.bubbles.histogram
    counts = [c for _, _, c in hist]
    last = max((i for i, c in enumerate(counts) if c), default=0)
    shown = hist[: max(last + 1, 1)]
    labels = [
        f"≥ {duration_label(lo)}" if hi is None else f"{duration_label(lo)} – {duration_label(hi)}"
        for lo, hi, _ in shown
    ]
    fig = Figure(
        [
            bar(
                x=labels,
                y=[c for _, _, c in shown],
                text=[f"{c:,}" if c else "" for _, _, c in shown],
                textposition="outside",
                cliponaxis=False,
                marker=dict(color="#7f7f7f"),
                hovertemplate="%{x}: %{y:,} bubbles<extra></extra>",
            )
        ]
    )
    fig.update_layout(
        xaxis=dict(title=dict(text="bubble length"), type="category"),
        yaxis=dict(title=dict(text="bubbles"), rangemode="tozero"),
    )
    b = device.figures.bubbles
    return _layout(
        fig,
        f"Bubble lengths, GPU {device.device_id} ({b.count:,} bubbles of at least {duration_label(b.threshold_ns)})",
    )


def utilization_over_time(
    device: DeviceAnalysis, series: pd.DataFrame, window: tuple[int, int] | None = None
) -> Figure:
    """Busy share per time bin (``series``: :attr:`~launchprof.analysis.result.Shown.utilization`
    of ``device``), with the timeline's ``window`` shaded when given."""
    t0 = device.figures.start_ns
    fig = Figure(
        [
            scatter(
                x=((series["start_ns"] - t0) / 1e6).to_numpy(),
                y=series["utilization"].to_numpy(),
                mode="lines",
                line=dict(shape="hv", color=COLORS["kernel"], width=1.5),
                fill="tozeroy",
                hovertemplate="%{x:.2f} ms: %{y:.1%} busy<extra></extra>",
                name="utilization",
            )
        ]
    )
    if window is not None:
        _window_band(fig, (window[0] - t0) / 1e6, (window[1] - t0) / 1e6)
    fig.update_layout(
        xaxis=dict(title=dict(text="time since the first GPU activity (ms)")),
        yaxis=dict(title=dict(text="GPU busy"), range=[0, 1.05], tickformat=".0%"),
    )
    return _layout(fig, f"GPU utilization over time, GPU {device.device_id} ({UTILIZATION_BINS} equal time bins)")


def _window_band(fig: Figure, x0: float, x1: float) -> None:
    """Shade [x0, x1] (x axis units) and label it "timeline window": what plotly's
    ``add_vrect(annotation_position="top left")`` writes, a rectangle over the whole y
    domain and its label at the top left corner."""
    fig.update_layout(
        shapes=[
            dict(
                type="rect",
                x0=x0,
                x1=x1,
                xref="x",
                y0=0,
                y1=1,
                yref="y domain",
                fillcolor="#ff7f0e",
                opacity=0.25,
                line=dict(width=0),
            )
        ],
        annotations=[
            dict(
                text="timeline window",
                showarrow=False,
                x=x0,
                xanchor="left",
                xref="x",
                y=1,
                yanchor="top",
                yref="y domain",
            )
        ],
    )


def embedded_device_figures(analysis: AnalysisResult) -> list[EmbeddedFigure]:
    """The report page's figures of each device of a finished ``analysis``, captioned and
    serialised: the timeline of a representative window, the bubble lengths, the
    utilization over time."""
    utilization = analysis.outputs().utilization
    embedded = []
    for device in analysis.devices:
        window = timeline_window(device)
        fig, downsampled = timeline(analysis, device, window)
        caption = (
            f"GPU {device.device_id}: timeline of a representative window "
            f"({fmt_ms(window[1] - window[0])} starting {fmt_ms(window[0] - device.figures.start_ns)} "
            f"after the first GPU activity, at the median GPU activity). Red CPU bars are launch calls, grey ones "
            "other CUDA API calls; the idle lane marks each GPU idle gap, red when the GPU waited for the CPU "
            "(host-wait), grey otherwise. Drag to zoom, double-click to reset, hover a bar for its name."
        )
        if downsampled:
            caption += (
                f" Downsampled: only the earliest {MAX_TIMELINE_BARS // 2:,} GPU activities, "
                f"{MAX_TIMELINE_BARS // 4:,} API calls and {MAX_TIMELINE_BARS // 4:,} idle gaps "
                "of the window are drawn."
            )
        embedded.append(embed(fig, caption))
        embedded.append(embed(bubble_histogram(device), f"GPU {device.device_id}: bubble lengths."))
        embedded.append(
            embed(
                utilization_over_time(device, utilization[device.device_id], window),
                f"GPU {device.device_id}: busy share of {UTILIZATION_BINS} equal time bins over the span; "
                "the shaded band is the timeline's window.",
            )
        )
    return embedded


# combined.html: the ranks of many traces.

HEATMAP_MAX_STEPS = 1000
# plotly's "RdBu_r" colour scale, as plotly writes a named scale into a figure.
RDBU_R_COLORSCALE = [
    [0.0, "rgb(5,48,97)"],
    [0.1, "rgb(33,102,172)"],
    [0.2, "rgb(67,147,195)"],
    [0.3, "rgb(146,197,222)"],
    [0.4, "rgb(209,229,240)"],
    [0.5, "rgb(247,247,247)"],
    [0.6, "rgb(253,219,199)"],
    [0.7, "rgb(244,165,130)"],
    [0.8, "rgb(214,96,77)"],
    [0.9, "rgb(178,24,43)"],
    [1.0, "rgb(103,0,31)"],
]


def work_heatmap(view: CrossRank) -> tuple[Figure, bool]:
    """Heatmap of each rank's work per aligned step (``work_ns`` of the rank's
    ``per_step``) relative to the step's median across ranks (``median_work_ns`` of
    ``view.per_step``; 1 = median, blank where a rank has no such step or the median is
    0); the first :data:`HEATMAP_MAX_STEPS` aligned steps. Returns the figure and whether
    steps were left out."""
    steps = view.per_step["step"].to_numpy()[:HEATMAP_MAX_STEPS]
    median = view.per_step["median_work_ns"].to_numpy()[:HEATMAP_MAX_STEPS]
    z = np.full((len(view.ranks), len(steps)), np.nan)
    for i, r in enumerate(view.ranks):
        t = r.per_step
        if len(t) == 0:
            continue
        work = t.set_index("step")["work_ns"].reindex(steps).to_numpy(dtype=float)
        z[i] = np.divide(work, median, out=np.full(len(steps), np.nan), where=median > 0)
    fig = Figure(
        [
            heatmap(
                z=z,
                x=steps,
                y=[f"{i}: {r.label}" for i, r in enumerate(view.ranks)],
                colorscale=RDBU_R_COLORSCALE,
                zmid=1.0,
                colorbar=dict(title=dict(text="work / median")),
                hovertemplate="step %{x}<br>%{y}<br>%{z:.2f}x median<extra></extra>",
            )
        ]
    )
    fig.update_layout(
        **titled("Work per step relative to the median across ranks", left=200, right=20, top=20, bottom=40),
        xaxis=dict(title=dict(text="step")),
        yaxis=dict(autorange="reversed"),
        height=max(240, 40 + 22 * len(view.ranks)) + MODEBAR_PX,
        template="plotly_white",
    )
    return fig, len(view.per_step) > HEATMAP_MAX_STEPS
