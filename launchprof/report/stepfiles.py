"""The step files of a report folder: their renderers (registered in
:data:`launchprof.report.outputs.ANALYSIS_OUTPUTS`; read back by
:mod:`launchprof.api.report_folder`). No jinja2 and no pandas at import: the reader and
the file lists import :data:`STEP_FILES` without them.

``analyze`` writes, next to ``summary.json``:

- ``steps.csv``: one row per step, the columns of
  :data:`launchprof.analysis.comparison.side.STEP_COLUMNS` (ns; ``warmup`` True/False);
- ``step_kernels.csv``: the kernels of a steady step: ``name``, ``grid_x``..``block_z``,
  ``per_step`` (mean count per steady step), ``gpu_ns_per_step`` (their mean summed
  duration per steady step, ns);
- ``step_timeline.csv``: GPU activity and CUDA API calls of one representative steady
  step: ``lane``, ``kind``, ``name``, ``start_ns``, ``end_ns``, ``shift_ns``.

A folder without them (written by an older launchprof) still compares, from the step
statistics in ``summary.json``, and the comparison says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported when a file is made: the folder writer's file lists need none of it
    import pandas as pd

    from launchprof.analysis.result import AnalysisResult

STEP_FILES = ("steps.csv", "step_kernels.csv", "step_timeline.csv")


def _csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def _int_csv(frame: pd.DataFrame) -> str:
    """``_csv(frame)`` for a frame of nullable ``Int64`` and NA-free bool columns, written
    by Arrow's CSV writer (C++; ~5x faster than pandas on 100k steps): the same text,
    a missing integer as an empty field, a bool as ``True``/``False``. Other frames go
    through pandas."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    columns: dict[str, pa.Array] = {}
    for name in frame.columns:
        col = frame[name]
        if col.dtype == bool:
            columns[str(name)] = pa.array(np.where(col.to_numpy(), "True", "False"))
        elif isinstance(col.dtype, pd.Int64Dtype):
            columns[str(name)] = pa.array(col)
        else:
            return _csv(frame)
    if not columns or any("," in name or '"' in name or "\n" in name for name in columns):
        return _csv(frame)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(pa.table(columns), sink, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    header = ",".join(columns) + "\n"  # written here: Arrow would quote the names
    return header + sink.getvalue().to_pybytes().decode("utf-8")


def steps_csv(analysis: AnalysisResult) -> str | None:
    """``steps.csv`` of a finished ``analysis``: its found steps' table
    (:attr:`~launchprof.analysis.result.Shown.step_table`; integers as ``Int64``, a missing
    one an empty field); None when no steps were found."""
    from launchprof.analysis.comparison.side import STEP_COLUMNS

    table = analysis.outputs().step_table
    if table is None:
        return None
    return _int_csv(table.astype({c: "Int64" for c in STEP_COLUMNS if c not in ("warmup",)}))


def step_kernels_csv(analysis: AnalysisResult) -> str | None:
    """``step_kernels.csv`` of a finished ``analysis``
    (:attr:`~launchprof.analysis.result.Shown.step_kernels`); None without steps."""
    shown = analysis.outputs()
    return None if shown.step_table is None or shown.step_kernels is None else _csv(shown.step_kernels)


def step_timeline_csv(analysis: AnalysisResult) -> str | None:
    """``step_timeline.csv`` of a finished ``analysis``
    (:attr:`~launchprof.analysis.result.Shown.step_sample`); None without steps."""
    shown = analysis.outputs()
    return None if shown.step_table is None or shown.step_sample is None else _csv(shown.step_sample)
