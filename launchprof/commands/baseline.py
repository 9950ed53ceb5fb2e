"""``launchprof profile --baseline-runs N``: the workload run N more times without nsys,
each writing its step times (``LAUNCHPROF_STEP_TIMES``) to read back for the report's
``baseline`` section (:mod:`launchprof.analysis.baseline`); none when the trace shows no
step such a run could time (:func:`nothing_to_time`)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from launchprof.nsys.profile import TargetError, Workload

if TYPE_CHECKING:
    import numpy as np
    from rich.console import Console

PYTHON_NAME = re.compile(r"python[0-9.]*(?:\.exe)?$")
# Python options that take the next word as their value (``python --help``).
PYTHON_VALUE_OPTIONS = ("-W", "-X", "--check-hash-based-pycs")


def baseline_argv(argv: Sequence[str]) -> list[str]:
    """The command line of a run without nsys: a Python workload (``python[X.Y] [OPTIONS]
    SCRIPT`` or ``... -m MODULE``; options with a value, ``-W``/``-X``, read as Python does)
    runs through ``launchprof/profiler_region.py``, which times its profiler regions for a
    workload without step markers (:mod:`launchprof.profiler_region`); any other command -
    not Python, ``-c CODE``, a script read from stdin - runs unchanged."""
    args = list(argv)
    if len(args) < 2 or not PYTHON_NAME.match(os.path.basename(args[0])):
        return args
    i = 1
    while i < len(args):
        word = args[i]
        if word == "-m" or (word.startswith("-m") and not word.startswith("--")):
            break
        if word == "-" or word.startswith("-c") or word in ("--help", "-h", "--version", "-V"):
            return args
        if word in PYTHON_VALUE_OPTIONS:
            i += 2
        elif word.startswith("-"):
            i += 1
        else:
            break
    if i >= len(args):
        return args
    from launchprof import profiler_region

    rest = args[i:]
    if rest[0].startswith("-m") and rest[0] != "-m":  # -mpkg.mod
        rest = ["-m", rest[0][2:], *rest[1:]]
    if rest[0] == "-m" and len(rest) < 2:
        return args
    return [*args[:i], str(Path(profiler_region.__file__).resolve()), *rest]


def nothing_to_time(work: Workload, sqlite: Path, step: str | None = None) -> str | None:
    """Why runs without nsys of this trace's workload could not time a step (a sentence),
    or None when they can or the trace cannot be read to tell. A workload started as
    ``python SCRIPT`` or ``-m MODULE`` runs through :mod:`launchprof.profiler_region`; the
    trace (:func:`launchprof.trace.steptimes.timed_sources`) says what that run can time:
    :func:`launchprof.step` ranges (any workload), else profiler regions
    (``cudaProfilerStart``), else, for a PyTorch workload, its top-level module calls
    (:func:`timing`)."""
    from launchprof.trace.steptimes import timed_sources

    sources = timed_sources(sqlite)
    wrapped = baseline_argv(work.argv) != list(work.argv)  # runs through profiler_region.py
    if sources is None or "markers" in sources or ("profiler-region" in sources and wrapped):
        return None
    if step:  # the user's own NVTX range: the profile found it, a run without nsys cannot see it
        return (
            f"the trace's '{step}' ranges are not launchprof.step() markers, which alone a run without nsys can "
            f"time (mark the loop with launchprof.step({step!r}))"
            + (" and there is no profiler region" if wrapped else "")
        )
    if wrapped and "pytorch" in sources:
        return None
    if "profiler-region" in sources:
        return (
            "the trace has no launchprof.step() range, and a profiler region is timed only for a workload "
            "started as `python SCRIPT` or `-m MODULE`"
        )
    if wrapped:
        return "the trace has no launchprof.step() range, no profiler region and no PyTorch kernel to time"
    return "the trace has no launchprof.step() range to time"


def timing(sqlite: Path) -> str:
    """What the runs without nsys of a workload that :func:`nothing_to_time` lets through
    time: ``"markers"``, ``"profiler-region"`` or ``"module-calls"`` (the first the trace
    shows, in that order)."""
    from launchprof.trace.steptimes import timed_sources

    sources = timed_sources(sqlite) or frozenset()
    if "markers" in sources:
        return "markers"
    return "profiler-region" if "profiler-region" in sources else "module-calls"


# params: the workload, its folder and runs, and three settings with defaults
def run_baselines(
    work: Workload,
    folder: Path,
    runs: int,
    console: Console,
    step: str | None = None,
    timed: str = "markers",
    stdout: IO[Any] | None = None,
) -> list[Any] | Any:
    """Run ``work`` ``runs`` times without nsys (:func:`baseline_argv`), each with
    ``LAUNCHPROF_STEP_TIMES`` set to its own file (:func:`launchprof.trace.steptimes.run_files`)
    and ``LAUNCHPROF_STOP_AFTER`` to :data:`~launchprof.defaults.BASELINE_STEPS`: the step
    markers end the run once that many steps are timed; with ``timed`` ``"module-calls"``
    (:func:`timing`) ``LAUNCHPROF_MODULE_CALLS`` is set instead of the stop and the program
    runs to its end (:mod:`launchprof.profiler_region`); a profiler region is timed whole.
    ``LAUNCHPROF_SOURCES`` names ``baseline-I.sources``: a PyTorch workload writes where it
    synchronizes there (:mod:`launchprof.profiler_region`). Returns the times read back
    (:func:`launchprof.analysis.baseline.runs_of`): one array of steps per run that exited
    0 (failed runs and unreadable step files are reported and left out, so the analysis of
    the recorded trace always runs), or the profiler regions
    (:class:`~launchprof.analysis.baseline.RegionRuns`) or module calls
    (:class:`~launchprof.analysis.baseline.ModuleRuns`) when no run recorded a step. The
    workload's standard output goes to ``stdout`` (default: ours)."""
    from launchprof.analysis.baseline import runs_of
    from launchprof.defaults import BASELINE_STEPS, STEP_NAME, STOP_AFTER_ENV
    from launchprof.marker import STEP_TIMES_ENV
    from launchprof.profiler_region import MODULE_CALLS_ENV, SOURCES_ENV
    from launchprof.trace.steptimes import run_files, sources_file

    argv = baseline_argv(work.argv)
    ends = {
        "markers": f"ended once {BASELINE_STEPS} marked steps are timed",
        "profiler-region": "its profiler region timed",
        "module-calls": (
            "no step markers: its top-level torch.nn.Module calls timed, run to its end (the later half of the calls "
            "stands for the steady steps)"
        ),
    }[timed]
    got, regions, modules = [], [], []
    for i, path in enumerate(run_files(folder, runs), start=1):
        console.print(
            f"launchprof: baseline run {i} of {runs} (without nsys: the workload runs again, {ends}; files it writes "
            "are written again)",
            markup=False,
            soft_wrap=True,
        )
        sources = sources_file(path)  # where the run writes its synchronizing calls (a PyTorch workload's)
        with contextlib.suppress(OSError):  # files left by an earlier run of this folder
            path.unlink(missing_ok=True)
            sources.unlink(missing_ok=True)
        began = time.perf_counter()
        try:
            stop = f"{BASELINE_STEPS}:{step or STEP_NAME}"
            env = {**os.environ, STEP_TIMES_ENV: str(path.resolve()), SOURCES_ENV: str(sources.resolve())}
            if timed == "module-calls":  # to its end: a warm-up can outlast any fixed count of calls
                env[MODULE_CALLS_ENV] = "1"
            else:
                env[STOP_AFTER_ENV] = stop
            done = subprocess.run(argv, env=env, check=False, stdout=stdout)
        except OSError as exc:
            raise TargetError(f"cannot run {argv[0]}: {exc.strerror}") from None
        wall = time.perf_counter() - began
        if done.returncode != 0:
            if path.exists():  # kept for the record, out of compare's way (it reads baseline-*.steps)
                path.replace(path.with_name(path.name + ".failed"))
            console.print(f"launchprof: baseline run {i} exited with code {done.returncode}; left out", markup=False)
            continue
        read = _read_run(path, step or STEP_NAME, i, wall, console)
        if read is not None:
            got.append(read[0])
            regions.append(read[1])
            modules.append(read[2])
    return runs_of(got, regions, modules)


def _read_run(
    path: Path, step: str, i: int, wall: float, console: Console
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
    """Baseline run ``i``'s step times (:mod:`launchprof.trace.steptimes`): its ``step``
    steps, profiler regions and module calls, with one line saying what it timed; None (and
    the line why) for a malformed file."""
    from launchprof.defaults import BASELINE_STEPS
    from launchprof.profiler_region import MODULE_PREFIX
    from launchprof.trace.steptimes import StepTimesError, module_step_times, read_step_times, region_step_times

    try:
        times = read_step_times(path, step)
        region = region_step_times(path)
        calls = module_step_times(path)
    except StepTimesError as exc:
        console.print(f"launchprof: baseline run {i} left out: {exc}", markup=False, soft_wrap=True)
        return None
    said = f"{len(times)} steps"
    if len(region):
        said += f", profiler regions {(region[:, 1] - region[:, 0]).sum() / 1e9:.3f} s"
    if calls and not len(times):
        said = "top-level module calls " + ", ".join(
            f"{name.removeprefix(MODULE_PREFIX)} x{len(a)}" for name, a in calls.items()
        )
    ended = f" (ended there: {BASELINE_STEPS} steps are enough to time)" if len(times) >= BASELINE_STEPS else ""
    console.print(f"launchprof: baseline run {i}: {said}{ended}; the run took {wall:.2f} s", markup=False)
    return times, region, calls


def wants_allocations(summary: Any, folder: Path) -> bool:
    """Whether ``profile`` makes an allocation run (:func:`run_allocations`): the analysis
    found steps that allocate memory (``alloc-in-step``) or change shape
    (``dynamic-shapes``), and the runs without nsys imported torch (they wrote a
    ``baseline-1.sources``: the allocation history is PyTorch's)."""
    from launchprof.analysis.diagnosis.sources import ALLOCATION_KINDS
    from launchprof.trace.steptimes import run_files, sources_file

    diag = getattr(summary, "diagnosis", None)
    kinds = {f.kind for f in (diag.findings if diag is not None else None) or []}
    return bool(kinds & set(ALLOCATION_KINDS)) and sources_file(run_files(folder, 1)[0]).is_file()


def run_allocations(
    work: Workload, folder: Path, console: Console, step: str | None = None, timed: str = "markers", stdout: Any = None
) -> bool:
    """One more run without nsys, short, with PyTorch's allocation history on
    (``LAUNCHPROF_ALLOCATIONS``, :mod:`launchprof.source_hooks`, "Allocations"): step
    times to ``allocations-1.steps`` and allocations with their Python stacks to
    ``allocations-1.sources`` (:data:`launchprof.trace.steptimes.ALLOCATION_RUN`). It ends
    after :data:`~launchprof.defaults.BASELINE_STEPS` marked steps or top-level module calls
    (a profiler region is run whole). Recording a stack at every allocation slows the run,
    so its step times are used only to find its steps, never as the step without nsys.
    Returns whether the run exited 0 (a line says so when not)."""
    from launchprof.defaults import BASELINE_STEPS, STEP_NAME, STOP_AFTER_ENV
    from launchprof.marker import STEP_TIMES_ENV
    from launchprof.profiler_region import ALLOCATIONS_ENV, MODULE_CALLS_ENV
    from launchprof.trace.steptimes import ALLOCATION_RUN, sources_file

    path = folder / ALLOCATION_RUN
    sources = sources_file(path)
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
        sources.unlink(missing_ok=True)
    console.print(
        "launchprof: allocation run (without nsys, short: the steps allocate memory or change shape; PyTorch's "
        "allocation history finds the lines; files it writes are written again)",
        markup=False,
        soft_wrap=True,
    )
    env = {**os.environ, STEP_TIMES_ENV: str(path.resolve()), ALLOCATIONS_ENV: str(sources.resolve())}
    if timed == "module-calls":
        env[MODULE_CALLS_ENV] = "1"
        env[STOP_AFTER_ENV] = str(BASELINE_STEPS)
    elif timed == "markers":
        env[STOP_AFTER_ENV] = f"{BASELINE_STEPS}:{step or STEP_NAME}"
    began = time.perf_counter()
    try:
        done = subprocess.run(baseline_argv(work.argv), env=env, check=False, stdout=stdout)
    except OSError as exc:
        raise TargetError(f"cannot run {work.argv[0]}: {exc.strerror}") from None
    if done.returncode != 0:
        console.print(f"launchprof: allocation run exited with code {done.returncode}; left out", markup=False)
        with contextlib.suppress(OSError):
            path.replace(path.with_name(path.name + ".failed"))
        return False
    console.print(f"launchprof: allocation run took {time.perf_counter() - began:.2f} s", markup=False)
    return True
