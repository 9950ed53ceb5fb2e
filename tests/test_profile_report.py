"""The report page says prominently when NVTX ranges were lost, and names processes that
made CUDA calls without GPU activity (tiny trace built here; page read by a real browser
when chromium is installed)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder

import launchprof
from launchprof.report.write import write_report


def build(tmp_path: Path) -> Path:
    b = TraceBuilder("2022")
    b.launch(100, 900, 1000, 2000, pid=100)
    b.call("cudaMalloc_v3020", 50, 80, pid=200)  # a CUDA call, no GPU activity
    b.nvtx.append(dict(start=10, end=None, eventType=75, text="launchprof", globalTid=0, domainId=1, textId=None))
    path = b.write(tmp_path / "t.sqlite")
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)")
    con.executemany("INSERT INTO PROCESSES VALUES (?, ?, ?)", [(1, 100, "trainer"), (2, 200, "data<loader>")])
    con.commit()
    con.close()
    return path


@pytest.mark.browser
def test_lost_ranges_card_and_named_process_without_gpu(tmp_path: Path) -> None:
    analysis = launchprof.analyze(build(tmp_path))
    summary = write_report(analysis, tmp_path / "rep")
    assert summary.nvtx_ranges_lost is True
    assert summary.processes_without_gpu == [200]
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.index('id="nvtx-lost"') < page.index("<h2>GPU time")  # above the figures
    assert "Fix: mark the loop with\n<code>launchprof.step()</code>" in page
    assert "200 (data&lt;loader&gt;)" in page  # named, escaped
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            (tmp_path / "rep/report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "NVTX ranges were lost." in dom
    assert "200 (data&lt;loader&gt;)" in dom


def test_no_card_when_ranges_present(tmp_path: Path) -> None:
    b = TraceBuilder("2022")
    b.launch(100, 900, 1000, 2000)
    b.range("step", 50, 950, domain="launchprof")
    analysis = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    write_report(analysis, tmp_path / "rep")
    assert 'id="nvtx-lost"' not in (tmp_path / "rep" / "report.html").read_text()
