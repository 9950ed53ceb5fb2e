"""The graph step model, break-even N* and the calibration constants, by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from launchprof.analysis.prediction.predict import (
    DEFAULTS,
    break_even,
    constants,
    predict_graph_step,
    unprofiled_values,
)

HERE = Path(__file__).resolve().parent
VALUES = {
    "node_gap_ns": 100.0,
    "graph_launch_gap_ns": 5_000.0,
    "graph_launch_call_base_ns": 10_000.0,
    "graph_launch_call_per_node_ns": 1_000.0,
    "instantiate_base_ns": 0.0,
    "instantiate_per_node_ns": 10_000.0,
    "launch_call_ns": 5_000.0,
    "profiler_launch_overhead_ns": 2_000.0,
}


def test_gpu_side_sets_the_graph_step_when_kernels_are_long() -> None:
    p = predict_graph_step(800_000, gpu_work_ns=90_000, nodes=36, values=VALUES)
    assert p.gpu_side_ns == 90_000 + 35 * 100 + 5_000  # 98.5 us
    assert p.cpu_side_ns == 10_000 + 36 * 1_000  # 46 us
    assert p.graph_step_ns == 98_500
    assert p.speedup == pytest.approx(800_000 / 98_500)
    assert p.instantiate_ns == 360_000
    # N* = floor(360000 / (800000 - 98500)) + 1 = 1
    assert p.break_even_iterations == 1


def test_cpu_side_sets_the_graph_step_when_the_launch_call_is_longer() -> None:
    p = predict_graph_step(500_000, gpu_work_ns=20_000, nodes=75, values=VALUES)
    assert p.cpu_side_ns == 10_000 + 75_000
    assert p.graph_step_ns == 85_000


def test_host_time_that_a_graph_keeps_adds_to_the_cpu_side() -> None:
    p = predict_graph_step(500_000, gpu_work_ns=20_000, nodes=10, values=VALUES, host_ns=300_000)
    assert p.cpu_side_ns == 10_000 + 10_000 + 300_000
    assert p.graph_step_ns == 320_000


def test_amortized_drops_the_per_graph_terms() -> None:
    p = predict_graph_step(20_000, gpu_work_ns=2_700, nodes=3, values=VALUES, amortized=True)
    assert p.gpu_side_ns == 2_700 + 3 * 100
    assert p.cpu_side_ns == 3_000
    assert p.graph_step_ns == 3_000


@pytest.mark.parametrize(
    ("instantiate", "graph", "per_launch", "expected"),
    [
        (1_000_000, 100_000, 800_000, 2),  # 1e6 / 7e5 = 1.43 -> 2
        (700_000, 100_000, 800_000, 2),  # exactly 1 x saving: N=1 ties, N=2 is below
        (5_000_000, 90_000, 100_000, 501),
        (1_000, 100, 100, None),  # no saving
        (0, 50, 100, 1),
    ],
)
def test_break_even(instantiate: float, graph: float, per_launch: float, expected: int | None) -> None:
    n = break_even(instantiate, graph, per_launch)
    assert n == expected
    if n is not None:  # the definition: amortized cost below the per-launch step at N, not at N-1
        assert (instantiate + n * graph) / n < per_launch
        assert n == 1 or (instantiate + (n - 1) * graph) / (n - 1) >= per_launch


def test_negative_inputs_are_rejected() -> None:
    with pytest.raises(ValueError):
        predict_graph_step(-1, 0, 1, VALUES)


def test_defaults_when_no_calibration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # an empty cache: no calibration file
    values, info = constants()
    assert values == {k: float(v) for k, v in DEFAULTS.items()}
    assert info["source"] == "defaults" and info["from_calibration"] == []


def test_explicit_calibration_overrides_key_by_key() -> None:
    values, info = constants({"node_gap_ns": 600, "constants": {"graph_launch_gap_ns": 4000}, "x": "y"})
    assert values["node_gap_ns"] == 600 and values["graph_launch_gap_ns"] == 4000
    assert values["instantiate_per_node_ns"] == DEFAULTS["instantiate_per_node_ns"]
    assert info["source"] == "argument" and info["from_calibration"] == ["graph_launch_gap_ns", "node_gap_ns"]


def test_calibration_document_from_the_h200_is_read() -> None:
    doc = json.loads((HERE / "data" / "gpu" / "calibration_h200.json").read_text())
    values, info = constants(doc)
    assert values["node_interval_ns"] == doc["medians"]["graph_node_interval_ns"]
    # the %globaltimer gap includes kernel prologue/epilogue: not the trace's node gap
    assert values["node_gap_ns"] == DEFAULTS["node_gap_ns"]
    assert values["instantiate_per_node_ns"] == pytest.approx(doc["fits"]["instantiate_ns"]["slope"])
    assert values["unprofiled_graph_launch_call_base_ns"] == pytest.approx(doc["fits"]["launch_cpu_ns"]["intercept"])
    assert values["unprofiled_graph_launch_call_per_node_ns"] == pytest.approx(doc["fits"]["launch_cpu_ns"]["slope"])
    # measured without nsys: the profiled constants stay the defaults (no profiler section here)
    assert values["graph_launch_call_base_ns"] == DEFAULTS["graph_launch_call_base_ns"]
    assert values["profiler_launch_overhead_ns"] == DEFAULTS["profiler_launch_overhead_ns"]
    assert values["unprofiled_graph_launch_gap_ns"] == DEFAULTS["unprofiled_graph_launch_gap_ns"]  # not in this file
    assert len(info["from_calibration"]) == 5


def test_profiler_section_and_graph_launch_gap_of_a_calibration() -> None:
    doc = {
        "medians": {"graph_node_gap_ns": 600.0, "graph_launch_gap_ns": 1_850.0, "graph_node_interval_ns": 700.0},
        "profiler": {
            "launch_overhead_ns": 2_400.0,
            "graph_launch_cpu_fit": {"intercept": 12_000.0, "slope": 950.0},
        },
    }
    values, info = constants(doc)
    assert values["profiler_launch_overhead_ns"] == 2_400
    assert values["graph_launch_call_base_ns"] == 12_000 and values["graph_launch_call_per_node_ns"] == 950
    # the node gap (80 ns default) + what a graph boundary adds to the gap: 1850 - 600 = 1250 ns
    assert values["unprofiled_graph_launch_gap_ns"] == DEFAULTS["node_gap_ns"] + 1_250
    assert values["node_interval_ns"] == 700
    assert sorted(info["from_calibration"]) == sorted(
        [
            "profiler_launch_overhead_ns",
            "graph_launch_call_base_ns",
            "graph_launch_call_per_node_ns",
            "unprofiled_graph_launch_gap_ns",
            "node_interval_ns",
        ]
    )


def test_a_graph_boundary_cheaper_than_a_node_adds_nothing() -> None:
    values, _ = constants({"medians": {"graph_node_gap_ns": 600.0, "graph_launch_gap_ns": 500.0}})
    assert values["unprofiled_graph_launch_gap_ns"] == DEFAULTS["node_gap_ns"]


def test_node_interval_is_a_floor_on_the_gpu_side() -> None:
    floor = {**VALUES, "node_interval_ns": 600.0}
    # 100 nodes of 0.1 us: 10 us of work + 99 x 0.1 us gaps = 19.9 us < 100 x 0.6 us = 60 us
    p = predict_graph_step(1_000_000, gpu_work_ns=10_000, nodes=100, values=floor)
    assert p.gpu_side_ns == 60_000 + 5_000
    # 100 nodes of 1 us: 100 + 9.9 us > 60 us: the floor does not bind
    q = predict_graph_step(1_000_000, gpu_work_ns=100_000, nodes=100, values=floor)
    assert q.gpu_side_ns == 100_000 + 99 * 100 + 5_000


def test_unprofiled_values_swap_the_graph_launch_constants() -> None:
    both = {
        **VALUES,
        "unprofiled_graph_launch_gap_ns": 1_000.0,
        "unprofiled_graph_launch_call_base_ns": 3_000.0,
        "unprofiled_graph_launch_call_per_node_ns": 10.0,
    }
    u = unprofiled_values(both)
    assert (u["graph_launch_gap_ns"], u["graph_launch_call_base_ns"], u["graph_launch_call_per_node_ns"]) == (
        1_000,
        3_000,
        10,
    )
    assert u["node_gap_ns"] == both["node_gap_ns"] and both["graph_launch_gap_ns"] == 5_000  # input unchanged
    p = predict_graph_step(800_000, gpu_work_ns=20_000, nodes=36, values=u)
    assert p.cpu_side_ns == 3_000 + 36 * 10 and p.gpu_side_ns == 20_000 + 35 * 100 + 1_000
    assert unprofiled_values(VALUES)["graph_launch_gap_ns"] == 5_000  # no unprofiled key: the profiled one


def test_calibration_file_is_used_when_launchprof_calibrate_finds_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calibrate = pytest.importorskip("launchprof.calibrate")
    doc = json.loads((HERE / "data" / "gpu" / "calibration_h200.json").read_text())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calibrate.save_calibration(doc)
    from launchprof.api.calibration import user_calibration

    found, source = user_calibration()  # the API reads the file; the analysis is given it
    values, info = constants(found, source)
    assert info["source"] == source != "defaults"
    assert values["node_interval_ns"] == doc["medians"]["graph_node_interval_ns"]
    assert constants()[1]["source"] == "defaults"  # the analysis reads no file of its own


@pytest.mark.slow
def test_defaults_are_what_derive_defaults_computes() -> None:
    import runpy

    derived = runpy.run_path(str(HERE.parent / "scripts" / "derive_defaults.py"))["derive"]()["constants"]
    for key, value in derived.items():
        assert math.isclose(DEFAULTS[key], value), key
