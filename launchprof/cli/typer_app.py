"""The ``launchprof`` Typer app: each command reads and checks its options
(:mod:`launchprof.cli.options`) and hands over to its module in :mod:`launchprof.commands`,
with the process-wide decisions that are the command line's to make (malloc settings:
:class:`~launchprof.malloc.MallocTuning`; signals; the exit).
``profile``'s parameters are made from the one option table,
:data:`launchprof.cli.options.PROFILE_OPTIONS`, which the fast path reads too."""

from __future__ import annotations

import gc
import inspect
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from launchprof import __version__
from launchprof.cli import consoles, options
from launchprof.cli.options import BUBBLE_HELP, STEP_HELP, default_output
from launchprof.cli.profile import profile_command
from launchprof.commands.common import AnalysisOptions, CompareOptions
from launchprof.commands.outcome import Outcome
from launchprof.defaults import DIAGNOSIS_VERDICTS
from launchprof.errors import LaunchprofError, OptionError
from launchprof.malloc import MallocTuning
from launchprof.report.outputs import COMBINED_FILES, COMPARE_FILES, PAGE

if TYPE_CHECKING:
    from rich.console import Console

KEEP_OUTCOME = "launchprof.cli.entry"  # the app's ``obj`` when its caller takes the Outcome itself


def _command_result(value: Any, **_params: Any) -> Any:
    """What the app gives back for a command's return value: the
    :class:`~launchprof.commands.outcome.Outcome` itself to :func:`launchprof.cli.entry.main`
    (which called the app with ``obj=KEEP_OUTCOME``); to any other caller (Typer's test
    runner, ``standalone_mode``) its exit status, as ``typer.Exit``."""
    if isinstance(value, Outcome) and click_context_obj() != KEEP_OUTCOME:
        raise typer.Exit(value.code)
    return value


def click_context_obj() -> Any:
    """The ``obj`` of the running command line's context (None outside one)."""
    try:
        from typer._click.globals import get_current_context  # Typer 0.28 carries its own click
    except ImportError:  # pragma: no cover - Typer < 0.28
        from click import get_current_context  # type: ignore[no-redef]

    ctx = get_current_context(silent=True)
    return None if ctx is None else ctx.find_root().obj


# Options that several commands share (one definition each; the defaults stay at each use).
StepOption = Annotated[Optional[str], typer.Option("--step", help=STEP_HELP)]
BubbleThresholdOption = Annotated[float, typer.Option("--bubble-threshold", help=BUBBLE_HELP)]
FailOnOption = Annotated[
    str,
    typer.Option(
        "--fail-on",
        help="comma-separated verdicts that exit with status 1, or 'none' (default: "
        + options.DEFAULT_COMPARE_FAIL_ON.replace(",", ", ")
        + ")",
        show_default=False,
    ),
]
MinEffectOption = Annotated[
    float, typer.Option("--min-effect", help="minimum speedup counted as faster, in percent", min=0)
]

app = typer.Typer(
    name="launchprof",
    help="Is your GPU program launch-bound? Would a CUDA Graph help? Did it?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    result_callback=_command_result,
)


err, out, terminal = consoles.err, consoles.out, consoles.terminal


def fail(exc: LaunchprofError) -> typer.Exit:
    """Print ``launchprof: error: ...`` on one line and return the Exit to raise."""
    return typer.Exit(consoles.print_error(exc))


def threshold_ns(us: float) -> int:
    """``--bubble-threshold`` in ns (:func:`launchprof.cli.options.bubble_threshold_ns`).

    Raises:
        typer.Exit: (after one error line) a value that is not a finite number of us in
            [0, :data:`launchprof.cli.options.MAX_BUBBLE_THRESHOLD_US`].
    """
    try:
        return options.bubble_threshold_ns(us)
    except OptionError as exc:
        raise fail(exc) from None


def step_name(step: str | None) -> str | None:
    """``--step`` as given; None when not given (:func:`launchprof.cli.options.step_text`).

    Raises:
        typer.Exit: (after one error line) an empty or blank name.
    """
    try:
        return options.step_text(step)
    except OptionError as exc:
        raise fail(exc) from None


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False) -> None:
    if version:
        out.print(f"launchprof {__version__}")
        raise typer.Exit(0)


# params: a command-line command: one parameter per option, which Typer reads from the signature
@app.command()
def analyze(
    trace: Annotated[
        list[str],
        typer.Argument(
            help=(
                "nsys .sqlite export (or .sqlite.xz) or .nsys-rep report; "
                "several, or a quoted glob, for one report per rank"
            ),
            show_default=False,
        ),
    ],
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", help="report folder (default: reports/<trace stem>)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing report folder")] = False,
    bubble_threshold: BubbleThresholdOption = options.DEFAULT_BUBBLE_THRESHOLD_US,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable (for .nsys-rep)")] = None,
    step: StepOption = None,
    scheduler: Annotated[
        Optional[str], typer.Option("--scheduler", help="many traces: address of a running Dask scheduler")
    ] = None,
    workers: Annotated[
        Optional[int],
        typer.Option(
            "--workers",
            min=0,
            help="many traces: local Dask workers (default: Dask only when it pays, see the docs; 0: no Dask)",
        ),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print summary.json (combined.json for many traces) on stdout, nothing else")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors (and --json)")] = False,
    fail_on: Annotated[
        Optional[str],
        typer.Option(
            "--fail-on",
            help=f"exit 1 when the verdict is one of these (comma separated: {', '.join(DIAGNOSIS_VERDICTS)})",
        ),
    ] = None,
    min_gain: Annotated[
        Optional[float],
        typer.Option("--min-gain", help="exit 1 when a CUDA Graph is expected to gain at least this, in percent"),
    ] = None,
    open_report: Annotated[bool, typer.Option("--open", help="open the report in the browser")] = False,
) -> Outcome | None:
    """Analyse an existing trace: write summary.json and report.html.

    Several traces (or a quoted glob such as 'traces/*.sqlite'), one per rank: analyse
    them, in parallel on Dask when that pays, write one report folder per trace and
    combined.json and combined.html (default folder: reports/combined).

    Exit status: 0 written; 1 a --fail-on verdict or a --min-gain reached; 2 bad input.
    """
    if len(trace) == 1 and trace[0].endswith(".sqlite"):
        from launchprof.trace.readahead import prefetch

        prefetch(trace[0])  # read its big tables in background threads while pandas is imported
    from launchprof.commands.many import expand_traces

    console = terminal(json_out, quiet)
    try:
        gates = (options.analyze_fail_on(fail_on), options.min_gain(min_gain))
        folder = options.output_path("--output", output)
        how = AnalysisOptions(threshold_ns(bubble_threshold), step_name(step), nsys, MallocTuning())
        parsed = _AnalyzeOptions(folder, force, how, json_out, open_report, gates, (scheduler, workers))
        many = expand_traces(trace)
        if many is not None:
            _analyze_many(many, parsed, console)
            return None
    except LaunchprofError as exc:
        raise fail(exc) from None
    return _analyze_one(trace[0], parsed, console)


@dataclass(frozen=True)
class _AnalyzeOptions:
    """``analyze``'s options, parsed and checked (the Typer signature's values): the
    folder (None: the default), ``--force``, how the traces are analysed, ``--json``,
    ``--open``, the exit's gates (``--fail-on``'s verdicts, ``--min-gain`` as a speedup:
    :func:`launchprof.commands.analyze.gate`) and, for many traces, the Dask scheduler
    and workers."""

    output: Path | None
    force: bool
    how: AnalysisOptions
    json_out: bool
    open_report: bool
    gates: tuple[frozenset[str], float | None]
    cluster: tuple[str | None, int | None]


def _analyze_many(traces: list[str], parsed: _AnalyzeOptions, console: Console) -> None:
    """``analyze`` of several traces (:func:`launchprof.commands.many.run_analyze_many`)."""
    from launchprof.commands.common import open_page, print_document
    from launchprof.commands.many import run_analyze_many

    folder = parsed.output or default_output("combined")
    scheduler, workers = parsed.cluster
    _unwind_on_termination()
    # The modules just imported stay for the whole run: keep the garbage collector from
    # walking their objects again at every full collection (~40 ms on a large trace).
    gc.freeze()
    try:
        run_analyze_many(traces, folder, parsed.force, parsed.how, console, scheduler=scheduler, workers=workers)
    finally:
        if parsed.json_out and (folder / COMBINED_FILES[0]).is_file():
            print_document((folder / COMBINED_FILES[0]).read_text(encoding="utf-8"))
    if parsed.open_report:
        open_page(folder / COMBINED_FILES[1], err)


def _analyze_one(trace: str, parsed: _AnalyzeOptions, console: Console) -> Outcome:
    """``analyze`` of one trace (:func:`launchprof.commands.analyze.run_analyze`): its
    outcome; the process may leave at once whatever happens from here (nothing left to
    tear down)."""
    from launchprof.commands.analyze import gate, run_analyze
    from launchprof.commands.common import open_page, print_document

    gc.freeze()  # as in _analyze_many
    _unwind_on_termination()
    folder = parsed.output or default_output(_trace_stem(trace))
    document = print_document if parsed.json_out else None
    try:
        summary = run_analyze(
            Path(trace), folder, parsed.force, parsed.how, console, require_gpu=True, document=document
        )
    except LaunchprofError as exc:
        return Outcome(consoles.print_error(exc), quick_exit=True)
    except typer.Exit as exc:
        return Outcome(exc.exit_code, quick_exit=True)
    if parsed.open_report:
        open_page(folder / PAGE, err)
    return Outcome(gate(summary, *parsed.gates, err), quick_exit=True)


def _trace_stem(trace: str) -> str:
    from launchprof.commands.folders import trace_stem

    return trace_stem(Path(trace).name)


def _profile(**params: Any) -> Outcome:
    """Run TARGET under nsys, keep its trace, and write summary.json and report.html.

    Options go before TARGET; everything after TARGET goes to the workload unchanged
    (use -- before TARGET when it starts with a dash other than -m).
    """
    return profile_command(**params)


_KINDS: dict[str, Any] = {
    "text": Optional[str],
    "texts": Optional[list[str]],
    "float": float,
    "int": int,
    "flag": bool,
}


def _profile_parameters() -> list[inspect.Parameter]:
    """The parameters of ``launchprof profile`` as Typer reads them: TARGET, then
    :data:`launchprof.cli.options.PROFILE_OPTIONS` in their order."""
    target = Annotated[list[str], typer.Argument(help=options.PROFILE_TARGET_HELP, show_default=False)]
    params = [inspect.Parameter("target", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=target)]
    for opt in options.PROFILE_OPTIONS:
        info = (
            typer.Option(*opt.names, help=opt.help, min=opt.min, max=opt.max)
            if opt.kind == "int"
            else typer.Option(*opt.names, help=opt.help)
        )
        # Annotated[kind, info] with kind a value: spelled so that mypy does not read it as a type
        annotation = Annotated.__class_getitem__((_KINDS[opt.kind], info))  # type: ignore[attr-defined]
        params.append(
            inspect.Parameter(
                opt.param, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=opt.default, annotation=annotation
            )
        )
    return params


_profile.__signature__ = inspect.Signature(_profile_parameters())  # type: ignore[attr-defined]
_profile.__annotations__ = {p.name: p.annotation for p in _profile.__signature__.parameters.values()}  # type: ignore[attr-defined]
profile = app.command(
    "profile",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)(_profile)


@app.command()
def doctor(
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable")] = None,
    check_nvtx: Annotated[
        bool, typer.Option("--check-nvtx", help="profile one launchprof.step() to see whether nsys records it")
    ] = False,
) -> None:
    """Check that this machine can profile: nsys, its importer, the GPU, NVTX step markers."""
    from launchprof.commands.doctor import run_doctor

    raise typer.Exit(run_doctor(out, nsys, check_nvtx))


# params: a command-line command: one parameter per option, which Typer reads from the signature
@app.command()
def compare(
    before: Annotated[Path, typer.Argument(help="BEFORE: trace (.sqlite, .sqlite.xz, .nsys-rep) or report folder")],
    after: Annotated[Path, typer.Argument(help="AFTER (the graph conversion): trace or report folder")],
    output: Annotated[
        Optional[str],
        typer.Option(
            "--output",
            "-o",
            help="comparison folder (default: reports/compare-B-vs-A; B, A: the BEFORE and AFTER stems)",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing comparison folder")] = False,
    step: StepOption = None,
    fail_on: FailOnOption = options.DEFAULT_COMPARE_FAIL_ON,
    min_effect: MinEffectOption = options.DEFAULT_MIN_EFFECT_PCT,
    bubble_threshold: BubbleThresholdOption = options.DEFAULT_BUBBLE_THRESHOLD_US,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable (for .nsys-rep)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print compare.json on stdout, nothing else")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors (and --json)")] = False,
    open_report: Annotated[bool, typer.Option("--open", help="open the comparison in the browser")] = False,
) -> None:
    """Verify a CUDA Graph conversion: write compare.json and compare.html; exit 0 only when verified.

    Exit status: 0 verified; 1 a --fail-on verdict; 2 bad input.
    """
    from launchprof.commands.common import open_page, print_document
    from launchprof.commands.compare import run_compare
    from launchprof.commands.folders import default_name

    _unwind_on_termination()
    console = terminal(json_out, quiet)
    try:
        folder = options.output_path("--output", output) or default_output(default_name(before, after))
        failing = options.compare_fail_on(fail_on)
        how = AnalysisOptions(threshold_ns(bubble_threshold), step_name(step), nsys, MallocTuning())
        code = run_compare(
            before, after, folder, force, CompareOptions(how, options.min_effect(min_effect), failing), console
        )
    except LaunchprofError as exc:
        raise fail(exc) from None
    if json_out:
        print_document((folder / COMPARE_FILES[0]).read_text(encoding="utf-8"))
    if open_report:
        open_page(folder / "compare.html", err)
    raise typer.Exit(code)


# params: a command-line command: one parameter per option, which Typer reads from the signature
@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def check(
    commands: Annotated[
        list[str],
        typer.Argument(help="BEFORE [ARGS] -- AFTER [ARGS]: two workloads as profile takes them", show_default=False),
    ],
    output: Annotated[
        Optional[str],
        typer.Option(
            "--output", "-o", help="folder (default: reports/check-B-TIME, B the BEFORE workload, TIME in UTC)"
        ),
    ] = None,
    runs: Annotated[
        int,
        typer.Option("--runs", help="runs of each side without nsys, for step times", min=0, max=options.MAX_RUNS),
    ] = options.DEFAULT_CHECK_RUNS,
    step: StepOption = None,
    fail_on: FailOnOption = options.DEFAULT_COMPARE_FAIL_ON,
    min_effect: MinEffectOption = options.DEFAULT_MIN_EFFECT_PCT,
    bubble_threshold: BubbleThresholdOption = options.DEFAULT_BUBBLE_THRESHOLD_US,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable")] = None,
) -> None:
    """Profile BEFORE and AFTER under nsys, time each without nsys, compare: the conversion loop in one command.

    Options go before BEFORE; BEFORE and AFTER are separated by --. Exit status: 0
    verified; 1 a --fail-on verdict; 2 bad input or a side that cannot be compared; a
    workload's own status when it failed.
    """
    from launchprof.commands.check import run_check

    try:
        how = AnalysisOptions(threshold_ns(bubble_threshold), step_name(step), nsys, MallocTuning())
        gates = CompareOptions(how, options.min_effect(min_effect), options.compare_fail_on(fail_on))
        code = run_check(commands, out, options.output_path("--output", output), runs, gates)
    except LaunchprofError as exc:
        raise fail(exc) from None
    raise typer.Exit(code)


@app.command()
def calibrate(
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="calibration file (default: the user cache folder)")
    ] = None,
    profiler: Annotated[
        bool,
        typer.Option("--profiler", help="also measure what nsys adds to launch calls (runs a launch loop under nsys)"),
    ] = False,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable (with --profiler)")] = None,
) -> None:
    """Measure this GPU's launch and graph costs with cuda-python and save them for predictions."""
    from launchprof.commands.calibrate import run_calibrate

    try:
        run_calibrate(output, out, profiler=profiler, nsys=nsys)
    except LaunchprofError as exc:
        raise fail(exc) from None


def _unwind_on_termination() -> None:
    """SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C: the staging folder of a
    report and a decompressed copy of a trace are removed (SIGHUP left the copy), exit 143
    or 129; nohup's ignored SIGHUP stays ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _terminated)


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


__all__ = ["app"]
