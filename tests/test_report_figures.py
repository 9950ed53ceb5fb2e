"""The report's figures on built traces: lanes, escaping, downsampling, labels."""

from __future__ import annotations

from pathlib import Path

from tracebuilder import TraceBuilder

import launchprof
from launchprof.report import figures
from launchprof.report.write import write_report
from launchprof.text import duration_label


def test_duration_labels_pick_a_fitting_unit() -> None:
    got = [duration_label(ns) for ns in (500, 1_000, 20_000, 1_500_000, 2_000_000_000)]
    assert got == ["500 ns", "1 µs", "20 µs", "1.5 ms", "2 s"]


def test_timeline_lanes_of_two_processes_and_escaped_names(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 100, 1000, 2000, pid=1, stream=3, name="<b>k</b>")
    b.launch(0, 2500, 3000, 3500, pid=2, stream=3)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    dev = a.devices[0]
    assert figures.timeline_window(dev) == (3000, 3000 + figures.TIMELINE_WINDOW_NS)  # the median activity
    fig, downsampled = figures.timeline(a, dev, (0, 10_000))
    assert not downsampled
    lanes = {y for trace in fig.data for y in trace.y}
    assert lanes == {
        "CPU pid 1 tid 1",
        "CPU pid 2 tid 2",
        "GPU 0 idle",
        "GPU 0 stream 3 (pid 1)",
        "GPU 0 stream 3 (pid 2)",
    }
    kernel = next(t for t in fig.data if t.name == "kernel")
    assert sorted(kernel.customdata) == ["&lt;b&gt;k&lt;/b&gt;", "k"]
    # The gap [2000, 3000) ns ends with pid 2's kernel, whose call ended at 2500: host-wait.
    gaps = next(t for t in fig.data if t.name == "host-wait gap")
    assert (list(gaps.y), list(gaps.base), list(gaps.x)) == (["GPU 0 idle"], [2.0], [1.0])


def test_dense_window_is_downsampled_and_the_page_says_so(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(6000):  # 6000 kernels of 100 ns every 300 ns: 1.8 ms, half of it in the window
        b.launch(10 * i, 10 * i + 5, 1000 + 300 * i, 1100 + 300 * i)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    dev = a.devices[0]
    fig, downsampled = figures.timeline(a, dev, (dev.figures.start_ns, dev.figures.start_ns + 2_000_000))
    assert downsampled
    assert sum(len(t.x) for t in fig.data if t.name == "kernel") == figures.MAX_TIMELINE_BARS // 2
    write_report(a, tmp_path / "r")
    assert "Downsampled: only the earliest 2,000 GPU activities" in (tmp_path / "r" / "report.html").read_text()


def test_bubble_histogram_stops_at_the_last_non_empty_bin(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 10, 1000, 2000)
    b.launch(0, 10, 5000, 6000)  # a 3 us bubble
    b.launch(0, 10, 6500, 7000)  # a 500 ns gap: not a bubble
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    bar = figures.bubble_histogram(a.devices[0]).data[0]
    assert list(bar.x) == ["1 µs – 2 µs", "2 µs – 5 µs"]
    assert list(bar.y) == [0, 1]
