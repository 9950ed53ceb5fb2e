"""Check that an ``nsys export --type arrowdir`` folder loads and analyses exactly as the
SQLite export of the same report (what ``launchprof profile``'s early analysis relies on,
:mod:`launchprof.early`).

Usage: python scripts/arrowdir_check.py TRACE.sqlite ARROWDIR

Compares every frame of the two loaded traces (values, dtypes, order), their notes and
schema tables, then the summary.json and step files of the two analyses. Prints one line
per difference and exits 1 when there is any.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from launchprof.api import analyze_loaded
from launchprof.report.outputs import render_outputs
from launchprof.report.summary import build_summary
from launchprof.trace import load_trace
from launchprof.trace.arrowdir import load_arrowdir

FRAMES = ("kernels", "memops", "graph_execs", "api", "nvtx", "gpus", "processes", "cuda_streams", "strings")


def main() -> int:
    sqlite, folder = Path(sys.argv[1]), Path(sys.argv[2])
    t0 = time.perf_counter()
    a = load_trace(sqlite)
    t1 = time.perf_counter()
    b = load_arrowdir(folder, path=sqlite)
    t2 = time.perf_counter()
    print(f"{sqlite.name}: load sqlite {t1 - t0:.3f} s, arrowdir {t2 - t1:.3f} s; {len(a.kernels):,} kernels")
    bad = 0
    for name in FRAMES:
        x, y = getattr(a, name), getattr(b, name)
        try:
            if isinstance(x, pd.Series):
                pd.testing.assert_series_equal(x, y)
            else:
                pd.testing.assert_frame_equal(x, y)
        except AssertionError as exc:
            bad += 1
            print(f"  {name} differ: {str(exc).splitlines()[:6]}")
    for attr in ("nvtx_domain_events", "notes"):
        if getattr(a, attr) != getattr(b, attr):
            bad += 1
            print(f"  {attr} differ: {getattr(a, attr)!r} vs {getattr(b, attr)!r}")
    if set(a.schema.tables) != set(b.schema.tables):
        print(f"  tables only in sqlite: {sorted(set(a.schema.tables) - set(b.schema.tables))}")
        print(f"  tables only in arrowdir: {sorted(set(b.schema.tables) - set(a.schema.tables))}")
    for t in sorted(set(a.schema.tables) & set(b.schema.tables)):
        if a.schema.tables[t] != b.schema.tables[t]:
            print(f"  columns of {t} differ: {a.schema.tables[t]} vs {b.schema.tables[t]}")
    if (a.schema.nsys_version, a.schema.schema_version) != (b.schema.nsys_version, b.schema.schema_version):
        bad += 1
        print(f"  export metadata differ: {a.schema} vs {b.schema}")
    ja, jb = analyze_loaded(a), analyze_loaded(b)
    sa, sb = build_summary(ja, str(sqlite)).to_json(), build_summary(jb, str(sqlite)).to_json()
    if sa != sb:
        bad += 1
        print("  summary.json differs")
    if render_outputs(ja) != render_outputs(jb):
        bad += 1
        print("  step files differ")
    print("  identical" if not bad else f"  {bad} difference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
