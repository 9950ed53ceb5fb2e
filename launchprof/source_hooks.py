"""The hooks a PyTorch workload run without nsys gets from :mod:`launchprof.profiler_region`:
they write where it synchronizes (:class:`SyncSources`), where Inductor ran a compiled
function without CUDA Graphs (:class:`SkipHandler`) and what the caching allocator
allocated (:class:`Allocations`), one JSON line an event with its Python stack, which
:mod:`launchprof.analysis.diagnosis.sources` reads back. Like profiler_region.py this file imports
nothing but the standard library (and torch, when the workload imports it):
profiler_region.py, run by path, loads it from beside itself.

Synchronizing calls. With ``LAUNCHPROF_SOURCES`` naming a file
(:data:`~launchprof.profiler_region.SOURCES_ENV`; ``launchprof profile`` sets it for its
runs without nsys of a PyTorch workload), the moment ``torch`` is imported the run turns
on PyTorch's own check, ``torch.cuda.set_sync_debug_mode("warn")``, which warns at every
operation that synchronizes the host with the GPU (``.item()``, ``.cpu()``, ``nonzero``, a
copy to pageable memory, ``torch.cuda.synchronize()``). Those warnings are not shown; each
is written to the file as one JSON line ``{"t": perf_counter_ns, "kind": "sync", "stack":
[[file, line, function], ...]}`` (innermost last, the innermost :data:`STACK_FRAMES`
frames, profiler_region.py's, this file's and the warnings module's left out; no source
line is read), the same clock as the step times, line by line so a run that leaves early
(``os._exit``) loses none. Other warnings are shown as before; PyTorch's own note that the
check is a prototype, said when it is turned on, is not shown. The file is made only when
torch is imported. Warning filters the workload sets itself after importing torch still
apply to these warnings: ``ignore`` hides the calls from the file, ``error`` ends that run
(it is then left out), and a ``catch_warnings(record=True)`` block records them; a
workload that turns the check on itself sees its warnings go to the file, not its stderr.
A torch without the check writes ``{"unavailable": why}`` instead.

CUDA Graphs that ``torch.compile(mode="reduce-overhead")`` did not use. In the same runs,
Inductor's reason for running a compiled function without CUDA Graphs (its log record
``skipping cudagraphs due to REASON ... Found from : File "F", line N, in FUNC``, at
WARNING on the loggers of :data:`SKIP_LOGGERS` or their artifact loggers) is also written,
as ``{"t": perf_counter_ns, "kind": "cudagraph-skip", "reason": REASON, "stack": [[file,
line, function], ...]}`` (the frames Inductor names, innermost last; none when it names
none). The record still reaches PyTorch's own handlers as before.

Allocations. With ``LAUNCHPROF_ALLOCATIONS`` naming a file
(:data:`~launchprof.profiler_region.ALLOCATIONS_ENV`; set by ``launchprof profile`` for
one short extra run when the trace's steps allocate memory or change shape,
:func:`launchprof.commands.baseline.run_allocations`), the run turns on PyTorch's own
allocation history once CUDA is initialised
(``torch.cuda.memory._record_memory_history(context="alloc", stacks="python")``, queued
with ``torch.cuda._lazy_call``) and, as it exits (also through ``os._exit``, which the
step markers' stop uses), writes each recorded allocation of the caching allocator as one
JSON line ``{"t": perf_counter_ns, "kind": "alloc" | "segment_alloc", "size": bytes,
"stack": [[file, line, function], ...]}`` (``segment_alloc``: the allocator called
``cudaMalloc``; innermost frame last; at most :data:`ALLOC_ENTRIES` of the latest).
PyTorch stamps the entries with the wall clock (``time_us``, microseconds since the
epoch); they are put on the step times' clock by the offset read when the history was
turned on. Recording a stack at every allocation costs time (a GPT-2 forward on an H200
took 5.9-9.4 ms with it against 5.2-8.5 ms without), so this run's step times are not used
as the step without nsys.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

# PyTorch's text for a synchronizing operation under torch.cuda.set_sync_debug_mode("warn").
SYNC_WARNING = "called a synchronizing CUDA operation"
# Frames kept per event, innermost first: enough for a Hugging Face generate() (the
# stopping check sits 6 frames deep, a model's forward 20-40) to reach the user's script.
STACK_FRAMES = 96
PROTOTYPE_WARNING = "Synchronization debug mode is a prototype"  # PyTorch's, at turning it on
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


class SyncSources:
    """Writes where the workload synchronizes (module docstring, "Synchronizing calls");
    ``runner(filename)``: whether a frame is the runner's (profiler_region.py's), left out."""

    def __init__(self, path: str, runner: Callable[[str], bool]) -> None:
        self.path = path
        self.runner = runner
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

        SkipHandler(self).attach()
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
            if not self.runner(name) and name != __file__ and not name.endswith(("warnings.py", "<frozen runpy>")):
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


class SkipHandler(logging.Handler):
    """Writes Inductor's reasons for skipping CUDA Graphs (module docstring)."""

    def __init__(self, sources: SyncSources) -> None:
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


class Allocations:
    """Writes the caching allocator's allocations with their stacks (module docstring,
    "Allocations"); ``runner(filename)``: whether a frame is the runner's
    (profiler_region.py's), left out."""

    def __init__(self, path: str, runner: Callable[[str], bool]) -> None:
        self.path = path
        self.runner = runner
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
                    # the runner's own frames (the runpy wrapper), and this file's
                    if not self.runner(f.get("filename")) and f.get("filename") != __file__
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
