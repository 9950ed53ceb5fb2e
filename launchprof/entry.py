"""The ``launchprof`` script's entry point.

``launchprof profile`` is timed against the bare ``nsys profile``
(benchmarks/README.md), and everything before nsys starts counts in full; importing
Typer and building the command line from the Typer app costs more than the interpreter's
own start (benchmarks/README.md, "Measurements behind constants in the code"). So
:func:`main` reads a ``profile`` command line that holds only what Typer would read the
same way (:func:`parse_profile`) without Typer, and starts nsys at once; any other
command line (help, an unknown option, a value Typer would refuse, another command) goes
to the Typer app (:mod:`launchprof.cli`) as before. Both run the same
:func:`profile_command`. ``tests/test_entry.py`` checks :func:`parse_profile` against
Typer's own parse of the same words.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launchprof.timings import dump, mark

# Options of `launchprof profile` (launchprof.cli.profile) that take a value: name -> parameter.
VALUE_OPTIONS = {
    "--output": "output",
    "-o": "output",
    "--nsys": "nsys",
    "--nsys-arg": "nsys_arg",
    "--step": "step",
    "--bubble-threshold": "bubble_threshold",
    "--baseline-runs": "baseline_runs",
}
FLAG_OPTIONS = {"--open": "open_report"}
# launchprof options that, written after TARGET, go to the workload: worth a warning
# (a workload's own `-o` is common, so only the long names are).
AFTER_TARGET_WARNED = frozenset(
    [name for name in (*VALUE_OPTIONS, *FLAG_OPTIONS) if name.startswith("--")] + ["--json", "--quiet", "--force"]
)
MAX_BASELINE_RUNS = 100  # launchprof.cli.profile's --baseline-runs max
COMMANDS = ("analyze", "profile", "doctor", "compare", "check", "calibrate")  # launchprof.cli's


def profile_defaults() -> dict[str, Any]:
    """The parameters of ``launchprof profile`` when no option is given."""
    return {
        "target": [],
        "output": None,
        "nsys": None,
        "nsys_arg": None,
        "step": None,
        "bubble_threshold": 1.0,
        "open_report": False,
        "baseline_runs": 0,
    }


def _convert(param: str, value: str) -> Any:
    """The value as Typer gives it; raises ValueError where Typer would refuse or convert
    otherwise."""
    if param == "bubble_threshold":
        return float(value)
    if param == "baseline_runs":
        runs = int(value)
        if not 0 <= runs <= MAX_BASELINE_RUNS:
            raise ValueError(value)
        return runs
    return value


def parse_profile(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of ``launchprof profile ARGS`` (:func:`profile_defaults`' keys), as
    the Typer command ``launchprof.cli.profile`` would parse them, or None when ARGS hold
    anything this reader leaves to Typer: ``-h``/``--help``, an option it does not know
    (``-m`` before a module name excepted: TARGET), ``--opt=`` on a flag, a value Typer
    would check or convert (a number out of range or malformed), an option
    without its value, or no TARGET. Options come before TARGET; from TARGET (or after
    ``--``) every word goes to the workload unchanged, as Typer does with this command's
    settings (no interspersed options, unknown options kept)."""
    params = profile_defaults()
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            params["target"] = list(args[i + 1 :])
            break
        if word == "-m":  # `-m module`: Typer keeps the unknown option, then the module ends the options
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            params["target"] = list(args[i:])
            break
        if len(word) < 2 or not word.startswith("-"):
            params["target"] = list(args[i:])
            break
        name, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        if name in FLAG_OPTIONS and not eq:
            params[FLAG_OPTIONS[name]] = True
            i += 1
            continue
        if name not in VALUE_OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        param = VALUE_OPTIONS[name]
        try:
            converted = _convert(param, value)
        except ValueError:
            return None
        if param == "nsys_arg":
            params["nsys_arg"] = [*(params["nsys_arg"] or []), converted]
        else:
            params[param] = converted
        i += 1
    if not params["target"]:
        return None
    return params


def _as_ctrl_c(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def profile_command(
    target: Sequence[str],
    output: str | None,
    nsys: str | None,
    nsys_arg: Sequence[str] | None,
    step: str | None,
    bubble_threshold: float,
    open_report: bool,
    baseline_runs: int,
) -> int:
    """``launchprof profile`` once its command line is read: run it
    (:func:`launchprof.profiling.run_profile`) and return the exit status: the
    workload's (said in one line when not 0), or the error's after its one line."""
    from launchprof.console import err, out, print_error
    from launchprof.errors import LaunchprofError
    from launchprof.options import bubble_threshold_ns, non_empty, options_after_target, output_folder, step_text
    from launchprof.profiling import run_profile

    mark("parsed")
    late = options_after_target(list(target[1:]), AFTER_TARGET_WARNED)
    if late:
        err.print(
            f"launchprof: warning: {', '.join(late)} after the target go{'es' if len(late) == 1 else ''} to the "
            "workload, not to launchprof; put launchprof's options before the target",
            markup=False,
            soft_wrap=True,
        )
    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C: forwarded to nsys while it
    # runs (launchprof.nsys.profile.run_nsys), later a baseline run is stopped and what was
    # recorded is kept, as after Ctrl-C (they ended launchprof silently, leaving children).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _as_ctrl_c)
    try:
        result = run_profile(
            target,
            out,
            None if output is None else Path(output_folder("--output", non_empty("--output", output, "a folder"))),
            None if nsys is None else non_empty("--nsys", nsys, "the path of the nsys executable"),
            nsys_arg or (),
            bubble_threshold_ns(bubble_threshold),
            step_text(step),
            open_report,
            baseline_runs=baseline_runs,
        )
    except LaunchprofError as exc:
        return print_error(exc)
    except KeyboardInterrupt:  # before nsys started (after, run_profile keeps the trace and says so)
        err.print("launchprof: interrupted before nsys started; nothing was recorded", markup=False, soft_wrap=True)
        return 130
    QUICK_EXIT.append(True)  # trace, report and baseline runs are done: nothing left to tear down
    if result.exit_code != 0:
        err.print(
            f"launchprof: the workload exited with code {result.exit_code}; "
            f"its trace is kept in {result.folder}" + ("" if result.analysed else " (not analysed)"),
            markup=False,
            soft_wrap=True,
        )
    return result.exit_code


BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, the status a shell gives a command killed by a closed pipe

# Set by a command whose process holds nothing left to clean up when it ends (analyze of
# one trace, profile): main() then leaves without tearing down its objects one by one.
QUICK_EXIT: list[bool] = []


def main() -> None:
    """Entry point of the ``launchprof`` script (module docstring).

    After ``analyze`` of one trace or ``profile`` (files written and closed, children
    reaped), the process flushes its output and ends with ``os._exit``: freeing a large
    analysis object by object at interpreter exit is measurable (benchmarks/README.md).
    When the terminal output itself cannot be written (stdout on a full disk), one line
    on stderr says so and the exit status is 1. A closed stdout (``| head -1``) is not an
    error: the rest of the output is dropped and the command ends with the status it would
    have had (:func:`launchprof.console.quiet_on_broken_pipe`); where the output did not go
    through rich, quietly with :data:`BROKEN_PIPE_EXIT`.
    """
    mark("main")
    try:
        params = parse_profile(sys.argv[2:]) if sys.argv[1:2] == ["profile"] else None
        if params is not None:
            raise SystemExit(profile_command(**params))
        raise SystemExit(_typer_app())
    except SystemExit as exc:
        if QUICK_EXIT and (exc.code is None or isinstance(exc.code, int)):
            dump()
            _flush()
            os._exit(exc.code or 0)
        raise
    except KeyboardInterrupt:  # while the modules were imported (later, each command says what was kept)
        with contextlib.suppress(Exception):
            sys.stderr.write("launchprof: interrupted\n")
            sys.stderr.flush()
        raise SystemExit(130) from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a path given (or made from one) longer than the file system takes
            with contextlib.suppress(Exception):
                sys.stderr.write(f"launchprof: error: file name too long: {exc.filename}\n")
                sys.stderr.flush()
            os._exit(2)
        if exc.errno == errno.EPIPE:  # stdout's reader has gone (not through rich): as a shell would say it
            os._exit(BROKEN_PIPE_EXIT)
        if exc.errno not in (errno.ENOSPC, errno.EBADF, errno.EIO):
            raise
        with contextlib.suppress(Exception):
            sys.stderr.write(f"launchprof: error: cannot write the output: {exc.strerror}\n")
            sys.stderr.flush()
        os._exit(1)


def _typer_app() -> int:
    """Run the Typer app on ``sys.argv`` and return the exit status. A usage error (an
    unknown option or command, a missing argument, a value of the wrong type) is one line
    on stderr, exit status 2, instead of Typer's usage box; no arguments at all print the
    help, as Typer does."""
    try:
        from typer._click import exceptions as click_errors  # Typer 0.28 carries its own click
    except ImportError:  # pragma: no cover - Typer < 0.28
        from click import exceptions as click_errors  # type: ignore[no-redef]

    from typer import Abort

    from launchprof.cli import app
    from launchprof.console import quiet_on_broken_pipe

    quiet_on_broken_pipe()  # Typer's help goes through a rich Console of its own
    try:
        code = app(prog_name="launchprof", standalone_mode=False)
    except click_errors.NoArgsIsHelpError:
        return _standalone(app)
    except click_errors.ClickException as exc:
        where = exc.ctx.command_path if isinstance(exc, click_errors.UsageError) and exc.ctx else "launchprof"
        if where == "launchprof" and sys.argv[1:2] and sys.argv[1] in COMMANDS:
            where = f"launchprof {sys.argv[1]}"  # an option's error found before its command's context was made
        message = " ".join(exc.format_message().split())
        sys.stderr.write(f"launchprof: error: {message} (see {where} --help)\n")
        return exc.exit_code
    except Abort:  # EOF on a prompt (launchprof asks none)
        sys.stderr.write("launchprof: aborted\n")
        return 1
    return code if isinstance(code, int) else 0


def _standalone(app: Any) -> int:
    try:
        app(prog_name="launchprof")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


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
