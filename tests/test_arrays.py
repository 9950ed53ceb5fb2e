"""The shared numpy kernels of :mod:`launchprof.analysis.arrays`, each against the plain
numpy/pandas formulation it stands for: pandas' grouped ``cummax`` and ``ngroup``,
``np.lexsort``, ``Series.isin``, ``np.searchsorted``, ``np.add.at`` and boolean indexing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from launchprof.analysis.arrays import (
    ascending,
    kind_in,
    label_sums,
    last_at_or_before,
    row_codes,
    rows_where,
    run_bounds,
    run_sums,
    segment_cummax,
    selection,
    sorted_by,
    take,
)

SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_segment_cummax_is_pandas_grouped_cummax(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    group = np.sort(rng.integers(0, 6, n))
    scale = [10, 10**6, 2**62][seed % 3]  # the last: the packed key would overflow
    for values in (rng.integers(-scale, scale, n), rng.normal(size=n), np.sort(rng.integers(0, 50, n))):
        ref = pd.Series(values).groupby(group, sort=False).cummax().to_numpy()
        assert np.array_equal(segment_cummax(values, group), ref)


@pytest.mark.parametrize("seed", SEEDS)
def test_last_at_or_before_is_searchsorted(seed: int) -> None:
    rng = np.random.default_rng(seed)
    bounds = np.sort(rng.integers(0, 1000, int(rng.integers(0, 30))))
    t_sorted = np.sort(rng.integers(-10, 1100, int(rng.integers(0, 400))))  # many, ascending: counted
    t_any = rng.integers(-10, 1100, 50)  # not in order: binary search
    for t in (t_sorted, t_any):
        assert np.array_equal(last_at_or_before(bounds, t), np.searchsorted(bounds, t, side="right") - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_sums_over_runs_are_bincount_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_steps = int(rng.integers(1, 12))
    step = np.sort(rng.integers(-2, n_steps + 3, int(rng.integers(0, 80))))  # some outside 0..n-1
    inside = (step >= 0) & (step < n_steps)
    for values in (rng.integers(-(10**12), 10**12, step.size), rng.random(step.size) < 0.4):
        ref = np.zeros(n_steps, dtype=np.int64)
        np.add.at(ref, step[inside], values[inside].astype(np.int64))
        got = run_sums(values, run_bounds(step, n_steps))
        assert got.dtype == np.int64 and np.array_equal(got, ref)


@pytest.mark.parametrize("seed", SEEDS)
def test_row_codes_are_pandas_ngroup(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    top = [3, 1000, 2**40][seed % 3]  # the last: too wide to pack, pandas numbers them
    columns = [rng.integers(-top, top, n) for _ in range(int(rng.integers(1, 8)))]
    columns = [c if rng.random() < 0.5 else np.full(n, c[0]) for c in columns]  # some constant
    frame = pd.DataFrame({str(i): c for i, c in enumerate(columns)})
    ref = frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy()
    assert np.array_equal(row_codes(columns), ref)


@pytest.mark.parametrize("seed", SEEDS)
def test_rows_take_the_masked_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 20))
    values = rng.integers(0, 100, n)
    a, b = sorted(rng.integers(0, n + 1, 2)) if n else (0, 0)
    block = np.zeros(n, bool)
    block[a:b] = True
    for mask in (np.ones(n, bool), block, rng.random(n) < 0.5):
        assert np.array_equal(take(values, rows_where(mask)), values[mask])
        assert np.array_equal(values[selection(mask)], values[mask])


@pytest.mark.parametrize("seed", SEEDS)
def test_label_sums_are_add_at_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 12))
    label = rng.integers(-2, n + 3, int(rng.integers(0, 80)))  # any order, some outside 0..n-1
    inside = (label >= 0) & (label < n)
    big = [10**3, 2**55][seed % 2]  # the second: past float64's exact integers (sums stay in int64)
    for values in (rng.integers(-big, big, label.size), rng.random(label.size) < 0.4):
        ref = np.zeros(n, dtype=np.int64)
        np.add.at(ref, label[inside], values[inside].astype(np.int64))
        got = label_sums(label, values, n)
        assert got.dtype == np.int64 and np.array_equal(got, ref)


@pytest.mark.parametrize("seed", SEEDS)
def test_sorted_by_is_lexsort_order(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    keys = [rng.integers(0, int(rng.integers(1, 5)), n) for _ in range(int(rng.integers(1, 4)))]
    if seed % 2:  # sorted input: the answer must be True
        order = np.lexsort(keys[::-1])
        keys = [k[order] for k in keys]
    expected = bool(np.array_equal(np.lexsort(keys[::-1]), np.arange(n))) or all(
        np.array_equal(k, k[np.lexsort(keys[::-1])]) for k in keys
    )
    assert sorted_by(*keys) == expected
    assert ascending(keys[0]) == bool((np.diff(keys[0]) >= 0).all())
    assert ascending(keys[0], strict=True) == bool((np.diff(keys[0]) > 0).all())


def test_sorted_by_needs_only_the_first_key_in_order() -> None:
    assert sorted_by(np.array([0, 1]), np.array([5, 3]))  # the primary key rises: sorted
    assert not sorted_by(np.array([0, 0]), np.array([5, 3]))
    assert sorted_by(np.array([0, 0, 1]), np.array([1, 2, 0]), np.array([9, 0, 0]))  # the second rises strictly
    assert not sorted_by(np.array([0, 0, 0]), np.array([1, 1, 1]), np.array([2, 1, 3]))
    assert sorted_by(np.array([], dtype=np.int64), np.array([], dtype=np.int64))


def test_row_codes_of_mixed_and_missing_values_are_ngroup() -> None:
    rng = np.random.default_rng(11)
    frame = pd.DataFrame(
        {
            "name_id": rng.integers(600, 620, 5_000),
            "grid_x": rng.choice([1, 16, 2**30], 5_000).astype(np.int32),
            "grid_y": np.ones(5_000, dtype=np.int32),  # constant: no part of the key
            "graph": pd.array(rng.choice([1, 2, None], 5_000), dtype="Int64"),  # missing is a value
            "name": rng.choice(["a", "b"], 5_000),
        }
    )
    for cols in (["name_id", "grid_x", "grid_y"], list(frame.columns)):
        ref = frame[cols].groupby(cols, sort=False, dropna=False).ngroup().to_numpy()
        assert np.array_equal(row_codes([frame[c].to_numpy() for c in cols]), ref)
    wide = frame[["name_id", "grid_x"]].assign(grid_y=rng.choice([0, 2**62], 5_000))  # too wide to pack
    wide["grid_x"] = wide["grid_x"].astype(np.int64) * 2**31
    ref = wide.groupby(list(wide.columns), sort=False).ngroup().to_numpy()
    assert np.array_equal(row_codes([wide[c].to_numpy() for c in wide.columns]), ref)
    assert row_codes([]).size == 0


@pytest.mark.parametrize("categorical", [False, True])
def test_kind_in_is_isin(categorical: bool) -> None:
    kinds = pd.Series(["kernel", "memcpy", None, "memset", "kernel", "sync"])
    if categorical:
        kinds = kinds.astype("category")
    for names in (("kernel",), ("memcpy", "memset"), ("other",)):
        assert np.array_equal(kind_in(kinds, names), kinds.isin(list(names)).to_numpy())


def test_run_bounds_of_an_empty_label() -> None:
    assert run_bounds(np.array([], dtype=np.int64), 3).tolist() == [0, 0, 0, 0]
    assert run_sums(np.array([], dtype=np.int64), run_bounds(np.array([], dtype=np.int64), 3)).tolist() == [0, 0, 0]


def test_stable_order_is_numpys_stable_argsort() -> None:
    from launchprof.analysis.arrays import stable_order

    rng = np.random.default_rng(11)
    tids = np.array([(100 << 24) | 7, (100 << 24) | 9, (2 << 40) | 3, 5], dtype=np.int64)
    cases = [
        rng.integers(0, 4, 5000),  # codes: offsets sorted by radix
        rng.integers(-3, 60_000, 5000),  # a range just within 16 bits
        tids[rng.integers(0, 4, 5000)],  # globalTids: ranks sorted by radix
        rng.integers(0, 2**40, 100_000),  # many distinct values: the plain sort
        np.sort(rng.integers(0, 9, 1000)),  # sorted: no sort
        np.array([5]),
        np.empty(0, np.int64),
        rng.integers(0, 4, 5000).astype(np.int32),
    ]
    for values in cases:
        assert np.array_equal(stable_order(values), np.argsort(values, kind="stable"))
