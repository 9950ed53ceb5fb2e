"""Pure arithmetic of the calibration: medians, a least-squares line, break-even.

No GPU and no cuda-python here; everything is plain numbers in nanoseconds.

- ``median(values) -> float``
- ``linear_fit(xs, ys) -> LinearFit`` (ordinary least squares, ``intercept + slope * x``)
- ``gaps_ns(starts, ends) -> list[int]``: idle time between consecutive intervals
- ``resolution_ns(stamps) -> int | None``: the smallest positive step between timer reads
- ``amortized_step_ns(instantiate_ns, graph_step_ns, iterations) -> float``
- ``break_even_iterations(instantiate_ns, per_launch_step_ns, graph_step_ns) -> int | None``

Source of the break-even formula: the graph pays ``instantiate_ns`` once and then saves
``per_launch_step_ns - graph_step_ns`` every iteration, so the amortized graph step
``(instantiate_ns + N * graph_step_ns) / N`` is no longer than the per-launch step once
``N >= instantiate_ns / (per_launch_step_ns - graph_step_ns)``; the smallest such whole
N is the ceiling of that ratio (docs/metrics.md, "Amortized cost and break-even").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction


def median(values: Sequence[float]) -> float:
    """The median of ``values`` as a float. Raises ValueError when empty."""
    if len(values) == 0:
        raise ValueError("median of no values")
    return float(statistics.median(values))


@dataclass(frozen=True)
class LinearFit:
    """``y = intercept + slope * x`` fitted by least squares; ``r2`` in [0, 1] (1 if exact)."""

    intercept: float
    slope: float
    r2: float
    points: int

    def predict(self, x: float) -> float:
        return self.intercept + self.slope * x

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit:
    """Ordinary least-squares line through (xs, ys).

    Raises ValueError if the lengths differ, fewer than two points are given, or all xs
    are equal (the slope is undefined).
    """
    if len(xs) != len(ys):
        raise ValueError(f"xs and ys differ in length ({len(xs)} vs {len(ys)})")
    if len(xs) < 2:
        raise ValueError("a line needs at least two points")
    n = len(xs)
    mean_x = math.fsum(xs) / n
    mean_y = math.fsum(ys) / n
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("all x values are equal: the slope is undefined")
    sxy = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    syy = math.fsum((y - mean_y) ** 2 for y in ys)
    if syy == 0:
        r2 = 1.0
    else:
        residual = math.fsum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
        r2 = min(1.0, max(0.0, 1.0 - residual / syy))
    return LinearFit(intercept=intercept, slope=slope, r2=r2, points=n)


def gaps_ns(starts: Sequence[int], ends: Sequence[int]) -> list[int]:
    """Idle time between consecutive intervals: ``starts[i + 1] - ends[i]``.

    The intervals are taken in the order given (the launch order); a negative value
    means the next one began before the previous one ended (overlap or timer skew).
    """
    if len(starts) != len(ends):
        raise ValueError("starts and ends differ in length")
    return [int(starts[i + 1]) - int(ends[i]) for i in range(len(starts) - 1)]


def resolution_ns(stamps: Sequence[int]) -> int | None:
    """The smallest positive difference between sorted timer reads (the tick), if any."""
    ordered = sorted(int(s) for s in stamps)
    steps = [b - a for a, b in zip(ordered, ordered[1:], strict=False) if b > a]
    return min(steps) if steps else None


def amortized_step_ns(instantiate_ns: float, graph_step_ns: float, iterations: int) -> float:
    """Graph step time with the instantiation spread over ``iterations`` (>= 1) steps."""
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    return (instantiate_ns + iterations * graph_step_ns) / iterations


def break_even_iterations(instantiate_ns: float, per_launch_step_ns: float, graph_step_ns: float) -> int | None:
    """N* = ceil(instantiate_ns / (per_launch_step_ns - graph_step_ns)).

    Returns None when the graph step is not shorter than the per-launch step (the graph
    never pays back). Computed with exact fractions so that a whole ratio is not rounded
    up by floating-point error. Raises ValueError for a negative ``instantiate_ns``.
    """
    if instantiate_ns < 0:
        raise ValueError("instantiate_ns must be >= 0")
    saving = Fraction(per_launch_step_ns) - Fraction(graph_step_ns)
    if saving <= 0:
        return None
    return math.ceil(Fraction(instantiate_ns) / saving)
