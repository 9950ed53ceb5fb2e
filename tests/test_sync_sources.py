"""Source lines of synchronizing calls (launchprof/source_hooks.py, "Synchronizing calls";
launchprof/analysis/diagnosis/sources.py).

The collection is run for real through the launcher, as ``profile``'s runs without nsys
run it. No GPU and no torch here (CI): the workload imports a ``torch`` package written
for the test, whose one operation warns as PyTorch's ``set_sync_debug_mode("warn")`` does
(its text, category and place: from inside torch), so what is checked is launchprof's
part - the hook on torch's import, the warnings kept off the user's stderr, the stack
written, the site and per-step count read back. On the GPU machine the same path runs
with the real torch (tests/data/frameworks, MANIFEST.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from launchprof import profiler_region
from launchprof.analysis.baseline import ModuleRuns
from launchprof.analysis.diagnosis.sources import NOT_COLLECTED, SyncRuns, run_window, site_of, sync_sites, where
from launchprof.trace.steptimes import read_step_times, read_sync_events

FAKE_TORCH = """
import warnings

class _Cuda:
    mode = None

    @staticmethod
    def set_sync_debug_mode(mode):
        if RAISE:
            raise AssertionError("Torch not compiled with CUDA enabled")
        warnings.warn("Synchronization debug mode is a prototype feature and does not yet detect all "
                      "synchronizing operations (Triggered internally at Module.cpp:1003.)", UserWarning)
        _Cuda.mode = mode

cuda = _Cuda()
RAISE = False

def item():
    # PyTorch's C++ TORCH_WARN reaches Python as a UserWarning raised inside the op
    if _Cuda.mode == "warn":
        warnings.warn("called a synchronizing CUDA operation (Triggered internally at sync.cpp:1.)", UserWarning)
    return 1.0
"""

LIBRARY = """
import torch

def stopping_check():
    return torch.item()  # library sync
"""

SCRIPT = """
import warnings
import torch
import launchprof
import lib

for i in range(12):
    with launchprof.step():
        torch.item()  # user sync
        if i % 2 == 0:
            lib.stopping_check()
warnings.warn("a warning of the user's own")
"""


def _tree(tmp_path: Path, raise_: bool = False) -> Path:
    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_TORCH.replace("RAISE = False", f"RAISE = {raise_}"))
    (site / "lib.py").write_text(LIBRARY)
    (tmp_path / "loop.py").write_text(SCRIPT)
    return site


def _run(tmp_path: Path, raise_: bool = False) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    site = _tree(tmp_path, raise_)
    steps, sources = tmp_path / "baseline-1.steps", tmp_path / "baseline-1.sources"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "LAUNCHPROF_STEP_TIMES": str(steps),
        profiler_region.SOURCES_ENV: str(sources),
    }
    done = subprocess.run(
        [sys.executable, profiler_region.__file__, str(tmp_path / "loop.py")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    return done, steps, sources


def _line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), start=1) if marker in text)


def test_each_synchronizing_call_is_written_with_its_stack_and_not_shown(tmp_path: Path) -> None:
    done, steps, sources = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "called a synchronizing" not in done.stderr  # kept off the user's stderr
    assert "prototype" not in done.stderr  # torch's note on turning the check on: launchprof's doing
    assert "a warning of the user's own" in done.stderr  # other warnings shown as before
    events, unavailable = read_sync_events(sources)
    assert unavailable is None and len(events) == 12 + 6
    user_line = _line(tmp_path / "loop.py", "# user sync")
    lib = tmp_path / "venv" / "lib" / "site-packages" / "lib.py"
    sites = [site_of(stack) for _, stack in events]
    assert sum(1 for s in sites if s is not None and s[0][1] == user_line and s[0][0].endswith("loop.py")) == 12
    from_lib = [s for s in sites if s is not None and s[0][0] == str(lib)]
    assert len(from_lib) == 6 and all(s[0][1] == _line(lib, "# library sync") for s in from_lib)
    assert all(s[1] is not None and s[1][0].endswith("loop.py") for s in from_lib)  # via the user's frame
    # the events carry the step times' clock: each lies inside a marked step
    times = read_step_times(steps, "step")
    assert len(times) == 12
    assert all(((times[:, 0] <= t) & (t <= times[:, 1])).any() for t, _ in events)


def test_the_sites_per_step_user_lines_first(tmp_path: Path) -> None:
    _, steps, sources = _run(tmp_path)
    events, _ = read_sync_events(sources)
    runs = [read_step_times(steps, "step")]
    sites, note = where(runs, SyncRuns([events]), syncs_per_step=1.5)
    assert note == ""
    assert [s["library"] for s in sites] == [False, True]
    user, lib = sites
    assert user["file"].endswith("loop.py") and user["line"] == _line(tmp_path / "loop.py", "# user sync")
    assert lib["file"] == "lib.py" and lib["function"] == "stopping_check" and lib["via"].startswith(user["file"])
    # the window leaves out the first (warm-up) step: 11 user syncs, 5 library ones after it
    assert user["share"] == pytest.approx(11 / 16) and lib["share"] == pytest.approx(5 / 16)
    assert user["per_step"] + lib["per_step"] == pytest.approx(1.5)


def test_a_torch_without_the_check_says_so_in_one_line(tmp_path: Path) -> None:
    done, steps, sources = _run(tmp_path, raise_=True)
    assert done.returncode == 0, done.stderr
    events, unavailable = read_sync_events(sources)
    assert events == [] and unavailable is not None and "not compiled with CUDA" in unavailable
    sites, note = where([read_step_times(steps, "step")], SyncRuns([events], unavailable), 1.0)
    assert sites == [] and note.startswith("source lines: not collected (torch.cuda.set_sync_debug_mode")


def test_without_runs_the_note_says_where_lines_come_from() -> None:
    assert where(None, None, 1.0) == ([], NOT_COLLECTED)


def test_a_module_timed_run_counts_its_later_half_only() -> None:
    calls = np.array([[i * 100, i * 100 + 50] for i in range(10)], dtype=np.int64)
    window = run_window(ModuleRuns([{"module M": calls}]), 0)
    assert window == (500, 950)
    stack = [["/home/u/gen.py", 7, "main"]]
    events = [[(t, stack) for t in (100, 499, 500, 700, 950, 951)]]
    (site,) = sync_sites(events, [window], syncs_per_step=2.0)
    assert site["share"] == 1.0 and site["per_step"] == 2.0 and site["file"] == "/home/u/gen.py"


def test_a_malformed_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "baseline-1.sources"
    good = {"t": 5, "kind": "sync", "stack": [["a.py", 1, "f"]]}
    path.write_text(json.dumps(good) + "\n" + '{"t": 6, "kind": "sy\n' + "[1, 2]\n")
    events, unavailable = read_sync_events(path)
    assert events == [(5, [["a.py", 1, "f"]])] and unavailable is None


@pytest.mark.parametrize("line", ['"abc"', "null", "1e400", "true", "-3"])
def test_a_frame_whose_line_is_not_an_integer_skips_its_event(tmp_path: Path, line: str) -> None:
    path = tmp_path / "baseline-1.sources"
    good = json.dumps({"t": 5, "kind": "sync", "stack": [["a.py", 1, "f"]]})
    path.write_text(good + "\n" + '{"t": 6, "kind": "sync", "stack": [["a.py", ' + line + ', "f"]]}\n')
    events, _ = read_sync_events(path)
    assert events == [(5, [["a.py", 1, "f"]])]


def test_a_step_name_with_a_line_break_keeps_the_step_times_file_readable(tmp_path: Path) -> None:
    code = 'import launchprof\nfor i in range(3):\n    with launchprof.step("a\\nb 1 2"):\n        pass\n'
    path = tmp_path / "t.steps"
    env = {**os.environ, "LAUNCHPROF_STEP_TIMES": str(path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(read_step_times(path)) == 3


FAKE_INDUCTOR = """
import logging, sys

class _Cuda:
    @staticmethod
    def set_sync_debug_mode(mode):
        pass

cuda = _Cuda()
_seen = set()

def compiled_add_(buf, level):
    # As Inductor does when it compiles a function that mutates its input: one record at
    # compile time, at WARNING, naming the user's line in a traceback after "Found from"
    # (PyTorch 2.11: cudagraph_utils' __cudagraphs artifact logger; up to 2.2: compile_fx's
    # __perf_hints, an artifact off by default that does not propagate).
    caller = sys._getframe(1)
    if (caller.f_code.co_filename, caller.f_lineno) in _seen:
        return
    _seen.add((caller.f_code.co_filename, caller.f_lineno))
    name = "torch._inductor." + ("cudagraph_utils.__cudagraphs" if level == "new" else "compile_fx.__perf_hints")
    logging.getLogger(name).propagate = level == "new"
    text = ("skipping cudagraphs due to mutated inputs (1 instances). Found from : \\n"
            f'   File "{caller.f_code.co_filename}", line {caller.f_lineno}, in {caller.f_code.co_name}\\n'
            "    buf.add_(1)\\n")
    logging.getLogger(name).warning(text)
"""

SKIP_SCRIPT = """
import torch
import launchprof

def forward(buf):
    torch.compiled_add_(buf, "new")  # planted mutation

def head(buf):
    torch.compiled_add_(buf, "old")  # planted mutation, older torch

for i in range(6):
    with launchprof.step():
        forward(None)
        head(None)
"""


def test_inductor_skipped_graphs_are_written_with_the_line_it_names(tmp_path: Path) -> None:
    """A workload whose ``torch.compile(mode="reduce-overhead")`` runs without CUDA Graphs:
    Inductor logs why and where (here a stand-in torch logs as Inductor does: on the logger
    PyTorch 2.11 used on the H200, and on the one of versions up to 2.2, whose artifact does
    not propagate). The
    run writes both reasons with the script's lines; the analysis makes a blocker naming
    them (no graph launches in the trace) or a warning (graphs launched)."""
    from launchprof.analysis.diagnosis.sources import graph_skips
    from launchprof.trace.steptimes import read_sources

    site = tmp_path / "venv" / "lib" / "site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(FAKE_INDUCTOR)
    (tmp_path / "loop.py").write_text(SKIP_SCRIPT)
    sources = tmp_path / "baseline-1.sources"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "LAUNCHPROF_STEP_TIMES": str(tmp_path / "baseline-1.steps"),
        profiler_region.SOURCES_ENV: str(sources),
    }
    done = subprocess.run(
        [sys.executable, profiler_region.__file__, str(tmp_path / "loop.py")],
        env=env, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = read_sources(sources)
    assert run.syncs == []
    script = tmp_path / "loop.py"
    lines = [_line(script, 'torch.compiled_add_(buf, "new")'), _line(script, 'torch.compiled_add_(buf, "old")')]
    assert [(reason, [f[1] for f in stack]) for reason, stack in run.skips] == [
        ("mutated inputs (1 instances)", [lines[0]]),
        ("mutated inputs (1 instances)", [lines[1]]),
    ]
    blocker = graph_skips(SyncRuns([run.syncs], None, [run.skips]), replaying=False)
    assert blocker is not None and blocker.severity == "blocker" and blocker.kind == "cudagraph-skip"
    assert sorted((w["file"], w["line"], w["function"]) for w in blocker.where) == [
        (str(script), lines[0], "forward"),
        (str(script), lines[1], "head"),
    ]
    assert all(w["reason"] == "mutated inputs (1 instances)" and w["per_step"] is None for w in blocker.where)
    assert "changes an input in place" in blocker.fix
    warning = graph_skips(SyncRuns([[]], None, [run.skips]), replaying=True)
    assert warning is not None and warning.severity == "warning"
    assert graph_skips(SyncRuns([[]], None, [[]]), replaying=False) is None


def test_a_line_whose_calls_all_come_between_module_calls_is_outside() -> None:
    """With the workload timed by its top-level module calls, a line synchronizing only
    between calls (a generate() loop's stopping check) is ``outside``; one that also does
    inside a call is not; with marked steps nothing is placed (None)."""
    from launchprof.analysis.diagnosis.sources import module_calls

    user = [["/home/u/loop.py", 7, "main"]]
    model = [["/home/u/model.py", 30, "forward"]]
    calls = {"module Net": np.array([[0, 10], [20, 30], [40, 50]], dtype=np.int64)}
    runs = ModuleRuns([calls])
    events = [[(15, user), (35, user), (5, model), (45, model), (36, model)]]
    sites = sync_sites(events, [(0, 60)], 2.0, [module_calls(runs, 0)])
    by_file = {w["file"]: w["outside"] for w in sites}
    assert by_file == {"/home/u/loop.py": True, "/home/u/model.py": False}
    assert all(w["outside"] is None for w in sync_sites(events, [(0, 60)], 2.0))
    assert module_calls([np.zeros((3, 2), dtype=np.int64)], 0) is None
