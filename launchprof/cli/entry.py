"""The ``launchprof`` script's entry point.

``launchprof profile`` is timed against the bare ``nsys profile``
(benchmarks/README.md), and everything before nsys starts counts in full; importing
Typer and building the command line from the Typer app costs more than the interpreter's
own start (benchmarks/README.md, "Measurements behind constants in the code"). So
:func:`main` reads a ``profile`` command line that holds only what Typer would read the
same way (:func:`parse_profile`) without Typer, and starts nsys at once; any other
command line (help, an unknown option, a value Typer would refuse, another command) goes
to the Typer app (:mod:`launchprof.cli.typer_app`). Both read the one option table
(:data:`launchprof.cli.optiontables.PROFILE`) and run the same
:func:`launchprof.cli.profile.profile_command`. A command returns its
:class:`~launchprof.commands.outcome.Outcome`: the exit status, and whether the process
may leave at once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launchprof.commands.outcome import Outcome

BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, the status a shell gives a command killed by a closed pipe


def main() -> None:
    """Entry point of the ``launchprof`` script (module docstring).

    After a command whose outcome says so (``analyze`` of one trace, ``profile``: files
    written and closed, children reaped), the process flushes its output and ends with ``os._exit``: freeing a large
    analysis object by object at interpreter exit is measurable (benchmarks/README.md).
    When the terminal output itself cannot be written (stdout on a full disk), one line
    on stderr says so and the exit status is 1. A closed stdout (``| head -1``) is not an
    error: the rest of the output is dropped and the command ends with the status it would
    have had (:func:`launchprof.cli.consoles.quiet_on_broken_pipe`); where the output did not go
    through rich, quietly with :data:`BROKEN_PIPE_EXIT`.
    """
    try:  # the imports too: a Ctrl-C while they run is one line, not a traceback
        from launchprof.cli.options import parse_profile
        from launchprof.timings import dump, mark

        mark("main")
        params = parse_profile(sys.argv[2:]) if sys.argv[1:2] == ["profile"] else None
        if params is not None:
            from launchprof.cli.profile import profile_command

            outcome = profile_command(**params)
        else:
            outcome = _typer_app()
        if outcome.quick_exit:
            dump()
            _flush()
            os._exit(outcome.code)
        raise SystemExit(outcome.code)
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


def _typer_app() -> Outcome:
    """Run the Typer app on ``sys.argv`` and return the command's outcome. A usage error (an
    unknown option or command, a missing argument, a value of the wrong type) is one line
    on stderr, exit status 2, instead of Typer's usage box; no arguments at all print the
    help, as Typer does."""
    try:
        from typer._click import exceptions as click_errors  # Typer 0.28 carries its own click
    except ImportError:  # pragma: no cover - Typer < 0.28
        from click import exceptions as click_errors  # type: ignore[no-redef]

    from typer import Abort

    from launchprof.cli.consoles import quiet_on_broken_pipe
    from launchprof.cli.optiontables import COMMANDS
    from launchprof.cli.typer_app import KEEP_OUTCOME, app
    from launchprof.commands.outcome import Outcome

    quiet_on_broken_pipe()  # Typer's help goes through a rich Console of its own
    try:
        code = app(prog_name="launchprof", standalone_mode=False, obj=KEEP_OUTCOME)
    except click_errors.NoArgsIsHelpError:
        return Outcome(_standalone(app))
    except click_errors.ClickException as exc:
        where = exc.ctx.command_path if isinstance(exc, click_errors.UsageError) and exc.ctx else "launchprof"
        if where == "launchprof" and sys.argv[1:2] and sys.argv[1] in COMMANDS:
            where = f"launchprof {sys.argv[1]}"  # an option's error found before its command's context was made
        message = " ".join(exc.format_message().split())
        sys.stderr.write(f"launchprof: error: {message} (see {where} --help)\n")
        return Outcome(exc.exit_code)
    except Abort:  # EOF on a prompt (launchprof asks none)
        sys.stderr.write("launchprof: aborted\n")
        return Outcome(1)
    if isinstance(code, Outcome):  # a command's own outcome (typer.Exit gives an int)
        return code
    return Outcome(code if isinstance(code, int) else 0)


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
