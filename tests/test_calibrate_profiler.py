"""The ``profiler`` section of a calibration (launchprof.calibrate.profiler), by hand.

The host loop itself needs a GPU and nsys; it was run on the H200 through
``launchprof calibrate --profiler`` (figures in docs/results.md)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from launchprof.calibrate import CalibrationError
from launchprof.calibrate.profiler import summarize
from launchprof.cli import app


def _loop(launch: list[int], graph: dict[int, list[int]]) -> dict[str, object]:
    return {"launch_cpu_ns": launch, "graph_launch_cpu_ns": {str(n): v for n, v in graph.items()}}


def test_summarize_by_hand() -> None:
    bare = _loop([3_100, 2_900, 3_000], {1: [3_000, 3_000], 16: [3_200, 3_000], 64: [3_700, 3_500]})
    # under nsys the graph launch grows 1 us per node on 12 us: 13 us, 28 us, 76 us
    under = _loop([5_400, 5_600, 5_500], {1: [13_000, 13_000], 16: [28_000, 28_000], 64: [76_000, 76_000]})
    got = summarize(bare, under)
    assert got["launch_cpu_ns"] == {"unprofiled": 3_000, "profiled": 5_500}
    assert got["launch_overhead_ns"] == 2_500
    assert got["graph_launch_cpu_ns"] == {
        "nodes": [1, 16, 64],
        "unprofiled": [3_000, 3_100, 3_600],
        "profiled": [13_000, 28_000, 76_000],
    }
    fit = got["graph_launch_cpu_fit"]
    assert fit["intercept"] == pytest.approx(12_000) and fit["slope"] == pytest.approx(1_000)
    over = got["graph_launch_overhead_fit"]  # 10000, 24900, 72400: the least-squares line
    xs, ys = [1, 16, 64], [10_000, 24_900, 72_400]
    mx, my = sum(xs) / 3, sum(ys) / 3
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    assert over["slope"] == pytest.approx(slope) and over["intercept"] == pytest.approx(my - slope * mx)


def test_summarize_rejects_runs_that_do_not_match() -> None:
    good = _loop([1], {1: [1]})
    with pytest.raises(CalibrationError, match="no launches"):
        summarize(_loop([], {1: [1]}), good)
    with pytest.raises(CalibrationError, match="different graphs"):
        summarize(good, _loop([1], {2: [1]}))


def test_calibrate_profiler_without_nsys_is_one_line() -> None:
    result = CliRunner().invoke(app, ["calibrate", "--profiler", "--nsys", "/nonexistent/nsys"])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "nsys not found at /nonexistent/nsys" in lines[0]
