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


def _analyze(b: TraceBuilder, tmp_path: Path, **kw) -> launchprof.Analysis:
    return launchprof.analyze(b.write(tmp_path / "t.sqlite"), **kw)


def test_overlapping_kernels_on_two_streams_count_once(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(100, 900, 1000, 3000, stream=7)  # k1
    b.launch(1000, 1800, 2000, 4000, stream=9)  # k2 overlaps k1 by 1000
    b.launch(4200, 5000, 6000, 7000, stream=7)  # k3: call ends 5000, after the gap opened at 4000
    b.launch(2500, 3500, 6500, 9000, stream=9)  # k4: queued early (call ends 3500)
    a = _analyze(b, tmp_path)
    d = a.devices[0].figures
    # union [1000, 4000) + [6000, 9000)
    assert (d.kernels, d.span_ns, d.busy_ns, d.idle_ns) == (4, 8000, 6000, 2000)
    assert (d.bubbles.count, d.bubbles.total_ns) == (1, 2000)
    assert d.host_wait_ns == 2000  # the gap [4000, 6000) ends with k3
    assert (d.utilization, d.cpu_bound_ratio) == (0.75, 0.25)
    s7, s9 = a.devices[0].streams
    assert (s7.stream_id, s7.figures.kernels, s7.figures.span_ns, s7.figures.busy_ns) == (7, 2, 6000, 3000)
    assert s7.figures.host_wait_ns == 3000  # gap [3000, 6000), k3's call ended at 5000
    assert (s9.stream_id, s9.figures.kernels, s9.figures.span_ns, s9.figures.busy_ns) == (9, 2, 7000, 4500)
    assert s9.figures.host_wait_ns == 0  # gap [4000, 6500), k4's call ended at 3500
    assert s9.figures.bubbles.total_ns == 2500


def test_memcpy_memset_and_kernel_are_all_busy(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.memcpy(1000, 1500, b.call("cudaMemcpyAsync_v3020", 100, 200))
    b.memset(1400, 1800, b.call("cudaMemsetAsync_v3020", 300, 400))  # overlaps the memcpy by 100
    b.launch(500, 600, 3000, 4000)
    a = _analyze(b, tmp_path)
    d = a.devices[0].figures
    assert (d.kernels, d.memops) == (1, 2)
    assert (d.span_ns, d.busy_ns, d.idle_ns) == (3000, 800 + 1000, 1200)
    assert (d.bubbles.count, d.bubbles.total_ns) == (1, 1200)
    assert d.host_wait_ns == 0  # the kernel's call ended at 600, long before the gap
    assert a.launches.kernel_launch_calls == 1
    assert sorted(a.trace.memops["kind"]) == ["memcpy", "memset"]


def test_host_wait_joins_on_pid_and_correlation_id(tmp_path: Path) -> None:
    """Processes 100 and 200 both use correlation ids 1 and 2. Joined on (pid, id) only
    the gap [2000, 5000) is host-wait (3000 ns). A join on the id alone finds two calls
    per activity; whichever it keeps (first, last, any, all) it counts the gap
    [6000, 7000) too or misses the first: 4000 or 0 or 1000, never 3000."""
    b = TraceBuilder()
    # correlation id 1: the right call (pid 200) starts first and ends late.
    b.call("cudaLaunchKernel_v7000", 50, 4500, pid=200, corr=1)
    b.call("cudaLaunchKernel_v7000", 100, 900, pid=100, corr=1)
    # correlation id 2: the right call (pid 100) starts last and ends early.
    b.call("cudaLaunchKernel_v7000", 2900, 6500, pid=200, corr=2)
    b.call("cudaLaunchKernel_v7000", 3000, 5500, pid=100, corr=2)
    b.kernel(1000, 2000, corr=1, pid=100)  # A
    b.kernel(5000, 6000, corr=1, pid=200)  # B: ends gap [2000, 5000); its call ended 4500
    b.kernel(7000, 8000, corr=2, pid=100)  # D: ends gap [6000, 7000); its call ended 5500
    b.kernel(7500, 8500, corr=2, pid=200)  # E: overlaps D
    a = _analyze(b, tmp_path)
    d = a.devices[0].figures
    assert (d.span_ns, d.busy_ns, d.idle_ns) == (7500, 3500, 4000)
    assert d.host_wait_ns == 3000
    gaps = d.gaps
    assert gaps[["start", "end", "host_wait"]].values.tolist() == [[2000, 5000, True], [6000, 7000, False]]
    assert gaps[["next_pid", "next_correlation_id"]].values.tolist() == [[200, 1], [100, 2]]
    p100, p200 = a.devices[0].processes
    assert (p100.pid, p100.figures.host_wait_ns) == (100, 5000)  # gap [2000, 7000), D's call ended 5500
    assert (p200.pid, p200.figures.host_wait_ns) == (200, 1500)  # gap [6000, 7500), E's call ended 6500
    # Kernel 1000 ns vs its call: A 800 (no), B 4450, D 2500, E 3600 (yes): 3 of 4.
    assert a.launches.kernels_shorter_than_launch_ratio == 0.75
    assert a.processes_without_gpu == []


def test_graph_trace_mode_counts_graph_launches_and_busy_from_graph_rows(tmp_path: Path) -> None:
    """--cuda-graph-trace=graph: one GRAPH_TRACE row per launch and no kernel rows."""
    b = TraceBuilder()
    b.call("cudaGraphInstantiateWithFlags_v11040", 0, 500)
    b.graph_exec(1000, 3000, b.call("cudaGraphLaunch_v10000", 600, 700))
    b.graph_exec(3000, 5000, b.call("cudaGraphLaunch_v10000", 800, 900))  # touches the first
    b.graph_exec(7000, 9000, b.call("cudaGraphLaunch_v10000", 5500, 6000))  # the GPU waited for this call
    a = _analyze(b, tmp_path)
    assert len(a.trace.kernels) == 0
    d = a.devices[0].figures
    assert (d.kernels, d.memops) == (0, 0)
    assert (d.span_ns, d.busy_ns, d.idle_ns) == (8000, 6000, 2000)
    assert (d.bubbles.count, d.host_wait_ns) == (1, 2000)
    la = a.launches
    assert (la.graph_launches, la.graph_instantiations, la.kernel_launch_calls) == (3, 1, 0)
    assert la.graph_launch_call_p50_ns == 100  # durations 100, 100, 500
    assert la.graph_instantiate_p50_ns == 500
    assert la.kernels_in_graphs == 0


def test_nsys_2022_schema_trace(tmp_path: Path) -> None:
    """EXPORT_META_DATA, schema 3.0.0, no graphNodeId column, no MEMSET table."""
    b = TraceBuilder("2022")
    b.memcpy(500, 800, b.call("cudaMemcpyAsync_v3020", 0, 100))
    b.launch(200, 700, 1500, 2500)  # queued before the memcpy ended
    b.launch(1100, 4000, 4500, 5000)
    a = _analyze(b, tmp_path)
    assert (a.trace.schema.nsys_version, a.trace.schema.schema_version) == ("2022.4.2.1", "3.0.0")
    assert not a.trace.schema.has("CUPTI_ACTIVITY_KIND_KERNEL", "graphNodeId")
    d = a.devices[0].figures
    assert (d.kernels, d.memops, d.span_ns, d.busy_ns) == (2, 1, 4500, 300 + 1000 + 500)
    # gaps: [800, 1500) = 700 ns (below 1 us; its kernel's call ended at 700, not host-wait),
    # [2500, 4500) = 2000 ns, host-wait (its kernel's call ended at 4000)
    assert (d.bubbles.count, d.bubbles.total_ns, d.host_wait_ns) == (1, 2000, 2000)
    assert a.launches.kernels_in_graphs == 0
    assert a.launches.kernel_launch_calls == 2


def _gappy(tmp_path: Path) -> Path:
    """Four kernels with gaps of 200, 1000, 2500 and 4000 ns."""
    b = TraceBuilder()
    t = 1000
    for gap in (200, 1000, 2500, 4000, None):
        b.launch(0, 10, t, t + 500)
        t += 500 + (gap or 0)
    return b.write(tmp_path / "gappy.sqlite")


def test_bubble_threshold_option(tmp_path: Path) -> None:
    path = _gappy(tmp_path)
    counts = {}
    for threshold_ns in (0, 201, 1000, 2500, 2501, 10_000):
        f = launchprof.analyze(path, bubble_threshold_ns=threshold_ns).devices[0].figures
        counts[threshold_ns] = (f.bubbles.count, f.bubbles.total_ns, f.bubbles.threshold_ns)
        assert f.idle_ns == 7700  # the threshold changes bubbles, never idle time
    assert counts == {
        0: (4, 7700, 0),
        201: (3, 7500, 201),
        1000: (3, 7500, 1000),  # a gap of exactly the threshold is a bubble
        2500: (2, 6500, 2500),
        2501: (1, 4000, 2501),
        10_000: (0, 0, 10_000),
    }


def test_processes_without_gpu(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 100, 1000, 2000, pid=100)
    b.call("cudaMalloc_v3020", 0, 50, pid=300)
    b.call("cudaFree_v3020", 60, 70, pid=300)
    b.call("cudaGetDeviceCount_v3020", 0, 5, pid=250)
    a = _analyze(b, tmp_path)
    assert a.processes_without_gpu == [250, 300]
    assert [p.pid for p in a.devices[0].processes] == [100]


def test_nvtx_ranges_lost_when_domains_have_no_ranges(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 100, 1000, 2000)
    b.domain("torch")
    b.domain("mylib")
    a = _analyze(b, tmp_path)
    assert a.trace.nvtx_domain_events == 2
    assert a.nvtx_ranges_lost is True
    assert any("no NVTX range was recorded" in n for n in a.notes)


def test_nvtx_ranges_kept_are_not_lost(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 100, 1000, 2000)
    b.range("step", 0, 3000, domain="torch")
    b.range("step", 3000, 6000)
    a = _analyze(b, tmp_path)
    assert a.nvtx_ranges_lost is False
    assert a.trace.nvtx[["text", "domain"]].values.tolist() == [["step", "torch"], ["step", ""]]


def test_no_nvtx_at_all_is_not_lost(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 100, 1000, 2000)
    assert _analyze(b, tmp_path).nvtx_ranges_lost is False


def test_bubble_percentiles_and_histogram(tmp_path: Path) -> None:
    b = launchprof.analyze(_gappy(tmp_path)).devices[0].figures.bubbles
    # bubbles >= 1 us: 1000, 2500, 4000 ns
    assert (b.p50_ns, b.p90_ns, b.max_ns) == (2500, 2500 + 0.8 * 1500, 4000)
    nonzero = [(lo, hi, c) for lo, hi, c in b.histogram if c]
    assert nonzero == [(1000, 2000, 1), (2000, 5000, 2)]
    assert b.histogram[0][0] == 1000 and b.histogram[-1][1] is None


def test_two_devices_are_measured_apart(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.gpus = [(0, "GPU zero"), (1, "GPU one")]
    b.launch(0, 100, 1000, 2000, device=0)
    b.launch(100, 200, 1500, 4500, device=1)  # would fill device 0's gap if mixed
    b.launch(200, 2500, 3000, 3500, device=0)
    a = _analyze(b, tmp_path)
    d0, d1 = a.devices
    assert (d0.device_id, d0.name, d1.device_id, d1.name) == (0, "GPU zero", 1, "GPU one")
    assert (d0.figures.kernels, d0.figures.span_ns, d0.figures.busy_ns, d0.figures.host_wait_ns) == (
        2,
        2500,
        1500,
        1000,
    )
    assert (d1.figures.kernels, d1.figures.span_ns, d1.figures.busy_ns, d1.figures.idle_ns) == (1, 3000, 3000, 0)
