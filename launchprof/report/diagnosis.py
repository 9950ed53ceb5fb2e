"""The diagnosis section of the report: verdict and recommendation card, per-step chart,
kernel vs launch-call durations, findings table and conversion code.

Draws only: every number comes from :mod:`launchprof.analysis.diagnose` (and the step
table); trace strings reach the page through jinja2 autoescaping or escaped figure JSON.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from launchprof.analysis import Analysis
from launchprof.analysis.diagnose import Diagnosis, Recommendation, duration_histogram
from launchprof.report import snippets
from launchprof.report.html import EmbeddedFigure, embed, render
from launchprof.report.plainfig import Figure, bar, scatter

MAX_STEP_BARS = 1_000


def _layout(fig: Figure, title: str, height: int = 340) -> Figure:
    fig.update_layout(
        title=dict(text=title), height=height, margin=dict(l=60, r=20, t=40, b=40), template="plotly_white"
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
    warm = t.loc[t["warmup"]]
    if len(warm):
        fig.add_trace(
            scatter(
                x=warm["step"].to_numpy(),
                y=(warm["period_ns"] / 1e3).to_numpy(),
                mode="markers",
                name="warm-up step",
                marker=dict(symbol="x", color="black"),
            )
        )
    fig.update_layout(
        barmode="stack", xaxis=dict(title=dict(text="step")), yaxis=dict(title=dict(text="us per step")), bargap=0
    )
    p50 = d.figures.get("period_p50_ns")
    if p50:  # warm-up steps can be 100x a steady one: keep the steady steps readable
        fig.update_layout(yaxis=dict(range=[0, 3 * p50 / 1e3]))
    return _layout(fig, "Per step: GPU busy vs idle, by cause"), len(t), total


def durations_figure(d: Diagnosis) -> Figure:
    """Overlaid histograms of kernel and launch-call durations (log-spaced bins)."""
    h = duration_histogram(d.durations)
    labels = [f"{lo / 1e3:,.0f}" if lo >= 100_000 else f"{lo / 1e3:.3g}" for lo in h["low_ns"]]
    fig = Figure()
    fig.add_trace(bar(x=labels, y=h["kernels"], name="kernel duration (GPU)", marker=dict(color="#2b7bba")))
    fig.add_trace(bar(x=labels, y=h["launch_calls"], name="launch call duration (CPU)", marker=dict(color="#e8842e")))
    fig.update_layout(
        barmode="overlay",
        xaxis=dict(title=dict(text="duration, bin start (us, 5 bins a decade)")),
        yaxis=dict(title=dict(text="count")),
    )
    fig.update_traces(opacity=0.7)
    return _layout(fig, "Kernel duration vs launch-call duration (steady per-launch kernels)")


def render_diagnosis(analysis: Analysis, reasons: Sequence[str] | None = None) -> str:
    """The HTML of the diagnosis section ("" when the analysis has no diagnosis).
    ``reasons``: the verdict's reasons as the summary gives them (with several ranks it
    adds which rank the verdict judged: :func:`~launchprof.report.summary.rank_scope`);
    default the diagnosis's own."""
    d = analysis.extra.get("diagnosis")
    r = analysis.extra.get("recommendation")
    if not isinstance(d, Diagnosis) or not isinstance(r, Recommendation):
        return ""
    figs: list[EmbeddedFigure] = []
    if len(d.per_step):
        fig, drawn, total = per_step_figure(d)
        caption = (
            "Each bar is one step's period: GPU busy time, then idle time by what the GPU waited for "
            "(y axis cut at 3x the steady median period; warm-up steps are marked x)."
        )
        if drawn < total:
            caption += f" {drawn} of {total} steps drawn, evenly spaced."
        figs.append(embed(fig, caption))
    if len(d.durations):
        figs.append(
            embed(
                durations_figure(d),
                "When most kernels are shorter than the call that launches them, the GPU outruns the CPU.",
            )
        )
    steps = analysis.extra.get("steps")
    code = snippets.choose(d, r)
    return render(
        "diagnosis.html.j2",
        d=d,
        r=r,
        reasons=list(reasons) if reasons is not None else list(d.reasons),
        steps=steps,
        figures=figs,
        code=code,
    )
