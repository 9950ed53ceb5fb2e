"""The calibration's pure arithmetic, with expected values worked out by hand (no GPU)."""

from __future__ import annotations

import pytest

from launchprof.calibrate.model import (
    LinearFit,
    amortized_step_ns,
    break_even_iterations,
    gaps_ns,
    linear_fit,
    median,
    resolution_ns,
)


@pytest.mark.parametrize(
    ("values", "expected"),
    [([3, 1, 2], 2.0), ([1, 2, 3, 4], 2.5), ([7], 7.0), ([5249.5, 1000, 9000], 5249.5)],
)
def test_median(values: list[float], expected: float) -> None:
    assert median(values) == expected


def test_median_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        median([])


def test_linear_fit_through_exact_points() -> None:
    fit = linear_fit([1, 2, 3], [3, 5, 7])  # y = 1 + 2x
    assert fit == LinearFit(intercept=1.0, slope=2.0, r2=1.0, points=3)
    assert fit.predict(10) == 21.0


def test_linear_fit_least_squares_by_hand() -> None:
    # mean x 1.5, mean y 2.5; Sxx = 5, Sxy = 4 -> slope 0.8, intercept 2.5 - 0.8 * 1.5 = 1.3
    # residuals -0.3, 0.9, -0.9, 0.3 -> SSR 1.8; Syy 5 -> r2 = 1 - 1.8 / 5 = 0.64
    fit = linear_fit([0, 1, 2, 3], [1, 3, 2, 4])
    assert fit.slope == pytest.approx(0.8)
    assert fit.intercept == pytest.approx(1.3)
    assert fit.r2 == pytest.approx(0.64)
    assert fit.points == 4


def test_linear_fit_of_instantiation_cost_per_node() -> None:
    # instantiate 2 us + 0.9 us per node, exactly
    nodes = [1, 4, 16, 64, 256]
    cost = [2000 + 900 * n for n in nodes]
    fit = linear_fit(nodes, cost)
    assert fit.intercept == pytest.approx(2000)
    assert fit.slope == pytest.approx(900)
    assert fit.r2 == pytest.approx(1.0)


def test_linear_fit_of_a_flat_line_has_r2_one() -> None:
    fit = linear_fit([1, 2, 3], [4, 4, 4])
    assert (fit.slope, fit.intercept, fit.r2) == (0.0, 4.0, 1.0)


@pytest.mark.parametrize(
    ("xs", "ys"),
    [([1, 2], [1]), ([1], [1]), ([2, 2, 2], [1, 2, 3]), ([], [])],
)
def test_linear_fit_rejects_unusable_points(xs: list[float], ys: list[float]) -> None:
    with pytest.raises(ValueError):
        linear_fit(xs, ys)


def test_gaps_between_consecutive_intervals() -> None:
    assert gaps_ns([0, 10, 25], [5, 20, 30]) == [5, 5]
    assert gaps_ns([0, 3], [5, 8]) == [-2]  # the second began before the first ended
    assert gaps_ns([7], [9]) == []
    with pytest.raises(ValueError):
        gaps_ns([1, 2], [3])


def test_resolution_is_the_smallest_positive_tick() -> None:
    assert resolution_ns([96, 0, 32, 64, 64]) == 32
    assert resolution_ns([5, 5]) is None
    assert resolution_ns([]) is None


def test_amortized_step() -> None:
    # (1000 + 100 * 10) / 100 = 20
    assert amortized_step_ns(1000, 10, 100) == 20.0
    assert amortized_step_ns(1000, 10, 1) == 1010.0
    with pytest.raises(ValueError):
        amortized_step_ns(1000, 10, 0)


@pytest.mark.parametrize(
    ("instantiate", "per_launch", "graph", "expected"),
    [
        (1000, 300, 200, 10),  # 1000 / 100 = 10 exactly: not rounded up to 11
        (1001, 300, 200, 11),
        (999, 300, 200, 10),
        (500_000, 310_000, 72_000, 3),  # the demo's figures: 0.5 ms / 238 us = 2.1 -> 3
        (0, 300, 200, 0),
        (1000, 200, 200, None),  # no saving: never pays back
        (1000, 100, 200, None),  # graph step longer
    ],
)
def test_break_even_iterations(instantiate: int, per_launch: int, graph: int, expected: int | None) -> None:
    assert break_even_iterations(instantiate, per_launch, graph) == expected


def test_break_even_is_where_the_amortized_graph_step_stops_losing() -> None:
    n = break_even_iterations(1001, 300, 200)
    assert n is not None
    assert amortized_step_ns(1001, 200, n) <= 300 < amortized_step_ns(1001, 200, n - 1)


def test_break_even_rejects_negative_instantiation() -> None:
    with pytest.raises(ValueError):
        break_even_iterations(-1, 300, 200)
