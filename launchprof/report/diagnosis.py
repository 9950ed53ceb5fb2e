"""The diagnosis section of the report: verdict and recommendation card, per-step chart,
kernel vs launch-call durations, findings table and conversion code.

Draws only: every number comes from :mod:`launchprof.analysis.diagnosis.diagnose` and the finished
result (:class:`~launchprof.analysis.result.Shown`); trace strings reach the page through
jinja2 autoescaping or escaped figure JSON.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.diagnosis.diagnose import Diagnosis
from launchprof.analysis.result import AnalysisResult
from launchprof.report import snippets
from launchprof.report.html import EmbeddedFigure, embed, render
from launchprof.report.plainfig import MODEBAR_PX, Figure, bar, scatter, titled
from launchprof.report.schema import Headline
from launchprof.text import bin_label, window_text

MAX_STEP_BARS = 1_000


def _layout(fig: Figure, title: str, height: int = 340) -> Figure:
    fig.update_layout(
        **titled(title, left=60, right=20, top=20, bottom=40), height=height + MODEBAR_PX, template="plotly_white"
    )
    return fig


def per_step_figure(d: Diagnosis) -> tuple[Figure, int, int]:
    """Stacked bars per step (us): GPU busy, waits by cause, other idle. Returns the
    figure, the steps drawn and the steps in all (evenly spaced when more than
    MAX_STEP_BARS)."""
    t = d.per_step.loc[d.per_step["period_ns"].notna()]
    total = len(t)
    width = 1.0
    if total > MAX_STEP_BARS:
        t = t.iloc[np.linspace(0, total - 1, MAX_STEP_BARS).astype(int)]
        width = float(t["step"].iloc[-1] - t["step"].iloc[0]) / (MAX_STEP_BARS - 1)  # bars touch
    fig = Figure()
    for col, label, color in (
        ("busy_ns", "GPU busy", "#2b7bba"),
        ("launch_wait_ns", "waiting for launches", "#e8842e"),
        ("sync_wait_ns", "waiting after a sync", "#c23b22"),
        ("host_work_wait_ns", "waiting for host work", "#8c564b"),
        ("other_idle_ns", "other idle", "#bbbbbb"),
    ):
        fig.add_trace(
            bar(
                x=t["step"].to_numpy(),
                y=(t[col] / 1e3).to_numpy(),
                name=label,
                marker=dict(color=color, line=dict(width=0)),
                width=width,
            )
        )
    p50 = d.figures.get("period_p50_ns")
    top = 3 * p50 / 1e3 if p50 else None  # warm-up steps can be 100x a steady one: keep the steady ones readable
    period_us = (t["period_ns"] / 1e3).to_numpy()
    warm = t["warmup"].to_numpy(dtype=bool)
    cut = period_us > top if top else np.zeros(len(t), dtype=bool)
    for mask, name, symbol in (
        (warm, "warm-up step", "x"),
        (cut & ~warm, "step cut off by the axis", "triangle-up"),
    ):
        if not mask.any():
            continue
        # A value above the axis is drawn at its top edge and says its length: never off the chart.
        y = np.minimum(period_us[mask], 0.97 * top) if top else period_us[mask]
        fig.add_trace(
            scatter(
                x=t["step"].to_numpy()[mask],
                y=y,
                mode="markers",
                name=name,
                marker=dict(symbol=symbol, color="black", size=9),
                text=[f"{v:,.1f} µs" for v in period_us[mask]],
                hovertemplate="step %{x}: %{text}<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack", xaxis=dict(title=dict(text="step")), yaxis=dict(title=dict(text="µs per step")), bargap=0
    )
    if top:
        fig.update_layout(yaxis=dict(range=[0, top]))
    return _layout(fig, "Per step: GPU busy vs idle, by cause"), len(t), total


def durations_figure(histogram: pd.DataFrame) -> Figure:
    """Overlaid histograms of kernel and launch-call durations (log-spaced bins:
    :attr:`~launchprof.analysis.result.Shown.durations`), drawn from the first to the last
    bin that holds a duration (one empty bin either side)."""
    h = histogram
    filled = np.flatnonzero((h["kernels"] + h["launch_calls"]).to_numpy() > 0)
    if len(filled):
        h = h.iloc[max(filled[0] - 1, 0) : filled[-1] + 2]
    labels = [bin_label(lo) for lo in h["low_ns"]]
    fig = Figure()
    fig.add_trace(bar(x=labels, y=h["kernels"].to_numpy(), name="kernel duration (GPU)", marker=dict(color="#2b7bba")))
    fig.add_trace(
        bar(x=labels, y=h["launch_calls"].to_numpy(), name="launch call duration (CPU)", marker=dict(color="#e8842e"))
    )
    fig.update_layout(
        barmode="overlay",
        xaxis=dict(title=dict(text="duration, bin start (5 bins a decade)"), type="category"),
        yaxis=dict(title=dict(text="count")),
        legend=dict(orientation="h", y=-0.3),
    )
    fig.update_traces(opacity=0.7)
    return _layout(fig, "Kernel duration vs launch-call duration (steady per-launch kernels)", height=360)


def nvtx_steps_figure(table: pd.DataFrame, name: str) -> Figure:
    """Bars of each NVTX step range's duration (µs), for a trace without GPU work
    (:class:`~launchprof.analysis.nvtx_steps.NvtxSteps` ``table``)."""
    t = table
    if len(t) > MAX_STEP_BARS:
        t = t.iloc[np.linspace(0, len(t) - 1, MAX_STEP_BARS).astype(int)]
    fig = Figure()
    fig.add_trace(
        bar(
            x=t["step"].to_numpy(),
            y=(t["duration_ns"] / 1e3).to_numpy(),
            name=f"'{name}' range",
            marker=dict(color="#2b7bba", line=dict(width=0)),
        )
    )
    fig.update_layout(
        xaxis=dict(title=dict(text="step")), yaxis=dict(title=dict(text="µs per step (host)")), bargap=0.1
    )
    return _layout(fig, f"Per step: duration of each NVTX '{name}' range")


def render_diagnosis(analysis: AnalysisResult, head: Headline | None = None) -> str:
    """The HTML of the diagnosis section ("" when the analysis has no diagnosis) of a
    finished ``analysis`` (its reasons: :attr:`~launchprof.analysis.result.Shown.reasons`,
    with several ranks the rank the verdict judged). ``head``: the summary's ``headline``
    (:func:`launchprof.analysis.headline.headline`): what applies - no prediction,
    break-even or conversion code for steps that already replay graphs built once, no
    GPU figures without GPU work."""
    d, r = analysis.diagnosis, analysis.recommendation
    if d is None or r is None:
        return ""
    shown = analysis.outputs()
    figs: list[EmbeddedFigure] = []
    if len(d.per_step):
        fig, drawn, total = per_step_figure(d)
        caption = (
            "Each bar is one step's period: GPU busy time, then idle time by what the GPU waited for "
            "(y axis cut at 3x the steady median period; warm-up steps are marked x, longer steps a triangle "
            "at the top edge: hover for their length)."
        )
        if drawn < total:
            caption += f" {drawn} of {total} steps drawn, evenly spaced."
        figs.append(embed(fig, caption))
    if len(d.durations):
        figs.append(
            embed(
                durations_figure(shown.durations),
                "When most kernels are shorter than the call that launches them, the GPU outruns the CPU.",
            )
        )
    nvtx_fig = None
    if d.verdict == "no-gpu-work":
        found = shown.host_steps
        if found is not None and len(found.table):
            nvtx_fig = embed(
                nvtx_steps_figure(found.table, found.name),
                "Each bar is one step range's length on the host (its NVTX push to pop).",
            )
    settled = head is not None and head.graphs and not head.rebuilt  # graphs built once: nothing to convert
    code = [] if settled else snippets.choose(d, r, shown.skip_causes)
    return render(
        "diagnosis.html.j2",
        d=d,
        r=r,
        head=head,
        settled=settled,
        reasons=analysis.outputs().reasons,
        steps=analysis.found_steps,
        figures=figs,
        nvtx_fig=nvtx_fig,
        code=code,
        window=_window(analysis),
    )


def _window(analysis: AnalysisResult) -> str | None:
    """``START-END`` seconds of the time range the trace was read in (``--time-range``), or None."""
    window = analysis.trace.window
    return None if window is None else window_text(window)


CARD_STYLE = """<style>
.launchprof-card { font-family: system-ui, sans-serif; line-height: 1.4; max-width: 1100px; color: #222; }
.launchprof-card .card { border: 2px solid #888; border-radius: 6px; padding: 0.8em 1.2em; margin: 0.5em 0; }
.launchprof-card .vline { font-size: 1.3em; margin: 0.2em 0; }
.launchprof-card .glance { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 0.6em; }
.launchprof-card .fig { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 0.8em; background: #fafafa; }
.launchprof-card .fig .v { font-size: 1.5em; font-weight: 600; }
.launchprof-card .fig .k, .launchprof-card .small { color: #555; font-size: 0.9em; }
.launchprof-card table { border-collapse: collapse; }
.launchprof-card th, .launchprof-card td { border: 1px solid #ccc; padding: 2px 6px; }
</style>"""


def render_card(analysis: AnalysisResult, summary: Any) -> str:
    """The report card alone (verdict, steady figures, prediction, findings; no charts or
    code), with its own styles: the HTML a notebook shows for an analysis."""
    d, r = analysis.diagnosis, analysis.recommendation
    if d is None or r is None:
        return '<div class="launchprof-card"><p>No diagnosis.</p></div>'
    head = summary.headline
    body = render(
        "diagnosis.html.j2",
        d=d,
        r=r,
        head=head,
        settled=head is not None and head.graphs and not head.rebuilt,
        reasons=analysis.outputs().reasons,
        steps=analysis.found_steps,
        figures=[],
        nvtx_fig=None,
        code=[],
        window=_window(analysis),
    )
    return f'{CARD_STYLE}<div class="launchprof-card">{body}</div>'
