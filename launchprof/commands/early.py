"""Analysing a recording while nsys is still writing its SQLite export.

``nsys profile --export=sqlite`` ends in two steps once the workload has exited: it
writes the report (``STEM.nsys-rep``), then exports it to ``STEM.sqlite``. The second
step is a sizeable share of a run (benchmarks/README.md, "Measurements behind constants
in the code"), and ``launchprof profile`` used to start its analysis only after it.
:class:`EarlyAnalysis` starts as soon as the ``.nsys-rep`` is complete - nsys creates
``STEM.sqlite`` only then, after the ``.nsys-rep`` has stopped changing - and runs, in a
background thread of the ``launchprof`` process:

1. ``nsys export --type arrowdir`` of the ``.nsys-rep`` into a hidden folder next to it,
   only the tables the loader reads (:func:`export_command`; faster than the SQLite
   export);
2. :func:`~launchprof.trace.arrowdir.load_arrowdir` and the whole analysis
   (:func:`~launchprof.api.analyze_loaded`), the step files' texts and the report page;
3. the hidden folder is removed.

When nsys exits, :meth:`EarlyAnalysis.finish` hands over the result: the report is then
only written out. If the export is still running at that point it is stopped and the
command analyses ``STEM.sqlite`` as before; so it does on any failure here, which is never
reported (the usual path meets and reports real problems). Used only where it can pay:
nsys knows ``arrowdir`` (2024 and later) and the machine has at least :data:`MIN_CPUS`
CPUs (the export competes with nsys's own for the CPU); ``$LAUNCHPROF_EARLY=0`` turns it
off, ``=1`` on whatever the CPU count.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launchprof.commands.common import AnalysisOptions
from launchprof.timings import mark
from launchprof.trace.tables import LOADED_TABLES

EARLY_ENV = "LAUNCHPROF_EARLY"
MIN_CPUS = 4
POLL_S = 0.005
ARROW_FOLDER = ".launchprof-arrowdir"
BACKGROUND_NICE = 10


def background_priority() -> None:
    """Lower the scheduling priority of the calling thread only (Linux: ``setpriority`` of
    its thread id) to nice :data:`BACKGROUND_NICE`: launchprof's work while the workload and
    nsys run (imports, the early export and analysis) then takes only CPU time they leave
    idle. Where that cannot be done, nothing changes."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (OSError, AttributeError):
        pass


@functools.lru_cache(maxsize=8)
def export_help(nsys: str) -> str:
    """``nsys export --help``'s text ("" when it cannot be run)."""
    try:
        done = subprocess.run([nsys, "export", "--help"], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def exports_arrowdir(nsys: str) -> bool:
    """Whether ``nsys export --help`` lists the ``arrowdir`` type."""
    return "arrowdir" in export_help(nsys)


def export_command(nsys: str, rep: Path, folder: Path) -> list[str]:
    """``nsys export --type arrowdir`` of ``rep`` into ``folder``, limited to the tables the
    loader reads (:data:`~launchprof.trace.tables.LOADED_TABLES`) when this nsys has
    ``--tables`` (nsys 2025 and later)."""
    cmd = [nsys, "export", "--type", "arrowdir", "--force-overwrite", "true", "--quiet", "true"]
    if "--tables" in export_help(nsys):
        cmd.append("--tables=" + ",".join(f"^{t}$" for t in LOADED_TABLES))
    nice = shutil.which("nice")  # the export yields the CPU to nsys's own (background_priority)
    return [
        *([nice, "-n", str(BACKGROUND_NICE)] if nice else []),
        *cmd,
        "--output",
        str(folder.absolute()),  # absolute: a relative path starting with '-' would read as an option
        str(rep.absolute()),
    ]


def wanted(nsys_argv: list[str]) -> bool:
    """Whether to analyse early for this ``nsys profile`` command line (module docstring):
    enough CPUs, not switched off, and the command exports to SQLite."""
    setting = os.environ.get(EARLY_ENV, "")
    if setting == "0" or (setting != "1" and (os.cpu_count() or 1) < MIN_CPUS):
        return False
    exports = [a.split("=", 1)[1] for a in nsys_argv if a.startswith("--export=")]
    return bool(exports) and "sqlite" in exports[-1].split(",")


@dataclass
class EarlyResult:
    """What the report needs, made while nsys exported: the analysis, its outputs' texts
    (:func:`launchprof.report.outputs.render_outputs`: name -> text), the page's device
    figures, and the summary and page (None when they must wait, e.g. for baseline runs)."""

    analysis: Any
    outputs: dict[str, str]
    figures: Any
    rendered: tuple[Any, str] | None
    seconds: dict[str, float] = field(default_factory=dict)


class EarlyAnalysis:
    """The background analysis of one ``nsys profile`` run (module docstring).

    ``stem``: nsys's ``--output`` (``STEM.nsys-rep``, ``STEM.sqlite``); ``warm``: the
    thread importing the analysis modules, joined before this thread imports anything;
    ``render``: also render the summary and page (no baseline runs to wait for);
    ``after``: set once the workload has exited (nsys writes its report only then), before
    which the report is not looked for; ``how``: the bubble threshold, the step and the
    malloc settings of the analysis (its ``nsys`` is not read: ``nsys`` is the one located).
    """

    def __init__(
        self,
        stem: Path,
        nsys: Path,
        how: AnalysisOptions,
        warm: threading.Thread | None = None,
        render: bool = True,
        after: threading.Event | None = None,
    ) -> None:
        self.stem = stem
        self.nsys = nsys
        self.how = how
        self.warm = warm
        self.render = render
        self.after = after
        self.result: EarlyResult | None = None
        self._nsys_done = threading.Event()
        self._dropped = threading.Event()
        self._lock = threading.Lock()
        self._export: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._run, name="launchprof-early", daemon=True)

    def start(self) -> EarlyAnalysis:
        self._thread.start()
        return self

    def _report_ready(self) -> bool:
        """``STEM.sqlite`` exists (nsys began its export) and ``STEM.nsys-rep`` is there."""
        return self.stem.with_suffix(".sqlite").exists() and self.stem.with_suffix(".nsys-rep").is_file()

    def _run(self) -> None:
        folder = self.stem.parent / ARROW_FOLDER
        background_priority()
        try:
            if not exports_arrowdir(str(self.nsys)):
                return
            while self.after is not None and not self.after.wait(0.1):
                if self._nsys_done.is_set():
                    return
            while not self._report_ready():
                if self._nsys_done.wait(POLL_S):
                    return
            rep = self.stem.with_suffix(".nsys-rep")
            began = time.perf_counter()
            with self._lock:
                if self._nsys_done.is_set():
                    return
                self._export = subprocess.Popen(
                    export_command(str(self.nsys), rep, folder),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            mark("early_export_start")
            if self._export.wait() != 0:
                return
            mark("early_exported")
            exported = time.perf_counter()
            if self.warm is not None:
                self.warm.join()  # no two threads import the same modules
            if self._dropped.is_set():
                return
            self.result = self._analyse(folder, {"export": exported - began})
            mark("early_done")
        except BaseException:  # noqa: BLE001 - any failure: the usual path runs instead (and reports)
            pass
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _analyse(self, folder: Path, seconds: dict[str, float]) -> EarlyResult:
        from launchprof.api.traces import analyze_loaded
        from launchprof.report.figures import embedded_device_figures
        from launchprof.report.outputs import render_outputs
        from launchprof.report.write import render_files
        from launchprof.trace.arrowdir import load_arrowdir

        t0 = time.perf_counter()
        trace = load_arrowdir(folder, path=self.stem.with_suffix(".sqlite"), memory_check=self.how.memory_check)
        shutil.rmtree(folder, ignore_errors=True)
        if self.how.memory is not None:
            self.how.memory.analysing()  # loaded: the analysis comes next
        mark("early_loaded")
        t1 = time.perf_counter()
        analysis = analyze_loaded(trace, self.how.bubble_threshold_ns, step=self.how.step)
        mark("early_analysed")
        t2 = time.perf_counter()
        texts = render_outputs(analysis)
        figures = embedded_device_figures(analysis)
        rendered = render_files(analysis, str(self.stem.with_suffix(".sqlite")), figures) if self.render else None
        seconds.update(load=t1 - t0, analysis=t2 - t1, report=time.perf_counter() - t2)
        return EarlyResult(analysis, texts, figures, rendered, seconds)

    def finish(self, wait: bool = True) -> EarlyResult | None:
        """nsys has exited: the result, waiting for the analysis when the export is done;
        None when the export was still running (stopped here), failed, or never began.
        ``wait=False`` (the run was interrupted): stop the export, drop the analysis."""
        with self._lock:
            self._nsys_done.set()
            if self._export is not None and self._export.poll() is None:
                self._export.kill()
        if not wait:
            self._dropped.set()
            return None
        self._thread.join()
        return self.result


__all__ = ["EarlyAnalysis", "EarlyResult", "background_priority", "exports_arrowdir", "wanted"]
