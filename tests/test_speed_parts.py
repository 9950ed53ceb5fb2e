"""The parts that make ``analyze`` fast, checked against what they replace: plain-dict
figures against plotly's own figure JSON, read-ahead against a plain load."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from tracebuilder import TraceBuilder

import launchprof
from launchprof.report import plainfig
from launchprof.report.html import embed
from launchprof.trace import load_trace
from launchprof.trace.readahead import forget_prefetch, prefetch


def _plotly(fig: go.Figure) -> str:
    return embed(fig, "").json


def _plain(fig: plainfig.Figure) -> str:
    return embed(fig, "").json


def test_typed_arrays_lists_and_template_as_plotly_writes_them() -> None:
    x_small = np.array([0, 1, 2, 100], dtype=np.int64)  # int8
    x_mid = np.array([0, 1000, -5], dtype=np.int64)  # int16
    x_big = np.array([0, 70_000], dtype=np.int64)  # int32
    x_huge = np.array([0, 2**40], dtype=np.int64)  # too big for int32: a list
    y = np.array([0.5, np.nan, 2.25, 3.0])
    base = np.array([1.5, 2.5, 3.5, 4.5])
    names = ["a<b", "c", "d", "e"]
    ref = go.Figure()
    ref.add_trace(go.Bar(x=x_small, y=y, base=base, customdata=names, name="one", marker=dict(color="#123456")))
    ref.add_trace(go.Bar(x=x_mid, y=[1, 2, 3], orientation="h", marker_line_width=0))
    ref.add_trace(go.Scatter(x=x_big, y=x_huge, mode="lines", line=dict(shape="hv")))
    ref.add_trace(go.Scatter(x=pd.Series(["p", "q"]), y=pd.Series([1.0, 2.0])))
    ref.update_layout(title=dict(text="t", x=0), template="plotly_white", barmode="overlay", height=300)
    ref.update_xaxes(title="x axis", range=[0, 2.5])
    ref.update_yaxes(automargin=True)

    fig = plainfig.Figure()
    fig.add_trace(plainfig.bar(x=x_small, y=y, base=base, customdata=names, name="one", marker=dict(color="#123456")))
    fig.add_trace(plainfig.bar(x=x_mid, y=[1, 2, 3], orientation="h", marker=dict(line=dict(width=0))))
    fig.add_trace(plainfig.scatter(x=x_big, y=x_huge, mode="lines", line=dict(shape="hv")))
    fig.add_trace(plainfig.scatter(x=pd.Series(["p", "q"]), y=pd.Series([1.0, 2.0])))
    fig.update_layout(title=dict(text="t", x=0), template="plotly_white", barmode="overlay", height=300)
    fig.update_layout(xaxis=dict(title=dict(text="x axis"), range=[0, 2.5]), yaxis=dict(automargin=True))
    assert _plain(fig) == _plotly(ref)
    assert fig.data[0].name == "one" and list(fig.data[0].base) == [1.5, 2.5, 3.5, 4.5]
    doc = json.loads(_plain(fig))
    assert doc["data"][0]["x"]["dtype"] == "i1" and doc["data"][1]["x"]["dtype"] == "i2"
    assert doc["data"][2]["x"]["dtype"] == "i4" and doc["data"][2]["y"] == [0, 2**40]


def test_vrect_as_plotly_adds_it(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(20):
        b.launch(10_000 * i, 10_000 * i + 500, 10_000 * i + 1000, 10_000 * i + 4000)
    a = launchprof.analyze(b.write(tmp_path / "t.sqlite"))
    from launchprof.report import figures

    dev = a.devices[0]
    window = (dev.figures.start_ns + 20_000, dev.figures.start_ns + 60_000)
    series = a.outputs().utilization[dev.device_id]
    mine = json.loads(_plain(figures.utilization_over_time(dev, series, window)))["layout"]
    ref = go.Figure()
    x0, x1 = (window[0] - dev.figures.start_ns) / 1e6, (window[1] - dev.figures.start_ns) / 1e6
    ref.add_vrect(
        x0=x0,
        x1=x1,
        fillcolor="#ff7f0e",
        opacity=0.25,
        line_width=0,
        annotation_text="timeline window",
        annotation_position="top left",
    )
    theirs = json.loads(_plotly(ref))["layout"]
    assert mine["shapes"] == theirs["shapes"] and mine["annotations"] == theirs["annotations"]


def test_heatmap_as_plotly_writes_it() -> None:
    from launchprof.report import figures

    z = np.array([[1.0, np.nan, 0.5], [2.0, 1.0, 0.0]])
    steps = np.array([3, 4, 5], dtype=np.int64)
    ref = go.Figure(go.Heatmap(z=z, x=steps, y=["0: a", "1: b"], colorscale="RdBu_r", colorbar=dict(title="c")))
    ref.update_layout(title="t", xaxis_title="step", yaxis_autorange="reversed", template="plotly_white")
    fig = plainfig.Figure(
        [
            plainfig.heatmap(
                z=z,
                x=steps,
                y=["0: a", "1: b"],
                colorscale=figures.RDBU_R_COLORSCALE,
                colorbar=dict(title=dict(text="c")),
            )
        ]
    )
    fig.update_layout(
        title=dict(text="t"),
        xaxis=dict(title=dict(text="step")),
        yaxis=dict(autorange="reversed"),
        template="plotly_white",
    )
    assert _plain(fig) == _plotly(ref)


def test_two_rows_as_make_subplots_lays_them_out() -> None:
    from plotly.subplots import make_subplots

    from launchprof.report import compare_figures

    titles = ["BEFORE: step 3", "AFTER: step 4"]
    ref = make_subplots(rows=2, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.12)
    ref.update_layout(template="plotly_white")
    # the one change: row titles at the left, smaller (a long one was cut at both ends at 800 px)
    ref.update_annotations(x=0, xanchor="left", align="left", font=dict(size=14))
    mine = plainfig.Figure(layout=compare_figures.two_rows_layout(titles)).update_layout(template="plotly_white")
    assert _plain(mine) == _plotly(ref)


def _frames(trace: launchprof.trace.Trace) -> dict[str, pd.DataFrame]:
    return {"kernels": trace.kernels, "memops": trace.memops, "api": trace.api, "graph_execs": trace.graph_execs}


def test_read_ahead_gives_the_frames_of_a_plain_load(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(50):
        b.launch(1000 * i, 1000 * i + 200, 1000 * i + 300, 1000 * i + 700, stream=7 + i % 2)
    path = b.write(tmp_path / "t.sqlite")
    plain = load_trace(path)  # load_trace starts (and ends) its own read-ahead
    prefetch(path)
    ahead = load_trace(path)
    for name, frame in _frames(plain).items():
        pd.testing.assert_frame_equal(_frames(ahead)[name], frame)
    assert len(plain.kernels) == 50


def test_read_ahead_of_a_file_changed_since_is_not_used(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i in range(10):
        b.launch(1000 * i, 1000 * i + 200, 1000 * i + 300, 1000 * i + 700)
    path = b.write(tmp_path / "t.sqlite")
    prefetch(path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= 5000")
    con.commit()
    con.close()
    later = path.stat().st_mtime_ns + 1_000_000_000  # written a second later (coarse clocks)
    os.utime(path, ns=(later, later))
    try:
        trace = load_trace(path)
    finally:
        forget_prefetch(path)
    # 10 kernels at 300, 1300, ... 9300 ns: 5 start before 5000 ns.
    assert len(trace.kernels) == 5


WINDOW = (10_000, 45_000)
ROW_FILTERS: dict[str, dict[str, Any]] = {
    "all": {},
    "window": {"window": WINDOW},
    "pid+window": {"pid": 101, "window": WINDOW},
}


@pytest.mark.parametrize("kept", list(ROW_FILTERS))
def test_a_table_read_in_parts_gives_the_rows_of_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: str
) -> None:
    """Big tables are read ahead in rowid ranges by several threads and joined: the frames
    are those of one plain read in the loader's own thread, rowid gaps (deleted rows)
    included, with a row filter (--time-range, --per-process) too; the ranges cover every
    rowid once."""
    from launchprof.trace import loader, readahead
    from launchprof.trace.columns import Reader, Rows, ro_uri

    rows = Rows(**ROW_FILTERS[kept])
    b = TraceBuilder()
    for i in range(60):
        b.launch(1000 * i, 1000 * i + 200, 1000 * i + 300, 1000 * i + 700, stream=7 + i % 3, pid=100 + i % 2)
    path = b.write(tmp_path / "t.sqlite")
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid IN (5, 6, 7, 30)")
    con.commit()
    con.close()
    monkeypatch.setattr(readahead, "ROWS_PER_PART", 7)
    monkeypatch.setattr(readahead, "read_threads", lambda: 4)
    con = sqlite3.connect(ro_uri(path), uri=True)
    try:
        ranges = readahead.row_ranges(con, "CUPTI_ACTIVITY_KIND_KERNEL", 4)
        lo, hi = con.execute("SELECT min(rowid), max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        reader = Reader(path, con, lambda _msg: None, rows=rows)  # no read-ahead: one query in this thread
        try:
            plain = loader.load_tables(path, con, reader, lambda _msg: None)
        finally:
            reader.close()
    finally:
        con.close()
    assert len(ranges) == 4 and all(r is not None for r in ranges)
    bounds = [r for r in ranges if r is not None]
    assert bounds[0][0] == lo and bounds[-1][1] == hi
    assert all(a[1] + 1 == b[0] for a, b in zip(bounds[:-1], bounds[1:], strict=True))  # no gap, no overlap
    joined: list[int] = []
    join = readahead._join_parts

    def counted(columns: Any, parts: Any) -> Any:
        joined.append(len(parts))
        return join(columns, parts)

    monkeypatch.setattr(readahead, "_join_parts", counted)
    ahead = load_trace(path, rows=rows)
    assert 4 in joined  # the kernels were read in 4 parts
    for name, frame in _frames(plain).items():
        pd.testing.assert_frame_equal(_frames(ahead)[name], frame)
    assert len(plain.kernels) == {"all": 56, "window": 34, "pid+window": 16}[kept]  # less rowid 30: i = 29


def test_a_small_table_or_one_without_rowids_is_read_whole(tmp_path: Path) -> None:
    from launchprof.trace.readahead import ROWS_PER_PART, row_ranges

    con = sqlite3.connect(tmp_path / "t.sqlite")
    con.execute("CREATE TABLE small (start INTEGER)")
    con.executemany("INSERT INTO small VALUES (?)", [(i,) for i in range(100)])
    con.execute("CREATE TABLE keyed (start INTEGER PRIMARY KEY) WITHOUT ROWID")
    con.execute("CREATE TABLE empty (start INTEGER)")
    con.execute("CREATE TABLE sparse (start INTEGER)")  # two rows, rowids far apart
    con.executemany("INSERT INTO sparse (rowid, start) VALUES (?, ?)", [(1, 0), (8 * ROWS_PER_PART, 1)])
    assert row_ranges(con, "small", 8) == [None]
    assert row_ranges(con, "keyed", 8) == [None]
    assert row_ranges(con, "empty", 8) == [None]
    assert row_ranges(con, "sparse", 1) == [None]  # one CPU: one read
    assert len(row_ranges(con, "sparse", 8)) == 8  # by rowid span: most parts are empty, none is wrong
    con.close()


def test_an_empty_part_does_not_widen_the_others() -> None:
    """A rowid range with no rows (deleted rows) reads as an empty int64 column: joined, the
    other parts' int32 columns stay int32, as one read keeps them."""
    from launchprof.trace.columns import Column
    from launchprof.trace.readahead import _join_parts

    def part(values: np.ndarray) -> dict[str, Column]:
        return {"c": Column(values, None)}

    joined = _join_parts(
        ["c"], [part(np.arange(3, dtype=np.int32)), part(np.empty(0, np.int64)), part(np.arange(2, dtype=np.int32))]
    )
    assert joined["c"].values.dtype == np.int32 and joined["c"].values.tolist() == [0, 1, 2, 0, 1]
    nothing = _join_parts(["c"], [part(np.empty(0, np.int64)), part(np.empty(0, np.int64))])
    assert nothing["c"].values.size == 0


def test_a_table_whose_parts_cannot_be_planned_is_left_to_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When planning a table's parts fails with anything (here MemoryError), the loader
    reads the table itself instead of waiting for a read that never started."""
    from launchprof.trace import readahead

    b = TraceBuilder()
    for i in range(20):
        b.launch(1000 * i, 1000 * i + 200, 1000 * i + 300, 1000 * i + 700)
    path = b.write(tmp_path / "t.sqlite")
    plain = load_trace(path)

    def fail(*_args: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(readahead, "row_ranges", fail)
    try:
        prefetch(path)
        again = load_trace(path)
    finally:
        forget_prefetch(path)
    for name, frame in _frames(plain).items():
        pd.testing.assert_frame_equal(_frames(again)[name], frame)


def test_a_batch_narrowed_as_it_is_copied_out_is_the_narrowed_copy() -> None:
    """The int32 copy taken straight from an Arrow batch is what narrowing its int64 copy
    gives: the same values and dtype, int64 kept where a value does not fit, NULLs 0."""
    import pyarrow as pa

    from launchprof.trace.columns import _int64_values, narrow

    for data in ([1, 2, 3], [1, 2**31], [-(2**31), 2**31 - 1], [], [5, None, 7], [2**40, None]):
        arr = pa.array(data, type=pa.int64())
        for sliced in (arr, arr.slice(1)):
            plain, null = _int64_values(sliced)
            fast, fast_null = _int64_values(sliced, narrowed=True)
            expected = narrow(plain)
            # The reader narrows every batch after (columns._fit): the same array either way.
            assert narrow(fast).dtype == expected.dtype and np.array_equal(narrow(fast), expected)
            assert (null is None) == (fast_null is None)
            if null is None:  # without NULLs: narrowed at once
                assert fast.dtype == expected.dtype
