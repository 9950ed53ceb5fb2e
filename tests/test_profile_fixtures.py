"""The loader and analysis on real nsys 2022.4 exports of CPU-only workloads
(tests/data/cpu/README.md), without running nsys. Expected values: the workloads'
construction (12 steps; 5 ranges lost) and sqlite3 queries on the files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import launchprof
from launchprof.report.write import write_report
from launchprof.trace import load_trace

CPU = Path(__file__).resolve().parent / "data" / "cpu"


@pytest.fixture
def steps(real_trace) -> Path:  # type: ignore[no-untyped-def]
    return real_trace("steps_loop_2022", CPU)


@pytest.fixture
def lost(real_trace) -> Path:  # type: ignore[no-untyped-def]
    return real_trace("nvtx_lost_2022", CPU)


def test_steps_fixture_ranges_match_sqlite(steps: Path) -> None:
    con = sqlite3.connect(steps)
    rows = con.execute(
        "SELECT n.start, n.end, s.value, (n.globalTid >> 24) & 16777215 FROM NVTX_EVENTS n "
        "JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59 ORDER BY n.start"
    ).fetchall()
    (version,) = con.execute("SELECT value FROM EXPORT_META_DATA WHERE name = 'EXPORT_PRODUCT_VERSION'").fetchone()
    con.close()
    assert len(rows) == 12 and version == "2022.4.2.1"
    trace = load_trace(steps)
    assert trace.schema.nsys_version == "2022.4.2.1" and trace.schema.schema_version == "3.0.0"
    nvtx = trace.nvtx.sort_values("start")
    assert list(nvtx["text"]) == ["step"] * 12
    assert set(nvtx["domain"]) == {"launchprof"}
    assert list(nvtx["start"]) == [r[0] for r in rows] and list(nvtx["end"]) == [r[1] for r in rows]
    assert set(nvtx["pid"]) == {rows[0][3]}
    assert trace.nvtx_domain_events == 1


def test_steps_fixture_analysis_and_report(steps: Path, tmp_path: Path) -> None:
    analysis = launchprof.analyze(steps)
    assert analysis.devices == [] and analysis.nvtx_ranges_lost is False
    assert analysis.processes_without_gpu == []
    summary = write_report(analysis, tmp_path / "rep")
    assert summary.trace.nsys_version == "2022.4.2.1"
    assert any("no CUDA activity" in n for n in summary.notes)
    assert 'id="nvtx-lost"' not in (tmp_path / "rep" / "report.html").read_text()


def test_lost_fixture_is_flagged(lost: Path, tmp_path: Path) -> None:
    con = sqlite3.connect(lost)
    types = sorted(t for (t,) in con.execute("SELECT eventType FROM NVTX_EVENTS"))
    con.close()
    assert types == [75, 76]  # domain created and destroyed, no range (59)
    analysis = launchprof.analyze(lost)
    assert analysis.nvtx_ranges_lost is True and len(analysis.trace.nvtx) == 0
    summary = write_report(analysis, tmp_path / "rep")
    assert summary.nvtx_ranges_lost is True
    assert 'id="nvtx-lost"' in (tmp_path / "rep" / "report.html").read_text()
