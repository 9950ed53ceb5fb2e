"""``launchprof profile``'s warm-up: the analysis modules imported in the background
while nsys writes its report, so that their import time does not add to the wall time."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence

from launchprof.commands.early import background_priority
from launchprof.timings import mark

# Imported while nsys runs, besides launchprof.commands.analyze (pandas and the report modules):
# what the first analysis would otherwise import on the way (measured: 0.01 s), and the
# SQLite reader of the usual path (ADBC: 0.06 s here) or the early path's Arrow reader.
WARM_MODULES = (
    "launchprof.analysis.ranks",
    "launchprof.calibrate.store",
    "numpy.char",
    "pandas.io.formats.csvs",
    "pyarrow.csv",
)


WARM_SQLITE = ("adbc_driver_manager", "adbc_driver_sqlite")


WARM_ARROW = (
    "launchprof.trace.arrowdir",
    "pyarrow.ipc",
    "launchprof.report.figures",
    "launchprof.analysis.comparison.side",  # the step files' tables
)


WARM_ENV = "LAUNCHPROF_WARM_AT"  # "start": import while the workload runs (the default before)


class WarmUp(threading.Thread):
    """Imports the analysis modules ``modules`` (besides :mod:`launchprof.commands.analyze`) in the
    background, at low priority (:func:`~launchprof.commands.early.background_priority`), once the
    workload has exited (:func:`~launchprof.nsys.watch.wait_for_workload_exit`): nsys then
    writes its report for 1.4 s or more, while the imports took 1.4-1.7 s of one CPU on
    the H200 machine, where they slowed down the workload they ran beside
    (benchmarks/README.md). ``ready``: true once the report is complete (the imports start
    then at the latest). With ``$LAUNCHPROF_WARM_AT=start`` they start at once, and the
    wait follows them. :attr:`workload_exited` is set once the workload is known to have
    exited (``run_nsys`` then holds back the first Ctrl-C).

    :meth:`nsys_started` gives the nsys process to watch; :meth:`nsys_exited` ends the wait.
    """

    def __init__(self, modules: Sequence[str], ready: Callable[[], bool] = lambda: False) -> None:
        super().__init__(name="launchprof-warm-up", daemon=True)
        self.modules = tuple(modules)
        self.ready = ready
        self.waited = ""  # why the wait ended (watch.wait_for_workload_exit), for benchmarks
        self.workload_gone = threading.Event()  # set when the wait ends (the workload exited, or no telling)
        self.workload_exited = threading.Event()  # set when the workload is known to have exited
        self._pid: int | None = None
        self._nsys_seen = threading.Event()
        self._nsys_gone = threading.Event()

    def nsys_started(self, pid: int) -> None:
        self._pid = pid
        self._nsys_seen.set()

    def nsys_exited(self) -> None:
        self._nsys_gone.set()
        self._nsys_seen.set()

    def run(self) -> None:
        background_priority()  # the workload and nsys come first
        at_start = os.environ.get(WARM_ENV) == "start"
        if at_start:
            self._import()
        self._nsys_seen.wait()
        if self._pid is not None:
            from launchprof.nsys.watch import wait_for_workload_exit

            self.waited = wait_for_workload_exit(self._pid, self._nsys_gone, self.ready)
            if self.waited in ("exited", "ready"):
                self.workload_exited.set()
        self.workload_gone.set()
        if not at_start:
            self._import()

    def _import(self) -> None:
        mark(f"warm_start_{self.waited or WARM_ENV}")
        mark("warm_start")
        import importlib

        import launchprof.commands.analyze  # noqa: F401

        for name in self.modules:
            with contextlib.suppress(ImportError):  # a missing one is met (and reported) where it is used
                importlib.import_module(name)
        mark("warm_done")
