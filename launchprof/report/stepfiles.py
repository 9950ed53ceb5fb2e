"""The step files of a report folder: made from an analysis and written (read back by
:mod:`launchprof.api.report_folder`). No jinja2 here: the reader imports
:data:`STEP_FILES` without the page renderer.

``analyze`` writes, next to ``summary.json``:

- ``steps.csv``: one row per step, the columns of
  :data:`launchprof.analysis.side.STEP_COLUMNS` (ns; ``warmup`` True/False);
- ``step_kernels.csv``: the kernels of a steady step: ``name``, ``grid_x``..``block_z``,
  ``per_step`` (mean count per steady step), ``gpu_ns_per_step`` (their mean summed
  duration per steady step, ns);
- ``step_timeline.csv``: GPU activity and CUDA API calls of one representative steady
  step: ``lane``, ``kind``, ``name``, ``start_ns``, ``end_ns``, ``shift_ns``.

A folder without them (written by an older launchprof) still compares, from the step
statistics in ``summary.json``, and the comparison says so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from launchprof.analysis.result import AnalysisResult
from launchprof.analysis.side import STEP_COLUMNS
from launchprof.errors import OutputError

STEP_FILES = ("steps.csv", "step_kernels.csv", "step_timeline.csv")


def _csv(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, lineterminator="\n")


def _int_csv(frame: pd.DataFrame) -> str:
    """``_csv(frame)`` for a frame of nullable ``Int64`` and NA-free bool columns, written
    by Arrow's CSV writer (C++; ~5x faster than pandas on 100k steps): the same text,
    a missing integer as an empty field, a bool as ``True``/``False``. Other frames go
    through pandas."""
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


def step_file_texts(analysis: AnalysisResult) -> dict[str, str]:
    """The step files of a finished ``analysis`` (the tables of its ``found_steps``:
    :attr:`~launchprof.analysis.result.Shown.step_table`, ...), name -> text; empty when
    no steps were found."""
    shown = analysis.outputs()
    if shown.step_table is None:
        return {}
    table = shown.step_table.astype({c: "Int64" for c in STEP_COLUMNS if c not in ("warmup",)})
    texts = {"steps.csv": _int_csv(table)}
    if shown.step_kernels is not None:
        texts["step_kernels.csv"] = _csv(shown.step_kernels)
    if shown.step_sample is not None:
        texts["step_timeline.csv"] = _csv(shown.step_sample)
    return texts


def stage_step_files(analysis: AnalysisResult, staging: Path) -> None:
    """Write the step files of ``analysis`` (:func:`step_file_texts`) into ``staging``, a
    report's staging folder (:attr:`launchprof.report.folder.FolderWriter.staging`), to be
    committed with the report.

    Raises:
        OutputError: a file cannot be written: ``cannot write STAGING/NAME: REASON``, the
            reason as the system gives it (the words ``analyze`` has always used here).
    """
    for name, text in step_file_texts(analysis).items():
        try:
            with open(staging / name, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise OutputError(f"cannot write {staging / name}: {exc.strerror or exc}") from None
