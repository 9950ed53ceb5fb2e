"""Load, timeline analysis and the parent's share of the report, each repeated in one
process: the fastest of N runs (wall and CPU seconds).

``analyze_stages.py`` times one run of every stage, first calls and all; this script
times the same code warmed up, so that small changes show above the noise of a shared
machine. As in ``analyze``: before each load the big tables are read ahead in background
threads (given 0.6 s, the time the imports take), so "load" is what is left of it; the
timeline analysis runs on a fresh copy of the trace each time (nothing cached); the
report is summary.json and report.html, with the device figures made beforehand and no
step files (written for the forked step-file child, which made those; ``analyze`` makes
them itself since that child was removed: see benchmarks/README.md).

Usage::

    python benchmarks/stage_repeats.py TRACE.sqlite [--runs N]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _best(runs: int, run: Callable[[], Any]) -> tuple[Any, float, float]:
    wall = cpu = float("inf")
    result = None
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        result = run()
        wall, cpu = min(wall, time.perf_counter() - w0), min(cpu, time.process_time() - c0)
    return result, wall, cpu


def _write(result: Any, out: Path, trace: str, figures: Any) -> None:
    """The report without the step files: the summary, the page with the figures already
    made, the folder's swap."""
    from launchprof.report.write import commit_report, open_report_folder, render_files

    summary, page = render_files(result, trace, figures)
    with open_report_folder(out, force=True) as writer:
        commit_report(writer, summary, page)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from launchprof.analysis import analyze_trace
    from launchprof.analysis.diagnosis.diagnose import diagnose
    from launchprof.analysis.finish import finish
    from launchprof.analysis.result import AnalysisResult
    from launchprof.analysis.steps import find_steps
    from launchprof.report.figures import embedded_device_figures
    from launchprof.trace import load_trace
    from launchprof.trace.readahead import prefetch

    loads = []
    for _ in range(args.runs):
        prefetch(args.trace)
        time.sleep(0.6)
        loads.append(_best(1, lambda: load_trace(Path(args.trace))))
    trace = loads[0][0]
    load_wall, load_cpu = min(r[1] for r in loads), min(r[2] for r in loads)
    analysis, tl_wall, tl_cpu = _best(args.runs, lambda: analyze_trace(dataclasses.replace(trace), 1000))
    steps = find_steps(analysis, step_name=None)
    diagnosis, recommendation = diagnose(analysis, steps)
    result = finish(AnalysisResult.of(analysis, steps, diagnosis=diagnosis, recommendation=recommendation))
    figures = embedded_device_figures(result)
    out = Path(tempfile.mkdtemp(prefix="lp-repeats-")) / "report"
    _, rep_wall, rep_cpu = _best(
        args.runs,
        lambda: _write(result, out, args.trace, figures),
    )
    print(f"{Path(args.trace).name}: fastest of {args.runs}, wall s / CPU s")
    for stage, w, c in (
        ("load (after read-ahead)", load_wall, load_cpu),
        ("timeline analysis", tl_wall, tl_cpu),
        ("report, parent's share", rep_wall, rep_cpu),
        ("together", load_wall + tl_wall + rep_wall, load_cpu + tl_cpu + rep_cpu),
    ):
        print(f"  {stage:26s} {w:6.3f} {c:6.3f}")


if __name__ == "__main__":
    main()
