"""``launchprof calibrate`` on a real GPU (skipped where there is none: CI has no GPU; run on
the H200 with ``python -m pytest tests/test_calibrate_on_gpu.py``).

What a measurement must satisfy whatever the GPU: every median positive, kernels really
queued back to back (the queueing took less than the spin kernel), an interval no shorter
than the gap inside it, instantiation growing with the node count, and, under nsys, launch
calls slower than without it.
"""

from __future__ import annotations

import shutil

import pytest

from launchprof.calibrate import CalibrationError, run_calibration

pytestmark = pytest.mark.gpu


def _gpu_or_skip() -> dict[str, object]:
    try:
        return run_calibration()
    except CalibrationError as exc:
        pytest.skip(f"no GPU to calibrate: {exc}")


@pytest.fixture(scope="module")
def calibration() -> dict[str, object]:
    return _gpu_or_skip()


def test_medians_are_positive_and_queued_back_to_back(calibration: dict) -> None:  # type: ignore[type-arg]
    med = calibration["medians"]
    assert all(v > 0 for v in med.values()), med
    assert calibration["checks"]["back_to_back"] is True
    assert med["stream_kernel_interval_ns"] >= med["stream_kernel_gap_ns"]
    assert med["graph_node_interval_ns"] >= med["graph_node_gap_ns"]
    assert med["graph_launch_interval_ns"] >= med["graph_launch_gap_ns"]
    assert calibration["duration_s"] < 60  # calibrate promises under a minute


def test_instantiation_grows_with_nodes(calibration: dict) -> None:  # type: ignore[type-arg]
    by = calibration["by_nodes"]
    inst = by["instantiate_ns"]
    assert inst[-1] > inst[0] and calibration["fits"]["instantiate_ns"]["slope"] > 0
    assert by["update_ns"][-1] < by["reinstantiate_ns"][-1]  # exercise 3: update is the cheaper way


def test_profiler_section_under_real_nsys(calibration: dict) -> None:  # type: ignore[type-arg]
    from launchprof.calibrate.profiler import measure_profiler_overhead
    from launchprof.nsys.locate import nsys_info

    if shutil.which("nsys") is None:
        pytest.skip("no nsys on PATH")
    info = nsys_info()
    section = measure_profiler_overhead(info.path, info.version)
    shown = {k: v for k, v in section.items() if k != "samples"}
    assert section["launch_overhead_ns"] > 0, shown
    assert section["graph_launch_cpu_fit"]["slope"] > 0, shown  # --cuda-graph-trace=node: grows with the nodes
    assert section["launch_cpu_ns"]["profiled"] > section["launch_cpu_ns"]["unprofiled"], shown
