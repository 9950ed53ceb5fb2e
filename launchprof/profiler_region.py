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

Synchronizing calls. With ``LAUNCHPROF_SOURCES`` naming a file (:data:`SOURCES_ENV`;
``launchprof profile`` sets it for its runs without nsys of a PyTorch workload), the
moment ``torch`` is imported the run turns on PyTorch's own check,
``torch.cuda.set_sync_debug_mode("warn")``, which warns at every operation that
synchronizes the host with the GPU (``.item()``, ``.cpu()``, ``nonzero``, a copy to
pageable memory, ``torch.cuda.synchronize()``). Those warnings are not shown; each is
written to the file as one JSON line ``{"t": perf_counter_ns, "kind": "sync", "stack":
[[file, line, function], ...]}`` (innermost last, the innermost :data:`STACK_FRAMES` frames,
this file's and the warnings module's left out; no source line is read), the same clock as the step times, line by
line so a run that leaves early (``os._exit``) loses none. Other warnings are shown as
before; PyTorch's own note that the check is a prototype, said when it is turned on, is
not shown. The file is made only when torch is imported. Warning filters the workload sets
itself after importing torch still apply to these warnings: ``ignore`` hides the calls from
the file, ``error`` ends that run (it is then left out), and a ``catch_warnings(record=True)``
block records them; a workload that turns the check on itself sees its warnings go to the
file, not its stderr. A torch without the check writes ``{"unavailable": why}`` instead.

CUDA Graphs that ``torch.compile(mode="reduce-overhead")`` did not use. In the same runs,
Inductor's reason for running a compiled function without CUDA Graphs (its log record
``skipping cudagraphs due to REASON ... Found from : File "F", line N, in FUNC``, at
WARNING on the loggers of :data:`SKIP_LOGGERS` or their artifact loggers) is also written, as ``{"t": perf_counter_ns,
"kind": "cudagraph-skip", "reason": REASON, "stack": [[file, line, function], ...]}`` (the
frames Inductor names, innermost last; none when it names none). The record still reaches
PyTorch's own handlers as before.

Allocations. With ``LAUNCHPROF_ALLOCATIONS`` naming a file (:data:`ALLOCATIONS_ENV`; set
by ``launchprof profile`` for one short extra run when the trace's steps allocate memory or
change shape, :func:`launchprof.commands.baseline.run_allocations`), the run turns on
PyTorch's own allocation history once CUDA is initialised
(``torch.cuda.memory._record_memory_history(context="alloc", stacks="python")``, queued
with ``torch.cuda._lazy_call``) and, as it exits (also through ``os._exit``, which the step
markers' stop uses), writes each recorded allocation of the caching allocator as one JSON
line ``{"t": perf_counter_ns, "kind": "alloc" | "segment_alloc", "size": bytes, "stack":
[[file, line, function], ...]}`` (``segment_alloc``: the allocator called ``cudaMalloc``;
innermost frame last; at most :data:`ALLOC_ENTRIES` of the latest). PyTorch stamps the
entries with the wall clock (``time_us``, microseconds since the epoch); they are put on
this file's clock by the offset read when the history was turned on. Recording a stack at
every allocation costs time (a GPT-2 forward on an H200 took 5.9-9.4 ms with it against
5.2-8.5 ms without), so this run's step times are not used as the step without nsys.

This file is run by path and imports nothing but the standard library (and torch, when
the workload imports it), so it works with any Python that runs the workload, whether or
not launchprof is installed there.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import logging
import os
import re
import runpy
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType, ModuleType
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
# PyTorch's text for a synchronizing operation under torch.cuda.set_sync_debug_mode("warn").
SYNC_WARNING = "called a synchronizing CUDA operation"
# Frames kept per event, innermost first: enough for a Hugging Face generate() (the
# stopping check sits 6 frames deep, a model's forward 20-40) to reach the user's script.
STACK_FRAMES = 96
PROTOTYPE_WARNING = "Synchronization debug mode is a prototype"  # PyTorch's, at turning it on
ALLOCATIONS_ENV = "LAUNCHPROF_ALLOCATIONS"
# Allocation entries kept by PyTorch's history (its ring buffer, the latest ones): a step
# of a large model allocates a few thousand times; the analysis needs some steady steps.
ALLOC_ENTRIES = 200_000
# Inductor's loggers of its CUDA Graph decisions: torch/_inductor/cudagraph_utils.py (2.3 on;
# 2.11 logged on its "__cudagraphs" artifact logger) and compile_fx.py (up to 2.2, on
# "__perf_hints"), each with its artifact loggers: an artifact that is off by default
# (perf_hints) does not propagate, so the handler sits on each of them. All log at WARNING.
SKIP_LOGGERS = ("torch._inductor.cudagraph_utils", "torch._inductor.compile_fx")
SKIP_ARTIFACTS = ("", ".__cudagraphs", ".__perf_hints")
SKIP_TEXT = "skipping cudagraphs due to "
_TRACE_LINE = re.compile(r'^\s*File "(.+)", line (\d+), in (.+?)\s*$')

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


class _SyncSources:
    """Writes where the workload synchronizes (module docstring, "Synchronizing calls")."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.out: Any = None
        self.pid = os.getpid()
        self.shown: Any = None
        self.lock = threading.Lock()

    def install(self, torch: ModuleType) -> None:
        import warnings

        try:  # only a workload that imports torch gets the file
            self.out = open(self.path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - kept for the process' life
        except OSError as exc:
            print(f"launchprof: synchronizing calls not written to {self.path}: {exc.strerror}", file=sys.stderr)
            return

        _SkipHandler(self).attach()
        warnings.filterwarnings(
            "ignore", message=PROTOTYPE_WARNING
        )  # said by torch when turned on: ours, not the user's
        try:
            torch.cuda.set_sync_debug_mode("warn")
        except Exception as exc:  # noqa: BLE001 - a torch without it: say so in the file, run on
            self.out.write(json.dumps({"unavailable": f"torch.cuda.set_sync_debug_mode: {exc}"}) + "\n")
            return
        warnings.filterwarnings("always", message=".*" + SYNC_WARNING)
        self.shown = warnings.showwarning
        warnings.showwarning = self.show

    def show(self, message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        text = str(message)
        if SYNC_WARNING not in text:
            self.shown(message, category, filename, lineno, file, line)
            return
        if os.getpid() != self.pid:  # a forked child: not the process timed
            return
        stack: list[list[Any]] = []
        frame: FrameType | None = sys._getframe(1)  # no source lines read: file, line and function only
        while frame is not None and len(stack) < STACK_FRAMES:
            name = frame.f_code.co_filename
            if name != __file__ and not name.endswith(("warnings.py", "<frozen runpy>")):
                stack.append([name, frame.f_lineno, frame.f_code.co_name])
            frame = frame.f_back
        stack.reverse()  # innermost last
        self.write({"t": time.perf_counter_ns(), "kind": "sync", "stack": stack})

    def write(self, event: dict[str, Any]) -> None:
        """One event, one line, whole (threads: one at a time)."""
        line = json.dumps(event) + "\n"
        with self.lock:
            try:
                self.out.write(line)
            except (OSError, ValueError):
                pass


class _SkipHandler(logging.Handler):
    """Writes Inductor's reasons for skipping CUDA Graphs (module docstring)."""

    def __init__(self, sources: _SyncSources) -> None:
        super().__init__(logging.DEBUG)
        self.sources = sources
        self.last: logging.LogRecord | None = None

    def attach(self) -> None:
        """On each of :data:`SKIP_LOGGERS` and its artifact loggers; no level is changed (the
        user's logging settings stand)."""
        for logger in SKIP_LOGGERS:
            for artifact in SKIP_ARTIFACTS:
                logging.getLogger(logger + artifact).addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        with self.sources.lock:  # Inductor may compile on another thread
            if record is self.last:  # met again on its way up from an artifact logger
                return
            self.last = record
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is not ours to report
            return
        at = text.find(SKIP_TEXT)
        if at < 0 or os.getpid() != self.sources.pid or self.sources.out is None:
            return
        head, _, found = text[at + len(SKIP_TEXT) :].partition("Found from")
        stack = [[m[1], int(m[2]), m[3]] for m in map(_TRACE_LINE.match, found.splitlines()) if m]
        reason = " ".join(head.split()).rstrip(".")
        event = {"t": time.perf_counter_ns(), "kind": "cudagraph-skip", "reason": reason, "stack": stack}
        self.sources.write(event)


class _Allocations:
    """Writes the caching allocator's allocations with their stacks (module docstring,
    "Allocations")."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.offset: int | None = None  # perf_counter_ns - wall-clock ns, when turned on
        self.torch: Any = None
        self.written = False

    def install(self, torch: ModuleType) -> None:
        self.torch = torch
        lazy = getattr(torch.cuda, "_lazy_call", None)
        try:
            if lazy is not None:
                lazy(self.enable)  # at CUDA's initialisation (now, when it has happened)
            else:
                self.enable()
        except Exception as exc:  # noqa: BLE001 - a torch without it: say so in the file, run on
            self._unavailable(f"torch.cuda.memory._record_memory_history: {exc}")
        atexit.register(self.dump)
        exit_now = os._exit

        def exiting(code: int) -> None:  # the step markers leave through os._exit
            self.dump()
            exit_now(code)

        setattr(os, "_exit", exiting)  # noqa: B010 - mypy types os._exit as never returning

    def enable(self) -> None:
        try:
            self.torch.cuda.memory._record_memory_history(max_entries=ALLOC_ENTRIES, context="alloc", stacks="python")
        except Exception as exc:  # noqa: BLE001
            self._unavailable(f"torch.cuda.memory._record_memory_history: {exc}")
            return
        self.offset = time.perf_counter_ns() - time.time_ns()

    def _unavailable(self, why: str) -> None:
        try:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps({"unavailable": why}) + "\n")
        except OSError:
            pass

    def dump(self) -> None:
        if self.written or os.getpid() != self.pid:
            return
        self.written = True
        if self.offset is None:
            self._unavailable("the allocation history was never turned on (CUDA not initialised, or refused)")
            return
        try:
            snapshot = self.torch.cuda.memory._snapshot()
        except Exception as exc:  # noqa: BLE001
            self._unavailable(f"torch.cuda.memory._snapshot: {exc}")
            return
        lines, untimed = [], 0
        for trace in snapshot.get("device_traces") or []:
            for entry in trace:
                if entry.get("action") not in ("alloc", "segment_alloc"):
                    continue
                if "time_us" not in entry:
                    untimed += 1
                    continue
                frames = [
                    [f.get("filename"), f.get("line"), f.get("name")]
                    for f in entry.get("frames") or []
                    if f.get("filename") != __file__  # this file's own frames (the runpy wrapper)
                ]
                frames.reverse()  # PyTorch lists the innermost frame first
                t = int(entry["time_us"]) * 1000 + self.offset
                event = {"t": t, "kind": entry["action"], "size": int(entry.get("size") or 0), "stack": frames}
                lines.append(json.dumps(event) + "\n")
        if untimed and not lines:
            self._unavailable(f"{untimed} allocations recorded without a time (time_us): this torch is too old")
            return
        try:
            with open(self.path, "a", encoding="utf-8") as out:
                out.writelines(lines)
        except OSError as exc:
            print(f"launchprof: allocations not written to {self.path}: {exc.strerror}", file=sys.stderr)


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


def install(modules: bool = False, sources: str | None = None, allocations: str | None = None) -> None:
    """Time every profiler region of this process from now on, and with ``modules`` its
    outermost module calls, and write them at exit; with ``sources`` (a file), write where
    the workload synchronizes there; with ``allocations`` (a file), its allocations."""
    targets: dict[str, Any] = {TARGET: _wrap}
    if modules:
        targets[MODULE_TARGET] = _time_modules
    on_torch: list[Any] = []
    if sources:
        on_torch.append(_SyncSources(sources).install)
    if allocations:
        on_torch.append(_Allocations(allocations).install)
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
