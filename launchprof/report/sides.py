"""The step files of a report folder, and reading a report folder back as one side of a
comparison.

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

import json
import os
import pickle
import signal
import sys
import tempfile
from collections.abc import Iterable
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
from launchprof.report.html import EmbeddedFigure

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
    nothing when no steps were found. Step files of an earlier report there that this one
    does not have are removed (:func:`drop_other_step_files`).

    Raises:
        OutputError: a file cannot be written.
    """
    from launchprof.report.html import atomic_write  # jinja2 only when writing

    texts = step_file_texts(analysis)
    for name, text in texts.items():
        atomic_write(folder / name, text)
    drop_other_step_files(folder, texts)


def drop_other_step_files(folder: Path, written: Iterable[str]) -> None:
    """Remove the :data:`STEP_FILES` in ``folder`` that are not in ``written``: left by an
    earlier report there (``--force``), they would make ``compare`` read another trace's
    steps beside this summary.

    Raises:
        OutputError: one cannot be removed.
    """
    keep = set(written)
    for name in STEP_FILES:
        if name in keep:
            continue
        try:
            (folder / name).unlink(missing_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot remove the old {folder / name}: {exc.strerror or exc}") from None


def drop_staged_leftovers(folder: Path) -> None:
    """Remove the staged step files (``.steps.csv.XXXX``: :func:`_stage`) an interrupted run
    left in ``folder``; never raises."""
    for name in STEP_FILES:
        for leftover in folder.glob(f".{name}.*"):
            _unlink(str(leftover))


class StepFilesJob:
    """Step files (and the report page's device figures) being made by a forked child:
    see :func:`start_step_files`."""

    def __init__(self, pid: int, read_end: int, folder: Path) -> None:
        self._pid = pid
        self._read_end = read_end
        self._folder = folder
        self._reply: dict[str, Any] | None = None
        self._figures: dict[str, Any] | None = None
        self._pipe: Any = None

    def _message(self) -> dict[str, Any] | None:
        """The child's next reply (a length-prefixed pickle), None at its end or when broken."""
        if self._pipe is None:
            self._pipe = os.fdopen(self._read_end, "rb")
        head = self._pipe.read(8)
        if len(head) != 8:
            return None
        data = self._pipe.read(int.from_bytes(head, "little"))
        try:
            reply = pickle.loads(data)
        except Exception:  # noqa: BLE001 - a broken reply: as a failed child
            return None
        return reply if isinstance(reply, dict) else None

    def _wait(self) -> dict[str, Any]:
        """The step files' reply (after the figures'); reaps the child."""
        if self._reply is None:
            if self._figures is None:
                self._figures = self._message() or {}
            reply = self._message() or {}
            if self._pipe is not None:
                self._pipe.close()
            _, status = os.waitpid(self._pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                reply = {}
            if "staged" not in reply and "error" not in reply:
                reply["error"] = f"writing the step files into {self._folder} failed"
            self._reply = reply
        return self._reply

    def figures(self) -> list[EmbeddedFigure] | None:
        """The device figures the child made (waits for them only: the child sends them
        before it makes the step files); None when it could not."""
        if self._figures is None:
            self._figures = self._message() or {}
        found: list[EmbeddedFigure] | None = self._figures.get("figures")
        return found

    def finish(self, commit: bool) -> None:
        """Wait for the child, then move its step files into place (``commit``, once the
        report itself was written) or remove them.

        Raises:
            OutputError: a step file could not be written.
        """
        reply = self._wait()
        staged: list[tuple[str, str]] = reply.get("staged", [])
        if not commit:
            for tmp, _ in staged:
                _unlink(tmp)
            drop_staged_leftovers(self._folder)  # staged, but the reply was cut short (interrupted)
            return
        if reply.get("error"):
            raise OutputError(str(reply["error"]))
        for i, (tmp, name) in enumerate(staged):
            try:
                os.replace(tmp, self._folder / name)
            except OSError as exc:
                for rest, _ in staged[i:]:
                    _unlink(rest)
                raise OutputError(f"cannot write {self._folder / name}: {exc.strerror or exc}") from None
        drop_other_step_files(self._folder, [name for _, name in staged])


class _InProcessJob(StepFilesJob):
    """The same, done here (no fork): the texts now, the files on commit."""

    def __init__(self, analysis: Analysis, folder: Path) -> None:
        self._folder = folder
        self._texts = step_file_texts(analysis)

    def figures(self) -> list[EmbeddedFigure] | None:
        return None

    def finish(self, commit: bool) -> None:
        from launchprof.report.html import atomic_write

        if commit:
            for name, text in self._texts.items():
                atomic_write(self._folder / name, text)
            drop_other_step_files(self._folder, self._texts)


def start_step_files(analysis: Analysis, folder: Path) -> StepFilesJob:
    """Make the step files of ``analysis`` in a forked child process, so that they are
    computed while this process goes on with the diagnosis (about 0.2 s of a 150k-kernel
    trace's 1.3 s, on a second CPU); the child also makes the report page's device
    figures (:func:`~launchprof.report.figures.embedded_device_figures`, which do not
    depend on the diagnosis either). The child writes the step files as temporary files
    in ``folder`` (which must exist); :meth:`StepFilesJob.finish` moves them into place
    once the report itself was written, so that a failed report leaves the old ones.
    Where ``os.fork`` is missing, or off Linux, everything is done in this process.

    Only for a command-line run (forking a process with threads of its own, such as a
    notebook kernel, is not safe); the child only writes files and its reply, and exits
    with ``os._exit``.
    """
    drop_staged_leftovers(folder)  # of an earlier run that was interrupted
    if sys.platform != "linux" or not hasattr(os, "fork"):
        return _InProcessJob(analysis, folder)
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return _InProcessJob(analysis, folder)
    if pid == 0:  # the child: stage the files, make the figures, reply, exit at once
        code = 0
        try:
            # Ctrl-C and SIGTERM are the parent's to handle: it reaps this child and removes
            # what it staged (StepFilesJob.finish(False)).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.close(read_end)
            with os.fdopen(write_end, "wb") as fh:
                # First the figures, which the parent's report waits for; then the step files.
                try:
                    from launchprof.report.figures import embedded_device_figures

                    figures: Any = embedded_device_figures(analysis)
                except BaseException:  # noqa: BLE001 - the parent makes them itself (and meets the error)
                    figures = None
                _send(fh, {"figures": figures})
                reply: dict[str, Any] = {"staged": []}
                try:
                    for name, text in step_file_texts(analysis).items():
                        reply["staged"].append((_stage(folder, name, text), name))
                except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
                    for tmp, _ in reply["staged"]:
                        _unlink(tmp)
                    reply = {"staged": [], "error": str(exc) if isinstance(exc, OutputError) else repr(exc)}
                _send(fh, reply)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    return StepFilesJob(pid, read_end, folder)


def _send(fh: Any, reply: dict[str, Any]) -> None:
    """One reply to the parent: its pickle's length (8 bytes, little-endian), then the pickle."""
    data = pickle.dumps(reply)
    fh.write(len(data).to_bytes(8, "little") + data)
    fh.flush()


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
    except BaseException as exc:
        if tmp_name is not None:
            _unlink(tmp_name)
        if not isinstance(exc, OSError):
            raise
        raise OutputError(f"cannot write {folder / name}: {exc.strerror or exc}") from None


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _read_csv(
    path: Path, columns: tuple[str, ...], notes: list[str], optional: tuple[str, ...] = (), nan: tuple[str, ...] = ()
) -> pd.DataFrame | None:
    """The ``columns`` of a step file (None: absent or unreadable, said in ``notes``);
    columns of ``optional`` missing from the file read as 0, those of ``nan`` as NaN
    (files written before the column existed)."""
    if not path.exists():
        return None
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        notes.append(f"{path} could not be read ({exc}); ignored")
        return None
    frame = frame.assign(**{c: 0 for c in optional if c not in frame.columns})
    frame = frame.assign(**{c: np.nan for c in nan if c not in frame.columns})
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
        ReportFolderError: no ``summary.json``, it is not a launchprof summary, or its
            figures or step files are damaged (wrong types, unreadable numbers); the
            message leaves out the folder: the caller names it.
    """
    try:
        return _side_from_folder(folder)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise ReportFolderError(f"its summary.json or step files are damaged ({type(exc).__name__}: {exc})") from None


def _check_one_run(folder: Path, summary: dict[str, Any]) -> None:
    """Refuse a folder whose files are not all of one run: ``summary.json`` lists the
    SHA-256 of the step files written with it (``files``) and ``report.html`` carries its
    ``run_id`` (:func:`launchprof.report.write.commit_report`). A summary without them
    (an older launchprof) is not checked.

    A step file that is missing is not an error (the comparison then uses the summary's
    step statistics, as for an older report).

    Raises:
        ReportFolderError: a step file is not the one written with the summary, or the
            page is another run's.
    """
    import hashlib
    import re

    files, run_id = summary.get("files"), summary.get("run_id")
    if not isinstance(files, dict) or not isinstance(run_id, str):
        return
    for name in STEP_FILES:
        path = folder / name
        if not path.exists():  # copied without it: compared from summary.json, as an older report
            continue
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            raise ReportFolderError(f"its {name} cannot be read: {exc.strerror or exc}") from None
        if digest != files.get(name):
            raise ReportFolderError(
                f"its {name} is not of the run that wrote summary.json (run {run_id}): the folder mixes two runs' "
                "files; write the report again"
            )
    try:
        with (folder / "report.html").open("rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return
    found = re.search(r'<meta name="launchprof-run" content="([0-9a-f]+)">', head)
    if found is not None and found.group(1) != run_id:
        raise ReportFolderError(
            f"its report.html is of run {found.group(1)}, its summary.json of run {run_id}: the folder mixes two runs' "
            "files; write the report again"
        )


def _baseline_periods(
    folder: Path, section: Any, table: pd.DataFrame | None, step_name: str | None, notes: list[str]
) -> np.ndarray | None:
    """The pooled step periods of the folder's runs without nsys (``baseline-*.steps``,
    every file of a run that wrote one, the steps named ``step_name``), each run's first
    period left out; None when the summary has no baseline, or no file holds two steps.

    A host that ran ahead of the GPU in those runs (``host_ahead_of_gpu``: its steps took
    less host time than the GPU's work, as a graph replay or GPU-bound work does) does not
    show the step's pace; the step is then GPU-bound, nsys does not slow the GPU's work,
    and the steady periods under nsys (``table``) stand for the unprofiled ones (said in
    ``notes``)."""
    from launchprof.baseline import StepTimesError, read_step_times

    if not isinstance(section, dict) or not section.get("runs"):
        return None
    if section.get("host_ahead_of_gpu"):
        if table is None:
            return None
        steady = table.loc[~table["warmup"] & table["period_ns"].notna(), "period_ns"].to_numpy(dtype=float)
        notes.append(
            f"{folder}: the host ran ahead of the GPU in the runs without nsys (GPU-bound steps): the step periods "
            "under nsys stand for the ones without it (nsys does not slow the GPU's work)"
        )
        return steady if steady.size >= 2 else None
    if section.get("source") == "profiler-region":
        return _region_periods(folder, section, notes)
    periods = []
    for path in sorted(folder.glob("baseline-*.steps")):
        try:
            times = read_step_times(path, step_name)
        except (StepTimesError, OSError) as exc:
            notes.append(f"{path}: not read ({exc}); left out")
            continue
        if len(times) > 2:
            periods.append(np.diff(times[:, 0])[1:])
    pooled = np.concatenate(periods) if periods else np.empty(0)
    return pooled.astype(float) if pooled.size >= 2 else None


def _region_periods(folder: Path, section: dict[str, Any], notes: list[str]) -> np.ndarray | None:
    """One step time per run without nsys of a workload without step markers: the run's
    profiler regions (:mod:`launchprof.profiler_region`) divided by the steps found inside the
    trace's regions (``region_steps``); None with fewer than two runs."""
    from launchprof.baseline import StepTimesError, region_step_times

    steps = section.get("region_steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or not 0 < steps < 2**31:
        notes.append(
            f"{folder}: its baseline section has no usable region_steps ({steps!r}); no step time without nsys"
        )
        return None
    values = []
    for path in sorted(folder.glob("baseline-*.steps")):
        try:
            regions = region_step_times(path)
        except (StepTimesError, OSError) as exc:
            notes.append(f"{path}: not read ({exc}); left out")
            continue
        total = int((regions[:, 1] - regions[:, 0]).sum())
        if total > 0:
            values.append(total / steps)
    notes.append(
        f"{folder}: no step markers: the step time without nsys is the workload's profiler region "
        f"(torch.cuda.profiler.start() to stop(), GPU drained at both ends) divided by the {steps} steps found "
        "inside that region of the trace, one figure per run"
    )
    return np.array(values, dtype=float) if len(values) >= 2 else None


def _side_from_folder(folder: Path) -> SideData:
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        raise ReportFolderError("a folder without summary.json; give a trace or a launchprof report folder")
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportFolderError(f"its summary.json is not readable JSON ({exc})") from None
    if not isinstance(summary, dict) or not str(summary.get("schema", "")).startswith("launchprof.summary/"):
        raise ReportFolderError("its summary.json is not a launchprof summary (no 'schema': 'launchprof.summary/...')")
    _check_one_run(folder, summary)
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
    kernels = _read_csv(
        folder / "step_kernels.csv", (*KERNEL_KEY, "per_step", "gpu_ns_per_step"), notes, nan=("gpu_ns_per_step",)
    )
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
    marker = str(stats.get("name") or "step").rpartition(":")[2] if stats.get("source") == "nvtx" else "step"
    unprofiled = _baseline_periods(folder, summary.get("baseline"), table, marker, notes)
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
        unprofiled_periods=unprofiled,
        expected_eager_step_ns=_opt((rec or {}).get("expected") if isinstance(rec, dict) else None, "eager_step_ns"),
        predicted_step_ns=_opt(rec, "predicted_step_ns"),
        break_even_iterations=_opt(rec, "break_even_iterations"),
        notes=tuple(notes),
    )
