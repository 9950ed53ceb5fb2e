"""The speedup of a comparison and its confidence interval: a ratio of medians with a
moving-block bootstrap interval (Kuensch 1989; block length ceil(n^(1/3)) keeps the
short-range correlation of consecutive steps; :data:`BOOTSTRAP_RESAMPLES` resamples, seed
:data:`BOOTSTRAP_SEED`: deterministic), and for the few figures of the runs without nsys
the whole range of ratios (docs/metrics.md, "Verifying a conversion")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

CI_LEVEL = 0.95
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 0


def block_bootstrap_medians(x: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` moving-block bootstrap resamples of ``x`` (block length
    ceil(n^(1/3)), blocks drawn uniformly with replacement, cut to n values)."""
    n = x.size
    block = max(1, int(np.ceil(n ** (1 / 3))))
    blocks = int(np.ceil(n / block))
    out = np.empty(resamples)
    per_chunk = max(1, 4_000_000 // (blocks * block))
    for i in range(0, resamples, per_chunk):
        m = min(per_chunk, resamples - i)
        starts = rng.integers(0, n - block + 1, size=(m, blocks))
        idx = (starts[:, :, None] + np.arange(block)).reshape(m, -1)[:, :n]
        out[i : i + m] = np.median(x[idx], axis=1)
    return out


def speedup_interval(
    before_ns: np.ndarray, after_ns: np.ndarray, level: float = CI_LEVEL
) -> tuple[float, tuple[float, float]]:
    """Ratio of medians ``median(before) / median(after)`` and its bootstrap interval.

    Args:
        before_ns, after_ns: steady step periods (ns), at least one value each.
        level: two-sided confidence level.

    Returns:
        (speedup, (low, high)); with fewer than 2 values on a side the interval is the
        point itself.
    """
    b = np.asarray(before_ns, dtype=float)
    a = np.asarray(after_ns, dtype=float)
    point = float(np.median(b) / np.median(a))
    if b.size < 2 or a.size < 2:
        return point, (point, point)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    ratios = block_bootstrap_medians(b, BOOTSTRAP_RESAMPLES, rng) / block_bootstrap_medians(a, BOOTSTRAP_RESAMPLES, rng)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(ratios, [tail, 100 - tail])
    return point, (float(min(lo, point)), float(max(hi, point)))


SMALL_SAMPLE = 8


def unprofiled_interval(before_ns: np.ndarray, after_ns: np.ndarray) -> tuple[float, tuple[float, float]]:
    """:func:`speedup_interval` for the step times of the runs without nsys; with fewer than
    :data:`SMALL_SAMPLE` values on a side (one figure per run: the profiler-region source),
    where a bootstrap of so few values has no width, the interval is the whole range of
    ratios instead: ``min(before) / max(after)`` to ``max(before) / min(after)``."""
    b = np.asarray(before_ns, dtype=float)
    a = np.asarray(after_ns, dtype=float)
    if b.size >= SMALL_SAMPLE and a.size >= SMALL_SAMPLE:
        return speedup_interval(b, a)
    point = float(np.median(b) / np.median(a))
    low, high = b.min() / a.max(), (b.max() / a.min() if a.min() > 0 else point)
    return point, (float(min(low, point)), float(max(high, point)))


def estimated_interval(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[float, tuple[float, float], str] | None:
    """The speedup without nsys from each side's ``step_without_profiler``
    (:class:`launchprof.analysis.prediction.recommendation.Recommendation`: ``step_ns``, ``low_ns``,
    ``high_ns``, ``source``): BEFORE's step over AFTER's, its range lowest BEFORE over
    highest AFTER to highest over lowest, and ``runs`` when both sides' steps were measured
    by runs without nsys (their step files not at hand: a range, not an interval), else
    ``estimate``; None when a side has none."""
    if not before or not after or not after.get("step_ns", 0) > 0 or not after.get("low_ns", 0) > 0:
        return None
    source = "runs" if before.get("source") == after.get("source") == "measured" else "estimate"
    interval = (before["low_ns"] / after["high_ns"], before["high_ns"] / after["low_ns"])
    return before["step_ns"] / after["step_ns"], interval, source


def without_profiler(
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    measured: tuple[float, tuple[float, float]] | None,
) -> dict[str, Any]:
    """A comparison's ``speedup_unprofiled``, ``speedup_unprofiled_ci`` and
    ``speedup_unprofiled_source``: ``measured`` (the runs' :func:`unprofiled_interval`)
    when given, else :func:`estimated_interval` of the sides' ``step_without_profiler``;
    empty when there is neither."""
    if measured is not None:
        point, interval, source = measured[0], measured[1], "measured"
    else:
        got = estimated_interval(before, after)
        if got is None:
            return {}
        point, interval, source = got
    return {"speedup_unprofiled": point, "speedup_unprofiled_ci": interval, "speedup_unprofiled_source": source}
