"""The ``launchprof`` command line. Each command is a few lines over the library."""

from __future__ import annotations

import contextlib
import errno
import gc
import math
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, cast

import typer

if TYPE_CHECKING:
    from rich.console import Console

from launchprof import __version__
from launchprof.errors import LaunchprofError, OptionError
from launchprof.timings import dump, mark

app = typer.Typer(
    name="launchprof",
    help="Is your GPU program launch-bound? Would a CUDA Graph help? Did it?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _LazyConsole:
    """A rich Console made on first use: importing rich took 20-40 ms, which ``profile``
    would otherwise spend before it starts nsys."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


err = cast("Console", _LazyConsole(stderr=True, highlight=False))
out = cast("Console", _LazyConsole(highlight=False, soft_wrap=True))


def fail(exc: LaunchprofError) -> typer.Exit:
    """Print ``launchprof: error: ...`` on one line and return the Exit to raise."""
    err.print(f"launchprof: error: {exc}", markup=False, soft_wrap=True)
    return typer.Exit(exc.exit_code)


MAX_BUBBLE_THRESHOLD_US = 1e9  # 1000 s: longer than any gap a threshold could sort


def threshold_ns(us: float) -> int:
    """``--bubble-threshold`` in ns.

    Raises:
        typer.Exit: (after one error line) a value that is not a finite number of us in
            [0, :data:`MAX_BUBBLE_THRESHOLD_US`].
    """
    if not (math.isfinite(us) and 0 <= us <= MAX_BUBBLE_THRESHOLD_US):
        raise fail(
            OptionError(f"--bubble-threshold must be a number of us from 0 to {MAX_BUBBLE_THRESHOLD_US:g}, not {us:g}")
        )
    return int(round(us * 1000))


def step_name(step: str | None) -> str | None:
    """``--step`` as given; None when not given.

    Raises:
        typer.Exit: (after one error line) an empty or blank name.
    """
    if step is not None and not step.strip():
        raise fail(OptionError("--step needs the text of an NVTX range (for example --step step)"))
    return step


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
        typer.Option("--workers", min=0, help="many traces: local Dask workers (default: one per CPU; 0: no Dask)"),
    ] = None,
) -> None:
    """Analyse an existing trace: write summary.json and report.html.

    Several traces (or a quoted glob such as 'traces/*.sqlite'), one per rank: analyse
    them in parallel on Dask, write one report folder per trace and combined.json and
    combined.html (default folder: reports/combined).
    """
    if len(trace) == 1 and trace[0].endswith(".sqlite"):
        from launchprof.trace.columns import prefetch

        prefetch(trace[0])  # read its big tables in background threads while pandas is imported
    from launchprof.commands import run_analyze, run_analyze_many
    from launchprof.multi import expand_traces

    # The modules just imported stay for the whole run: keep the garbage collector from
    # walking their objects again at every full collection (~40 ms on a large trace).
    gc.freeze()

    try:
        many = expand_traces(trace)
        if many is not None:
            run_analyze_many(
                many,
                output or default_output("combined"),
                force,
                threshold_ns(bubble_threshold),
                nsys,
                out,
                step=step_name(step),
                scheduler=scheduler,
                workers=workers,
            )
            return
        _QUICK_EXIT.append(True)
        # SIGTERM unwinds like Ctrl-C (the child's staged step files are removed), exit 143
        signal.signal(signal.SIGTERM, _terminated)
        run_analyze(
            Path(trace[0]),
            output or default_output(Path(trace[0]).name.split(".")[0]),
            force,
            threshold_ns(bubble_threshold),
            nsys,
            out,
            step=step_name(step),
            require_gpu=True,
        )
    except LaunchprofError as exc:
        raise fail(exc) from None


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
        Optional[Path], typer.Option("--output", "-o", help="folder (default: reports/<target>-<UTC time>)")
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
    from launchprof.profiling import run_profile

    mark("parsed")
    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C: forwarded to nsys while it
    # runs (launchprof.nsys.profile.run_nsys), later a baseline run is stopped and what was
    # recorded is kept, as after Ctrl-C (they ended launchprof silently, leaving children).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _as_ctrl_c)
    try:
        result = run_profile(
            target,
            out,
            output,
            nsys,
            nsys_arg or (),
            threshold_ns(bubble_threshold),
            step_name(step),
            open_report,
            baseline_runs=baseline_runs,
        )
    except LaunchprofError as exc:
        raise fail(exc) from None
    _QUICK_EXIT.append(True)  # trace, report and baseline runs are done: nothing left to tear down
    if result.exit_code != 0:
        err.print(
            f"launchprof: the workload exited with code {result.exit_code}; "
            f"its trace is kept in {result.folder}" + ("" if result.analysed else " (not analysed)"),
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(result.exit_code)


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
) -> None:
    """Verify a CUDA Graph conversion: write compare.json and compare.html; exit 0 only when verified."""
    from launchprof.commands import run_compare
    from launchprof.compare_runs import default_name

    try:
        code = run_compare(
            before,
            after,
            output or default_output(default_name(before, after)),
            force,
            step_name(step),
            fail_on,
            min_effect / 100,
            threshold_ns(bubble_threshold),
            nsys,
            out,
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


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _as_ctrl_c(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


# Set by a command whose process holds nothing left to clean up when it ends (analyze of
# one trace, profile): main() then leaves without tearing down its objects one by one.
_QUICK_EXIT: list[bool] = []


def main() -> None:
    """Entry point of the ``launchprof`` script.

    After ``analyze`` of one trace or ``profile`` (files written and closed, children
    reaped), the process flushes its output and ends with ``os._exit``: freeing a large
    analysis object by object at interpreter exit took ~0.1 s for a 150k-kernel trace.
    When the terminal output itself cannot be written (stdout on a full disk, a closed
    pipe), one line on stderr says so and the exit status is 1.
    """
    mark("main")
    try:
        app(prog_name="launchprof")
    except SystemExit as exc:
        if _QUICK_EXIT and (exc.code is None or isinstance(exc.code, int)):
            dump()
            _flush()
            os._exit(exc.code or 0)
        raise
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a path given (or made from one) longer than the file system takes
            with contextlib.suppress(Exception):
                sys.stderr.write(f"launchprof: error: file name too long: {exc.filename}\n")
                sys.stderr.flush()
            os._exit(2)
        if exc.errno not in (errno.ENOSPC, errno.EPIPE, errno.EBADF, errno.EIO):
            raise
        with contextlib.suppress(Exception):
            sys.stderr.write(f"launchprof: error: cannot write the output: {exc.strerror}\n")
            sys.stderr.flush()
        os._exit(1)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # closed at start (``>&-``)
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``| head``), a full disk: nothing more to say
            pass


if __name__ == "__main__":
    main()
