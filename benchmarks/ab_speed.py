"""Wall time of two checkouts of launchprof on the same commands, run alternately.

Usage::

    python benchmarks/ab_speed.py --a OLD_ROOT --b NEW_ROOT [--repeat 7] -- SUBCOMMAND ARGS...

Each round runs ``python -m launchprof SUBCOMMAND ARGS`` once with ``PYTHONPATH=OLD_ROOT``
and once with ``PYTHONPATH=NEW_ROOT`` (the order alternates between rounds), in a fresh
process each time, so import time counts. An argument ``{out}`` is replaced by a fresh
temporary folder per run. Prints the median, min and max wall time of each side and the
paired median ratio B / A. Both checkouts use this Python's installed packages.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(root: str, args: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "launchprof", *[a.replace("{out}", os.path.join(tmp, "out")) for a in args]]
        began = time.perf_counter()
        done = subprocess.run(argv, env={**os.environ, "PYTHONPATH": root}, capture_output=True, cwd=tmp, check=False)
        wall = time.perf_counter() - began
    if done.returncode not in (0, 1):
        raise SystemExit(f"{root}: exit {done.returncode}: {done.stderr.decode()[-400:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True)
    parser.add_argument("--b", required=True)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    args = opts.command[1:] if opts.command[:1] == ["--"] else opts.command
    times: dict[str, list[float]] = {"a": [], "b": []}
    for i in range(opts.repeat):
        order = ("a", "b") if i % 2 == 0 else ("b", "a")
        for side in order:
            times[side].append(run(getattr(opts, side), args))
    for side in ("a", "b"):
        t = times[side]
        print(f"{side}: median {statistics.median(t):.3f} s (min {min(t):.3f}, max {max(t):.3f}) over {len(t)}")
    ratios = [b / a for a, b in zip(times["a"], times["b"], strict=True)]
    print(f"b / a: paired median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
