"""Verify a CUDA Graph conversion: the checks and the verdict of ``launchprof compare``.

Input: two :class:`~launchprof.analysis.comparison.side.SideData` (BEFORE, AFTER), their steps
already cut to the same unit of work. Output: a :class:`Comparison`. Pure: no files.

Checks (:mod:`launchprof.analysis.comparison.checks`; docs/metrics.md, "Verifying a conversion"):
``converted``, ``same_work``, ``faster``, ``bubbles``, ``predicted``, ``churn`` and
``paid_back``; the speedup that ``faster`` judges is computed here, with its interval.

Verdict, first match: ``not-converted`` (converted failed), ``churn`` (re-capturing or
re-instantiating every step comes first: it also explains extra kernels per step, such as
the fills PyTorch issues around each capture), ``different-work`` (same work failed),
``not-faster`` (faster failed), ``unknown-work`` (same work could not be evaluated: a side
traced with whole-graph rows, or without kernels per step; ``verified`` would claim the
same work), ``not-faster`` (faster not evaluated), else ``verified``. Another check
that could not be evaluated (``passed`` None) decides nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from launchprof.analysis.comparison.checks import (
    Check,
    check_bubbles,
    check_churn,
    check_converted,
    check_faster,
    check_paid_back,
    check_predicted,
    check_same_work,
)
from launchprof.analysis.comparison.side import SideData
from launchprof.analysis.comparison.sidefigures import SideFigures, SpeedupParts, side_figures, speedup_parts
from launchprof.analysis.comparison.speedstats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CI_LEVEL,
    speedup_interval,
    unprofiled_interval,
    without_profiler,
)
from launchprof.analysis.comparison.workchange import WorkChange, classify, kernel_table
from launchprof.defaults import COMPARE_VERDICTS

VERDICTS = COMPARE_VERDICTS
DEFAULT_MIN_EFFECT = 0.05


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`verify`.

    Attributes:
        verdict: one of :data:`VERDICTS`.
        speedup: median steady period BEFORE / AFTER (None without steps).
        speedup_ci: (low, high) at :data:`CI_LEVEL`.
        speedup_method: how ``speedup`` and its interval were computed.
        predicted_speedup: BEFORE's predicted speedup, if any.
        min_effect: the minimum speedup - 1 that counts as faster.
        checks: the checks, in the order of :mod:`launchprof.analysis.comparison.checks`.
        kernels: per kernel (:data:`KERNEL_KEY`) ``before_per_step``,
            ``after_per_step`` and ``differs`` (bool), sorted by name and configuration.
        notes: what was approximated on either side.
        work_change: how the kernels changed (:mod:`launchprof.analysis.comparison.workchange`);
            None when a side does not know its kernels.
        speedup_parts: where the gain came from (:func:`speedup_parts`); None without
            periods and busy times on both sides.
        speedup_unprofiled, speedup_unprofiled_ci: the speedup without nsys, the headline:
            measured (``speedup_unprofiled_source`` ``measured``: the same ratio of median
            step periods and its interval, :func:`unprofiled_interval`, from the runs
            without nsys of both sides, ``profile --baseline-runs``; the ``faster`` check
            then decides on it), else estimated (``estimate``: the ratio of each side's
            ``step_without_profiler``, the one model of :mod:`launchprof.analysis.prediction.unprofiled`,
            and its range: lowest BEFORE over highest AFTER to highest over lowest; the
            ``faster`` check keeps deciding on the measurement under nsys); None when a
            side has neither.
    """

    verdict: str
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    speedup_method: str
    predicted_speedup: float | None
    min_effect: float
    checks: list[Check]
    before: SideData
    after: SideData
    before_figures: SideFigures
    after_figures: SideFigures
    kernels: pd.DataFrame
    notes: list[str]
    work_change: WorkChange | None = None
    speedup_parts: SpeedupParts | None = None
    speedup_unprofiled: float | None = None
    speedup_unprofiled_ci: tuple[float, float] | None = None
    speedup_unprofiled_source: str | None = None

    def check(self, name: str) -> Check:
        """The check called ``name``.

        Raises:
            KeyError: no such check.
        """
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def __repr__(self) -> str:  # short: the full dataclass repr ran to 11,000 characters
        speed = "" if self.speedup is None else f", {self.speedup:.2f}x per step"
        if self.speedup is not None and self.speedup_ci is not None:
            speed += f" (95% CI {self.speedup_ci[0]:.2f}-{self.speedup_ci[1]:.2f})"
        failed = [c.name for c in self.checks if c.passed is False]
        return f"<launchprof comparison: {self.verdict}{speed}" + (f"; failed: {', '.join(failed)}>" if failed else ">")


def _mean_interval(fb: SideFigures, fa: SideFigures, level: float = CI_LEVEL) -> tuple[float, tuple[float, float]]:
    both = bool(fb.period_mean_ns and fa.period_mean_ns)  # else the p50s, on both sides
    mb, ma = (fb.period_mean_ns, fa.period_mean_ns) if both else (fb.period_p50_ns, fa.period_p50_ns)
    assert mb is not None and ma is not None
    r = mb / ma
    if not (both and fb.period_std_ns and fa.period_std_ns and fb.steady > 1 and fa.steady > 1):
        return r, (r, r)
    z = NormalDist().inv_cdf(1 - (1 - level) / 2)
    rel = np.sqrt((fb.period_std_ns / mb) ** 2 / fb.steady + (fa.period_std_ns / ma) ** 2 / fa.steady)
    return r, (max(r * (1 - z * rel), 0.0), r * (1 + z * rel))


def verdict_of(checks: list[Check]) -> str:
    """The verdict from the checks (first match in the module docstring's order)."""
    by = {c.name: c.passed for c in checks}
    if by.get("converted") is not True:
        return "not-converted"
    if by.get("churn") is False:
        return "churn"
    if by.get("same_work") is False:
        return "different-work"
    if by.get("faster") is False:  # a measured slowdown is said first: a CI gate on not-faster holds
        return "not-faster"
    if by.get("same_work") is None:  # the kernels could not be compared: "verified" would claim it
        return "unknown-work"
    if by.get("faster") is not True:
        return "not-faster"
    return "verified"


def verify(before: SideData, after: SideData, min_effect: float = DEFAULT_MIN_EFFECT) -> Comparison:
    """Compare BEFORE and AFTER and decide the verdict.

    Args:
        before, after: the two runs, steps cut to the same unit of work.
        min_effect: the speedup must reach ``1 + min_effect`` at the low end of its
            interval to count as faster (default 0.05).

    Returns:
        :class:`Comparison`.

    Raises:
        ValueError: ``min_effect`` is negative or not a finite number.
    """
    if not (min_effect >= 0 and math.isfinite(min_effect)):  # NaN fails both
        raise ValueError(f"min_effect must be a finite number >= 0, not {min_effect!r}")
    fb, fa = side_figures(before), side_figures(after)
    sb, sa = before.steady, after.steady
    notes: list[str] = list(before.notes) + list(after.notes)
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    method = "none"
    statistic = "p50"
    if sb is not None and sa is not None and len(sb) and len(sa):
        speedup, ci = speedup_interval(sb["period_ns"].to_numpy(), sa["period_ns"].to_numpy())
        method = (
            f"ratio of median steady step periods; {CI_LEVEL:.0%} interval from a moving-block bootstrap "
            f"({BOOTSTRAP_RESAMPLES} resamples, seed {BOOTSTRAP_SEED})"
        )
    elif fb.period_p50_ns and fa.period_p50_ns:
        speedup, ci = _mean_interval(fb, fa)
        statistic = "mean" if (fb.period_mean_ns and fa.period_mean_ns) else "p50"
        method = f"ratio of mean steady step periods; {CI_LEVEL:.0%} normal interval (delta method)"
        notes.append("no per-step table on one side (report folder without steps.csv): summary statistics used")
    if speedup is not None and not (math.isfinite(speedup) and speedup > 0):
        # A side's steady steps take no time (e.g. every activity at one instant): no ratio.
        speedup, ci, method = None, None, "none"
        notes.append("a side's steady step period is 0: no speedup")
    kernels = kernel_table(before, after)
    unprofiled = None
    ub, ua = before.unprofiled_periods, after.unprofiled_periods
    if ub is not None and ua is not None and ub.size >= 2 and ua.size >= 2 and np.median(ua) > 0:
        unprofiled = unprofiled_interval(ub, ua)
    checks = [
        check_converted(fb, fa),
        check_same_work(fb, fa, kernels),
        check_faster(fb, fa, speedup, ci, min_effect, statistic, unprofiled),
        check_bubbles(fb, fa),
        check_predicted(before.predicted_speedup, speedup),
        check_churn(after, fa),
        check_paid_back(after, fb, fa),
    ]
    return Comparison(
        verdict=verdict_of(checks),
        speedup=speedup,
        speedup_ci=ci,
        speedup_method=method,
        predicted_speedup=before.predicted_speedup,
        min_effect=min_effect,
        checks=checks,
        before=before,
        after=after,
        before_figures=fb,
        after_figures=fa,
        kernels=kernels,
        notes=notes,
        work_change=classify(kernels) if len(kernels) else None,
        speedup_parts=speedup_parts(fb, fa),
        **without_profiler(before.step_without_profiler, after.step_without_profiler, unprofiled),
    )
