"""``launchprof check BEFORE... -- AFTER...``: the conversion loop in one command.

Profiles the BEFORE command and then the AFTER command under nsys, each followed by
``--runs`` runs without nsys for its step times (``profile --baseline-runs``, read from
the step markers: ``launchprof.step()``, or any marker honouring
``LAUNCHPROF_STEP_TIMES``; without markers, a Python workload's profiler region divided by
the steps found in it, :mod:`launchprof.profiler_region`), compares the two report folders (``compare``: the speedup
without nsys decides when both sides have step times), writes everything under one
folder and returns the verdict's exit code, so CI can gate on it:

    ROOT/before/   trace, summary.json, report.html, baseline-I.steps
    ROOT/after/    the same for AFTER
    ROOT/compare/  compare.json, compare.html

Exit status: 0 verified (or a verdict not in ``--fail-on``); 1 a verdict in
``--fail-on``; 2 bad input or a side that cannot be compared (no GPU work, no steps);
a workload's own non-zero status when it failed under nsys (nothing is compared then);
130 when interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from launchprof.commands.common import CompareOptions, ProfileOptions
from launchprof.errors import LaunchprofError, OutputError
from launchprof.report.outputs import SUMMARY


class CheckUsageError(LaunchprofError):
    """The command line does not hold BEFORE and AFTER commands separated by ``--``."""


@dataclass(frozen=True)
class CheckPlan:
    """What ``check`` runs: the two commands and where their folders go."""

    before: list[str]
    after: list[str]
    root: Path

    @property
    def folders(self) -> tuple[Path, Path, Path]:
        return self.root / "before", self.root / "after", self.root / "compare"


def split_commands(words: Sequence[str]) -> tuple[list[str], list[str]]:
    """BEFORE and AFTER from ``BEFORE... -- AFTER...`` (the first ``--`` separates them).

    Raises:
        CheckUsageError: no ``--``, or an empty side.
    """
    items = list(words)
    if "--" not in items:
        raise CheckUsageError(
            "check needs two commands separated by --: launchprof check [OPTIONS] BEFORE [ARGS] -- AFTER [ARGS]"
        )
    cut = items.index("--")
    before, after = items[:cut], items[cut + 1 :]
    if not before or not after:
        raise CheckUsageError(
            f"check needs a command on both sides of --; {'BEFORE' if not before else 'AFTER'} is empty"
        )
    return before, after


def plan(words: Sequence[str], output: Path | None, label: str | None = None) -> CheckPlan:
    """The :class:`CheckPlan` for ``words``; ``output`` (default
    ``reports/check-<BEFORE's label>-<UTC time>``) must not exist yet.

    Raises:
        CheckUsageError: see :func:`split_commands`.
        TargetError: BEFORE or AFTER cannot be run (e.g. a missing script).
        OutputError: ``output`` exists.
    """
    from launchprof.commands.folders import default_folder
    from launchprof.nsys.profile import workload

    before, after = split_commands(words)
    first = workload(before)  # both targets are checked before anything is created or run
    workload(after)
    root = output if output is not None else default_folder(f"check-{label or first.label}")
    if root.exists():
        raise OutputError(f"{root} already exists; give another --output (check never writes over a folder)")
    return CheckPlan(before, after, root)


def _has_step_times(folder: Path) -> bool:
    """Whether a profile folder's runs without nsys gave a step time (its summary.json's
    ``baseline.period_p50_ns``)."""
    import json

    try:
        section = json.loads((folder / SUMMARY).read_text(encoding="utf-8")).get("baseline") or {}
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(section, dict) and bool(section.get("period_p50_ns"))


def run_check(
    words: Sequence[str],
    console: Console,
    output: Path | None = None,
    runs: int = 3,
    options: CompareOptions | None = None,
) -> int:
    """Run the loop (module docstring) and return the exit status. ``options``: how each
    side is analysed and compared, and the verdicts that exit 1 (parsed before the
    workloads run; default: every verdict but ``verified``, as ``compare``).

    Raises:
        LaunchprofError: bad input (usage, output folder), nsys missing or failing, a side
            that cannot be compared; the caller prints it in one line.
    """
    from launchprof.commands.compare import run_compare
    from launchprof.commands.profile import run_profile

    options = options or CompareOptions()
    how = options.how
    p = plan(words, output)
    before_dir, after_dir, compare_dir = p.folders
    p.root.mkdir(parents=True)
    for label, command, folder in (("BEFORE", p.before, before_dir), ("AFTER", p.after, after_dir)):
        console.print(f"launchprof check: {label}: {' '.join(command)}", markup=False, soft_wrap=True)
        result = run_profile(command, console, folder, how, ProfileOptions(baseline_runs=runs))
        if result.exit_code != 0:
            console.print(
                f"launchprof check: {label} exited with status {result.exit_code} under nsys; nothing compared "
                f"(its report: {folder})",
                markup=False,
                soft_wrap=True,
            )
            return result.exit_code
    missing = [name for name, d in (("BEFORE", before_dir), ("AFTER", after_dir)) if not _has_step_times(d)]
    if runs and missing:
        console.print(
            f"launchprof check: no step times from the runs without nsys of {' and '.join(missing)} (no steps "
            "marked with launchprof.step(), no torch.cuda.profiler region, no top-level module call at the steps' "
            "pace): the speedup is the one measured "
            "under nsys",
            markup=False,
            soft_wrap=True,
        )
    return run_compare(before_dir, after_dir, compare_dir, False, options, console)
