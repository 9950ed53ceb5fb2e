"""The step files of a report folder, and reading a report folder back as one side of a
comparison.

``analyze`` writes, next to ``summary.json``:

- ``steps.csv``: one row per step, the columns of
  :data:`launchprof.analysis.side.STEP_COLUMNS` (ns; ``warmup`` True/False);
- ``step_kernels.csv``: the kernels of a steady step: ``name``, ``grid_x``..``block_z``,
  ``per_step`` (mean count per steady step);
- ``step_timeline.csv``: GPU activity and CUDA API calls of one representative steady
  step: ``lane``, ``kind``, ``name``, ``start_ns``, ``end_ns``, ``shift_ns``.

A folder without them (written by an older launchprof) still compares, from the step
statistics in ``summary.json``, and the comparison says so.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis import Analysis
from launchprof.analysis.side import (
    KERNEL_KEY,
    OPTIONAL_STEP_COLUMNS,
    SAMPLE_COLUMNS,
    STEP_COLUMNS,
    SideData,
    side_from_analysis,
)
from launchprof.analysis.steps import Steps
from launchprof.errors import LaunchprofError, OutputError

STEP_FILES = ("steps.csv", "step_kernels.csv", "step_timeline.csv")


class ReportFolderError(LaunchprofError):
    """A report folder given to ``compare`` cannot be read."""


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


def step_file_texts(analysis: Analysis) -> dict[str, str]:
    """The step files of ``analysis`` (its ``extra["steps"]``), name -> text; empty when
    no steps were found."""
    steps = analysis.extra.get("steps")
    if not isinstance(steps, Steps):
        return {}
    side = side_from_analysis(analysis, steps)
    if side.table is None:
        return {}
    table = side.table.astype({c: "Int64" for c in STEP_COLUMNS if c not in ("warmup",)})
    texts = {"steps.csv": _int_csv(table)}
    if side.kernels is not None:
        texts["step_kernels.csv"] = _csv(side.kernels)
    if side.sample is not None:
        texts["step_timeline.csv"] = _csv(side.sample)
    return texts


def write_step_files(analysis: Analysis, folder: Path) -> None:
    """Write the step files of ``analysis`` (its ``extra["steps"]``) into ``folder``;
    nothing when no steps were found.

    Raises:
        OutputError: a file cannot be written.
    """
    from launchprof.report.html import atomic_write  # jinja2 only when writing

    for name, text in step_file_texts(analysis).items():
        atomic_write(folder / name, text)


def start_step_files(analysis: Analysis, folder: Path) -> Callable[[bool], None]:
    """Write the step files of ``analysis`` into ``folder`` (which must exist) from a
    forked child process, so that they are computed while this process goes on (the
    diagnosis and the report page; about 0.15 s of 1.4 s on a 150k-kernel trace, on a
    second CPU). The child writes temporary files; the returned function, given
    ``commit``, waits for the child and then moves them into place (True: call it once
    the report itself was written, so that a failed report leaves the old step files) or
    removes them (False). Where ``os.fork`` is missing, or off Linux, the texts are made
    here and written by the returned function.

    Only for a command-line run (forking a process with threads of its own, such as a
    notebook kernel, is not safe); the child only writes files and exits with
    ``os._exit``.

    Raises (from the returned function):
        OutputError: a step file could not be written.
    """
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return _in_process(analysis, folder)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return _in_process(analysis, folder)
    if pid == 0:  # the child: stage the files, say where, exit at once
        code, staged = 0, []
        try:
            os.close(read_end)
            for name, text in step_file_texts(analysis).items():
                staged.append((_stage(folder, name, text), name))
            reply = "".join(f"{tmp}\t{name}\n" for tmp, name in staged)
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            code = 1
            for tmp, _ in staged:
                _unlink(tmp)
            reply = str(exc) if isinstance(exc, OutputError) else f"writing the step files failed: {exc!r}"
        finally:
            try:
                os.write(write_end, reply.encode("utf-8", errors="replace"))
            finally:
                os._exit(code)
    os.close(write_end)

    def finish(commit: bool) -> None:
        with os.fdopen(read_end, "rb") as fh:
            reply = fh.read().decode("utf-8", errors="replace")
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OutputError(reply or f"writing the step files into {folder} failed")
        staged = [line.split("\t", 1) for line in reply.splitlines() if "\t" in line]
        if not commit:
            for tmp, _ in staged:
                _unlink(tmp)
            return
        for i, (tmp, name) in enumerate(staged):
            try:
                os.replace(tmp, folder / name)
            except OSError as exc:
                for rest, _ in staged[i:]:
                    _unlink(rest)
                raise OutputError(f"cannot write {folder / name}: {exc.strerror or exc}") from None

    return finish


def _in_process(analysis: Analysis, folder: Path) -> Callable[[bool], None]:
    texts = step_file_texts(analysis)

    def finish(commit: bool) -> None:
        from launchprof.report.html import atomic_write

        if commit:
            for name, text in texts.items():
                atomic_write(folder / name, text)

    return finish


def _stage(folder: Path, name: str, text: str) -> str:
    """Write ``text`` to a new temporary file in ``folder`` (mode as a normal file's);
    return its path.

    Raises:
        OutputError: the folder is not writable or the disk is full.
    """
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        return tmp_name
    except OSError as exc:
        if tmp_name is not None:
            _unlink(tmp_name)
        raise OutputError(f"cannot write {folder / name}: {exc.strerror or exc}") from None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _read_csv(
    path: Path, columns: tuple[str, ...], notes: list[str], optional: tuple[str, ...] = ()
) -> pd.DataFrame | None:
    if not path.exists():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        notes.append(f"{path} could not be read ({exc}); ignored")
        return None
    frame = frame.assign(**{c: 0 for c in optional if c not in frame.columns})
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        notes.append(f"{path} lacks columns {', '.join(missing)}; ignored")
        return None
    return frame.loc[:, list(columns)]


def _opt(d: dict[str, Any] | None, key: str) -> float | None:
    if not d:
        return None
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and np.isfinite(v) else None


def side_from_folder(folder: Path) -> SideData:
    """Read a report folder (``summary.json`` and, when present, the step files).

    Raises:
        ReportFolderError: no ``summary.json``, or it is not a launchprof summary (the
            message leaves out the folder: the caller names it).
    """
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        raise ReportFolderError("a folder without summary.json; give a trace or a launchprof report folder")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportFolderError(f"its summary.json is not readable JSON ({exc})") from None
    if not isinstance(summary, dict) or not str(summary.get("schema", "")).startswith("launchprof.summary/"):
        raise ReportFolderError("its summary.json is not a launchprof summary (no 'schema': 'launchprof.summary/...')")
    stats = summary.get("steps") or {}
    launches = summary.get("launches") or {}
    devices = summary.get("devices") or []
    notes: list[str] = []
    table = _read_csv(folder / "steps.csv", STEP_COLUMNS, notes, OPTIONAL_STEP_COLUMNS)
    if table is not None:
        table = table.assign(warmup=table["warmup"].astype(str).str.lower().eq("true"))
    else:
        notes.append(
            f"{folder}: no steps.csv (report written by an older launchprof): per-step distributions unavailable, "
            "the step statistics of summary.json are used"
        )
    kernels = _read_csv(folder / "step_kernels.csv", (*KERNEL_KEY, "per_step"), notes)
    sample = _read_csv(folder / "step_timeline.csv", SAMPLE_COLUMNS, notes)
    if kernels is not None:
        kernels = kernels.assign(name=kernels["name"].astype(str))
    if sample is not None:
        sample = sample.assign(name=sample["name"].astype(str))
    inst = int(launches.get("graph_instantiations") or 0)
    inst_p50 = _opt(launches, "graph_instantiate_p50_ns")
    if inst and inst_p50 is not None and inst > 1:
        notes.append(f"{folder}: instantiation time estimated as {inst} x the median instantiate call")
    threshold = devices[0].get("bubbles", {}).get("threshold_ns", 1000) if devices else 1000
    rec = summary.get("recommendation")
    rep = None
    if table is not None and sample is not None:
        steady = table.loc[~table["warmup"] & table["period_ns"].notna()]
        if len(steady):
            period = steady["period_ns"].to_numpy(dtype=float)
            rep = int(steady["step"].to_numpy()[int(np.argmin(np.abs(period - np.median(period))))])
    return SideData(
        path=str(folder),
        origin="report",
        step_source=str(stats.get("source") or "none"),
        step_name=stats.get("name"),
        step_reason=str(stats.get("reason") or "no steps in summary.json"),
        table=table,
        stats=dict(stats),
        kernels=kernels,
        sample=sample,
        sample_step=rep,
        bubble_threshold_ns=int(threshold),
        graph_instantiations=inst,
        instantiate_ns=int(round(inst * (inst_p50 or 0.0))),
        exec_updates=int(launches.get("graph_exec_updates") or 0),
        graph_launches=int(launches.get("graph_launches") or 0),
        predicted_speedup=_opt(rec, "predicted_speedup"),
        predicted_step_ns=_opt(rec, "predicted_step_ns"),
        break_even_iterations=_opt(rec, "break_even_iterations"),
        notes=tuple(notes),
    )
