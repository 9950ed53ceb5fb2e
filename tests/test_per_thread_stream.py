"""A program built with the per-thread default stream (``nvcc --default-stream per-thread``)
calls the runtime's ``_ptsz`` entry points, which nsys records as
``cudaLaunchKernel_ptsz_v7000`` and ``cudaStreamSynchronize_ptsz_v7000``. Recorded on an
H200 (tests/data/gpu/MANIFEST.md, "per_thread_stream"): examples/cuda/per_thread_stream.cu
built both ways, each build recorded twice. Before these names were known, the per-thread
build had no launch call and no synchronization: "launch-bound, convert, 5.3x" for the
program whose legacy build got "no conversion, 1.1x".

Counts come from sqlite3 (the names as nsys wrote them), not from launchprof."""

from __future__ import annotations

import lzma
import sqlite3
from pathlib import Path

import pytest

import launchprof

GPU = Path(__file__).resolve().parent / "data" / "gpu"
BUILDS = ("ptsz", "legacy")
RECORDINGS = [f"per_thread_stream_{b}_rec{r}" for b in BUILDS for r in (1, 2)]


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _calls(name: str, tmp_path: Path) -> dict[str, int]:
    """Runtime calls per name as nsys wrote it (version suffix included)."""
    plain = tmp_path / f"{name}.sqlite"
    plain.write_bytes(lzma.decompress((GPU / f"{name}.sqlite.xz").read_bytes()))
    with sqlite3.connect(plain) as con:
        rows = con.execute(
            "SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id "
            "GROUP BY s.value"
        ).fetchall()
    return {str(n): int(c) for n, c in rows}


@pytest.mark.parametrize("name", RECORDINGS)
def test_every_launch_and_synchronize_is_counted_whatever_the_default_stream(name: str, tmp_path: Path) -> None:
    calls = _calls(name, tmp_path)
    per_thread = "ptsz" in name
    assert any("_ptsz" in n for n in calls) == per_thread  # the recording is what its name says
    launches = sum(c for n, c in calls.items() if n.startswith("cudaLaunchKernel"))
    a = launchprof.analyze(GPU / f"{name}.sqlite.xz")
    assert launches == 2401 and a.launches.kernel_launch_calls == launches  # 300 steps x 8, 1 warm-up
    d = a.diagnosis
    assert d is not None and d.figures["launch_calls_per_step_p50"] == 8
    assert d.figures["sync_wait_ratio"] > 0.1  # each step ends in a cudaStreamSynchronize(_ptsz)
    assert "sync-in-step" in {f.kind for f in d.findings}
    assert ("legacy-stream" in {f.kind for f in d.findings}) == (not per_thread)


def test_both_builds_get_one_answer() -> None:
    """The same loop, built two ways and recorded twice each: one recommendation, expected
    speedups within 15 % of each other (the verdict's name may differ: see the note)."""
    got = {name: launchprof.analyze(GPU / f"{name}.sqlite.xz").recommendation for name in RECORDINGS}
    assert {r.convert for r in got.values()} == {False}
    speedups = [r.expected_speedup for r in got.values()]
    assert max(speedups) / min(speedups) < 1.15, speedups


@pytest.mark.parametrize(
    "recorded, named",
    [
        ("cudaLaunchKernel_v7000", "cudaLaunchKernel"),
        ("cudaLaunchKernel_ptsz_v7000", "cudaLaunchKernel_ptsz"),
        ("cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoD_ptds"),  # a driver call's per-thread form (cuda.h)
        ("cuMemcpyHtoD_v2", "cuMemcpyHtoD"),
        ("cudaGraphLaunch", "cudaGraphLaunch"),
        ("my_v2_kernel_helper", "my_v2_kernel_helper"),  # a version only at the end
    ],
)
def test_a_call_has_one_name_whatever_its_version(recorded: str, named: str, tmp_path: Path) -> None:
    from tracebuilder import TraceBuilder

    b = TraceBuilder()
    corr = b.call(recorded, 1_000, 2_000)
    b.kernel(3_000, 4_000, corr)
    calls = launchprof.analyze(b.write(tmp_path / "t.sqlite")).trace.api["call"].astype(str)
    assert list(calls) == [named]
