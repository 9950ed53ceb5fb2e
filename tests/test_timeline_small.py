"""Exact figures on tiny traces built here, counted by hand."""

from __future__ import annotations

from pathlib import Path

from tracebuilder import TraceBuilder

import launchprof


def test_two_kernels_one_host_wait_gap(tmp_path: Path) -> None:
    b = TraceBuilder()
    # kernel 1: [1000, 2000); its launch call ends at 900 (queued ahead of time).
    b.launch(100, 900, 1000, 2000)
    # kernel 2: [5000, 5500); its launch call ends at 4800 > 2000: the GPU waited.
    b.launch(4000, 4800, 5000, 5500)
    # kernel 3: [5700, 6000); launched early (call ends 3000): a non-host-wait 200 ns gap.
    b.launch(2500, 3000, 5700, 6000)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    d = a.devices[0].figures
    assert d.kernels == 3
    assert d.span_ns == 5000  # 1000 .. 6000
    assert d.busy_ns == 1000 + 500 + 300
    assert d.idle_ns == 3000 + 200
    assert d.bubbles.count == 1  # only the 3000 ns gap is >= 1 us
    assert d.bubbles.total_ns == 3000
    assert d.host_wait_ns == 3000
    assert d.cpu_bound_ratio == 3000 / 5000
    assert a.launches.kernel_launch_calls == 3
    assert a.launches.launch_call_p50_ns == 800  # durations 800, 800, 500
