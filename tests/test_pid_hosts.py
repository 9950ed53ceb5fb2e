"""Two processes with one pid on two hosts or VMs (nsys's globalPid differs only in the bits
above the 24-bit pid) stay two processes; a trace of one host keeps its plain pids.
Crafted traces (tests/tracebuilder.py)."""

from __future__ import annotations

from pathlib import Path

from tracebuilder import TraceBuilder

import launchprof
from launchprof.trace import load_trace

OTHER_HOST = 1 << 24  # a pid given as (host/VM bits << 24) | pid by the builder's gtid/gpid


def _two(tmp_path: Path, second: int) -> Path:
    b = TraceBuilder()
    t = 1_000_000
    for i in range(40):  # process A: launches back to back; process B: 20 us of host work between launches
        b.launch(t + i * 30_000, t + i * 30_000 + 5_000, t + i * 30_000 + 6_000, t + i * 30_000 + 8_000, pid=700)
        s = t + 10_000 + i * 30_000
        b.launch(s, s + 4_000, s + 4_500, s + 6_000, pid=second)
    return b.write(tmp_path / "t.sqlite")


def test_one_pid_on_two_hosts_stays_two_processes(tmp_path: Path) -> None:
    path = _two(tmp_path, 700 | OTHER_HOST)
    trace = load_trace(path)
    assert trace.api["pid"].nunique() == 2 and trace.kernels["pid"].nunique() == 2
    assert any("pid 700 belongs to processes on different hosts or VMs" in n for n in trace.notes)
    result = launchprof.analyze(path)
    assert len(result.devices[0].processes) == 2


def test_a_one_host_trace_keeps_its_plain_pids(tmp_path: Path) -> None:
    trace = load_trace(_two(tmp_path, 701))
    assert sorted(trace.kernels["pid"].unique()) == [700, 701]
    assert sorted(trace.api["pid"].unique()) == [700, 701]
    assert not any("different hosts" in n for n in trace.notes)
