"""The same program on a slower host gets the same advice, and never a lower expected gain
(the capture region follows the program's structure, not how fast its host ran).

Crafted traces of one decode-like program: each step runs loop Python without CUDA calls,
then 40 kernel launches (the forward), a read-back sync, then more loop Python. The host's
times (calls, the gaps between them, the Python around them) are scaled by 1x, 2x and 3x;
the GPU's kernels keep their length. At 1x the gaps between launch calls are 60 us, at 2x
and 3x they pass 100 us (the threshold that splits an idle gap's cause), which used to cut
the forward into pieces and shrink what a graph was expected to remove.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tracebuilder import TraceBuilder

import launchprof


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


KERNEL_NS = 8_000


def _decode_like(path: Path, host_scale: float, steps: int = 14, launches: int = 40) -> Path:
    """The crafted program (module docstring), its host ``host_scale`` times slower."""
    b = TraceBuilder()
    t, gpu_free = 1_000_000, 0

    def h(ns: float) -> int:
        return int(ns * host_scale)

    for _ in range(steps):
        step_start = t
        t += h(400_000)  # the loop's own Python before the forward
        for _ in range(launches):
            call_end = t + h(6_000)
            k_start = max(call_end + 2_000, gpu_free + 500)
            b.launch(t, call_end, k_start, k_start + KERNEL_NS)
            gpu_free = k_start + KERNEL_NS
            t = call_end + h(60_000)  # dispatch and Python between two ops
        sync_end = max(t + h(5_000), gpu_free + 1_000)
        b.call("cudaStreamSynchronize_v3020", t, sync_end)
        t = sync_end + h(300_000)  # sampling, the stopping check
        b.range("step", step_start, t - 1, domain="launchprof")
    return b.write(path)


def test_a_slower_host_gets_the_same_advice_and_no_lower_gain(tmp_path: Path) -> None:
    results = []
    for scale in (1.0, 2.0, 3.0):
        a = launchprof.analyze(_decode_like(tmp_path / f"x{scale}.sqlite", scale))
        rec, e = a.recommendation, a.recommendation.expected
        assert e is not None and e.synchronizing
        results.append((scale, a.diagnosis.verdict, rec.convert, e.kept_share, e.speedup, e.speedup_low))
    (_, v1, c1, k1, s1, _), *slower = results
    for _, verdict, convert, kept, speedup, _ in slower:
        assert (verdict, convert) == (v1, c1)
        assert kept == pytest.approx(k1, abs=0.02)  # the region is the same part of the step
        assert speedup >= s1 * 0.999
    # Held to a hand figure: the region runs from the first launch call of the forward
    # to the end of its last (40 launches, 39 gaps: 40 x 6 us + 39 x 60 us = 2.58 ms at 1x),
    # the CPU step is 0.4 ms + that + the sync + 0.3 ms around it.
    a = launchprof.analyze(_decode_like(tmp_path / "hand.sqlite", 1.0))
    e = a.recommendation.expected
    assert e is not None and e.region_ns is not None
    # CYCLE_LAUNCH_SHARE of the launches: the shortest stretch of 32 of the 40 launches.
    need = 32
    assert e.region_ns == pytest.approx(need * 6_000 + (need - 1) * 60_000, rel=0.01)
