"""``launchprof compare BEFORE AFTER``: compare two runs, write the comparison folder,
print the verdict and the checks."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from launchprof.commands.analyze import update_index
from launchprof.commands.common import CompareOptions

# Checks that are evidence: a miss there does not change the verdict (analysis/comparison/checks.py).
EVIDENCE = ("bubbles", "predicted", "paid_back")


def run_compare(before: Path, after: Path, output: Path, force: bool, options: CompareOptions, console: Console) -> int:
    """Compare ``before`` and ``after``, write the comparison into ``output``, print the
    verdict and the checks; return the exit code (1 when the verdict is in
    ``options.failing``, the verdicts ``--fail-on`` named:
    :func:`launchprof.cli.options.compare_fail_on`)."""
    from launchprof.api.compare_runs import compare
    from launchprof.report.compare import speedup_phrase, write_compare

    how = options.how
    with console.status("loading") as status:
        result = compare(
            before,
            after,
            step=how.step,
            min_effect=options.min_effect,
            bubble_threshold_ns=how.bubble_threshold_ns,
            nsys=how.nsys,
            progress=lambda msg: status.update(f"{msg}..."),
            memory=how.memory,
        )
        status.update("writing comparison")
        doc = write_compare(result, output, force=force, before_path=str(before), after_path=str(after))
        update_index(output)

    phrase = speedup_phrase(doc)
    speed = f": {phrase}" if phrase else ""
    console.print(f"verdict: {doc.verdict}{speed}", markup=False)
    for c in doc.checks:
        mark = "n/a " if c.passed is None else ("pass" if c.passed else ("off " if c.name in EVIDENCE else "FAIL"))
        console.print(f"  {mark} {c.name}: {c.detail}", markup=False, soft_wrap=True)
    for note in doc.notes:
        console.print(f"  note: {note}", markup=False, soft_wrap=True)
    console.print(f"comparison: {output / 'compare.html'}", markup=False)
    return 1 if doc.verdict in options.failing else 0
