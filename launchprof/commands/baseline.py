"""``launchprof profile --baseline-runs N``: the workload run N more times without nsys,
each writing its step times (``LAUNCHPROF_STEP_TIMES``) to read back for the report's
``baseline`` section (:mod:`launchprof.analysis.baseline`)."""

from __future__ import annotations

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


def baseline_argv(argv: Sequence[str]) -> list[str]:
    """The command line of a run without nsys: a Python workload (``python[X.Y] SCRIPT.py``
    or ``python -m MODULE``, options before them left alone) runs through
    ``launchprof/profiler_region.py``, which times its profiler regions for a workload without
    step markers (:mod:`launchprof.profiler_region`); any other command runs unchanged."""
    args = list(argv)
    if len(args) > 1 and PYTHON_NAME.match(os.path.basename(args[0])):
        i = 1
        while i < len(args) and args[i].startswith("-") and args[i] != "-m" and args[i] != "-":
            i += 1
        if i < len(args) and (args[i] == "-m" or args[i].endswith(".py")):
            from launchprof import profiler_region

            return [*args[:i], str(Path(profiler_region.__file__).resolve()), *args[i:]]
    return args


def run_baselines(
    work: Workload, folder: Path, runs: int, console: Console, step: str | None = None
) -> list[Any] | Any:
    """Run ``work`` ``runs`` times without nsys (:func:`baseline_argv`), each with
    ``LAUNCHPROF_STEP_TIMES`` set to its own file (:func:`launchprof.trace.steptimes.run_files`),
    and return the step times read back: one array per run that exited 0 (failed runs and
    unreadable step files are reported and left out, so the analysis of the recorded trace
    always runs); when no run recorded a step but some timed a profiler region, the regions
    instead (:class:`launchprof.analysis.baseline.RegionRuns`)."""
    from launchprof.analysis.baseline import RegionRuns
    from launchprof.marker import STEP_NAME, STEP_TIMES_ENV
    from launchprof.trace.steptimes import StepTimesError, read_step_times, region_step_times, run_files

    argv = baseline_argv(work.argv)
    got, regions = [], []
    for i, path in enumerate(run_files(folder, runs), start=1):
        console.print(f"launchprof: baseline run {i} of {runs} (without nsys)", markup=False)
        began = time.perf_counter()
        try:
            done = subprocess.run(argv, env={**os.environ, STEP_TIMES_ENV: str(path.resolve())}, check=False)
        except OSError as exc:
            raise TargetError(f"cannot run {argv[0]}: {exc.strerror}") from None
        wall = time.perf_counter() - began
        if done.returncode != 0:
            console.print(f"launchprof: baseline run {i} exited with code {done.returncode}; left out", markup=False)
            continue
        try:
            times = read_step_times(path, step or STEP_NAME)
            region = region_step_times(path)
        except StepTimesError as exc:
            console.print(f"launchprof: baseline run {i} left out: {exc}", markup=False, soft_wrap=True)
            continue
        timed = f", profiler regions {(region[:, 1] - region[:, 0]).sum() / 1e9:.3f} s" if len(region) else ""
        console.print(f"launchprof: baseline run {i}: {len(times)} steps{timed} in {wall:.2f} s", markup=False)
        got.append(times)
        regions.append(region)
    if not any(len(t) for t in got) and any(len(r) for r in regions):
        return RegionRuns(regions)
    return got
