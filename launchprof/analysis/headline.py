"""The verdict first: what the steady steps say, in the few figures a reader needs before
anything else (summary.json's ``headline``, the terminal's first lines, the report card,
the index).

Computed from the summary's own sections (``steps``, ``diagnosis``, ``recommendation``,
``nvtx_steps``), so an older summary.json gets the same headline when it is read back.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


def _num(d: Mapping[str, Any] | None, key: str) -> float | None:
    v = (d or {}).get(key)
    return float(v) if isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) else None


def replays_graphs(figures: Mapping[str, Any] | None) -> bool:
    """The steady steps already replay CUDA graphs: their median count of graph launches
    (``graph_launches_per_step_p50`` of the diagnosis' figures) is one or more. The one
    rule the verdict, the prediction, the decision, the headline and the terminal follow."""
    return (_num(figures, "graph_launches_per_step_p50") or 0) >= 1


def rebuilds_graphs(finding_kinds: Iterable[str]) -> bool:
    """The graphs are instantiated or updated about every launch: the diagnosis has the
    ``reinstantiation`` finding (:func:`launchprof.analysis.diagnosis.findings.reinstantiation`)."""
    return "reinstantiation" in set(finding_kinds)


def expected_speedup(recommendation: Mapping[str, Any] | None, diagnosis: Mapping[str, Any] | None) -> float | None:
    """The speedup a CUDA Graph conversion is expected to bring: the recommendation's
    ``expected_speedup`` when it has one, else its ``predicted_speedup``; 1.0 for a run
    that already replays graphs built once (nothing left to convert); None without a
    prediction."""
    figures = (diagnosis or {}).get("figures") or {}
    kinds = (f.get("kind") for f in (diagnosis or {}).get("findings") or [])
    if replays_graphs(figures) and not rebuilds_graphs(kinds):
        return 1.0
    for key in ("expected_speedup", "predicted_speedup"):
        value = _num(recommendation, key)
        if value is not None:
            return value
    return None


def headline(
    steps: Mapping[str, Any] | None,
    diagnosis: Mapping[str, Any] | None,
    recommendation: Mapping[str, Any] | None,
    nvtx_steps: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """summary.json's ``headline``: ``verdict``; ``scope`` (``steady steps``, or ``whole
    trace`` when no step was found); ``steady_steps``, ``warmup_steps``;
    ``period_p50_ns`` (steady step period); ``gpu_busy_ratio`` and ``host_wait_ratio``
    (0..1, sums over the steady steps / summed period); ``graphs`` (the steady steps
    already replay CUDA graphs: a graph launch a step or more) and ``rebuilt`` (and
    instantiate or update them every step); ``action`` (``convert``,
    ``fix-blockers-then-convert``, ``build-graph-once`` or ``none``);
    ``expected_speedup`` (:func:`expected_speedup`); ``break_even_iterations`` (only when
    there is something to convert); ``idle_bound_speedup`` (step period / GPU busy time
    a step: the most removing every idle gap could gain - what is left once graphs are
    in place); ``nvtx_steps`` (count and period of the NVTX step ranges of a trace
    without GPU work). None without a diagnosis.
    """
    if not diagnosis:
        return None
    figures = diagnosis.get("figures") or {}
    rec = recommendation or {}
    steps = steps or {}
    graphs = replays_graphs(figures)
    rebuilt = rebuilds_graphs(f.get("kind") for f in diagnosis.get("findings") or [])
    steady = int(_num(figures, "steady_steps") or 0)
    busy = _num(figures, "busy_ratio")
    if graphs and rebuilt:
        action = "build-graph-once"
    elif graphs or not rec.get("convert"):
        action = "none"
    elif rec.get("blockers"):
        action = "fix-blockers-then-convert"
    else:
        action = "convert"
    expected = expected_speedup(rec, diagnosis)
    return {
        "verdict": diagnosis.get("verdict"),
        "scope": "steady steps" if steady else "whole trace",
        "steady_steps": steady,
        "warmup_steps": int(_num(steps, "warmup") or 0),
        "period_p50_ns": _num(figures, "period_p50_ns"),
        "gpu_busy_ratio": busy,
        "host_wait_ratio": _num(figures, "host_wait_ratio"),
        "graphs": graphs,
        "rebuilt": rebuilt,
        "action": action,
        "expected_speedup": expected,
        "break_even_iterations": rec.get("break_even_iterations") if action != "none" else None,
        "idle_bound_speedup": (1 / busy) if busy else None,
        "nvtx_steps": None
        if not nvtx_steps
        else {k: nvtx_steps.get(k) for k in ("name", "count", "period_p50_ns", "duration_p50_ns")},
    }
