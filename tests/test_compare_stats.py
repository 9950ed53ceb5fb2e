"""The speedup interval: properties that hold for any step periods."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchprof.analysis.comparison.speedstats import block_bootstrap_medians, speedup_interval

periods = st.lists(st.integers(min_value=1_000, max_value=10_000_000), min_size=2, max_size=300)


@settings(max_examples=40, deadline=None)
@given(periods, periods)
def test_point_inside_interval_and_deterministic(before: list[int], after: list[int]) -> None:
    s, (lo, hi) = speedup_interval(np.array(before), np.array(after))
    assert s == float(np.median(before)) / float(np.median(after))
    assert 0 < lo <= s <= hi
    assert speedup_interval(np.array(before), np.array(after)) == (s, (lo, hi))


@settings(max_examples=30, deadline=None)
@given(periods, periods, st.integers(min_value=2, max_value=1000))
def test_same_unit_change_on_both_sides_changes_nothing(before: list[int], after: list[int], k: int) -> None:
    a = speedup_interval(np.array(before), np.array(after))
    b = speedup_interval(np.array(before) * k, np.array(after) * k)
    assert b[0] == pytest.approx(a[0], rel=1e-12)
    assert b[1] == pytest.approx(a[1], rel=1e-12)


def test_constant_periods_give_a_point_interval() -> None:
    assert speedup_interval(np.full(50, 500.0), np.full(80, 100.0)) == (5.0, (5.0, 5.0))


def test_single_step_gives_a_point_interval() -> None:
    assert speedup_interval(np.array([300.0]), np.array([100.0, 120.0])) == (300 / 110, (300 / 110, 300 / 110))


def test_bootstrap_medians_are_medians_of_values_present() -> None:
    x = np.arange(1, 102, dtype=float)  # odd length: every resample median is a value of x
    meds = block_bootstrap_medians(x, 200, np.random.default_rng(0))
    assert meds.shape == (200,)
    assert np.isin(meds, x).all()
    assert abs(np.median(meds) - 51) < 10


def test_interval_narrows_with_more_steps() -> None:
    rng = np.random.default_rng(3)
    widths = []
    for n in (30, 3000):
        b = 500 + rng.normal(0, 20, n)
        a = 100 + rng.normal(0, 5, n)
        _, (lo, hi) = speedup_interval(b, a)
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 4
