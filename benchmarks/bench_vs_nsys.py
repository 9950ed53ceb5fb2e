"""``launchprof analyze`` vs ``nsys analyze`` on demo_A_4096 (150k kernels, 300k API rows).

The issue names ``nsys analyze -r gpu_gaps,gpu_time_util``; those rules are used when this
nsys lists them (``nsys analyze --help-rules``: 2023 and later). nsys 2022.4 (Debian) has
neither; its closest rules are ``gpu-starv`` (GPU idle gaps) and ``gpu-low-util`` (time
regions of low GPU utilization), used there. ``--trace`` takes another copy of the demo
trace (e.g. the untrimmed export, with every table nsys's rules may read). Both tools read
the same decompressed .sqlite file, each run is a fresh process; wall time is the median of
``--repeat`` runs, peak RSS the largest ``ru_maxrss`` (of the process tree: nsys starts a
Python for its rules).

Usage::

    python benchmarks/bench_vs_nsys.py [--repeat 7] [--nsys /usr/bin/nsys] [--rules R1,R2] [--trace X.sqlite.xz]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--nsys", default=shutil.which("nsys") or "/usr/bin/nsys")
    ap.add_argument("--rules", default=None, help="nsys analyze rules (default: see the module docstring)")
    ap.add_argument("--trace", type=Path, default=TRACE_XZ, help="demo_A_4096 .sqlite or .sqlite.xz")
    args = ap.parse_args()
    rules = args.rules or default_rules(args.nsys)
    launchprof = shutil.which("launchprof") or str(Path(sys.executable).with_name("launchprof"))
    with tempfile.TemporaryDirectory(prefix="lp-vs-nsys-") as tmp:
        work = Path(tmp)
        trace = work / "demo_A_4096.sqlite"
        opener = lzma.open if args.trace.suffix == ".xz" else open
        with opener(args.trace, "rb") as src, trace.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        cmds = {
            "launchprof analyze": [launchprof, "analyze", str(trace), "-o", str(work / "report"), "--force"],
            f"nsys analyze -r {rules}": [args.nsys, "analyze", "-r", rules, str(trace)],
        }
        for cmd in cmds.values():  # warm the page cache and any first-run setup
            measure(cmd, work)
        results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in cmds}
        for _ in range(args.repeat):  # interleaved, so load changes hit both alike
            for name, cmd in cmds.items():
                results[name].append(measure(cmd, work))
    print(f"demo_A_4096 ({args.trace.name}), {args.repeat} runs each, interleaved; {args.nsys}\n")
    print("| tool | wall time median (min..max) | CPU time median | peak RSS |")
    print("| --- | ---: | ---: | ---: |")
    medians, cpu_medians = {}, {}
    for name, runs in results.items():
        walls = [w for w, _, _ in runs]
        medians[name] = statistics.median(walls)
        cpu_medians[name] = statistics.median(c for _, c, _ in runs)
        peak = max(r for _, _, r in runs)
        print(
            f"| `{name}` | {medians[name]:.2f} s ({min(walls):.2f}..{max(walls):.2f}) "
            f"| {cpu_medians[name]:.2f} s | {peak / 2**20:.0f} MiB |"
        )
    lp, ns = medians.values()
    lp_cpu, ns_cpu = cpu_medians.values()
    print(
        f"\nlaunchprof / nsys: wall {lp / ns:.2f}x, CPU {lp_cpu / ns_cpu:.2f}x; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
