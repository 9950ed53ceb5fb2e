"""``launchprof profile`` on the command line: its options checked (the fast path of
:mod:`launchprof.cli.entry` and the Typer app both come here), Ctrl-C, SIGTERM and SIGHUP,
and the one line that says how the run ended (:func:`profile_command`)."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from pathlib import Path

from launchprof.cli.options import (
    AFTER_TARGET_WARNED,
    analyze_fail_on,
    bubble_threshold_ns,
    meant_command,
    non_empty,
    options_after_target,
    output_folder,
    step_text,
)
from launchprof.commands.outcome import Outcome
from launchprof.malloc import MallocTuning
from launchprof.timings import mark


def _as_ctrl_c(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _print_document(text: str) -> None:
    from launchprof.commands.common import print_document  # imports rich: not before nsys starts

    print_document(text)


# params: a command-line command: one parameter per option, which Typer reads from the signature
# (made from cli/optiontables.PROFILE)
def profile_command(
    target: Sequence[str],
    output: str | None,
    nsys: str | None,
    nsys_arg: Sequence[str] | None,
    step: str | None,
    bubble_threshold: float,
    open_report: bool,
    baseline_runs: int,
    no_baseline: bool = False,
    json_out: bool = False,
    quiet: bool = False,
    fail_on: str | None = None,
) -> Outcome:
    """``launchprof profile`` once its command line is read: run it
    (:func:`launchprof.commands.profile.run_profile`) and return its outcome: the
    workload's exit status (said in one line when not 0), else 1 when the verdict is one
    of ``fail_on`` (:func:`launchprof.commands.analyze.gate`), else 0; or the error's
    after its one line; once the run is done, the process may leave at once (nothing left
    to tear down). ``json_out``: summary.json alone on stdout, launchprof's lines and the
    workload's own output on stderr; ``quiet``: no launchprof line but errors."""
    import shlex
    import sys

    from launchprof.cli.consoles import err, print_error, terminal
    from launchprof.commands.common import AnalysisOptions, ProfileOptions
    from launchprof.commands.profile import run_profile
    from launchprof.errors import LaunchprofError

    mark("parsed")
    late = options_after_target(list(target[1:]), AFTER_TARGET_WARNED)
    if late:
        meant = " ".join(shlex.quote(w) for w in meant_command(target, frozenset(late)))
        err.print(
            f"launchprof: warning: {', '.join(late)} after the target go{'es' if len(late) == 1 else ''} to the "
            f"workload, not to launchprof; put launchprof's options before the target: {meant}",
            markup=False,
            soft_wrap=True,
        )
    console = terminal(json_out, quiet)
    # SIGTERM and SIGHUP (a closed terminal) unwind like Ctrl-C: forwarded to nsys while it
    # runs (launchprof.nsys.profile.run_nsys), later a baseline run is stopped and what was
    # recorded is kept, as after Ctrl-C (they ended launchprof silently, leaving children).
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's ignored SIGHUP stays ignored
            signal.signal(sig, _as_ctrl_c)
    try:
        failing = analyze_fail_on(fail_on)
        folder = None if output is None else Path(output_folder("--output", non_empty("--output", output, "a folder")))
        how = AnalysisOptions(
            bubble_threshold_ns(bubble_threshold),
            step_text(step),
            None if nsys is None else non_empty("--nsys", nsys, "the path of the nsys executable"),
            MallocTuning(),  # this process is the command line's: tune malloc for the analysis
        )
        runs = ProfileOptions(
            tuple(nsys_arg or ()), 0 if no_baseline else baseline_runs, open_report, sys.stderr if json_out else None
        )
        result = run_profile(target, console, folder, how, runs, document=_print_document if json_out else None)
    except LaunchprofError as exc:
        return Outcome(print_error(exc))
    except KeyboardInterrupt:  # before nsys started (after, run_profile keeps the trace and says so)
        err.print("launchprof: interrupted before nsys started; nothing was recorded", markup=False, soft_wrap=True)
        return Outcome(130)
    # trace, report and baseline runs are done: nothing left to tear down
    if result.exit_code != 0:
        err.print(
            f"launchprof: the workload exited with code {result.exit_code}; "
            f"its trace is kept in {result.folder}" + ("" if result.analysed else " (not analysed)"),
            markup=False,
            soft_wrap=True,
        )
    elif result.interrupted:  # a Ctrl-C while nsys wrote the trace of a workload that had finished
        err.print(
            f"launchprof: interrupted after the workload finished (exit code 0); its trace is analysed in "
            f"{result.folder}",
            markup=False,
            soft_wrap=True,
        )
        return Outcome(130, quick_exit=True)
    elif failing and result.summary is not None:
        from launchprof.commands.analyze import gate

        return Outcome(gate(result.summary, failing, None, err), quick_exit=True)
    return Outcome(result.exit_code, quick_exit=True)
