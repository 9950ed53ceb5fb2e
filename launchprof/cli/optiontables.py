"""The one table of each command's arguments and options, as data: the Typer app's
signatures are made from them (:mod:`launchprof.cli.typer_app`), and so is the reader of
``profile``'s fast path (:func:`launchprof.cli.options.parse_profile`), which reads a
command line before Typer is imported. The defaults of the command line live here too.

An option several commands take is defined once (:data:`OUTPUT`, :data:`NSYS`,
:data:`STEP`, ...); a command that says it otherwise gives its own help text with
``dataclasses.replace``. ``tests/test_option_tables.py`` checks that each option name is
spelled in one definition and that every command's parameters are its table's.

No Typer and no launchprof import but the constants: ``profile`` reads this before the
workload starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from launchprof.defaults import BASELINE_STEPS, COMPARE_FAILING, DEFAULT_BUBBLE_THRESHOLD_NS, DIAGNOSIS_VERDICTS

# Defaults of the command line (the library's own, in ns, are in launchprof.defaults).
DEFAULT_BUBBLE_THRESHOLD_US = DEFAULT_BUBBLE_THRESHOLD_NS / 1000
DEFAULT_COMPARE_FAIL_ON = ",".join(COMPARE_FAILING)
DEFAULT_MIN_EFFECT_PCT = 5.0
DEFAULT_CHECK_RUNS = 3
MAX_RUNS = 100  # --baseline-runs, check --runs


@dataclass(frozen=True)
class Option:
    """One option of a command.

    Attributes:
        param: the Python name its value is passed as.
        names: its spellings on the command line (``--output``, ``-o``).
        help: the help text.
        kind: ``text``, ``texts`` (repeatable), ``float``, ``int``, ``flag`` or ``path``;
            a ``text``, ``float``, ``int`` or ``path`` whose default is None is optional.
        default: the value when the option is not given.
        min, max: the range of an ``int`` or ``float`` (Typer checks it).
        show_default: whether the help shows the default.
    """

    param: str
    names: tuple[str, ...]
    help: str
    kind: str
    default: Any = None
    min: int | None = None
    max: int | None = None
    show_default: bool = True


@dataclass(frozen=True)
class Argument:
    """One argument of a command: ``param``, its help, ``kind`` (``texts``: one or more
    words; ``path``: one path)."""

    param: str
    help: str
    kind: str


@dataclass(frozen=True)
class Command:
    """A command's arguments and options, in the order its help lists them."""

    arguments: tuple[Argument, ...]
    options: tuple[Option, ...]


BUBBLE_HELP = "minimum idle gap counted as a bubble, in us"
STEP_HELP = "NVTX range text that marks one step"

# Options of several commands: one definition each.
OUTPUT = Option("output", ("--output", "-o"), "folder", "text")
FORCE = Option("force", ("--force",), "overwrite an existing report folder", "flag", False)
NSYS = Option("nsys", ("--nsys",), "path of the nsys executable", "text")
STEP = Option("step", ("--step",), STEP_HELP, "text")
BUBBLE_THRESHOLD = Option(
    "bubble_threshold", ("--bubble-threshold",), BUBBLE_HELP, "float", DEFAULT_BUBBLE_THRESHOLD_US
)
JSON_OUT = Option("json_out", ("--json",), "print the document on stdout, nothing else", "flag", False)
QUIET = Option("quiet", ("--quiet", "-q"), "print nothing but errors (and --json)", "flag", False)
OPEN = Option("open_report", ("--open",), "open the report in the browser", "flag", False)
FAIL_ON = Option(
    "fail_on",
    ("--fail-on",),
    f"exit 1 when the verdict is one of these (comma separated: {', '.join(DIAGNOSIS_VERDICTS)})",
    "text",
)
COMPARE_FAIL_ON = replace(
    FAIL_ON,
    help="comma-separated verdicts that exit with status 1, or 'none' (default: "
    + DEFAULT_COMPARE_FAIL_ON.replace(",", ", ")
    + ")",
    default=DEFAULT_COMPARE_FAIL_ON,
    show_default=False,
)
MIN_EFFECT = Option(
    "min_effect", ("--min-effect",), "minimum speedup counted as faster, in percent", "float", DEFAULT_MIN_EFFECT_PCT, 0
)
NSYS_REP = replace(NSYS, help="path of the nsys executable (for .nsys-rep)")

ANALYZE = Command(
    (
        Argument(
            "trace",
            "nsys .sqlite export (or .sqlite.xz) or .nsys-rep report; several, or a quoted glob, for one report "
            "per rank",
            "texts",
        ),
    ),
    (
        replace(OUTPUT, help="report folder (default: reports/<trace stem>)"),
        FORCE,
        BUBBLE_THRESHOLD,
        NSYS_REP,
        STEP,
        Option(
            "per_process",
            ("--per-process",),
            "analyse each process with GPU work on its own, reading only its rows (memory of the largest "
            "process's share; each process reads the whole file, so time grows with the processes): one "
            "report per process and a combined report, no verdict for the whole trace (default folder: "
            "reports/<trace stem>-per-process)",
            "flag",
            False,
        ),
        Option(
            "time_range",
            ("--time-range",),
            "START:END seconds of the trace's clock (as the Nsight Systems timeline shows it): read and "
            "analyse only the rows starting in that window (memory of that window)",
            "text",
        ),
        Option(
            "no_memory_check",
            ("--no-memory-check",),
            "analyse the trace (or the process's or window's rows) even when it looks too large for the memory "
            "available (by default it is refused before it is read, naming --per-process and --time-range)",
            "flag",
            False,
        ),
        Option("scheduler", ("--scheduler",), "many traces: address of a running Dask scheduler", "text"),
        Option(
            "workers",
            ("--workers",),
            "many traces: local Dask workers (default: Dask only when it pays, see the docs; 0: no Dask)",
            "int",
            None,
            0,
        ),
        replace(JSON_OUT, help="print summary.json (combined.json for many traces) on stdout, nothing else"),
        QUIET,
        FAIL_ON,
        Option(
            "min_gain",
            ("--min-gain",),
            "exit 1 when a CUDA Graph is expected to gain at least this, in percent",
            "float",
        ),
        OPEN,
    ),
)

PROFILE_TARGET_HELP = "a Python script (run with this Python), -m module, or an executable, then its arguments"
PROFILE = Command(
    (Argument("target", PROFILE_TARGET_HELP, "texts"),),
    (
        replace(OUTPUT, help="folder (default: reports/<target>-<UTC time>)"),
        NSYS,
        Option("nsys_arg", ("--nsys-arg",), "extra nsys profile flag (repeatable)", "texts"),
        STEP,
        BUBBLE_THRESHOLD,
        OPEN,
        Option(
            "baseline_runs",
            ("--baseline-runs",),
            f"run TARGET N more times without nsys, each up to {BASELINE_STEPS} marked steps, to measure the step "
            "the expected speedup starts from (default 1; 3 give a spread)",
            "int",
            1,
            0,
            MAX_RUNS,
        ),
        Option(
            "no_baseline",
            ("--no-baseline",),
            "no run without nsys: the expected speedup stays an estimate",
            "flag",
            False,
        ),
        replace(JSON_OUT, help="print summary.json on stdout, nothing else (the workload's own output goes to stderr)"),
        replace(QUIET, help="print nothing but errors (and --json); the workload's output stays"),
        replace(
            FAIL_ON,
            help="exit 1 when the workload exited 0 and the verdict is one of these (comma separated: "
            f"{', '.join(DIAGNOSIS_VERDICTS)})",
        ),
    ),
)

DOCTOR = Command(
    (),
    (
        NSYS,
        Option(
            "check_nvtx",
            ("--check-nvtx",),
            "profile one launchprof.step() to see whether nsys records it",
            "flag",
            False,
        ),
    ),
)

COMPARE = Command(
    (
        Argument("before", "BEFORE: trace (.sqlite, .sqlite.xz, .nsys-rep) or report folder", "path"),
        Argument("after", "AFTER (the graph conversion): trace or report folder", "path"),
    ),
    (
        replace(OUTPUT, help="comparison folder (default: reports/compare-B-vs-A; B, A: the BEFORE and AFTER stems)"),
        replace(FORCE, help="overwrite an existing comparison folder"),
        STEP,
        COMPARE_FAIL_ON,
        MIN_EFFECT,
        BUBBLE_THRESHOLD,
        NSYS_REP,
        replace(JSON_OUT, help="print compare.json on stdout, nothing else"),
        QUIET,
        replace(OPEN, help="open the comparison in the browser"),
    ),
)

CHECK = Command(
    (Argument("commands", "BEFORE [ARGS] -- AFTER [ARGS]: two workloads as profile takes them", "texts"),),
    (
        replace(OUTPUT, help="folder (default: reports/check-B-TIME, B the BEFORE workload, TIME in UTC)"),
        Option(
            "runs",
            ("--runs",),
            "runs of each side without nsys, for step times",
            "int",
            DEFAULT_CHECK_RUNS,
            0,
            MAX_RUNS,
        ),
        STEP,
        COMPARE_FAIL_ON,
        MIN_EFFECT,
        BUBBLE_THRESHOLD,
        NSYS,
    ),
)

CALIBRATE = Command(
    (),
    (
        replace(OUTPUT, help="calibration file (default: the user cache folder)", kind="path"),
        Option(
            "profiler",
            ("--profiler",),
            "also measure what nsys adds to launch calls (runs a launch loop under nsys)",
            "flag",
            False,
        ),
        replace(NSYS, help="path of the nsys executable (with --profiler)"),
    ),
)

# The Typer app's commands, in its order.
COMMAND_TABLES: dict[str, Command] = {
    "analyze": ANALYZE,
    "profile": PROFILE,
    "doctor": DOCTOR,
    "compare": COMPARE,
    "check": CHECK,
    "calibrate": CALIBRATE,
}
COMMANDS = tuple(COMMAND_TABLES)
