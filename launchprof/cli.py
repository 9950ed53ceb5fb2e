"""The ``launchprof`` command line. Each command is a few lines over the library."""

from __future__ import annotations

import gc
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from launchprof import __version__, console, options
from launchprof.entry import QUICK_EXIT, main, profile_command
from launchprof.errors import LaunchprofError, OptionError

if TYPE_CHECKING:
    from rich.console import Console

app = typer.Typer(
    name="launchprof",
    help="Is your GPU program launch-bound? Would a CUDA Graph help? Did it?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


err, out = console.err, console.out


def fail(exc: LaunchprofError) -> typer.Exit:
    """Print ``launchprof: error: ...`` on one line and return the Exit to raise."""
    return typer.Exit(console.print_error(exc))


MAX_BUBBLE_THRESHOLD_US = options.MAX_BUBBLE_THRESHOLD_US


def threshold_ns(us: float) -> int:
    """``--bubble-threshold`` in ns (:func:`launchprof.options.bubble_threshold_ns`).

    Raises:
        typer.Exit: (after one error line) a value that is not a finite number of us in
            [0, :data:`MAX_BUBBLE_THRESHOLD_US`].
    """
    try:
        return options.bubble_threshold_ns(us)
    except OptionError as exc:
        raise fail(exc) from None


def step_name(step: str | None) -> str | None:
    """``--step`` as given; None when not given (:func:`launchprof.options.step_text`).

    Raises:
        typer.Exit: (after one error line) an empty or blank name.
    """
    try:
        return options.step_text(step)
    except OptionError as exc:
        raise fail(exc) from None


MAX_LABEL = 100  # characters of a default folder's name taken from the input's (file names end at 255 bytes)


def default_output(stem: str) -> Path:
    """``reports/<stem>`` under the current folder (``stem`` cut to :data:`MAX_LABEL` characters)."""
    return Path("reports") / stem[:MAX_LABEL]


@app.callback(invoke_without_command=True)
def _root(version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False) -> None:
    if version:
        out.print(f"launchprof {__version__}")
        raise typer.Exit(0)


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
        Optional[Path], typer.Option("--output", "-o", help="report folder (default: reports/<trace stem>)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing report folder")] = False,
    bubble_threshold: Annotated[
        float, typer.Option("--bubble-threshold", help="minimum idle gap counted as a bubble, in us")
    ] = 1.0,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable (for .nsys-rep)")] = None,
    step: Annotated[Optional[str], typer.Option("--step", help="NVTX range text that marks one step")] = None,
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
            help="exit 1 when the verdict is one of these (comma separated: launch-bound, sync-bound, host-bound, "
            "gpu-bound, no-gpu-work)",
        ),
    ] = None,
    min_gain: Annotated[
        Optional[float],
        typer.Option("--min-gain", help="exit 1 when a CUDA Graph is expected to gain at least this, in percent"),
    ] = None,
    open_report: Annotated[bool, typer.Option("--open", help="open the report in the browser")] = False,
) -> None:
    """Analyse an existing trace: write summary.json and report.html.

    Several traces (or a quoted glob such as 'traces/*.sqlite'), one per rank: analyse
    them, in parallel on Dask when that pays, write one report folder per trace and
    combined.json and combined.html (default folder: reports/combined).

    Exit status: 0 written; 1 a --fail-on verdict or a --min-gain reached; 2 bad input.
    """
    if len(trace) == 1 and trace[0].endswith(".sqlite"):
        from launchprof.trace.columns import prefetch

        prefetch(trace[0])  # read its big tables in background threads while pandas is imported
    from launchprof.commands import run_analyze, run_analyze_many
    from launchprof.multi import expand_traces

    # The modules just imported stay for the whole run: keep the garbage collector from
    # walking their objects again at every full collection (~40 ms on a large trace).
    gc.freeze()

    console = terminal(json_out, quiet)
    try:
        failing = options.analyze_fail_on(fail_on)
        gain = options.min_gain(min_gain)
        if output is not None:
            options.output_folder("--output", str(output))
        many = expand_traces(trace)
        if many is not None:
            folder = output or default_output("combined")
            try:
                run_analyze_many(
                    many,
                    folder,
                    force,
                    threshold_ns(bubble_threshold),
                    nsys,
                    console,
                    step=step_name(step),
                    scheduler=scheduler,
                    workers=workers,
                )
            finally:
                if json_out and (folder / "combined.json").is_file():
                    _print_document((folder / "combined.json").read_text(encoding="utf-8"))
            if open_report:
                open_page(folder / "combined.html", console)
            return
        QUICK_EXIT.append(True)
        # SIGTERM unwinds like Ctrl-C (the child's staged step files are removed), exit 143
        signal.signal(signal.SIGTERM, _terminated)
        folder = output or default_output(options.trace_stem(Path(trace[0]).name))
        summary = run_analyze(
            Path(trace[0]),
            folder,
            force,
            threshold_ns(bubble_threshold),
            nsys,
            console,
            step=step_name(step),
            require_gpu=True,
            document=_print_document if json_out else None,
        )
    except LaunchprofError as exc:
        raise fail(exc) from None
    if open_report:
        open_page(folder / "report.html", console)
    code = gate(summary, failing, gain)
    if code:
        raise typer.Exit(code)


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def profile(
    target: Annotated[
        list[str],
        typer.Argument(
            help="a Python script (run with this Python), -m module, or an executable, then its arguments",
            show_default=False,
        ),
    ],
    output: Annotated[
        Optional[str], typer.Option("--output", "-o", help="folder (default: reports/<target>-<UTC time>)")
    ] = None,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable")] = None,
    nsys_arg: Annotated[
        Optional[list[str]], typer.Option("--nsys-arg", help="extra nsys profile flag (repeatable)")
    ] = None,
    step: Annotated[Optional[str], typer.Option("--step", help="NVTX range text that marks one step")] = None,
    bubble_threshold: Annotated[
        float, typer.Option("--bubble-threshold", help="minimum idle gap counted as a bubble, in us")
    ] = 1.0,
    open_report: Annotated[bool, typer.Option("--open", help="open the report in the browser")] = False,
    baseline_runs: Annotated[
        int,
        typer.Option(
            "--baseline-runs", help="also run TARGET N times without nsys and compare step times", min=0, max=100
        ),
    ] = 0,
) -> None:
    """Run TARGET under nsys, keep its trace, and write summary.json and report.html.

    Options go before TARGET; everything after TARGET goes to the workload unchanged
    (use -- before TARGET when it starts with a dash other than -m).
    """
    raise typer.Exit(
        profile_command(target, output, nsys, nsys_arg, step, bubble_threshold, open_report, baseline_runs)
    )


@app.command()
def doctor(
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable")] = None,
    check_nvtx: Annotated[
        bool, typer.Option("--check-nvtx", help="profile a one-range script to see whether nsys records nvtx ranges")
    ] = False,
) -> None:
    """Check that this machine can profile: nsys, its importer, the GPU, nvtx."""
    from launchprof.doctor import run_doctor

    raise typer.Exit(run_doctor(out, nsys, check_nvtx))


@app.command()
def compare(
    before: Annotated[Path, typer.Argument(help="BEFORE: trace (.sqlite, .sqlite.xz, .nsys-rep) or report folder")],
    after: Annotated[Path, typer.Argument(help="AFTER (the graph conversion): trace or report folder")],
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="comparison folder (default: reports/compare-<before>-vs-<after>)"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing comparison folder")] = False,
    step: Annotated[Optional[str], typer.Option("--step", help="NVTX range text that marks one step")] = None,
    fail_on: Annotated[
        str,
        typer.Option("--fail-on", help="comma-separated verdicts that exit with status 1 (or 'none')"),
    ] = "not-faster,not-converted,different-work,churn",
    min_effect: Annotated[
        float, typer.Option("--min-effect", help="minimum speedup counted as faster, in percent", min=0)
    ] = 5.0,
    bubble_threshold: Annotated[
        float, typer.Option("--bubble-threshold", help="minimum idle gap counted as a bubble, in us")
    ] = 1.0,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable (for .nsys-rep)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print compare.json on stdout, nothing else")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors (and --json)")] = False,
    open_report: Annotated[bool, typer.Option("--open", help="open the comparison in the browser")] = False,
) -> None:
    """Verify a CUDA Graph conversion: write compare.json and compare.html; exit 0 only when verified.

    Exit status: 0 verified; 1 a --fail-on verdict; 2 bad input.
    """
    from launchprof.commands import run_compare
    from launchprof.compare_runs import default_name

    console = terminal(json_out, quiet)
    folder = output or default_output(default_name(before, after))
    try:
        options.output_folder("--output", str(folder))
        code = run_compare(
            before,
            after,
            folder,
            force,
            step_name(step),
            fail_on,
            min_effect / 100,
            threshold_ns(bubble_threshold),
            nsys,
            console,
        )
    except LaunchprofError as exc:
        raise fail(exc) from None
    if json_out:
        _print_document((folder / "compare.json").read_text(encoding="utf-8"))
    if open_report:
        open_page(folder / "compare.html", console)
    raise typer.Exit(code)


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
def check(
    commands: Annotated[
        list[str],
        typer.Argument(help="BEFORE [ARGS] -- AFTER [ARGS]: two workloads as profile takes them", show_default=False),
    ],
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help="folder (default: reports/check-<before>-<UTC time>)")
    ] = None,
    runs: Annotated[
        int, typer.Option("--runs", help="runs of each side without nsys, for step times", min=0, max=100)
    ] = 3,
    step: Annotated[Optional[str], typer.Option("--step", help="NVTX range text that marks one step")] = None,
    fail_on: Annotated[
        str,
        typer.Option("--fail-on", help="comma-separated verdicts that exit with status 1 (or 'none')"),
    ] = "not-faster,not-converted,different-work,churn",
    min_effect: Annotated[
        float, typer.Option("--min-effect", help="minimum speedup counted as faster, in percent", min=0)
    ] = 5.0,
    bubble_threshold: Annotated[
        float, typer.Option("--bubble-threshold", help="minimum idle gap counted as a bubble, in us")
    ] = 1.0,
    nsys: Annotated[Optional[str], typer.Option("--nsys", help="path of the nsys executable")] = None,
) -> None:
    """Profile BEFORE and AFTER under nsys, time each without nsys, compare: the conversion loop in one command.

    Options go before BEFORE; BEFORE and AFTER are separated by --. Exit status: 0
    verified; 1 a --fail-on verdict; 2 bad input or a side that cannot be compared; a
    workload's own status when it failed.
    """
    from launchprof.check import run_check

    try:
        code = run_check(
            commands,
            out,
            None if output is None else Path(options.output_folder("--output", str(output))),
            runs,
            step_name(step),
            fail_on,
            min_effect / 100,
            threshold_ns(bubble_threshold),
            nsys,
        )
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
    from launchprof.commands import run_calibrate

    try:
        run_calibrate(output, out, profiler=profiler, nsys=nsys)
    except LaunchprofError as exc:
        raise fail(exc) from None


def terminal(json_out: bool, quiet: bool) -> Console:
    """Where a command's lines go: nowhere with ``-q``; stderr with ``--json`` (stdout
    holds the document alone); else stdout."""
    if quiet:
        from rich.console import Console

        return Console(quiet=True)
    return err if json_out else out


def _print_document(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def open_page(page: Path, console: Console) -> None:
    """Open ``page`` in the default browser; say so when there is none (a machine without
    a display): the page is written either way."""
    import webbrowser

    uri = page.resolve().as_uri()
    if not webbrowser.open(uri):
        err.print(f"launchprof: no browser to open here; the page is {uri}", markup=False, soft_wrap=True)


def gate(summary: Any, failing: frozenset[str], min_speedup: float | None) -> int:
    """``analyze``'s exit status for CI: 1 when the verdict is in ``failing`` or a CUDA
    Graph is expected to bring a gain (summary ``headline``'s ``expected_speedup`` above
    1) of at least ``min_speedup``; else 0. The reason goes to stderr in one line."""
    head = summary.headline or {}
    verdict = head.get("verdict")
    if verdict in failing:
        err.print(f"launchprof: verdict {verdict} is one of --fail-on", markup=False, soft_wrap=True)
        return 1
    expected = head.get("expected_speedup")
    if min_speedup is not None and expected is not None and expected > 1 and expected >= min_speedup:
        err.print(
            f"launchprof: a CUDA Graph is expected to make a step {expected:.2f}x faster, at least --min-gain "
            f"{(min_speedup - 1) * 100:g} % ({min_speedup:.2f}x)",
            markup=False,
            soft_wrap=True,
        )
        return 1
    return 0


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


__all__ = ["app", "main"]


if __name__ == "__main__":
    main()
