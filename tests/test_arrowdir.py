"""Loading an ``nsys export --type arrowdir`` folder (launchprof.trace.arrowdir): the same
trace and analysis as the SQLite export of the same report (real exports from the H200,
tests/data/arrowdir/README.md)."""

from __future__ import annotations

import lzma
import sqlite3
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from launchprof.api import analyze_loaded
from launchprof.errors import TraceError
from launchprof.report.outputs import render_outputs
from launchprof.report.summary import build_summary
from launchprof.trace import load_trace
from launchprof.trace.arrowdir import load_arrowdir
from launchprof.trace.tables import LOADED_TABLES

DATA = Path(__file__).parent / "data" / "arrowdir"
NAMES = ("mlp10", "graph30")
FRAMES = ("kernels", "memops", "graph_execs", "api", "nvtx", "gpus", "processes", "cuda_streams", "strings")


def unpack(name: str, tmp: Path) -> tuple[Path, Path]:
    sqlite = tmp / f"{name}.sqlite"
    sqlite.write_bytes(lzma.decompress((DATA / f"{name}.sqlite.xz").read_bytes()))
    with tarfile.open(DATA / f"{name}.arrowdir.tar.xz") as tar:
        tar.extractall(tmp, filter="data")
    return sqlite, tmp / f"{name}.arrowdir"


@pytest.mark.parametrize("name", NAMES)
def test_arrowdir_loads_as_the_sqlite_export(name: str, tmp_path: Path) -> None:
    sqlite, folder = unpack(name, tmp_path)
    a = load_trace(sqlite)
    b = load_arrowdir(folder, path=sqlite)
    for frame in FRAMES:
        x, y = getattr(a, frame), getattr(b, frame)
        if isinstance(x, pd.Series):
            pd.testing.assert_series_equal(x, y)
        else:
            pd.testing.assert_frame_equal(x, y)
    assert (a.notes, a.nvtx_domain_events, a.schema.nsys_version) == (
        b.notes,
        b.nvtx_domain_events,
        b.schema.nsys_version,
    )
    assert b.path == sqlite
    # Hand count straight from the SQLite file: every kernel row is there.
    with sqlite3.connect(sqlite) as con:
        (kernels,) = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    assert len(b.kernels) == kernels > 0


@pytest.mark.parametrize("name", NAMES)
def test_arrowdir_analysis_is_the_sqlite_analysis(name: str, tmp_path: Path) -> None:
    sqlite, folder = unpack(name, tmp_path)
    a = analyze_loaded(load_trace(sqlite))
    b = analyze_loaded(load_arrowdir(folder, path=sqlite))
    assert build_summary(a, str(sqlite)).to_json() == build_summary(b, str(sqlite)).to_json()
    assert render_outputs(a) == render_outputs(b)
    assert a.found_steps.source == b.found_steps.source != "none"


def test_the_loaded_tables_are_those_the_test_traces_hold(tmp_path: Path) -> None:
    """The tables launchprof names (launchprof.trace.tables, which the loader, the Arrow
    reader and the early path's export read) against the tables the test trace builder
    writes (nsys's schema spelled out on its own) and those of the real recordings (nsys
    2025 on H200s, and one of nsys 2022): each table the builder writes is one the loader
    reads, and each table the loader reads is in some real export (no name misspelt) but
    the driver API's."""
    from tracebuilder import TraceBuilder

    built = TraceBuilder()
    built.launch(0, 900, 1000, 2000)
    path = built.write(tmp_path / "t.sqlite")
    with sqlite3.connect(path) as con:
        written = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert written <= set(LOADED_TABLES), written - set(LOADED_TABLES)
    real: set[str] = set()
    for xz in [*sorted((DATA.parent / "gpu").glob("*.sqlite.xz")), DATA.parent / "cpu" / "steps_loop_2022.sqlite.xz"]:
        plain = tmp_path / xz.name.removesuffix(".xz")
        plain.write_bytes(lzma.decompress(xz.read_bytes()))
        with sqlite3.connect(plain) as con:
            real |= {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    # CUDA driver API calls have a table only when the program calls the driver itself
    # (none of these recordings does).
    assert set(LOADED_TABLES) - real == {"CUPTI_ACTIVITY_KIND_DRIVER"}, set(LOADED_TABLES) - real


def test_not_an_arrowdir_export(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not a folder"):
        load_arrowdir(tmp_path / "missing")
    with pytest.raises(TraceError, match="no .arrow file"):
        load_arrowdir(tmp_path)
    (tmp_path / "StringIds.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(TraceError, match="cannot read .*StringIds.arrow"):
        load_arrowdir(tmp_path)
