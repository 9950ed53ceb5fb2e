"""The workload's profiler region and its top-level module calls, timed without a profiler:
step times for workloads without step markers.

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

Top-level module calls. A PyTorch workload with neither step markers nor a profiler region
(a user's ``generate()`` script) is timed by its outermost ``torch.nn.Module`` calls when
``LAUNCHPROF_MODULE_CALLS`` is set (:data:`MODULE_CALLS_ENV`; ``launchprof profile`` sets it
for such a workload, :func:`launchprof.commands.baseline.run_baselines`). The moment
``torch.nn.modules.module`` is imported, global forward hooks (PyTorch's own
``register_module_forward_pre_hook`` / ``register_module_forward_hook``) watch the first
:data:`OBSERVE_CALLS` outermost module calls; then they are removed and the same hooks are
registered on the modules seen there alone (``Module.register_forward_pre_hook`` /
``register_forward_hook``), so the other modules keep PyTorch's hook-free fast path. Each
outermost call of those modules is written as ``module NAME START_NS END_NS`` (NAME: the
class's qualified name, ``#2``, ``#3`` for further instances of one class; host times,
no synchronisation: in a steady loop the period between calls is the step's pace). Hooks
do nothing while ``torch.compile`` traces (``torch.compiler.is_compiling()``). The
calls are appended to the file every :data:`FLUSH_CALLS` calls and at exit. ``launchprof``
runs such a program to its end (a warm-up, e.g. a first ``generate()`` that meets every
sequence length for the first time, can outlast any fixed count of calls; the analysis takes
the later half of the calls, :func:`launchprof.analysis.baseline.later_half`); with
``LAUNCHPROF_STOP_AFTER=N`` set by hand, the process writes its times and leaves
(``os._exit(0)``) once one module has N + 1 outermost calls (N periods), as the step
markers do. Which module's period is the step's is decided against the trace
(:func:`launchprof.analysis.baseline.module_match`).

Synchronizing calls, Inductor's reasons for skipping CUDA Graphs, allocations. With
``LAUNCHPROF_SOURCES`` (:data:`SOURCES_ENV`) or ``LAUNCHPROF_ALLOCATIONS``
(:data:`ALLOCATIONS_ENV`) naming a file, the run also writes where a PyTorch workload
synchronizes and where Inductor did not use CUDA Graphs, or what it allocated, each with
its stack: :mod:`launchprof.source_hooks`.

This file is run by path and imports nothing but the standard library, the file beside it
(``source_hooks.py``, loaded by path) and torch, when the workload imports it, so it works
with any Python that runs the workload, whether or not launchprof is installed there.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

REGION_NAME = "profiler region"
STEP_TIMES_ENV = "LAUNCHPROF_STEP_TIMES"  # launchprof.marker.STEP_TIMES_ENV (not imported: this file stands alone)
STOP_AFTER_ENV = "LAUNCHPROF_STOP_AFTER"  # launchprof.defaults.STOP_AFTER_ENV
MODULE_CALLS_ENV = "LAUNCHPROF_MODULE_CALLS"
MODULE_PREFIX = "module "
# Outermost module calls watched by the global hooks before they move to the modules seen:
# a few steps of a loop that calls one to three top-level modules (model, loss, a head).
OBSERVE_CALLS = 8
FLUSH_CALLS = 10_000
TARGET = "torch.cuda.profiler"
MODULE_TARGET = "torch.nn.modules.module"
SOURCES_ENV = "LAUNCHPROF_SOURCES"
SOURCES_TARGET = "torch"
ALLOCATIONS_ENV = "LAUNCHPROF_ALLOCATIONS"


def _beside(name: str) -> ModuleType:
    """The module of the file ``name``.py beside this one, loaded by path: run as a script,
    this file cannot count on launchprof being importable."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"launchprof_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __package__:  # imported as launchprof.profiler_region
    from launchprof import source_hooks
else:  # run by path (the usual way): the file beside this one
    source_hooks = _beside("source_hooks")


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


class _ModuleTimer:
    """Times the outermost calls of ``torch.nn.Module`` (module docstring)."""

    def __init__(self, module_mod: ModuleType, stop_after: int) -> None:
        self.depth = 0
        self.start = 0
        self.calls: list[tuple[str, int, int]] = []
        self.counts: dict[str, int] = {}
        self.names: dict[int, str] = {}
        self.seen: dict[int, Any] = {}  # id -> module, while watching (strong refs: a handful)
        self.stop_after = stop_after
        self.pid = os.getpid()  # a forked child does not write its parent's calls again
        self.is_compiling: Any = None
        self.handles = [
            module_mod.register_module_forward_pre_hook(self.pre),
            module_mod.register_module_forward_hook(self.post, always_call=True),
        ]

    def _compiling(self) -> bool:
        if self.is_compiling is None:
            torch = sys.modules.get("torch")
            compiler = getattr(torch, "compiler", None)
            self.is_compiling = getattr(compiler, "is_compiling", None) or (lambda: False)
        return bool(self.is_compiling())

    def pre(self, module: Any, args: Any) -> None:
        if self._compiling():
            return
        if self.depth == 0:
            self.start = time.perf_counter_ns()
        self.depth += 1

    def post(self, module: Any, args: Any, output: Any) -> None:
        if self._compiling() or self.depth == 0:
            return
        self.depth -= 1
        if self.depth:
            return
        end = time.perf_counter_ns()
        name = self._name(module)
        self.calls.append((name, self.start, end))
        count = self.counts[name] = self.counts.get(name, 0) + 1
        if self.handles and len(self.calls) >= OBSERVE_CALLS:
            self._narrow()
        if len(self.calls) >= FLUSH_CALLS:  # a long run's calls go to the file as it runs
            _write()
        if self.stop_after and count > self.stop_after:
            _write()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(0)

    def _name(self, module: Any) -> str:
        name = self.names.get(id(module))
        if name is None:
            base = type(module).__qualname__
            same = sum(1 for n in self.names.values() if n == base or n.startswith(base + "#"))
            name = self.names[id(module)] = base if not same else f"{base}#{same + 1}"
            if self.handles:
                self.seen[id(module)] = module
        return name

    def _narrow(self) -> None:
        """Move the hooks from every module to the modules seen at the top so far."""
        for handle in self.handles:
            handle.remove()
        self.handles = []
        for module in self.seen.values():
            module.register_forward_pre_hook(self.pre)
            module.register_forward_hook(self.post, always_call=True)
        self.seen = {}


_timer: list[_ModuleTimer] = []


def _time_modules(module_mod: ModuleType) -> None:
    """Start timing the outermost module calls (once)."""
    if _timer:
        return
    count = (os.environ.get(STOP_AFTER_ENV) or "").partition(":")[0]
    stop = int(count) if count.strip().isdigit() and os.environ.get("WORLD_SIZE", "1").strip() in ("", "1") else 0
    _timer.append(_ModuleTimer(module_mod, stop))


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, then: Any) -> None:
        self.inner = inner
        self.then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        self.then(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of ``targets`` with the other finders and wraps their loaders, which
    then call the target's function on the module they loaded."""

    def __init__(self, targets: dict[str, Any]) -> None:
        self.targets = targets

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        then = self.targets.get(fullname)
        if then is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, then)
                return spec
        return None


def _write() -> None:
    path = os.environ.get(STEP_TIMES_ENV)
    lines = [f"{REGION_NAME} {a} {b}\n" for pid, a, b in _regions if pid == os.getpid()]  # not a forked child's
    if _timer and _timer[0].calls and _timer[0].pid == os.getpid():
        lines += [f"{MODULE_PREFIX}{name} {a} {b}\n" for name, a, b in _timer[0].calls]
        _timer[0].calls = []
    _regions.clear()
    if not path or not lines:
        return
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.writelines(lines)
    except OSError as exc:
        print(f"launchprof: step times not written to {path}: {exc.strerror}", file=sys.stderr)


# This file's path, taken while the module runs: run as a script, the module loses its
# __file__ once the workload's body has run (runpy's __main__ swap), before the exit handlers
# that write the allocations and sync sources.
_THIS_FILE = __file__


def _own(filename: str) -> bool:
    """Whether ``filename`` is this file's (the hooks leave its frames out of the stacks
    they write)."""
    return filename == _THIS_FILE


def install(modules: bool = False, sources: str | None = None, allocations: str | None = None) -> None:
    """Time every profiler region of this process from now on, and with ``modules`` its
    outermost module calls, and write them at exit; with ``sources`` (a file), write where
    the workload synchronizes there; with ``allocations`` (a file), its allocations."""
    targets: dict[str, Any] = {TARGET: _wrap}
    if modules:
        targets[MODULE_TARGET] = _time_modules
    on_torch: list[Any] = []
    if sources:
        on_torch.append(source_hooks.SyncSources(sources, _own).install)
    if allocations:
        on_torch.append(source_hooks.Allocations(allocations, _own).install)
    if on_torch:
        targets[SOURCES_TARGET] = lambda torch: [f(torch) for f in on_torch]
    for name, then in list(targets.items()):
        if name in sys.modules:
            then(sys.modules[name])
            del targets[name]
    if targets:
        sys.meta_path.insert(0, _Finder(targets))
    atexit.register(_write)


def main(argv: Sequence[str]) -> None:
    """Run ``SCRIPT ARGS`` or ``-m MODULE ARGS`` as ``__main__`` with the regions timed."""
    args = list(argv)
    if not args or (args[0] == "-m" and len(args) < 2):
        sys.exit("usage: python profiler_region.py SCRIPT.py [ARGS...] | -m MODULE [ARGS...]")
    install(
        modules=bool(os.environ.get(MODULE_CALLS_ENV)),
        sources=os.environ.get(SOURCES_ENV) or None,
        allocations=os.environ.get(ALLOCATIONS_ENV) or None,
    )
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
