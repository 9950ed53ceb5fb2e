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
from typing import TYPE_CHECKING, Any

from launchprof.nsys.profile import TargetError, Workload

if TYPE_CHECKING:
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
    or None when they can or the trace cannot be read to tell: the trace has
    :func:`launchprof.step` ranges, or profiler regions (``cudaProfilerStart``) of a
    workload started as ``python SCRIPT`` or ``-m MODULE``, which then runs through
    :mod:`launchprof.profiler_region` (:func:`launchprof.trace.steptimes.timed_sources`)."""
    from launchprof.trace.steptimes import timed_sources

    sources = timed_sources(sqlite)
    wrapped = baseline_argv(work.argv) != list(work.argv)  # runs through profiler_region.py
    if sources is None or "markers" in sources or ("profiler-region" in sources and wrapped):
        return None
    if "profiler-region" in sources:
        return (
            "the trace has no launchprof.step() range, and a profiler region is timed only for a workload "
            "started as `python SCRIPT` or `-m MODULE`"
        )
    if step:  # the user's own NVTX range: the profile found it, a run without nsys cannot see it
        return (
            f"the trace's '{step}' ranges are not launchprof.step() markers, which alone a run without nsys can "
            f"time (mark the loop with launchprof.step({step!r}))"
            + (" and there is no profiler region" if wrapped else "")
        )
    return "the trace has no launchprof.step() range" + (" and no profiler region" if wrapped else "") + " to time"


def run_baselines(
    work: Workload, folder: Path, runs: int, console: Console, step: str | None = None
) -> list[Any] | Any:
    """Run ``work`` ``runs`` times without nsys (:func:`baseline_argv`), each with
    ``LAUNCHPROF_STEP_TIMES`` set to its own file (:func:`launchprof.trace.steptimes.run_files`)
    and ended by its step markers once :data:`~launchprof.defaults.BASELINE_STEPS` steps
    are timed (``LAUNCHPROF_STOP_AFTER``),
    and return the step times read back: one array per run that exited 0 (failed runs and
    unreadable step files are reported and left out, so the analysis of the recorded trace
    always runs); when no run recorded a step but some timed a profiler region, the regions
    instead (:class:`launchprof.analysis.baseline.RegionRuns`)."""
    from launchprof.analysis.baseline import runs_of
    from launchprof.defaults import BASELINE_STEPS, STEP_NAME, STOP_AFTER_ENV
    from launchprof.marker import STEP_TIMES_ENV
    from launchprof.trace.steptimes import StepTimesError, read_step_times, region_step_times, run_files

    argv = baseline_argv(work.argv)
    got, regions = [], []
    for i, path in enumerate(run_files(folder, runs), start=1):
        console.print(
            f"launchprof: baseline run {i} of {runs} (without nsys: the workload runs again, ended once "
            f"{BASELINE_STEPS} marked steps are timed; files it writes are written again)",
            markup=False,
            soft_wrap=True,
        )
        with contextlib.suppress(OSError):  # a file left by an earlier run of this folder
            path.unlink(missing_ok=True)
        began = time.perf_counter()
        try:
            stop = f"{BASELINE_STEPS}:{step or STEP_NAME}"
            env = {**os.environ, STEP_TIMES_ENV: str(path.resolve()), STOP_AFTER_ENV: stop}
            done = subprocess.run(argv, env=env, check=False)
        except OSError as exc:
            raise TargetError(f"cannot run {argv[0]}: {exc.strerror}") from None
        wall = time.perf_counter() - began
        if done.returncode != 0:
            if path.exists():  # kept for the record, out of compare's way (it reads baseline-*.steps)
                path.replace(path.with_name(path.name + ".failed"))
            console.print(f"launchprof: baseline run {i} exited with code {done.returncode}; left out", markup=False)
            continue
        try:
            times = read_step_times(path, step or STEP_NAME)
            region = region_step_times(path)
        except StepTimesError as exc:
            console.print(f"launchprof: baseline run {i} left out: {exc}", markup=False, soft_wrap=True)
            continue
        timed = f", profiler regions {(region[:, 1] - region[:, 0]).sum() / 1e9:.3f} s" if len(region) else ""
        ended = f" (ended there: {BASELINE_STEPS} steps are enough to time)" if len(times) >= BASELINE_STEPS else ""
        console.print(
            f"launchprof: baseline run {i}: {len(times)} steps{timed}{ended}; the run took {wall:.2f} s", markup=False
        )
        got.append(times)
        regions.append(region)
    return runs_of(got, regions)
