"""The same program gets the same advice: real programs recorded more than once, in
different device calls on lent H200s, one recording with the host slowed (the workload
shares a core with a CPU burner: scripts/slow_host.sh), each with its truth - the
program's own step without nsys over its conversion's, timed in the same call
(tests/data/frameworks/manifest.json, ``stability``; MANIFEST.md says how).

Held: every recording of a program gets the same verdict and ``convert`` decision, and
every recording's range holds the truth of every recording on a like host. And a loop whose host time is
mostly NumPy, not CUDA calls, is never called launch-bound nor told to convert.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import launchprof

CORPUS = Path(__file__).resolve().parent / "data" / "frameworks"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
STABILITY: dict[str, Any] = MANIFEST["stability"]
_CACHE: dict[str, Any] = {}


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _analysis(name: str) -> Any:
    if name not in _CACHE:
        _CACHE[name] = launchprof.analyze(CORPUS / f"{name}.sqlite.xz")
    return _CACHE[name]


def _truth(recording: dict[str, Any]) -> float:
    # The NumPy loop's own time moved by up to 30 % between processes: its truth puts the
    # conversion's NumPy time in place of the eager run's (manifest: truth_same_prep).
    return float(recording.get("truth_same_prep") or recording["truth"])


def test_every_program_was_recorded_several_times_one_with_a_slow_host() -> None:
    launch_bound = [p for p, s in STABILITY.items() if s["family"] != "numpy-pipeline"]
    assert len(launch_bound) >= 3
    for program in launch_bound:
        recordings = STABILITY[program]["recordings"]
        assert len(recordings) >= 3, program
        assert any(r["host"] == "slowed" for r in recordings), program
        assert len({r["recorded"] + r["host"] for r in recordings}) == len(recordings)  # one a device call


@pytest.mark.parametrize("program", sorted(STABILITY))
def test_the_same_program_gets_the_same_advice_and_the_ranges_hold_the_truths(program: str) -> None:
    """Every recording: the same verdict and decision; its range holds its own truth and
    the truth of every recording made on a host like its own. A slowed host changes the
    truth itself (ResNet-50 4.2x -> 10.1x, the training step 4.3x -> 13.6x: the burner
    slows the eager host path, not the graph's one launch), so a normal recording's
    range is not held to the slowed run's truth, nor the other way round."""
    recordings = STABILITY[program]["recordings"]
    assert len(recordings) >= 2
    advice = set()
    for r in recordings:
        a = _analysis(r["trace"])
        e = a.recommendation.expected
        assert e is not None and e.eager_source == "estimate"
        advice.add((a.diagnosis.verdict, a.recommendation.convert))
        for other in recordings:
            if other["host"] == r["host"]:
                assert e.speedup_low <= _truth(other) <= e.speedup_high, (r["trace"], other["trace"])
    assert len(advice) == 1, advice


@pytest.mark.parametrize("program", [p for p, s in STABILITY.items() if s["family"] == "numpy-pipeline"])
def test_a_loop_of_numpy_work_is_not_launch_bound_and_gets_no_conversion(program: str) -> None:
    for r in STABILITY[program]["recordings"]:
        a = _analysis(r["trace"])
        assert a.diagnosis.verdict != "launch-bound" and a.recommendation.convert is False
        assert a.summary.headline.action == "none"
        e = a.recommendation.expected
        assert e is not None and e.kept_share > 0.5  # most of the CPU step lies outside the region
        # ... and analyze and compare find the same steps on one trace.
        graph = r["trace"].replace("_eager_", "_graph_")
        c = launchprof.compare(CORPUS / f"{r['trace']}.sqlite.xz", CORPUS / f"{graph}.sqlite.xz")
        steps = a.found_steps
        assert (c.before.step_source, c.before.stats["count"]) == (steps.source, steps.count)
        assert c.before.stats["kernels_per_step_p50"] == steps.steady["kernels"].median()
        # The replaying side's step without the profiler (nsys's replay inflation, set on the
        # HF replays of the corpus, not on these): its range holds the loop's own clock.
        g = _analysis(graph).recommendation.step_without_profiler
        bare = MANIFEST["traces"][graph]["bare_step_us"] * 1e3
        assert g["source"] == "estimate" and g["low_ns"] <= bare <= g["high_ns"]
