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

import os
import pickle
import signal
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from launchprof.analysis.result import AnalysisResult
from launchprof.analysis.side import STEP_COLUMNS, side_from_analysis
from launchprof.errors import OutputError

if TYPE_CHECKING:
    from launchprof.report.html import EmbeddedFigure

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
    """The step files of ``analysis`` (its ``found_steps``), name -> text; empty when
    no steps were found."""
    side = side_from_analysis(analysis, analysis.found_steps)
    if side.table is None:
        return {}
    table = side.table.astype({c: "Int64" for c in STEP_COLUMNS if c not in ("warmup",)})
    texts = {"steps.csv": _int_csv(table)}
    if side.kernels is not None:
        texts["step_kernels.csv"] = _csv(side.kernels)
    if side.sample is not None:
        texts["step_timeline.csv"] = _csv(side.sample)
    return texts


def write_step_files(analysis: AnalysisResult, folder: Path) -> None:
    """Write the step files of ``analysis`` (its ``found_steps``) into ``folder``;
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

    def __init__(self, analysis: AnalysisResult, folder: Path) -> None:
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


def start_step_files(analysis: AnalysisResult, folder: Path) -> StepFilesJob:
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
