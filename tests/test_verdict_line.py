"""The terminal's verdict line on real H200 traces already using CUDA graphs: it says so
instead of predicting a conversion (new-user trial: mlp_graph printed "CUDA Graph
predicted ... 1.01x" beside "no conversion recommended")."""

from __future__ import annotations

import lzma
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from launchprof.cli import app

GPU = Path(__file__).parent / "data" / "gpu"


def _graph_launches_and_steps(trace: Path) -> tuple[int, int]:
    """cudaGraphLaunch calls and 'step' NVTX ranges, counted by SQL."""
    con = sqlite3.connect(":memory:")
    con.deserialize(lzma.decompress(trace.read_bytes()))
    launches = con.execute(
        "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "WHERE s.value LIKE 'cudaGraphLaunch%'"
    ).fetchone()[0]
    steps = con.execute(
        "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.eventType = 59 AND coalesce(e.text, s.value) = 'step'"
    ).fetchone()[0]
    return launches, steps


def _verdict(trace: Path, out: Path) -> str:
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("verdict: ")]
    return line


def test_a_trace_already_using_graphs_gets_no_conversion_prediction(tmp_path: Path) -> None:
    trace = GPU / "small_kernels_graph.sqlite.xz"
    launches, steps = _graph_launches_and_steps(trace)
    assert steps > 0 and launches >= steps  # a graph launch a step, by hand
    line = _verdict(trace, tmp_path / "out")
    assert "; already runs as CUDA graphs (1 graph launch a step); no conversion recommended" in line
    assert "predicted" not in line


@pytest.mark.parametrize("name", ["small_kernels_reinstantiate", "torch_mlp_capture-every-step"])
def test_graphs_rebuilt_every_step_are_told_to_build_once(tmp_path: Path, name: str) -> None:
    line = _verdict(GPU / f"{name}.sqlite.xz", tmp_path / "out")
    assert "already runs as CUDA graphs (1 graph launch a step, rebuilt every step); a graph built once" in line
    assert line.endswith("; build the graph once (fix the reinstantiation blocker)")


def test_a_per_launch_trace_keeps_its_prediction(tmp_path: Path) -> None:
    trace = GPU / "small_kernels_launch.sqlite.xz"
    launches, _ = _graph_launches_and_steps(trace)
    assert launches == 0
    line = _verdict(trace, tmp_path / "out")
    assert "; CUDA Graph expected " in line and "without nsys" in line and "already" not in line


def test_a_predicted_loss_is_not_called_a_gain(tmp_path: Path) -> None:
    import json

    _verdict(GPU / "two_procs.sqlite.xz", tmp_path / "out")
    rec = json.loads((tmp_path / "out" / "summary.json").read_text())["recommendation"]
    speedup = rec["expected"]["eager_step_ns"] / rec["expected_step_ns"]
    assert speedup == pytest.approx(rec["expected_speedup"])
    # Under nsys a graph is predicted slower (0.90x); without it no gain (the eager step is
    # floored at the graph's GPU side): not a conversion, and not called a gain.
    assert rec["predicted_speedup"] < 1 and speedup <= 1 and rec["convert"] is False
    # The GPU waits for the launch path under nsys, but not without it: the verdict names
    # what holds the GPU back then (its own work), and agrees with the decision.
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["diagnosis"]["verdict"] == "gpu-bound" == summary["headline"]["verdict"]
    assert rec["reason"] == (
        f"GPU-bound: a graph is expected to gain only {rec['expected_speedup']:.2f}x without the profiler (under "
        f"nsys {rec['predicted_speedup']:.2f}x); the GPU's work sets the pace."
    )
