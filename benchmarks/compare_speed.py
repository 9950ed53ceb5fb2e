"""Time ``launchprof compare`` stages on the bundled real traces (no GPU needed).

Usage: python benchmarks/compare_speed.py [BEFORE AFTER]   (default: the demo pair,
150,000 kernels a side). Prints seconds per stage and the peak resident memory.
"""

from __future__ import annotations

import lzma
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import launchprof
from launchprof.analysis.comparison.side import side_from_analysis
from launchprof.analysis.comparison.verify import speedup_interval, verify
from launchprof.api.compare_runs import align
from launchprof.report.compare import write_compare

TRACES = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"


def plain(path: Path, folder: Path) -> Path:
    if path.suffix != ".xz":
        return path
    target = folder / path.stem
    with lzma.open(path) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def main() -> None:
    args = sys.argv[1:] or [str(TRACES / "demo_A_4096.sqlite.xz"), str(TRACES / "demo_B_4096.sqlite.xz")]
    with tempfile.TemporaryDirectory() as tmp:
        before, after = (plain(Path(a), Path(tmp)) for a in args)
        t = time.perf_counter()
        stages = []
        ab = launchprof.analyze(before)
        stages.append(("analyze BEFORE", time.perf_counter() - t))
        t = time.perf_counter()
        aa = launchprof.analyze(after)
        stages.append(("analyze AFTER", time.perf_counter() - t))
        t = time.perf_counter()
        sb = side_from_analysis(ab, ab.found_steps)
        sa = side_from_analysis(aa, aa.found_steps)
        stages.append(("step data of both sides", time.perf_counter() - t))
        t = time.perf_counter()
        sb, sa = align(sb, sa, ab, aa)
        stages.append(("re-cut steps (when needed)", time.perf_counter() - t))
        t = time.perf_counter()
        c = verify(sb, sa)
        stages.append(("checks (incl. bootstrap)", time.perf_counter() - t))
        t = time.perf_counter()
        assert sb.steady is not None and sa.steady is not None
        speedup_interval(sb.steady["period_ns"].to_numpy(), sa.steady["period_ns"].to_numpy())
        stages.append(("  of which the bootstrap", time.perf_counter() - t))
        t = time.perf_counter()
        write_compare(c, Path(tmp) / "out")
        stages.append(("write compare.json/.html", time.perf_counter() - t))
    for name, sec in stages:
        print(f"{name:32s} {sec:7.2f} s")
    print(f"verdict {c.verdict}, speedup {c.speedup:.3f}, steps {c.before_figures.steps} / {c.after_figures.steps}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
