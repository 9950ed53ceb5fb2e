"""Valid traces the analysis answered wrongly: each built
here with figures counted by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracebuilder import TraceBuilder

import launchprof

T53 = 2**60 + 10  # an absolute clock (ns since 1970 is ~2**60.6): float64 steps 256 ns here


def _analyze(b: TraceBuilder, path: Path, step: str | None = None):  # type: ignore[no-untyped-def]
    b.write(path)
    return launchprof.analyze(path, step=step)


# ---------------------------------------------------------------- case 7: clocks above 2**53


@pytest.mark.parametrize("t0", [1_000_000, T53], ids=["small-clock", "absolute-clock"])
def test_host_wait_is_exact_above_2_to_the_53(tmp_path: Path, t0: int) -> None:
    """12 steps of one launch: call 1000 ns, kernel 500 ns after it for 1960 ns; the next
    call starts 2560 ns after the previous and ends 100 ns after the previous kernel, its
    kernel starts 600 ns after that kernel's end. Every gap (11 x 600 ns) is host-wait:
    span 11 x 2560 + 1960 = 30120, busy 12 x 1960 = 23520. Old: at 2**60 the call end and
    the kernel end, 100 ns apart, were the same float64: the device's host-wait 0 and each
    step's 0 (while the diagnosis, from its own integer gap causes, said launch-bound)."""
    b = TraceBuilder()
    for i in range(12):
        c = t0 + i * 2560
        b.launch(c, c + 1000, c + 1500, c + 3460)
        b.range("step", c, c + 2550, domain="launchprof")
    a = _analyze(b, tmp_path / "t.sqlite")
    d = a.devices[0].figures
    assert (d.span_ns, d.busy_ns, d.idle_ns, d.host_wait_ns) == (30120, 23520, 6600, 6600)
    steps = a.found_steps
    steady = steps.steady
    assert list(steady["period_ns"]) == [2560.0] * len(steady)
    assert set(steady["host_wait_ns"]) == {600}  # the gap after each step (the one its period spans)
    # 600 / 2560 = 23.4 % host-wait, all of it the launch path; but a graph of one kernel
    # keeps the host's work around its launch (the CPU step outside the launch call) and
    # adds a cudaGraphLaunch: no gain, and the verdict names what holds the GPU back. (With
    # the 5.6 us gap between graph launches under nsys taken for the one without, the
    # GPU side was the larger: gpu-bound; predict.DEFAULTS, unprofiled_graph_launch_gap_ns.)
    assert a.diagnosis.verdict == "host-bound" and a.recommendation.convert is False
    assert a.diagnosis.reasons[-2].startswith("Under nsys: the GPU idles between its 1 kernels")
    assert "the host work a graph keeps" in a.diagnosis.reasons[-1]


# ---------------------------------------------------------------- case 4: the verdict's window


def test_host_wait_of_a_step_is_the_gap_its_period_spans(tmp_path: Path) -> None:
    """6 steps of period 10000 ns: a launch, its 7800 ns kernel, a stream sync blocked until
    after the kernel; the next launch ends after the kernel did, so each of the 5 gaps
    (2200 ns) is host-wait behind a sync. Steady steps 0-4 (the last has no period) span
    5 periods and 5 gaps: 22 % host-wait, sync-bound. Old: each step counted the gap
    before it, so steps 0-4 held 4 gaps: 17.6 %, gpu-bound."""
    b = TraceBuilder()
    for i in range(6):
        c = 1_000_000 + i * 10_000
        b.launch(c, c + 1000, c + 1500, c + 9300)
        b.call("cudaStreamSynchronize", c + 1100, c + 9350)
        b.range("step", c, c + 9400, domain="launchprof")
    a = _analyze(b, tmp_path / "t.sqlite")
    steady = a.found_steps.steady
    assert list(steady["step"]) == [0, 1, 2, 3, 4]
    assert list(steady["host_wait_ns"]) == [2200] * 5
    diag = a.diagnosis
    assert diag.figures["host_wait_ratio"] == pytest.approx(0.22)
    assert diag.figures["sync_wait_ratio"] == pytest.approx(0.22)
    assert diag.verdict == "sync-bound"


# ---------------------------------------------------------------- case 2: overlapping start/end ranges


def _four_launches(b: TraceBuilder, c: int) -> None:
    """4 launch calls of 4000 ns from ``c``, 5000 ns apart, each kernel 500 ns after its
    call for 1000 ns."""
    for j in range(4):
        t = c + j * 5000
        b.launch(t, t + 4000, t + 4500, t + 5500, name=f"k{j}")


def test_overlapping_start_end_ranges_are_steps_each(tmp_path: Path) -> None:
    """12 nvtxRangeStart/End ranges, each ending 30 us into the next (period 50 us, range
    80 us): 12 steps of 4 kernels, 11 steady, period 50000 ns; a call in the overlap is
    the later step's. Old: every range "nested" in the first: 1 step, no repeating step."""
    b = TraceBuilder()
    for i in range(12):
        c = 1_000_000 + i * 50_000
        _four_launches(b, c)
        b.range("step", c, c + 80_000, domain="launchprof", event_type=60)
    a = _analyze(b, tmp_path / "t.sqlite")
    steps = a.found_steps
    assert (steps.source, steps.count, len(steps.steady)) == ("nvtx", 12, 11)
    assert list(steps.table["kernels"]) == [4] * 12
    assert set(steps.steady["period_ns"]) == {50_000.0}


# ---------------------------------------------------------------- case 6: --step and NVTX domains


def _two_domains(tmp_path: Path) -> Path:
    """12 steps (domain "train", 4 kernels each, period 50 us) and 12 "step" ranges of a
    data-loader thread (domain "loader", no CUDA call) in between."""
    b = TraceBuilder()
    for i in range(12):
        c = 1_000_000 + i * 50_000
        _four_launches(b, c)
        b.range("step", c, c + 40_000, domain="train")
        b.range("step", c + 41_000, c + 49_000, tid=777, domain="loader")
    return b.write(tmp_path / "t.sqlite")


@pytest.mark.parametrize("step", ["step", "train:step"])
def test_step_ranges_of_two_domains_are_not_pooled(tmp_path: Path, step: str) -> None:
    """Old: --step step pooled both domains: 24 steps, 0 steady; --step train:step (the
    name the summary gives) was refused: no NVTX range named 'train:step'."""
    a = launchprof.analyze(_two_domains(tmp_path), step=step)
    steps = a.found_steps
    assert (steps.name, steps.count, len(steps.steady)) == ("train:step", 12, 11)
    assert set(steps.steady["kernels"]) == {4}


def test_step_of_an_unknown_domain_is_refused(tmp_path: Path) -> None:
    with pytest.raises(launchprof.analysis.steps.StepError, match="no NVTX range named 'other:step'"):
        launchprof.analyze(_two_domains(tmp_path), step="other:step")


# ---------------------------------------------------------------- case 3: eager kernels around graph launches


def test_eager_kernels_around_graph_launches_are_the_steps(tmp_path: Path) -> None:
    """No NVTX; 12 iterations 40 us apart: an eager kernel (call [c, c+4000], kernel
    [c+4500, c+6500]), a cudaGraphLaunch [c+5000, c+9000] of 4 kernels of 2000 ns from
    c+9500, an eager kernel (call [c+10000, c+14000]) queued behind the graph until
    c+19500. A step runs from one graph launch to the next: 6 kernels (4 in the graph),
    busy 12000 ns, idle 40000 - 12000 = 28000 ns, all host-wait (every next activity's call
    ends after the gap begins). Old: only the graph's 4 kernels were the step's; the eager
    kernels' 4000 ns read as idle: host-wait 32000 ns a step, 100 % of kernels in graphs."""
    b = TraceBuilder()
    for i in range(12):
        c = 1_000_000 + i * 40_000
        b.launch(c, c + 4000, c + 4500, c + 6500, name="copy_in")
        corr = b.call("cudaGraphLaunch_v10000", c + 5000, c + 9000)
        for n in range(4):
            b.kernel(c + 9500 + n * 2000, c + 11_500 + n * 2000, corr, name=f"g{n}", graph_node=n + 1)
        b.launch(c + 10_000, c + 14_000, c + 17_500, c + 19_500, name="post")
    a = _analyze(b, tmp_path / "t.sqlite")
    steps = a.found_steps
    assert (steps.source, steps.count) == ("graph-launch", 12)
    steady = steps.steady
    assert len(steady) == 11  # the last step has no period (its copy_in of a 13th iteration is absent)
    assert set(steady["kernels"]) == {6}
    assert set(steady["busy_ns"]) == {12_000}
    assert set(steady["host_wait_ns"]) == {28_000}
    assert set(steady["period_ns"]) == {40_000.0}
    assert a.diagnosis.figures["host_wait_ratio"] == pytest.approx(0.7)
    assert a.diagnosis.figures["graph_launches_per_step_p50"] == 1


# ---------------------------------------------------------------- case 8: steps without GPU work


@pytest.mark.parametrize("empty", [(3, 7), tuple(range(1, 12, 2))], ids=["two", "every-other"])
def test_steps_without_gpu_work_are_noted(tmp_path: Path, empty: tuple[int, ...]) -> None:
    """12 steps of 50 us (4 kernels each) but ``empty``, NVTX ranges around CPU work only.
    Steps 3 and 7 (and 2 and 6 before them, whose period ends at no GPU start) leave 12 - 1 -
    4 = 7 steady steps; every other step empty leaves none. Old: no note either way."""
    b = TraceBuilder()
    for i in range(12):
        c = 1_000_000 + i * 50_000
        if i not in empty:
            _four_launches(b, c)
        b.range("step", c, c + 40_000, domain="launchprof")
    a = _analyze(b, tmp_path / "t.sqlite")
    notes = [n for n in a.notes if "hold no GPU work" in n]
    shown = ", ".join(map(str, empty))
    assert notes and notes[0].startswith(f"{len(empty)} of 12 steps (launchprof:step) hold no GPU work (steps {shown})")
    if len(empty) == 2:
        assert len(a.found_steps.steady) == 7 and "no steady step is left" not in notes[0]
    else:
        assert notes[0].endswith("no steady step is left, so the whole trace is judged as one window")


def test_correlation_ids_past_int32_give_the_same_analysis(tmp_path: Path) -> None:
    """CUPTI's correlation ids are unsigned 32-bit: the loader keeps a table's ids int32
    only when they all fit, so one trace can hold int64 ids (the calls and kernels, here
    from 3,000,000,000 on) beside int32 ones (each step's memcpy, ids from 2,000,000,000).
    Its analysis is the one of the same loop with small ids."""
    from steploop import launch_loop

    def traced(offset: int, name: str) -> launchprof.TraceAnalysis:
        b = TraceBuilder()
        b._corr[100] = offset  # the next call's id is offset + 1

        def copy(b: TraceBuilder, s: int, t: int) -> int:
            corr = b.call("cudaMemcpyAsync_v3020", t, t + 2_000, corr=2_000_000_000 + s)
            b.memcpy(t + 2_500, t + 3_500, corr)
            return t + 2_000

        launch_loop(b, steps=12, kernels=6, in_step=copy)
        return launchprof.analyze(b.write(tmp_path / name))

    big, small = traced(3_000_000_000, "big.sqlite"), traced(0, "small.sqlite")
    assert big.trace.kernels["correlation_id"].min() > 2**31 > big.trace.memops["correlation_id"].max()
    assert big.trace.kernels["correlation_id"].dtype == "int64" and big.trace.memops["correlation_id"].dtype == "int32"
    assert small.trace.kernels["correlation_id"].dtype == "int32"
    assert big.diagnosis.verdict == small.diagnosis.verdict and big.found_steps.count == small.found_steps.count == 12
    assert big.diagnosis.figures == small.diagnosis.figures
    assert big.recommendation.expected == small.recommendation.expected
