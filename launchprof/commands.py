"""The work behind each CLI command, kept out of cli.py so the commands stay short."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from launchprof.api import analyze
from launchprof.report.write import write_report


def run_analyze(
    trace: Path, output: Path, force: bool, bubble_threshold_ns: int, nsys: str | None, console: Console
) -> None:
    """Analyse ``trace`` and write its report into ``output``; print where it went."""
    with console.status("loading trace") as status:
        analysis = analyze(trace, bubble_threshold_ns, nsys=nsys, progress=lambda msg: status.update(f"{msg}..."))
        status.update("writing report")
        summary = write_report(analysis, output, force=force, trace_path=str(trace))
    for d in summary.devices:
        console.print(
            f"GPU {d.device_id}: {d.kernels} kernels, utilization {d.utilization:.1%}, "
            f"{d.bubbles.count} bubbles, CPU-bound ratio {d.cpu_bound_ratio:.1%}",
            markup=False,
        )
    if not summary.devices:
        console.print("no GPU activity in this trace", markup=False)
    for note in summary.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    console.print(f"report: {output / 'report.html'}", markup=False)
