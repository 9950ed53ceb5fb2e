"""Allocation lines (launchprof/source_hooks.py, "Allocations"; launchprof/analysis/diagnosis/sources.py,
alloc_sites): the allocation run's collector run for real through the launcher, as
``profile``'s allocation run runs it, with a stand-in ``torch`` (CI has no GPU and no
torch) whose operations record their allocations as PyTorch's allocation history does
(``_record_memory_history`` / ``_snapshot``: entries with ``action``, ``size``,
``time_us`` on the wall clock, ``frames`` innermost first). What is checked is launchprof's
part: the history turned on through ``torch.cuda._lazy_call``, written at the step
markers' ``os._exit``, put on the step times' clock, and the lines read back. On the GPU
machine the same path runs with the real torch (tests/data/frameworks, manifest
``allocations``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from launchprof import profiler_region
from launchprof.analysis.baseline import runs_of
from launchprof.analysis.diagnosis.sources import AllocRun, alloc_sites, alloc_where
from launchprof.trace.steptimes import read_sources, read_step_times

FAKE_TORCH = """
import sys, time

class _Memory:
    on = False
    trace = []

    @staticmethod
    def _record_memory_history(max_entries=0, context=None, stacks=None):
        _Memory.on = (context, stacks) == ("alloc", "python")

    @staticmethod
    def _snapshot():
        return {"segments": [], "device_traces": [list(_Memory.trace)]}

class _Cuda:
    memory = _Memory()

    @staticmethod
    def _lazy_call(fn):
        fn()  # CUDA already initialised

cuda = _Cuda()
_cached = [0]

def _record(action, size):
    if not _Memory.on:
        return
    frames, f = [], sys._getframe(2)
    while f is not None:  # innermost first, as PyTorch's CapturedTraceback gives them
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    _Memory.trace.append({"action": action, "addr": 0, "size": size, "stream": 0,
                          "time_us": time.time_ns() // 1000, "frames": frames})

def zeros(n):
    _record("alloc", 4 * n)
    return n

def cat(rows):
    size = 1024 * (rows + 1)
    if size > _cached[0]:  # the allocator asks CUDA for more now and then
        _cached[0] = size * 4
        _record("segment_alloc", size * 4)
    _record("alloc", size)
    return rows + 1
"""

SCRIPT = """
import time
import torch
import launchprof

cache = 1
for i in range(80):
    with launchprof.step():
        x = torch.zeros(256)  # planted zeros
        cache = torch.cat(cache)  # planted cat
        time.sleep(0.0005)
"""


def _line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), start=1) if marker in text)


def _allocation_run(
    tmp_path: Path, stop_after: str | None
) -> tuple[Path, Path, Path, subprocess.CompletedProcess[str]]:
    """:data:`SCRIPT` run under the runner with the fake torch, its allocations asked for
    (as profile's allocation run does), the step markers ending it after ``stop_after``
    (None: it runs to its end); the script, step times and sources files, the process."""
    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH)
    script = tmp_path / "loop.py"
    script.write_text(SCRIPT)
    steps, sources = tmp_path / "allocations-1.steps", tmp_path / "allocations-1.sources"
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHPROF_STOP_AFTER"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
            "LAUNCHPROF_STEP_TIMES": str(steps),
            profiler_region.ALLOCATIONS_ENV: str(sources),
        }
    )
    if stop_after is not None:
        env["LAUNCHPROF_STOP_AFTER"] = stop_after
    done = subprocess.run(
        [sys.executable, profiler_region.__file__, str(script)], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    return script, steps, sources, done


def test_allocations_are_written_at_the_markers_exit_and_pinned_to_their_lines(tmp_path: Path) -> None:
    script, steps, sources, done = _allocation_run(tmp_path, stop_after="50:step")
    assert done.returncode == 0, done.stderr
    times = read_step_times(steps, "step")
    assert len(times) == 50  # the markers ended the run (os._exit): the history was written all the same
    run = read_sources(sources)
    assert {kind for _, kind, _, _ in run.allocs} == {"alloc", "segment_alloc"}
    # on the step times' clock: every allocation falls inside the marked steps' span
    assert all(times[0, 0] <= t <= times[-1, 1] for t, _, _, _ in run.allocs)
    alloc = AllocRun(runs_of([times], [times[:0]]), run.allocs)
    zeros, cat = _line(script, "# planted zeros"), _line(script, "# planted cat")

    growing = alloc_sites(alloc, "dynamic-shapes")
    assert [(w["line"], w["function"]) for w in growing] == [(cat, "<module>")]  # not the fixed-size zeros
    assert growing[0]["reason"].startswith("growing: ") and growing[0]["per_step"] == 1.0
    mallocs = alloc_sites(alloc, "alloc-in-step")
    assert [w["line"] for w in mallocs] == [cat] and mallocs[0]["reason"].startswith("cudaMalloc ")
    assert 0 < mallocs[0]["per_step"] < 1  # now and then, not every step
    assert zeros not in {w["line"] for w in growing + mallocs}


def test_without_an_allocation_run_the_finding_says_so_in_one_line() -> None:
    sites, note = alloc_where(None, "alloc-in-step")
    assert sites == [] and note.startswith("source lines: not collected") and "\n" not in note


def _grow(t0: int, period: int, n: int, line: int) -> list[tuple[int, str, int, list[list[object]]]]:
    stack: list[list[object]] = [["/home/u/decode.py", line, "main"]]
    return [(t0 + i * period + 300, "alloc", 1024 * (i + 1), stack) for i in range(n)]


def test_per_step_counts_the_steps_of_the_module_that_paces_them_and_none_for_a_region() -> None:
    """Reviewer's cases: an encoder and a decoder called at top level each step made the
    module calls twice the steps (0.5 a step instead of 1); a profiler region counted as
    one step (50 a step). The steps are the calls of the module that paces them (the
    baseline's choice), and a region gives no per-step figure."""
    from launchprof.analysis.baseline import ModuleRuns, RegionRuns

    period = 1_000_000
    enc = np.array([[i * period, i * period + 100] for i in range(50)], dtype=np.int64)
    dec = np.array([[i * period + 200, i * period + 900] for i in range(50)], dtype=np.int64)
    events = _grow(0, period, 50, 12)
    two = AllocRun(ModuleRuns([{"module Encoder": enc, "module Decoder": dec}]), events)
    (w,) = alloc_sites(two, "dynamic-shapes", module="module Decoder")
    assert w["per_step"] == 1.0 and w["line"] == 12
    region = AllocRun(RegionRuns([np.array([[0, 50 * period]], dtype=np.int64)]), events)
    (r,) = alloc_sites(region, "dynamic-shapes")
    assert r["per_step"] is None and "50 sizes" in r["reason"]


def test_steps_before_the_first_recorded_allocation_are_left_out() -> None:
    """PyTorch keeps only the latest history entries: when the first 20 of 50 steps lost
    theirs, the figures are over the 30 steps that kept them (not 30 events over 49)."""
    period = 1_000_000
    steps = np.array([[i * period, i * period + 500_000] for i in range(50)], dtype=np.int64)
    events = _grow(20 * period, period, 30, 7)
    alloc = AllocRun(runs_of([steps], [steps[:0]]), events)
    (w,) = alloc_sites(alloc, "dynamic-shapes")
    assert w["per_step"] == 1.0


def test_terminal_lines_of_odd_source_lines_stay_one_line_each() -> None:
    """Breaker's cases: a profiler-region allocation line (no per-step figure) crashed the
    terminal line; a line break in a file or function name faked a 'verdict:' line."""
    from types import SimpleNamespace

    from launchprof.commands.text import where_lines

    def line(**kw: object) -> SimpleNamespace:
        base = {"file": "a.py", "line": 3, "function": "f", "library": False, "via": None, "share": 1.0,
                "per_step": None, "outside": None, "reason": "growing: 3 sizes, 1 B to 3 B"}  # fmt: skip
        return SimpleNamespace(**{**base, **kw})

    findings = [
        SimpleNamespace(kind="dynamic-shapes", where=[line(), line(function="f\nverdict: gpu-bound FAKE")]),
        SimpleNamespace(kind="sync-in-step", where=[line(per_step=123.4, reason=None)]),
    ]
    out = where_lines(SimpleNamespace(diagnosis=SimpleNamespace(findings=findings)))
    assert out[0] == "  changes shape at a.py:3 (f): growing: 3 sizes, 1 B to 3 B"
    assert "\n" not in out[1] and "(f\\nverdict: gpu-bound FAKE)" in out[1]
    assert out[2] == "  sync at a.py:3 (f), 123 a step"


def test_sizes_past_int64_and_lines_nested_too_deep_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "allocations-1.sources"
    good = '{"t": 5, "kind": "alloc", "size": 64, "stack": [["a.py", 1, "f"]]}'
    path.write_text(
        "[" * 100_000 + "\n"
        + '{"t": 5, "kind": "alloc", "size": ' + str(10**400) + ', "stack": []}\n'
        + '{"t": 5, "kind": "alloc", "size": 0, "stack": []}\n'
        + good + "\n"
    )  # fmt: skip
    assert [a[2] for a in read_sources(path).allocs] == [64]


def test_allocations_are_written_when_the_workload_exits_on_its_own(tmp_path: Path) -> None:
    """No step limit: the loop ends and Python exits normally, running its exit handlers
    after CPython has dropped the runner's own ``__file__``; the allocations are written
    all the same (they were lost to a NameError at exit)."""
    script, steps, sources, done = _allocation_run(tmp_path, stop_after=None)
    assert done.returncode == 0 and "Error" not in done.stderr, done.stderr
    assert len(read_step_times(steps, "step")) == 80  # every step ran: no os._exit
    run = read_sources(sources)
    assert {kind for _, kind, _, _ in run.allocs} == {"alloc", "segment_alloc"}
    cat = _line(script, "# planted cat")
    alloc = AllocRun(runs_of([read_step_times(steps, "step")], [np.zeros((0, 2), dtype=np.int64)]), run.allocs)
    assert [w["line"] for w in alloc_sites(alloc, "alloc-in-step")] == [cat]
