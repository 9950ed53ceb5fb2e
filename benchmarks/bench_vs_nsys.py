"""``launchprof analyze`` vs ``nsys analyze`` on demo_A_4096 (150k kernels, 300k API rows)
and on synthetic traces of millions of kernels (``--kernels N``).

The issue names ``nsys analyze -r gpu_gaps,gpu_time_util``; those rules are used when this
nsys lists them (``nsys analyze --help-rules``: 2023 and later). nsys 2022.4 (Debian) has
neither; its closest rules are ``gpu-starv`` (GPU idle gaps) and ``gpu-low-util`` (time
regions of low GPU utilization), used there. ``--trace`` takes another copy of the demo
trace (e.g. the untrimmed export, with every table nsys's rules may read). Both tools read
the same decompressed .sqlite file, each run is a fresh process; wall time is the median of
``--repeat`` runs, peak RSS the largest ``ru_maxrss`` (of the process tree: nsys starts a
Python for its rules). Prints a table and, per trace, launchprof's wall time, CPU time and
peak RSS as a share of nsys's (issue "Scale": <= 0.25x the time and <= 1.7 GiB on 10M
kernels, <= 0.5x the time on the demo trace).

Usage::

    python benchmarks/bench_vs_nsys.py [--repeat 7] [--nsys /usr/bin/nsys] [--rules R1,R2] [--trace X.sqlite.xz]
    python benchmarks/bench_vs_nsys.py --repeat 2 --kernels 10000000   # + a 10M-kernel trace (~4 min a round)
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACE_XZ = ROOT / "tests" / "data" / "traces" / "demo_A_4096.sqlite.xz"
NAMED_RULES = "gpu_gaps,gpu_time_util"
OLD_RULES = "gpu-starv,gpu-low-util"


def default_rules(nsys: str) -> str:
    """The issue's rules when this nsys has them, else nsys 2022.4's closest ones."""
    done = subprocess.run([nsys, "analyze", "--help-rules"], capture_output=True, text=True, errors="replace")
    listed = done.stdout + done.stderr
    return NAMED_RULES if all(r in listed for r in NAMED_RULES.split(",")) else OLD_RULES


def measure(cmd: list[str], cwd: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS bytes of the process tree) of one run."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0 or b"ERROR" in out:
        sys.exit(f"{cmd[0]} failed:\n{out.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def _traces(args: argparse.Namespace, work: Path) -> list[tuple[str, Path]]:
    """(label, decompressed .sqlite) of each trace compared: the demo trace, then one
    synthetic trace per ``--kernels`` (benchmarks/synth_trace.py, seeded)."""
    demo = work / "demo_A_4096.sqlite"
    opener = lzma.open if args.trace.suffix == ".xz" else open
    with opener(args.trace, "rb") as src, demo.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    traces = [(f"demo_A_4096 ({args.trace.name})", demo)]
    for n in args.kernels:
        out = work / f"synthetic_{n}.sqlite"
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "synth_trace.py"), str(out), "--kernels", str(n)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        traces.append((f"synthetic, {n:,} kernels ({out.stat().st_size / 2**20:.0f} MiB)", out))
    return traces


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--nsys", default=shutil.which("nsys") or "/usr/bin/nsys")
    ap.add_argument("--rules", default=None, help="nsys analyze rules (default: see the module docstring)")
    ap.add_argument("--trace", type=Path, default=TRACE_XZ, help="demo_A_4096 .sqlite or .sqlite.xz")
    ap.add_argument(
        "--kernels",
        type=int,
        action="append",
        default=[],
        help="also a synthetic trace of this many kernels (repeatable; e.g. 10000000)",
    )
    args = ap.parse_args()
    rules = args.rules or default_rules(args.nsys)
    launchprof = shutil.which("launchprof") or str(Path(sys.executable).with_name("launchprof"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="lp-vs-nsys-") as tmp:
        work = Path(tmp)
        for label, trace in _traces(args, work):
            cmds = {
                "launchprof analyze": [launchprof, "analyze", str(trace), "-o", str(work / "report"), "--force", "-q"],
                f"nsys analyze -r {rules}": [args.nsys, "analyze", "-r", rules, str(trace)],
            }
            for cmd in cmds.values():  # warm the page cache and any first-run setup
                measure(cmd, work)
            results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in cmds}
            for _ in range(args.repeat):  # interleaved, so load changes hit both alike
                for name, cmd in cmds.items():
                    results[name].append(measure(cmd, work))
            rows.append((label, results))
            trace.unlink()
    print(f"{args.repeat} runs each, interleaved; {args.nsys}; {os.cpu_count()} CPUs\n")
    print("| trace | tool | wall time median (min..max) | CPU time median | peak RSS |")
    print("| --- | --- | ---: | ---: | ---: |")
    ratios = []
    for label, results in rows:
        wall, cpu, peak = {}, {}, {}
        for name, runs in results.items():
            walls = [w for w, _, _ in runs]
            wall[name] = statistics.median(walls)
            cpu[name] = statistics.median(c for _, c, _ in runs)
            peak[name] = max(r for _, _, r in runs)
            print(
                f"| {label} | `{name}` | {wall[name]:.2f} s ({min(walls):.2f}..{max(walls):.2f}) "
                f"| {cpu[name]:.2f} s | {peak[name] / 2**30:.2f} GiB |"
            )
        (lp_w, ns_w), (lp_c, ns_c), (lp_r, ns_r) = wall.values(), cpu.values(), peak.values()
        ratios.append(f"{label}: wall {lp_w / ns_w:.2f}x, CPU {lp_c / ns_c:.2f}x, peak RSS {lp_r / ns_r:.2f}x")
    print("\nlaunchprof / nsys:")
    for line in ratios:
        print(f"- {line}")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
