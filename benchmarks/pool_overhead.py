"""Pool the runs of several ``profile_overhead.py --json`` files (same workload, any
machines) into one estimate of launchprof's overhead over the bare ``nsys profile``.

Each round of ``profile_overhead.py`` times the bare command and launchprof back to back,
so each round gives one paired ratio ``launchprof / nsys - 1``; this prints, per workload
and launchprof variant, the number of rounds, the median and the mean of those ratios,
each with a 95 % bootstrap interval (10,000 resamples of the rounds, seed 1), and the
medians of the two wall times.

Usage::

    python benchmarks/pool_overhead.py [--reference nsys+import+export] FILE.json [FILE.json ...]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import defaultdict
from pathlib import Path


def interval(values: list[float], stat: object, resamples: int = 10_000, seed: int = 1) -> tuple[float, float]:
    """2.5 and 97.5 percentiles of ``stat`` over bootstrap resamples of ``values``."""
    rng = random.Random(seed)
    got = sorted(stat(rng.choices(values, k=len(values))) for _ in range(resamples))  # type: ignore[operator]
    return got[int(0.025 * resamples)], got[int(0.975 * resamples) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument(
        "--reference",
        default="nsys",
        help="the bare command to compare with: nsys (default) or nsys+import+export (where nsys left a .qdstrm)",
    )
    args = parser.parse_args()
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    walls: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for path in args.files:
        result = json.loads(path.read_text())
        workload = " ".join(Path(result["workload"][0]).name.split() + result["workload"][1:])
        bare = result["times_s"][args.reference]
        for name, times in result["times_s"].items():
            if not name.startswith("launchprof") or not times:
                continue
            key = (workload, name)
            ratios[key] += [lp / b - 1 for b, lp in zip(bare, times, strict=True)]
            walls[key][0].extend(bare)
            walls[key][1].extend(times)
    for (workload, name), r in sorted(ratios.items()):
        lo_med, hi_med = interval(r, statistics.median)
        lo_mean, hi_mean = interval(r, statistics.mean)
        bare, lp = walls[(workload, name)]
        print(
            f"{workload:<40} {name:<22} rounds {len(r):>3}  "
            f"median {statistics.median(r):+.1%} [{lo_med:+.1%}, {hi_med:+.1%}]  "
            f"mean {statistics.mean(r):+.1%} [{lo_mean:+.1%}, {hi_mean:+.1%}]  "
            f"bare {statistics.median(bare):.3f} s, launchprof {statistics.median(lp):.3f} s"
        )


if __name__ == "__main__":
    main()
