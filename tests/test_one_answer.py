"""One answer a user can act on: over every trace of the corpus (the bundled traces, the
GPU recordings, the real framework workloads), summary.json holds one graph step without
the profiler per step shape, "launch-bound" never stands beside "no conversion", and the
terminal's verdict line, the report card and the index row say what summary.json says.

The figures compared come from the outputs themselves (summary.json, the terminal line,
the card's HTML, the index row read back from the folder), not from the analysis' objects.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import pytest

import launchprof
from launchprof.commands.text import verdict_line
from launchprof.report.index import collect

DATA = Path(__file__).resolve().parent / "data"
TRACES = sorted(
    [
        *(DATA / "traces").glob("*.sqlite.xz"),
        *(DATA / "gpu").glob("*.sqlite.xz"),
        *(DATA / "frameworks").glob("*.sqlite.xz"),
    ]
)


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The documented defaults, whatever the machine's cache holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _cases() -> list[Any]:
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in TRACES]  # about 0.2 s each


def _graph_steps_without_nsys(doc: dict[str, Any]) -> set[float]:
    """Every figure of summary.json that claims to be the graph step without the profiler."""
    rec = doc.get("recommendation") or {}
    found: set[float] = set()
    exp = rec.get("expected") or {}
    for value in (rec.get("expected_step_ns"), exp.get("graph_step_ns")):
        if value is not None:
            found.add(round(float(value), 3))
    for f in (doc.get("diagnosis") or {}).get("findings") or []:
        value = (f.get("figures") or {}).get("unprofiled_graph_step_ns")
        if value is not None:
            found.add(round(float(value), 3))
    for key in ("unprofiled_graph_step_ns", "unprofiled_gpu_side_ns", "unprofiled_cpu_side_ns"):
        assert key not in (rec.get("model") or {}), f"a second prediction without the profiler: model.{key}"
    assert "corrected" not in (doc.get("baseline") or {}), (
        "a second prediction without the profiler: baseline.corrected"
    )
    return found


@pytest.mark.parametrize("trace", _cases())
def test_one_graph_step_and_a_verdict_that_agrees_everywhere(trace: Path, tmp_path: Path) -> None:
    a = launchprof.analyze(trace)
    doc = json.loads(a.summary.to_json())
    rec, diag, head = doc.get("recommendation") or {}, doc.get("diagnosis") or {}, doc.get("headline") or {}
    verdict = diag.get("verdict")

    # One graph step without the profiler, and its speedup is eager / graph step.
    graph_steps = _graph_steps_without_nsys(doc)
    assert len(graph_steps) <= 1, graph_steps
    exp = rec.get("expected")
    if exp:
        assert exp["speedup"] == pytest.approx(exp["eager_step_ns"] / exp["graph_step_ns"])
        assert rec["expected_speedup"] == exp["speedup"]
        # The graph step is its GPU side and CPU side, added for a synchronizing step.
        g, c = exp["gpu_side_ns"], exp["cpu_side_ns"]
        if not exp["shapes"]:
            assert exp["graph_step_ns"] == pytest.approx(g + c if exp["synchronizing"] else max(g, c))
        else:  # the steps' shapes' mean of that one formula, each shape's sides their own
            assert max(g, c) * (1 - 1e-9) <= exp["graph_step_ns"] <= (g + c) * (1 + 1e-9)
    model = rec.get("model") or {}
    if rec.get("predicted_step_ns") is not None and "gpu_side_ns" in model:
        # Under nsys too: the card's sides make its graph step.
        g, c = model["gpu_side_ns"], model["cpu_side_ns"]
        assert rec["predicted_step_ns"] == pytest.approx(g + c if model.get("sides_add") else max(g, c))

    # The verdict agrees with the decision.
    if verdict == "launch-bound":
        assert rec.get("convert") is True, rec.get("reason")
    if rec.get("convert"):
        assert verdict == "launch-bound"
    assert head.get("verdict") == verdict

    # The terminal says the same.
    line = verdict_line(a.summary)
    assert line is not None and line.startswith(f"verdict: {verdict}")
    if head.get("action") in ("convert", "fix-blockers-then-convert"):
        assert "; convert" in line
    elif rec:
        assert "; convert" not in line
    if exp and not head.get("graphs"):
        assert f"CUDA Graph expected {exp['speedup']:.2f}x without nsys" in line

    # The card says the same.
    card = html.unescape(a._repr_html_())
    assert verdict in card
    if exp:
        assert f"{exp['speedup']:.2f}×" in card

    # The index row, read back from the folder's summary.json, says the same.
    folder = tmp_path / "reports" / "r"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(a.summary.to_json())
    rows, _, _ = collect(tmp_path / "reports")
    (row,) = rows
    assert row.verdict == verdict and row.action == head.get("action")
    if head.get("expected_speedup") is not None:
        assert row.expected_speedup is not None and math.isclose(row.expected_speedup, head["expected_speedup"])


def test_steps_of_copies_alone_get_an_answer(tmp_path: Path) -> None:
    """Steady steps with copies and no kernel launch: no capture region of launches (this
    crashed the expectation once), one answer all the same."""
    from tracebuilder import TraceBuilder

    b = TraceBuilder()
    for i in range(12):
        t = 1_000_000 + i * 50_000
        for k in range(4):
            c = b.call("cudaMemcpyAsync_v3020", t + k * 8_000, t + k * 8_000 + 5_000)
            b.memcpy(t + k * 8_000 + 6_000, t + k * 8_000 + 7_000, c)
        b.range("step", t, t + 40_000, domain="launchprof")
    a = launchprof.analyze(b.write(tmp_path / "copies.sqlite"))
    doc = json.loads(a.summary.to_json())
    assert doc["diagnosis"]["verdict"] in ("launch-bound", "gpu-bound", "host-bound", "sync-bound")
    assert len(_graph_steps_without_nsys(doc)) <= 1
    if doc["diagnosis"]["verdict"] == "launch-bound":
        assert doc["recommendation"]["convert"] is True


@pytest.mark.parametrize(
    "value, replays",
    [(1, True), (2.0, True), (0.5, False), (None, False), (True, False), ("2", False), (float("nan"), False)],
)
def test_replays_graphs_is_one_rule_for_any_number(value: Any, replays: bool) -> None:
    """The median graph launches a step decides 'already replays CUDA graphs' whether the
    figure is a Python number or numpy's (the diagnosis' figures come from pandas); a flag
    or a text is no count."""
    import numpy as np

    from launchprof.analysis.headline import replays_graphs

    assert replays_graphs({"graph_launches_per_step_p50": value}) is replays
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        assert replays_graphs({"graph_launches_per_step_p50": np.float64(value)}) is replays
    if isinstance(value, int) and not isinstance(value, bool):
        assert replays_graphs({"graph_launches_per_step_p50": np.int64(value)}) is replays
