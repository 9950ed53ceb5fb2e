"""The ``launchprof`` Typer app: each command reads and checks its options
(:mod:`launchprof.cli.options`) and hands over to its module in :mod:`launchprof.commands`,
with the process-wide decisions that are the command line's to make (malloc settings:
:class:`~launchprof.malloc.MallocTuning`; signals; the exit).
Each command's parameters are made from its table (:mod:`launchprof.cli.optiontables`; the
fast path of ``profile`` reads the same table)."""

from __future__ import annotations

import gc
import inspect
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from launchprof import __version__
from launchprof.cli import consoles, options, optiontables
from launchprof.cli.options import default_output
from launchprof.cli.profile import profile_command
from launchprof.commands.common import AnalysisOptions, CompareOptions
from launchprof.commands.outcome import Outcome
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


_KINDS: dict[str, Any] = {"text": str, "texts": list[str], "float": float, "int": int, "flag": bool, "path": Path}


def _parameters(table: optiontables.Command) -> list[inspect.Parameter]:
    """A command's parameters as Typer reads them: its arguments, then its options, in
    the order of its table (:mod:`launchprof.cli.optiontables`)."""
    params = []
    for arg in table.arguments:
        info = typer.Argument(help=arg.help, show_default=False)
        # Annotated[kind, info] with kind a value: spelled so that mypy does not read it as a type
        annotation = Annotated.__class_getitem__((_KINDS[arg.kind], info))  # type: ignore[attr-defined]
        params.append(inspect.Parameter(arg.param, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation))
    for opt in table.options:
        info = typer.Option(*opt.names, help=opt.help, min=opt.min, max=opt.max, show_default=opt.show_default)
        kind = _KINDS[opt.kind]
        kind = Optional[kind] if opt.default is None else kind  # noqa: UP045 - a value, not an annotation
        annotation = Annotated.__class_getitem__((kind, info))  # type: ignore[attr-defined]
        params.append(
            inspect.Parameter(
                opt.param, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=opt.default, annotation=annotation
            )
        )
    return params


def command(name: str, **settings: Any) -> Callable[[Callable[..., Any]], Any]:
    """Register a function taking ``**params`` as the command ``name`` of the app, with
    the signature made from its table (:data:`launchprof.cli.optiontables.COMMAND_TABLES`) and
    Typer's ``settings``; the function's docstring is the command's help."""

    def register(func: Callable[..., Any]) -> Any:
        signature = inspect.Signature(_parameters(optiontables.COMMAND_TABLES[name]))
        func.__signature__ = signature  # type: ignore[attr-defined]
        func.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        return app.command(name, **settings)(func)

    return register


@contextmanager
def _collector_off_while_importing() -> Iterator[Callable[[], None]]:
    """The garbage collector off while ``analyze`` imports pandas and its own modules: it
    ran ~230 times there (40-70 ms of a 0.9 s run on demo_A_4096, this 2-CPU VM) and
    found next to nothing to free (benchmarks/README.md, "Small traces: start-up and
    analysis"). The function it gives is called once the modules are imported: it
    freezes their objects (the collector leaves them alone from then on) and turns the
    collector back on, before the analysis makes objects of its own. On again when the
    command ends, whatever happens (an option error; the command run in-process)."""
    was = gc.isenabled()
    gc.disable()

    def imported() -> None:
        gc.freeze()
        if was:
            gc.enable()

    try:
        yield imported
    finally:
        if was:
            gc.enable()


@command("analyze")
def analyze(**params: Any) -> Outcome | None:
    """Analyse an existing trace: write summary.json and report.html.

    Several traces (or a quoted glob such as 'traces/*.sqlite'), one per rank: analyse
    them, in parallel on Dask when that pays, write one report folder per trace and
    combined.json and combined.html (default folder: reports/combined).

    Exit status: 0 written; 1 a --fail-on verdict or a --min-gain reached; 2 bad input.
    """
    trace = params["trace"]
    with _collector_off_while_importing() as imported:
        if len(trace) == 1 and trace[0].endswith(".sqlite") and not params["per_process"]:
            _read_ahead(trace[0], params["time_range"], not params["no_memory_check"])
        from launchprof.commands.many import expand_traces

        console = terminal(params["json_out"], params["quiet"])
        try:
            parsed = _AnalyzeOptions.parse(params)
            many = expand_traces(trace)
            if parsed.per_process and many is not None and len(many) != 1:
                raise OptionError("--per-process analyses the processes of one trace: give one trace")
            if parsed.per_process or many is not None:
                if parsed.gates != (frozenset(), None):
                    raise OptionError(
                        "--fail-on and --min-gain judge one report: with several traces or --per-process, "
                        "read combined.json (--json) instead"
                    )
                _analyze_many(many or trace, parsed, console, imported)
                return None
        except LaunchprofError as exc:
            raise fail(exc) from None
        return _analyze_one(trace[0], parsed, console, imported)


def _read_ahead(trace: str, time_range: str | None, memory_check: bool) -> None:
    """Start reading the big tables of ``trace`` (the rows of ``--time-range``, when given)
    in background threads while pandas is imported
    (:func:`launchprof.trace.readahead.prefetch`; not a whole trace too large for the
    memory available, with ``memory_check``); a bad ``--time-range`` is left to the
    options' parse, which says so."""
    from launchprof.trace.readahead import prefetch

    try:
        rows = AnalysisOptions(time_range=options.time_range(time_range)).window()
    except OptionError:
        return
    prefetch(trace, rows, memory_check)


@dataclass(frozen=True)
class _AnalyzeOptions:
    """``analyze``'s options, parsed and checked (the Typer signature's values): the
    folder (None: the default), ``--force``, how the traces are analysed, ``--json``,
    ``--open``, the exit's gates (``--fail-on``'s verdicts, ``--min-gain`` as a speedup:
    :func:`launchprof.commands.analyze.gate`), for many traces (or processes) the Dask
    scheduler and workers, and ``--per-process``."""

    output: Path | None
    force: bool
    how: AnalysisOptions
    json_out: bool
    open_report: bool
    gates: tuple[frozenset[str], float | None]
    cluster: tuple[str | None, int | None]
    per_process: bool

    @classmethod
    def parse(cls, params: dict[str, Any]) -> _AnalyzeOptions:
        """The options of the Typer command's ``params``, checked.

        Raises:
            OptionError: a value :mod:`launchprof.cli.options` refuses.
            typer.Exit: (after one error line) a bad ``--bubble-threshold`` or ``--step``.
        """
        p = params
        gates = (options.analyze_fail_on(p["fail_on"]), options.min_gain(p["min_gain"]))
        folder = options.output_path("--output", p["output"])
        how = AnalysisOptions(
            threshold_ns(p["bubble_threshold"]),
            step_name(p["step"]),
            p["nsys"],
            MallocTuning(),
            options.time_range(p["time_range"]),
            not p["no_memory_check"],
        )
        cluster = (p["scheduler"], p["workers"])
        return cls(folder, p["force"], how, p["json_out"], p["open_report"], gates, cluster, p["per_process"])


def _window_suffix(parsed: _AnalyzeOptions) -> str:
    """``-START-ENDs`` of ``--time-range`` for a default folder's name (a window's report
    does not replace the whole trace's), or ""."""
    from launchprof.text import window_text

    window = parsed.how.window().window
    return "" if window is None else f"-{window_text(window)}s"


def _analyze_many(traces: list[str], parsed: _AnalyzeOptions, console: Console, imported: Callable[[], None]) -> None:
    """``analyze`` of several traces, or of the processes of one
    (:func:`launchprof.commands.many.run_analyze_many`); ``imported``: called once its
    modules are imported (:func:`_collector_off_while_importing`)."""
    from launchprof.commands.common import open_page, print_document
    from launchprof.commands.many import run_analyze_many

    if parsed.per_process:
        folder = parsed.output or default_output(_trace_stem(traces[0]) + "-per-process" + _window_suffix(parsed))
    else:
        folder = parsed.output or default_output("combined" + _window_suffix(parsed))
    _unwind_on_termination()
    # The modules just imported stay for the whole run: keep the garbage collector from
    # walking their objects again at every full collection (~40 ms on a large trace).
    imported()
    document = folder / COMBINED_FILES[0]
    before = _file_stamp(document)
    try:
        run_analyze_many(traces, folder, parsed.force, parsed.how, console, parsed.cluster, parsed.per_process)
    finally:
        # this run's document only (one is written also when some traces failed), not an older one
        if parsed.json_out and _file_stamp(document) not in (None, before):
            print_document(document.read_text(encoding="utf-8"))
    if parsed.open_report:
        open_page(folder / COMBINED_FILES[1], err)


def _analyze_one(trace: str, parsed: _AnalyzeOptions, console: Console, imported: Callable[[], None]) -> Outcome:
    """``analyze`` of one trace (:func:`launchprof.commands.analyze.run_analyze`): its
    outcome; the process may leave at once whatever happens from here (nothing left to
    tear down). ``imported``: as for :func:`_analyze_many`."""
    from launchprof.commands.analyze import gate, run_analyze
    from launchprof.commands.common import open_page, print_document

    imported()  # as in _analyze_many
    _unwind_on_termination()
    folder = parsed.output or default_output(_trace_stem(trace) + _window_suffix(parsed))
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


def _file_stamp(path: Path) -> tuple[int, int] | None:
    """(inode, mtime in ns) of ``path``, None when it is not a file: a report's document
    written anew (moved in by its folder's writer) has another."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns) if path.is_file() else None


def _trace_stem(trace: str) -> str:
    from launchprof.commands.folders import trace_stem

    return trace_stem(Path(trace).name)


@command("profile", context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def profile(**params: Any) -> Outcome:
    """Run TARGET under nsys, keep its trace, and write summary.json and report.html.

    Options go before TARGET; everything after TARGET goes to the workload unchanged
    (use -- before TARGET when it starts with a dash other than -m).
    """
    return profile_command(**params)


@command("doctor")
def doctor(**params: Any) -> None:
    """Check that this machine can profile: nsys, its importer, the GPU, NVTX step markers."""
    from launchprof.commands.doctor import run_doctor

    raise typer.Exit(run_doctor(out, params["nsys"], params["check_nvtx"]))


@command("compare")
def compare(**params: Any) -> None:
    """Verify a CUDA Graph conversion: write compare.json and compare.html; exit 0 only when verified.

    Exit status: 0 verified; 1 a --fail-on verdict; 2 bad input.
    """
    from launchprof.commands.common import open_page, print_document
    from launchprof.commands.compare import run_compare
    from launchprof.commands.folders import default_name

    _unwind_on_termination()
    before, after = params["before"], params["after"]
    console = terminal(params["json_out"], params["quiet"])
    try:
        folder = options.output_path("--output", params["output"]) or default_output(default_name(before, after))
        code = run_compare(before, after, folder, params["force"], _compare_options(params), console)
    except LaunchprofError as exc:
        raise fail(exc) from None
    if params["json_out"]:
        print_document((folder / COMPARE_FILES[0]).read_text(encoding="utf-8"))
    if params["open_report"]:
        open_page(folder / "compare.html", err)
    raise typer.Exit(code)


def _compare_options(params: dict[str, Any]) -> CompareOptions:
    """``compare``'s and ``check``'s options of the analysis and the verdict, checked.

    Raises:
        OptionError: a bad ``--min-effect`` or ``--fail-on``.
        typer.Exit: (after one error line) a bad ``--bubble-threshold`` or ``--step``.
    """
    how = AnalysisOptions(
        threshold_ns(params["bubble_threshold"]), step_name(params["step"]), params["nsys"], MallocTuning()
    )
    return CompareOptions(how, options.min_effect(params["min_effect"]), options.compare_fail_on(params["fail_on"]))


@command("check", context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def check(**params: Any) -> None:
    """Profile BEFORE and AFTER under nsys, time each without nsys, compare: the conversion loop in one command.

    Options go before BEFORE; BEFORE and AFTER are separated by --. Exit status: 0
    verified; 1 a --fail-on verdict; 2 bad input or a side that cannot be compared; a
    workload's own status when it failed.
    """
    from launchprof.commands.check import run_check

    try:
        gates = _compare_options(params)
        folder = options.output_path("--output", params["output"])
        code = run_check(params["commands"], out, folder, params["runs"], gates)
    except LaunchprofError as exc:
        raise fail(exc) from None
    raise typer.Exit(code)


@command("calibrate")
def calibrate(**params: Any) -> None:
    """Measure this GPU's launch and graph costs with cuda-python and save them for predictions."""
    from launchprof.commands.calibrate import run_calibrate

    try:
        run_calibrate(params["output"], out, profiler=params["profiler"], nsys=params["nsys"])
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
