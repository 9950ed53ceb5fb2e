"""The plotly figures of compare.html, built as plain data (:mod:`launchprof.report.plainfig`:
the same JSON as plotly's figure objects, without building them): the steady-step medians
of both sides of a comparison as grouped bars, and one steady step of each side on one
time scale, BEFORE above AFTER. Draws only: every number shown was computed in
:mod:`launchprof.analysis`; names from the traces are HTML-escaped, as plotly reads its
hover and tick text as HTML of its own.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import pandas as pd

from launchprof.report.plainfig import MODEBAR_PX, Figure, bar, titled

if TYPE_CHECKING:  # types only
    from launchprof.analysis.comparison.side import SideData
    from launchprof.analysis.comparison.verify import Comparison
    from launchprof.report.compare_schema import CompareDoc

# The colours of compare's step timelines (their own palette since compare.html began:
# kept, so that the page stays the same).
STEP_KIND_COLORS = {
    "kernel": "#1f77b4",
    "memcpy": "#2ca02c",
    "memset": "#17becf",
    "graph": "#9467bd",
    "launch call": "#ff7f0e",
    "graph launch": "#d62728",
    "graph instantiate": "#e377c2",
    "graph update": "#bcbd22",
    "capture begin/end": "#7f7f7f",
    "sync call": "#8c564b",
    "other CUDA API": "#b0b0b0",
}
_SIDE_BARS = (
    ("step period", "period_p50_ns"),
    ("GPU busy", "busy_p50_ns"),
    ("bubbles", "bubble_p50_ns"),
    ("host-wait idle", "host_wait_p50_ns"),
    ("CPU time in CUDA API", "api_p50_ns"),
    ("CPU step span", "cpu_p50_ns"),
)


def side_bars(doc: CompareDoc) -> Figure:
    """Grouped bars of the steady-step medians of both sides of a comparison (the
    ``*_p50_ns`` of compare.json's ``before`` and ``after``, drawn in µs; a missing one
    as "-")."""
    labels = [label for label, _ in _SIDE_BARS]
    fig = Figure()
    for name, side, color in (("BEFORE", doc.before, "#9e9e9e"), ("AFTER", doc.after, "#2b7bba")):
        values = [getattr(side, key) for _, key in _SIDE_BARS]
        us = [None if v is None else v / 1e3 for v in values]
        fig.add_trace(
            bar(
                x=labels,
                y=us,
                name=name,
                marker=dict(color=color),
                text=["-" if v is None else f"{v:,.1f}" for v in us],
                textposition="outside",
                hovertemplate="%{x}: %{y:,.2f} µs<extra>" + name + "</extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        yaxis=dict(title=dict(text="median per steady step (µs)")),
        height=380 + MODEBAR_PX,
        **titled("Per steady step, median", left=60, right=20, top=40, bottom=40),
        template="plotly_white",
    )
    return fig


def step_timelines(c: Comparison) -> Figure | None:
    """One steady step of each side (its ``sample``: the rows of step_timeline.csv, ns
    from the step's first event), BEFORE above AFTER on one time scale: a lane per GPU
    stream and CPU thread, a bar per row coloured by kind. None when neither side has a
    sample."""
    sides = [("BEFORE", c.before), ("AFTER", c.after)]
    if all(s.sample is None for _, s in sides):
        return None
    fig = Figure(layout=two_rows_layout([_step_title(label, s) for label, s in sides]))
    seen: set[str] = set()
    end = 0.0
    for row, (_, s) in enumerate(sides, start=1):
        if s.sample is None or s.sample.empty:
            continue
        end = max(end, float(s.sample["end_ns"].max()))
        _step_bars(fig, s.sample, row, seen)
    fig.update_layout(
        barmode="overlay",
        height=460 + MODEBAR_PX,
        margin=dict(l=140, r=20, t=50 + MODEBAR_PX, b=50),  # the row titles below plotly's mode bar
        template="plotly_white",
        legend=dict(orientation="h", y=-0.15),
    )
    x_range = [0, end / 1e3 * 1.02]
    fig.update_layout(
        xaxis=dict(range=x_range),
        xaxis2=dict(range=x_range, title=dict(text="time from the step's first event (µs), same scale for both")),
    )
    return fig


def _step_title(label: str, side: SideData) -> str:
    if side.sample is None:
        return f"{label}: no step timeline available"
    shift = int(side.sample["shift_ns"].max()) if len(side.sample) else 0
    # The GPU ran the step's work well after the CPU launched it: its rows are moved left
    # (said on a line of its own: one line was cut at 800 px).
    extra = (
        f";<br>the GPU ran it {shift / 1e3:,.1f} µs after the CPU (queued ahead): its rows moved left" if shift else ""
    )
    return f"{label}: step {side.sample_step}{extra}"


def two_rows_layout(titles: list[str]) -> dict[str, Any]:
    """The layout of plotly's ``make_subplots(rows=2, cols=1, shared_xaxes=True,
    subplot_titles=titles, vertical_spacing=0.12)``: two rows of 0.44 of the height each,
    the x axes matched, a title above each row (at the left, not centred: a long one was
    cut at both ends at 800 px)."""
    return dict(
        xaxis=dict(anchor="y", domain=[0.0, 1.0], matches="x2", showticklabels=False),
        xaxis2=dict(anchor="y2", domain=[0.0, 1.0]),
        yaxis=dict(anchor="x", domain=[0.56, 1.0]),
        yaxis2=dict(anchor="x2", domain=[0.0, 0.44]),
        annotations=[
            dict(
                font=dict(size=14),
                showarrow=False,
                text=title,
                x=0,
                xanchor="left",
                align="left",
                xref="paper",
                y=y,
                yanchor="bottom",
                yref="paper",
            )
            for title, y in zip(titles, (1.0, 0.44), strict=True)
        ],
    )


def _step_bars(fig: Figure, sample: pd.DataFrame, row: int, seen: set[str]) -> None:
    """The bars of one side's step ``sample`` in subplot ``row`` (1 or 2), one trace per
    kind; a kind's legend entry only once (``seen``: the kinds already drawn)."""
    suffix = "" if row == 1 else str(row)
    # Names and lanes from the trace are escaped: plotly reads its hover and tick text as
    # HTML of its own (a kernel named '<a href=...>' was a live link on compare.html).
    sample = sample.assign(
        name=sample["name"].astype(str).map(html.escape), lane=sample["lane"].astype(str).map(html.escape)
    )
    lanes = sorted(sample["lane"].unique(), key=lambda lane: (not str(lane).startswith("GPU"), str(lane)))
    # Bottom to top: GPU lanes below, CPU threads above (as nsys draws them).
    fig.update_layout(**{f"yaxis{suffix}": dict(categoryorder="array", categoryarray=lanes)})
    for kind, rows in sample.groupby("kind", sort=True):
        fig.add_trace(
            bar(
                orientation="h",
                base=rows["start_ns"] / 1e3,
                x=(rows["end_ns"] - rows["start_ns"]) / 1e3,
                y=rows["lane"],
                name=str(kind),
                legendgroup=str(kind),
                showlegend=kind not in seen,
                marker=dict(color=STEP_KIND_COLORS.get(str(kind), "#444444")),
                text=rows["name"],
                textposition="none",
                hovertemplate="%{text}<br>start %{base:,.2f} µs<br>%{x:,.2f} µs<extra>%{y}</extra>",
                xaxis=f"x{suffix}",
                yaxis=f"y{suffix}",
            )
        )
        seen.add(str(kind))
