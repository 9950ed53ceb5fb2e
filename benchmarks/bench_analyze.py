"""Benchmark ``launchprof analyze`` (load + analysis + summary.json + report.html) on
synthetic traces of 1M, 3M and 10M kernels: wall time and peak RSS of the child process;
``--modes whole,per-process,time-range`` also runs ``analyze --per-process`` (one process
of the trace at a time, reading only its rows) and ``analyze --time-range`` (only the rows
starting in the middle ``--window-share`` of the kernels' span, default a tenth) on each
trace.

Each run is the installed ``launchprof`` command in a fresh process (so import time
counts); peak RSS is the child's ``ru_maxrss`` from ``os.wait4``. Traces are generated
with benchmarks/synth_trace.py (seeded) into ``--workdir`` unless already there, in a
process of its own: Linux counts the RSS a child had before its ``exec`` (this process's)
in the child's ``ru_maxrss``, so a trace generated in this process (about 1.5 GiB for 10M
kernels) would be counted in every run after it.

Usage::

    python benchmarks/bench_analyze.py [--sizes 1000000,3000000,10000000] [--repeat 1]
    python benchmarks/bench_analyze.py --sizes 1000000,3000000,10000000,30000000 --processes 8 \
        --modes whole,per-process
    python benchmarks/bench_analyze.py --sizes 10000000,30000000 --processes 1 --modes time-range,whole
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_measured(cmd: list[str]) -> tuple[float, float, int, int]:
    """Run ``cmd``; return (wall seconds, CPU seconds (user + system), peak RSS bytes, exit code).

    CPU time is reported beside wall time because this machine is shared: under load the
    wall time of a single-threaded run stretches while its CPU time does not (much)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if proc.stderr is not None:
        err = proc.stderr.read().decode(errors="replace").strip()
        if err and os.waitstatus_to_exitcode(status) != 0:
            print(err, file=sys.stderr)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, proc.returncode


def launchprof_cmd() -> list[str]:
    exe = shutil.which("launchprof") or str(Path(sys.executable).with_name("launchprof"))
    return [exe]


def middle_window(trace: Path, share: float) -> str:
    """``START:END`` seconds: the middle ``share`` of the span of the trace's kernel starts."""
    con = sqlite3.connect(trace)
    lo, hi = con.execute("SELECT min(start), max(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    con.close()
    mid, half = (lo + hi) / 2, (hi - lo) * share / 2
    return f"{(mid - half) / 1e9:.9f}:{(mid + half) / 1e9:.9f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000,3000000,10000000")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/launchprof-bench"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--processes", type=int, default=4, help="processes of the synthetic trace (two per GPU)")
    ap.add_argument("--modes", default="whole", help="comma-separated: whole (analyze), per-process, time-range")
    ap.add_argument("--window-share", type=float, default=0.1, help="time-range: the share of the span analysed")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= {"whole", "per-process", "time-range"}:
        ap.error(f"--modes: whole, per-process or time-range, not {args.modes!r}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        suffix = "" if args.processes == 4 else f"_p{args.processes}"
        trace = args.workdir / f"synth_{n}{suffix}.sqlite"
        if not trace.exists():
            t = time.perf_counter()
            synth = Path(__file__).resolve().with_name("synth_trace.py")
            subprocess.run(
                [sys.executable, str(synth), str(trace), "--kernels", str(n), "--seed", str(args.seed),
                 "--processes", str(args.processes)],
                check=True,
                stdout=subprocess.DEVNULL,
            )  # fmt: skip
            print(f"generated {trace} ({trace.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s")
        for mode in modes:
            if mode == "time-range":
                extra = ["--time-range", middle_window(trace, args.window_share)]
            else:
                extra = {"per-process": ["--per-process"], "whole": []}[mode]
            walls, cpus, rss = [], [], []
            for _ in range(args.repeat):
                out = args.workdir / f"report_{n}_{mode}"
                cmd = [*launchprof_cmd(), "analyze", str(trace), "-o", str(out), "--force", *extra]
                wall, cpu, peak, rc = run_measured(cmd)
                if rc != 0:
                    sys.exit(f"launchprof failed on {trace} (exit {rc})")
                walls.append(wall)
                cpus.append(cpu)
                rss.append(peak)
                load = os.getloadavg()[0]
            wall, cpu = statistics.median(walls), statistics.median(cpus)
            rows.append((n, mode, wall, cpu, max(rss), trace.stat().st_size, load))
            gib = max(rss) / 2**30
            print(
                f"{n:>10,} kernels, {mode}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, peak RSS {gib:5.2f} GiB, "
                f"load {load:.1f}",
                flush=True,
            )
    print(
        "\n| kernels | processes | mode | trace size | wall time (median) | CPU time | peak RSS | CPU s per M kernels "
        "| load avg |"
    )
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, mode, wall, cpu, peak, size, load in rows:
        print(
            f"| {n:,} | {args.processes} | {mode} | {size / 2**20:.0f} MiB | {wall:.1f} s | {cpu:.1f} s "
            f"| {peak / 2**30:.2f} GiB | {cpu / (n / 1e6):.2f} | {load:.1f} |"
        )
    print(f"\nmachine: {os.cpu_count()} CPUs; load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
