"""Time the stages of ``launchprof.analyze`` on a bundled trace (default demo_A_4096:
150,000 kernels, 300,000 API calls, 50,000 inferred steps).

    python3 benchmarks/diagnose_speed.py [tests/data/traces/NAME.sqlite.xz] [repeats]
"""

from __future__ import annotations

import lzma
import shutil
import sys
import tempfile
import time
from pathlib import Path

from launchprof.analysis import analyze_trace
from launchprof.analysis.diagnosis.diagnose import diagnose
from launchprof.analysis.steps import find_steps
from launchprof.trace import load_trace

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests/data/traces/demo_A_4096.sqlite.xz"
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.sqlite"
        with lzma.open(src) as f, path.open("wb") as g:
            shutil.copyfileobj(f, g)
        best: dict[str, float] = {}
        for _ in range(repeats):
            t0 = time.perf_counter()
            trace = load_trace(path)
            t1 = time.perf_counter()
            analysis = analyze_trace(trace)
            t2 = time.perf_counter()
            steps = find_steps(analysis)
            t3 = time.perf_counter()
            diagnose(analysis, steps)
            t4 = time.perf_counter()
            for k, v in (("load", t1 - t0), ("timeline", t2 - t1), ("steps", t3 - t2), ("diagnose", t4 - t3)):
                best[k] = min(best.get(k, v), v)
    print(f"{src.name}: {len(trace.kernels)} kernels, {len(trace.api)} API calls, {steps.count} steps")
    for k, v in best.items():
        print(f"  {k:9s} {v:6.2f} s (best of {repeats})")


if __name__ == "__main__":
    main()
