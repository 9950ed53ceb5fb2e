"""Graphs that replay what the eager run launches as many short repeats (tests/data/
frameworks, manifest ``whole_replays``): an LSTMCell sequence and a BERT forward captured
whole, no step markers, and a CuPy loop; recorded on an H200 with the workloads' own clock
without a profiler (the truth: the eager step over the graph step, before and after the
profile).

The LSTM's eager steps are found one cell long (3 kernels) and its graph's one sequence
(99): compare cuts BEFORE into steps of one replay's kernels, and its step without the
profiler must then be one sequence's too (it was one cell's: 0.16x where the truth is
6.8x)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import launchprof

CORPUS = Path(__file__).resolve().parent / "data" / "frameworks"
PAIRS: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())["whole_replays"]["pairs"]


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _truths(pair: dict[str, Any]) -> list[float]:
    """The eager step over the graph step, from each of the two timings (before and after)."""
    t = pair["bare_step_us"]
    return [b / a for b, a in zip(t["before"], t["after"], strict=True)]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p["before"])
def test_a_whole_replay_is_verified_against_the_eager_steps_it_replaces(pair: dict[str, Any]) -> None:
    c = launchprof.compare(CORPUS / f"{pair['before']}.sqlite.xz", CORPUS / f"{pair['after']}.sqlite.xz")
    assert c.verdict == "verified"
    # BERT captured runs 9 other kernel kinds (20 % of its kernel time): PyTorch picks other
    # kernels under capture; compare calls that a known transform, still the same work
    assert c.work_change is not None and c.work_change.kind in ("same", "known-transform")
    assert c.speedup_unprofiled is not None and c.speedup_unprofiled_ci is not None
    lo, hi = c.speedup_unprofiled_ci
    truths = _truths(pair)
    assert max(truths) / min(truths) < 1.15  # the truth held still over the call
    if pair["before"].startswith("bert"):
        # the eager BERT host ran 1.0x-1.1x slower under nsys, not the 2.0x the PyTorch estimate
        # assumes: the range holds the truth, the estimate is 45 % short of it
        assert all(lo <= t <= hi for t in truths)
    elif pair["before"].startswith("cupy"):
        # a CuPy loop: nsys's cost per driver launch is a constant (no calibration): the estimate
        # is 11 % short of the truth and its range misses it by 5 %
        assert all(t == pytest.approx(c.speedup_unprofiled, rel=0.30) for t in truths)
    else:
        assert all(lo <= t <= hi for t in truths)
        assert all(t == pytest.approx(c.speedup_unprofiled, rel=0.30) for t in truths)


def test_the_lstm_before_side_is_cut_to_whole_sequences_without_the_profiler_too() -> None:
    """BEFORE re-cut into one replay's kernels is diagnosed again on those steps: its step
    without the profiler is a sequence's (the workload's own clock), not a cell's."""
    pair = next(p for p in PAIRS if p["before"].startswith("lstm"))
    before = launchprof.analyze(CORPUS / f"{pair['before']}.sqlite.xz")
    cell = before.recommendation.step_without_profiler["step_ns"]
    c = launchprof.compare(CORPUS / f"{pair['before']}.sqlite.xz", CORPUS / f"{pair['after']}.sqlite.xz")
    assert c.before.kernels_per_step == pair["kernels_per_replay"]
    step = c.before.step_without_profiler["step_ns"]
    assert step > 10 * cell
    assert all(step == pytest.approx(t * 1e3, rel=0.30) for t in pair["bare_step_us"]["before"])
