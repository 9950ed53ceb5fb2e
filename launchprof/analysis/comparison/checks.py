"""The checks of ``launchprof compare``: one :class:`Check` each, from the two sides'
figures (:class:`~launchprof.analysis.comparison.sidefigures.SideFigures`) and their runs, with its
evidence and a sentence saying what it found; :func:`launchprof.analysis.comparison.verify.verify`
runs them in the order below and decides the verdict from them.

Checks (docs/metrics.md, "Verifying a conversion"):

- ``converted``: AFTER launches at least one graph per steady step (median) and at least
  :data:`GRAPH_SHARE_MIN` of its steady steps' kernels are submitted by a graph launch
  (joined on (pid, correlation id)); BEFORE ran a smaller share of its kernels in graphs
  (by at least 0.1; without per-step tables: fewer graph launches per step).
- ``same_work``: the kernels of a steady step (name and grid/block configuration, mean
  count per steady step) agree on both sides within :data:`SAME_WORK_TOLERANCE`
  (relative, at least 0.05 kernels per step): a conversion that drops or adds kernels is suspect.
- ``faster``: speedup = median steady step period BEFORE / AFTER (of the runs without
  nsys when both sides have them, ``profile --baseline-runs``; else under nsys, with the
  estimate without nsys beside it as the headline: ``speedup_unprofiled``), with a
  :data:`CI_LEVEL` interval from a moving-block bootstrap of both medians (Kuensch 1989;
  blocks of ceil(n^(1/3)) steps, :data:`~launchprof.analysis.comparison.speedstats.BOOTSTRAP_RESAMPLES`
  resamples, seed :data:`~launchprof.analysis.comparison.speedstats.BOOTSTRAP_SEED`: deterministic;
  computed by :func:`~launchprof.analysis.comparison.verify.verify`). Passes when the interval's low
  end reaches 1 + ``min_effect`` (default 5 %). Without per-step tables (a report folder with only
  summary.json) the ratio of mean periods with a delta-method normal interval is used.
- ``bubbles``: bubble time, GPU utilization and CPU-bound ratio per steady step (ratios of
  sums over the steady steps: bubble_ns / period, busy_ns / period, host_wait_ns /
  period); passes when AFTER's bubble share and CPU-bound ratio are not higher and its
  utilization not lower than BEFORE's by more than 0.01. Evidence only: it does not
  decide the verdict.
- ``predicted``: BEFORE's predicted speedup (its graph recommendation) against the
  measured one; passes when measured / predicted >= :data:`PREDICTION_MIN_RATIO`.
  Evidence only.
- ``churn``: graph instantiations and stream captures (begin/end call pairs) per graph
  launch in AFTER's steady steps; fails above :data:`CHURN_MAX` (a steady graph loop
  instantiates and captures nothing after warm-up; re-doing it every step pays the
  instantiation each time). Exec updates are reported, never failed: they are the cheap
  way to change parameters.
- ``paid_back``: the run's step count N against the break-even N* = AFTER's measured
  instantiation time / (BEFORE period - AFTER period) (docs/metrics.md, "Amortized cost and break-even").
  Evidence only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.comparison.side import SideData
from launchprof.analysis.comparison.sidefigures import SideFigures
from launchprof.analysis.comparison.speedstats import CI_LEVEL
from launchprof.analysis.comparison.workchange import SAME_WORK_TOLERANCE, classify
from launchprof.text import fmt_pct, us_text

GRAPH_SHARE_MIN = 0.5
CHURN_MAX = 0.1
PREDICTION_MIN_RATIO = 0.8
_SLACK = 0.01

Evidence = dict[str, float | int | str | None]


@dataclass(frozen=True)
class Check:
    """One check: ``passed`` is None when it could not be evaluated (no data)."""

    name: str
    passed: bool | None
    detail: str
    evidence: Evidence = field(default_factory=dict)

    def evidence_json(self) -> dict[str, Any]:
        """``evidence`` with non-finite floats as None (JSON has no NaN)."""
        return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in self.evidence.items()}


def _config(row: pd.Series) -> str:
    return (
        f"{row['name']} <<<({row['grid_x']},{row['grid_y']},{row['grid_z']}), "
        f"({row['block_x']},{row['block_y']},{row['block_z']})>>>"
    )


def _launches(n: float) -> str:
    return f"{n:g} graph launch" if n == 1 else f"{n:g} graph launches"


def _kinds(n: int) -> str:
    return f"{n} kernel kind" if n == 1 else f"{n} kernel kinds"


def check_converted(fb: SideFigures, fa: SideFigures) -> Check:
    """The ``converted`` check (see the module docstring)."""
    glb, gla = fb.graph_launches_per_step or 0.0, fa.graph_launches_per_step or 0.0
    shb, sha = fb.graph_kernel_share, fa.graph_kernel_share
    after_graphs = gla >= 1 and (sha is None or sha >= GRAPH_SHARE_MIN)
    less_before = shb <= sha - 0.1 if shb is not None and sha is not None else glb < gla
    passed = bool(after_graphs and less_before)
    detail = (
        f"AFTER: {_launches(gla)} per step, {fmt_pct(sha)} of a step's kernels run inside graphs; "
        f"BEFORE: {_launches(glb)} per step, {fmt_pct(shb)} inside graphs."
    )
    if not after_graphs:
        detail += " AFTER does not run its steps as graphs."
    elif not less_before:
        detail += " BEFORE already ran its steps as graphs: nothing was converted between the two."
    elif sha is not None and sha < 0.9:
        detail += " Partial conversion: some of AFTER's kernels are still launched one by one."
    return Check(
        "converted",
        passed,
        detail,
        {
            "before_graph_launches_per_step": glb,
            "after_graph_launches_per_step": gla,
            "before_graph_kernel_share": shb,
            "after_graph_kernel_share": sha,
        },
    )


def _whole_graphs_only(fb: SideFigures, fa: SideFigures, evidence: Evidence) -> Check | None:
    """``same_work`` unknown (None) when a side was traced with whole-graph rows only: no
    kernels per step, graph executions per step."""
    for label, f in (("BEFORE", fb), ("AFTER", fa)):
        if not f.kernels_per_step and f.graph_execs_per_step:
            return Check(
                "same_work",
                None,
                f"{label} was traced with whole-graph rows only (nsys --cuda-graph-trace=graph): the kernels inside "
                "its graphs are not in the trace, so the work cannot be compared; record with "
                "--cuda-graph-trace=node.",
                evidence,
            )
    return None


def _same_count(kb: float | None, ka: float | None, evidence: Evidence) -> Check:
    """``same_work`` by kernels per step alone (a side without kernel names): equal within
    :data:`SAME_WORK_TOLERANCE` (at least 0.05 kernels)."""
    if kb is None or ka is None:
        return Check("same_work", None, "Kernels per step unknown on one side.", evidence)
    same = abs(kb - ka) <= max(SAME_WORK_TOLERANCE * max(kb, ka), 0.05)
    return Check(
        "same_work",
        same,
        f"{kb:g} vs {ka:g} kernels per step (kernel names not available on one side: only counts compared).",
        evidence,
    )


def check_same_work(fb: SideFigures, fa: SideFigures, kernels: pd.DataFrame) -> Check:
    """The ``same_work`` check (see the module docstring)."""
    kb, ka = fb.kernels_per_step, fa.kernels_per_step
    evidence: Evidence = {"before_kernels_per_step": kb, "after_kernels_per_step": ka}
    whole_graphs = _whole_graphs_only(fb, fa, evidence)
    if whole_graphs is not None:
        return whole_graphs
    if kernels.empty:
        return _same_count(kb, ka, evidence)
    diff = kernels.loc[kernels["differs"]]
    change = classify(kernels)
    evidence["kernel_kinds_differing"] = int(len(diff))
    evidence["work_change"] = change.kind
    evidence["changed_kernel_share"] = change.changed_kernel_share
    if diff.empty:
        return Check(
            "same_work",
            True,
            f"The same {_kinds(len(kernels))} (name and launch configuration) run per steady step on both sides, "
            f"{kb:g} kernels per step before and {ka:g} after.",
            evidence,
        )
    listed = "; ".join(
        f"{_config(r)}: {r['before_per_step']:g} -> {r['after_per_step']:g} per step"
        for _, r in diff.head(5).iterrows()
    )
    more = f" and {len(diff) - 5} more" if len(diff) > 5 else ""
    verb = "differs" if len(diff) == 1 else "differ"
    counts = f"({_per_step(kb)} vs {_per_step(ka)} kernels per step)"
    if change.kind in ("known-transform", "fused"):
        how = {
            "known-transform": "a known transform (small kernels added or replaced, as a capturable optimizer or "
            "a static KV cache does)",
            "fused": "fusion by a compiler (torch.compile's Triton kernels replace eager kernels)",
        }[change.kind]
        return Check(
            "same_work",
            True,
            f"Work changed by {how}: {change.summary} {counts}. Examples: {listed}{more}.",
            evidence,
        )
    return Check(
        "same_work",
        False,
        f"{_kinds(len(diff))} {verb} per steady step {counts}, which neither fusion nor a known transform "
        f"explains: {change.summary}. {listed}{more}.",
        evidence,
    )


def _per_step(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


# params: the two sides' figures, the speedup, its interval and the unprofiled one
def check_faster(
    fb: SideFigures,
    fa: SideFigures,
    speedup: float | None,
    ci: tuple[float, float] | None,
    min_effect: float,
    statistic: str = "p50",
    unprofiled: tuple[float, tuple[float, float]] | None = None,
) -> Check:
    """The ``faster`` check (see the module docstring). ``statistic``: what ``speedup`` is
    the ratio of, ``p50`` (medians of the per-step periods) or ``mean`` (the summary
    statistics of report folders without steps.csv); the text gives those figures."""
    evidence: Evidence = {
        "before_period_p50_ns": fb.period_p50_ns,
        "after_period_p50_ns": fa.period_p50_ns,
        "speedup": speedup,
        "speedup_ci_low": None if ci is None else ci[0],
        "speedup_ci_high": None if ci is None else ci[1],
        "min_effect": min_effect,
        "before_steady_steps": fb.steady,
        "after_steady_steps": fa.steady,
    }
    if unprofiled is not None:
        evidence["speedup_unprofiled"] = unprofiled[0]
        evidence["speedup_unprofiled_ci_low"], evidence["speedup_unprofiled_ci_high"] = unprofiled[1]
    if speedup is None or ci is None:
        return Check("faster", None, "No steady steps with a period on one side: nothing to compare.", evidence)
    lo, hi = ci
    if statistic == "mean":
        before_ns, after_ns = fb.period_mean_ns, fa.period_mean_ns
    else:
        before_ns, after_ns = fb.period_p50_ns, fa.period_p50_ns
    head = (
        f"Step period {statistic} {us_text(before_ns)} -> {us_text(after_ns)}: {speedup:.2f}x "
        f"({CI_LEVEL:.0%} CI {lo:.2f}-{hi:.2f}x, {fb.steady} and {fa.steady} steady steps)."
    )
    if unprofiled is not None:
        u, (lo, hi) = unprofiled
        head = (
            f"Without nsys (the runs of --baseline-runs): {u:.2f}x ({CI_LEVEL:.0%} CI {lo:.2f}-{hi:.2f}x), "
            f"which decides; under nsys: {head[0].lower()}{head[1:]}"
        )
    need = 1 + min_effect
    if lo >= need:
        return Check("faster", True, f"{head} Faster by more than the minimum effect ({min_effect:.0%}).", evidence)
    if hi < 1:
        return Check("faster", False, f"{head} AFTER is slower.", evidence)
    if lo <= 1 <= hi:
        return Check("faster", False, f"{head} The difference is within noise.", evidence)
    return Check("faster", False, f"{head} Faster, but by less than the minimum effect ({min_effect:.0%}).", evidence)


def check_bubbles(fb: SideFigures, fa: SideFigures) -> Check:
    """The ``bubbles`` check (see the module docstring)."""
    evidence: Evidence = {
        "before_bubble_p50_ns": fb.bubble_p50_ns,
        "after_bubble_p50_ns": fa.bubble_p50_ns,
        "before_bubble_ratio": fb.bubble_ratio,
        "after_bubble_ratio": fa.bubble_ratio,
        "before_utilization": fb.utilization,
        "after_utilization": fa.utilization,
        "before_cpu_bound_ratio": fb.cpu_bound_ratio,
        "after_cpu_bound_ratio": fa.cpu_bound_ratio,
    }
    pairs = [(fb.bubble_ratio, fa.bubble_ratio, 1), (fb.cpu_bound_ratio, fa.cpu_bound_ratio, 1)]
    pairs.append((fb.utilization, fa.utilization, -1))
    if any(b is None or a is None for b, a, _ in pairs):
        return Check("bubbles", None, "Per-step bubble or utilization figures missing on one side.", evidence)
    passed = all(sign * (a - b) <= _SLACK for b, a, sign in pairs)  # type: ignore[operator]
    detail = (
        f"Per steady step: bubbles inside the step {us_text(fb.bubble_p50_ns)} -> {us_text(fa.bubble_p50_ns)} "
        f"({fmt_pct(fb.bubble_ratio)} -> {fmt_pct(fa.bubble_ratio)} of the period; the idle gap before a step's "
        "first activity is not among them, the utilization counts it); GPU utilization "
        f"{fmt_pct(fb.utilization)} -> {fmt_pct(fa.utilization)}; CPU-bound ratio "
        f"{fmt_pct(fb.cpu_bound_ratio)} -> {fmt_pct(fa.cpu_bound_ratio)}."
    )
    if not passed:
        detail += " AFTER leaves the GPU idle more than BEFORE."
    return Check("bubbles", passed, detail, evidence)


def check_predicted(predicted: float | None, measured: float | None) -> Check:
    """The ``predicted`` check (see the module docstring)."""
    evidence: Evidence = {"predicted_speedup": predicted, "measured_speedup": measured, "measured_over_predicted": None}
    if predicted is None:
        return Check("predicted", None, "No prediction available for BEFORE (no graph recommendation).", evidence)
    if measured is None or predicted <= 0:
        return Check("predicted", None, f"Predicted {predicted:.2f}x; no measured speedup to compare.", evidence)
    ratio = measured / predicted
    evidence["measured_over_predicted"] = ratio
    passed = ratio >= PREDICTION_MIN_RATIO
    detail = f"Predicted {predicted:.2f}x, measured {measured:.2f}x (measured / predicted = {ratio:.2f})."
    if not passed:
        detail += f" The conversion delivered less than {PREDICTION_MIN_RATIO:.0%} of the predicted gain."
    elif ratio > 1.25:
        detail += " The prediction was conservative."
    return Check("predicted", passed, detail, evidence)


def check_churn(after: SideData, fa: SideFigures) -> Check:
    """The ``churn`` check (see the module docstring)."""
    inst, caps, upd = fa.instantiations_per_launch, fa.captures_per_launch, fa.updates_per_launch
    each_ns = after.instantiate_ns / after.graph_instantiations if after.graph_instantiations else None
    cost = None if inst is None or each_ns is None else inst * each_ns * (fa.graph_launches_per_step or 0)
    evidence: Evidence = {
        "instantiations_per_graph_launch": inst,
        "captures_per_graph_launch": caps,
        "exec_updates_per_graph_launch": upd,
        "instantiate_each_ns": each_ns,
        "instantiate_per_step_ns": cost,
        "run_instantiations": after.graph_instantiations,
        "run_exec_updates": after.exec_updates,
    }
    if inst is None:
        return Check("churn", None, "AFTER has no graph launches in its steady steps (or no step table).", evidence)
    assert caps is not None and upd is not None
    passed = inst <= CHURN_MAX and caps <= CHURN_MAX
    detail = (
        f"Per graph launch in AFTER's steady steps: {inst:.2f} instantiations, {caps:.2f} captures, "
        f"{upd:.2f} exec updates ({after.graph_instantiations} instantiation"
        f"{'s' if after.graph_instantiations != 1 else ''} and {after.exec_updates} "
        f"update{'s' if after.exec_updates != 1 else ''} in the whole run)."
    )
    if not passed and inst > CHURN_MAX:
        detail += " AFTER re-instantiates its graph in steady state"
        if cost is not None and fa.period_p50_ns:
            detail += (
                f": instantiation costs {us_text(cost)} per step ({us_text(each_ns)} each), "
                f"{cost / fa.period_p50_ns:.0%} of the step period"
            )
        detail += "; instantiate once and reuse the graph (static buffers), or update it with cudaGraphExecUpdate."
    elif not passed:
        detail += " AFTER re-captures its graph in steady state: every step still makes the captured launch calls"
        if fa.api_p50_ns is not None and fa.period_p50_ns:
            detail += (
                f" (CUDA API time {us_text(fa.api_p50_ns)} per step, "
                f"{fa.api_p50_ns / fa.period_p50_ns:.0%} of the step period)"
            )
        detail += "; capture once and keep the buffers static (copy new inputs into them)."
    return Check("churn", passed, detail, evidence)


def check_paid_back(after: SideData, fb: SideFigures, fa: SideFigures) -> Check:
    """The ``paid_back`` check (see the module docstring)."""
    n = fa.steps
    evidence: Evidence = {
        "iterations": n,
        "instantiate_ns": after.instantiate_ns,
        "break_even_iterations": None,
        "gain_per_step_ns": None,
    }
    if fb.period_p50_ns is None or fa.period_p50_ns is None:
        return Check("paid_back", None, "No step periods to compare.", evidence)
    gain = fb.period_p50_ns - fa.period_p50_ns
    evidence["gain_per_step_ns"] = gain
    if after.graph_instantiations == 0:
        return Check(
            "paid_back", None, "No graph instantiation in AFTER's trace (made before profiling started?).", evidence
        )
    if gain <= 0:
        return Check(
            "paid_back",
            False,
            f"No gain per step: the {us_text(after.instantiate_ns)} instantiation never pays back.",
            evidence,
        )
    n_star = after.instantiate_ns / gain
    evidence["break_even_iterations"] = n_star
    passed = n >= n_star
    detail = (
        f"Instantiation {us_text(after.instantiate_ns)} / gain {us_text(gain)} per step under nsys = break-even "
        f"after {np.ceil(n_star):.0f} iterations under nsys; this run has {n}."
    )
    if not passed:
        detail += " The run is too short to repay the instantiation."
    return Check("paid_back", passed, detail, evidence)
