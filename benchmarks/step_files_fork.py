"""``launchprof analyze`` with and without the forked step-file child: wall time of the
whole command (a fresh process each run, as a user runs it), the two ways interleaved,
median of N runs each; and whether both ways wrote the same bytes.

The child (:func:`launchprof.report.stepfiles.start_step_files`) makes the step files and
the page's device figures while the parent diagnoses. "In-process" runs the same command
with ``os.fork`` removed before launchprof is imported, so that ``start_step_files``
takes its no-fork path (what the command does off Linux): the parent makes the step
files and the figures itself, nothing else changes.

Usage::

    python benchmarks/step_files_fork.py TRACE.sqlite[.xz] ... [--runs N]

Traces ending in ``.xz`` are unpacked into a temporary folder first (not timed). The last
column, the child's work, is what the fork can save at most (with a second CPU free): the
step files' texts and the device figures made in this process, fastest of N.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The command, run as `python -c`: MODE is "fork" or "in-process".
_RUNNER = """
import os, runpy, sys
if sys.argv.pop(1) == "in-process":
    del os.fork
sys.argv[0] = "launchprof"
runpy.run_module("launchprof", run_name="__main__")
"""
MODES = ("fork", "in-process")


def _unpacked(trace: Path, work: Path) -> Path:
    if trace.suffix != ".xz":
        return trace
    out = work / trace.name.removesuffix(".xz")
    with lzma.open(trace) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return out


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != "plotly.min.js"
    }


def _run(mode: str, trace: Path, out: Path, env: dict[str, str]) -> float:
    argv = [sys.executable, "-c", _RUNNER, mode, "analyze", str(trace), "-o", str(out), "--force", "-q"]
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, cwd=out.parent)
    return time.perf_counter() - t0


def _childs_work(trace: Path, runs: int) -> float:
    """Fastest of ``runs`` in-process times of what the child makes (step file texts and
    the report page's device figures), s."""
    import launchprof
    from launchprof.report.figures import embedded_device_figures
    from launchprof.report.stepfiles import step_file_texts

    analysis = launchprof.analyze(trace)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        step_file_texts(analysis)
        embedded_device_figures(analysis)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lp-fork-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAUNCHPROF_")}
    env["XDG_CACHE_HOME"] = str(work / "cache")  # no calibration file: no NVML query
    print(f"{args.runs} interleaved runs per way, median (min..max) wall s; load average {os.getloadavg()[0]:.1f}")
    print(f"{'trace':32s} {'fork':>20s} {'in-process':>20s} {'fork gain':>10s}  same bytes  child's work")
    try:
        for trace in args.traces:
            sqlite = _unpacked(trace, work)
            outs = {mode: work / mode / "out" for mode in MODES}  # one name: it appears in the outputs
            for out in outs.values():
                out.parent.mkdir(exist_ok=True)
            times: dict[str, list[float]] = {mode: [] for mode in MODES}
            _run("fork", sqlite, outs["fork"], env)  # warm the page cache and jinja2's template cache
            for i in range(args.runs):
                for mode in MODES if i % 2 == 0 else MODES[::-1]:
                    times[mode].append(_run(mode, sqlite, outs[mode], env))
            same = _digests(outs["fork"]) == _digests(outs["in-process"])
            cells = [f"{statistics.median(t):.3f} ({min(t):.2f}..{max(t):.2f})" for t in times.values()]
            gain = statistics.median(times["in-process"]) - statistics.median(times["fork"])
            child_s = _childs_work(sqlite, args.runs)
            row = f"{trace.name:32s} {cells[0]:>20s} {cells[1]:>20s} {gain:>+9.3f}s  {same!s:10s}  {child_s:.3f}s"
            print(row, flush=True)
            if sqlite != trace:
                sqlite.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
