"""Where ``launchprof analyze`` spends its time, stage by stage, in one process.

Mirrors :func:`launchprof.api.analyze` and :func:`launchprof.commands.run_analyze` with a
wall clock (``perf_counter``) and a CPU clock (``process_time``, all threads) around each
stage, and the process's resident memory (``/proc/self/statm``, Linux: the peak during
each stage, sampled every 5 ms by a thread, and the RSS when it ends; the command line's
malloc settings, ``launchprof.malloc``, are not applied here). Imports are timed first (a
fresh interpreter; run it as its own process); the big tables are read ahead in
background threads from there on, as the ``analyze`` command does, so "load" is what is
left of the reading. The step files are written in this process.

Usage::

    python benchmarks/analyze_stages.py TRACE.sqlite [--output DIR]
"""

from __future__ import annotations

import time

T0 = (time.perf_counter(), time.process_time())

import argparse  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

rows: list[tuple[str, float, float, float, float]] = []
_last = list(T0)
_peak = [0.0]
_lock = threading.Lock()  # the sampler's read-max-write against mark's reset


def _rss() -> float:
    """Resident set size now (bytes); 0 where /proc is absent."""
    try:
        with open("/proc/self/statm") as fh:
            return float(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0.0


def _sample() -> None:
    while True:
        now = _rss()
        with _lock:
            _peak[0] = max(_peak[0], now)
        time.sleep(0.005)


def mark(stage: str) -> None:
    now = (time.perf_counter(), time.process_time())
    end = _rss()
    with _lock:
        rows.append((stage, now[0] - _last[0], now[1] - _last[1], max(_peak[0], end), end))
        _peak[0] = end
    _last[:] = now


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--output", default=None)
    args = ap.parse_args()
    threading.Thread(target=_sample, daemon=True).start()
    import launchprof.cli.typer_app  # noqa: F401  (what the launchprof script imports first)

    mark("import launchprof.cli.typer_app")
    try:  # as the analyze command does: the big tables are read while pandas is imported
        from launchprof.trace.readahead import prefetch

        prefetch(args.trace)
    except ImportError:  # launchprof before read-ahead existed
        pass
    mark("start reading ahead")
    from launchprof import api
    from launchprof.commands.analyze import run_analyze  # noqa: F401

    mark("import analyze path (commands, api)")
    from launchprof.analysis import analyze_trace
    from launchprof.analysis.diagnosis.diagnose import diagnose
    from launchprof.analysis.finish import finish
    from launchprof.analysis.ranks import rank_view
    from launchprof.analysis.result import AnalysisResult
    from launchprof.analysis.steps import find_steps
    from launchprof.report.index import write_index
    from launchprof.report.write import write_report
    from launchprof.trace import load_trace

    mark("import the rest")
    trace = load_trace(Path(args.trace))
    mark("load")
    analysis = analyze_trace(trace, 1000)
    mark("timeline analysis")
    ranks = rank_view(analysis, step_name=None)
    mark("ranks")
    steps = find_steps(analysis, step_name=None)
    mark("steps")
    diagnosis, recommendation = diagnose(analysis, steps)
    mark("diagnose")
    result = finish(AnalysisResult.of(analysis, steps, None, ranks, diagnosis, recommendation))
    mark("finish (what the outputs show)")
    out = Path(args.output or tempfile.mkdtemp(prefix="lp-stages-")) / "report"
    write_report(result, out, force=True, trace_path=args.trace)
    mark("write report (summary, html, step files)")
    write_index(out.resolve().parent)
    mark("index")
    del api
    wall = sum(r[1] for r in rows)
    cpu = sum(r[2] for r in rows)
    gib = float(1 << 30)
    print(f"{Path(args.trace).name}: stage, wall s, CPU s, peak RSS during it GiB, RSS at its end GiB")
    for stage, w, c, peak, end in rows:
        print(f"  {stage:42s} {w:6.3f} {c:6.3f} {peak / gib:6.2f} {end / gib:6.2f}")
    print(f"  {'total (interpreter start excluded)':42s} {wall:6.3f} {cpu:6.3f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
