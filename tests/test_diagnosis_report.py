"""The diagnosis section of report.html: content, escaping, and a real browser render."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from steploop import launch_loop
from tracebuilder import TraceBuilder

import launchprof
from launchprof.report.write import write_report

EVIL = '</script><img src=x onerror="alert(1)">'


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Predictions here use the documented defaults, whatever the machine's cache holds."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _report(tmp_path: Path, kernel_name: str = "k") -> str:
    b = TraceBuilder()
    sizes = [3, 5, 8, 16]
    launch_loop(b, steps=21, kernels=8, kernel_name=kernel_name, grid_of=lambda s, j: (sizes[s % 4], 1, 1))
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    write_report(a, tmp_path / "out")
    return (tmp_path / "out" / "report.html").read_text()


def test_diagnosis_leads_the_report(tmp_path: Path) -> None:
    page = _report(tmp_path)
    assert page.index('id="diagnosis"') < page.index("<h2>GPU time")
    assert '<strong id="verdict">launch-bound</strong>' in page
    assert "dynamic-shapes" in page and "break-even N*" in page
    assert "cudaStreamBeginCapture" in page  # CUDA C++ code: not a Python process


def test_trace_strings_are_escaped(tmp_path: Path) -> None:
    page = _report(tmp_path, kernel_name=EVIL)
    assert EVIL not in page
    assert "<img src=x" not in page


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    _report(tmp_path, kernel_name=EVIL)
    out = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
            (tmp_path / "out" / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    dom = out.stdout
    # plotly drew both diagnosis figures (an SVG inside each div), and no injected element exists.
    for fig in ("diagfig1", "diagfig2"):
        start = dom.index(f'id="{fig}"')
        assert "main-svg" in dom[start : start + 5000]
    assert "<img src=" not in dom
