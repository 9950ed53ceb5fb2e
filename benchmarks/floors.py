"""What no change to launchprof's analysis can go below, for issue 30's time goals.

Two floors, each timed in fresh processes (``--repeat`` times, medians):

* ``imports``: ``python -c "import numpy, pandas, pyarrow"`` - the libraries the loader and
  the analysis are built on (a user's first run is a fresh process), and, for scale,
  ``python -c "import launchprof.commands.analyze, launchprof.api"`` (what ``analyze``
  imports before it reads: Typer, rich, plotly, jinja2, pydantic and launchprof's own).
* ``read``: the numeric columns the loader reads from the big tables
  (:data:`launchprof.trace.tables.NUMERIC_TABLES`, the columns a table has), fetched
  through the ADBC SQLite driver as Arrow tables and nothing else: one table after another
  in one thread (``serial``), and the tables split into as many rowid ranges as there are
  CPUs, one thread each (``parallel``: the most that reading them in parts, as
  :mod:`launchprof.trace.readahead` does, could give). No numpy conversion, no analysis.

Usage::

    python benchmarks/floors.py TRACE.sqlite [TRACE.sqlite ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import sys, threading, time
import adbc_driver_sqlite.dbapi as adbc
path, mode, cpus = sys.argv[1], sys.argv[2], int(sys.argv[3])
queries = [q for q in sys.argv[4:]]
def read(sql):
    con = adbc.connect(path)
    try:
        cur = con.cursor(); cur.execute(sql); cur.fetch_arrow_table(); cur.close()
    finally:
        con.close()
t = time.perf_counter()
if mode == "serial":
    for q in queries:
        read(q)
else:
    threads = [threading.Thread(target=read, args=(q,)) for q in queries]
    [th.start() for th in threads]; [th.join() for th in threads]
print(time.perf_counter() - t)
"""


def _queries(path: Path, parts: int) -> list[str]:
    """SELECTs of the columns launchprof reads, one per table, or per rowid range of it."""
    from launchprof.trace.tables import NUMERIC_TABLES

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        out = []
        for table, columns, _ in NUMERIC_TABLES:
            if table not in tables:
                continue
            have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
            cols = ", ".join(f'"{c}"' for c in columns if c in have)
            lo, hi = con.execute(
                f'SELECT (SELECT min(rowid) FROM "{table}"), (SELECT max(rowid) FROM "{table}")'
            ).fetchone()
            if lo is None:
                continue
            n = max(1, parts)
            bounds = [lo + (hi - lo + 1) * i // n for i in range(n + 1)]
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                out.append(f'SELECT {cols} FROM "{table}" WHERE rowid >= {a} AND rowid < {b}')
        return out
    finally:
        con.close()


def _seconds(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    py = sys.executable
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    rows = {
        "python -c pass": [py, "-c", "pass"],
        "import numpy, pandas, pyarrow": [py, "-c", "import numpy, pandas, pyarrow"],
        "import launchprof.commands.analyze, launchprof.api": [
            py,
            "-c",
            "import launchprof.commands.analyze, launchprof.api",
        ],
    }
    print(f"{cpus} CPUs; medians of {args.repeat} fresh processes")
    for name, argv in rows.items():
        print(f"  {name:<52} {statistics.median(_seconds(argv) for _ in range(args.repeat)):6.3f} s")
    for trace in args.traces:
        path = Path(trace)
        for mode, parts in (("serial", 1), ("parallel", cpus)):
            qs = _queries(path, parts)
            argv = [py, "-c", CHILD, str(path), mode, str(cpus), *qs]
            times = [
                float(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
                for _ in range(args.repeat)
            ]
            label = f"read {path.name} ({mode}, {len(qs)} queries)"
            print(f"  {label:<52} {statistics.median(times):6.3f} s")


if __name__ == "__main__":
    main()
