"""The workload's profiler region, timed without a profiler: step times for workloads without
step markers.

Many workloads bracket the loop they time with ``torch.cuda.profiler.start()`` and
``stop()`` (``cudaProfilerStart/Stop``, what ``nsys --capture-range=cudaProfilerApi``
honours; ``torch.cuda.profiler.profile()`` calls the same two). When such a workload has no
step markers (:mod:`launchprof.marker`), ``launchprof profile --baseline-runs`` and
``launchprof check`` run it without nsys through this file::

    python launchprof/profiler_region.py SCRIPT.py ARGS...     (or -m MODULE ARGS...)

which runs the script as ``__main__`` (``runpy``, as ``python SCRIPT.py`` would) after
wrapping ``torch.cuda.profiler.start`` and ``stop`` the moment that module is imported.
Each start records ``time.perf_counter_ns()`` after ``torch.cuda.synchronize()`` and
each stop records it after another one, so a region's time is its wall-clock time with
the GPU drained at both ends (the workload's own CUDA-synchronised timed loop). As in the
trace, a region runs from a start to the next stop: a start inside an open region changes
nothing. A forked child does not write its parent's regions again. At exit,
every region is appended to the file named by ``LAUNCHPROF_STEP_TIMES`` as a line
``profiler region START_NS END_NS`` (the step-times format of :mod:`launchprof.marker`,
name :data:`REGION_NAME`). Calls to ``cudart().cudaProfilerStart()`` that bypass
``torch.cuda.profiler`` are not seen.

The analysis divides a region's time by the steps it found inside the same region of the
profiled trace (:func:`launchprof.analysis.baseline.region_step_count`).

This file is run by path and imports nothing but the standard library (and torch, when
the workload imports it), so it works with any Python that runs the workload, whether or
not launchprof is installed there.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

REGION_NAME = "profiler region"
STEP_TIMES_ENV = "LAUNCHPROF_STEP_TIMES"  # launchprof.marker.STEP_TIMES_ENV (not imported: this file stands alone)
TARGET = "torch.cuda.profiler"

_regions: list[tuple[int, int, int]] = []  # (pid, start_ns, end_ns)
_open: list[int] = []  # the start of the open region (at most one)


def _synchronize() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _wrap(module: ModuleType) -> None:
    """Replace ``module.start`` and ``module.stop`` by timed versions (once)."""
    start, stop = module.start, module.stop
    if getattr(start, "_launchprof_region", False):
        return

    def timed_start() -> Any:
        result = start()
        if not _open:  # a start inside an open region changes nothing (as in the trace)
            _synchronize()
            _open.append(time.perf_counter_ns())
        return result

    def timed_stop() -> Any:
        if _open:
            _synchronize()
            _regions.append((os.getpid(), _open.pop(), time.perf_counter_ns()))
        return stop()

    timed_start._launchprof_region = True  # type: ignore[attr-defined]
    setattr(module, "start", timed_start)  # noqa: B010 - a module attribute mypy does not know
    setattr(module, "stop", timed_stop)  # noqa: B010


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        _wrap(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``torch.cuda.profiler`` with the other finders and wraps its loader."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def _write() -> None:
    path = os.environ.get(STEP_TIMES_ENV)
    mine = [(a, b) for pid, a, b in _regions if pid == os.getpid()]  # not a forked child's copy
    if not path or not mine:
        return
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.writelines(f"{REGION_NAME} {a} {b}\n" for a, b in mine)
    except OSError as exc:
        print(f"launchprof: profiler region times not written to {path}: {exc.strerror}", file=sys.stderr)


def install() -> None:
    """Time every profiler region of this process from now on and write them at exit."""
    if TARGET in sys.modules:
        _wrap(sys.modules[TARGET])
    else:
        sys.meta_path.insert(0, _Finder())
    atexit.register(_write)


def main(argv: Sequence[str]) -> None:
    """Run ``SCRIPT ARGS`` or ``-m MODULE ARGS`` as ``__main__`` with the regions timed."""
    args = list(argv)
    if not args or (args[0] == "-m" and len(args) < 2):
        sys.exit("usage: python profiler_region.py SCRIPT.py [ARGS...] | -m MODULE [ARGS...]")
    install()
    # sys.path[0] is this file's folder; python itself would have put the script's real
    # folder (symlinks resolved) or, for -m, the working directory there - or nothing at
    # all with -P / PYTHONSAFEPATH, when sys.path[0] is already the first PYTHONPATH entry.
    safe = bool(getattr(sys.flags, "safe_path", False))
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        if not safe:
            sys.path[0] = os.getcwd()
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        if not safe:
            sys.path[0] = os.path.dirname(os.path.realpath(args[0]))
        runpy.run_path(os.path.abspath(args[0]), run_name="__main__")  # __file__ absolute, as python gives it


if __name__ == "__main__":
    main(sys.argv[1:])
