"""What a whole trace needs in memory: the peak RSS of ``launchprof analyze TRACE`` (each
run a fresh process, ``ru_maxrss`` from ``os.wait4``) beside the rows of its big tables and
the estimate :mod:`launchprof.trace.footprint` refuses a trace by, and the fit of its
constants.

For each trace: the rows of the big tables (their rowid spans), the measured peak, the
peak above the base (the peak of a process that only imports what ``analyze`` imports),
that per row, and the estimate with its margin below the measured peak (the estimate is
meant as a low end: a negative margin would refuse a trace that fits).

``.sqlite.xz`` traces are decompressed into a temporary folder first.

Usage::

    python benchmarks/memory_need.py TRACE.sqlite[.xz] ... [--repeat N]
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from launchprof.trace.footprint import BASE_BYTES, BYTES_PER_ROW, needed_bytes, table_rows

MIB = float(1 << 20)


def peak_rss(cmd: list[str]) -> int:
    """Peak RSS of ``cmd`` run in a fresh process, bytes (raises on a non-zero exit)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise SystemExit(f"{' '.join(cmd)} failed: {err.strip()}")
    return int(usage.ru_maxrss) * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each trace (the median peak is shown)")
    args = ap.parse_args()
    exe = shutil.which("launchprof") or str(Path(sys.executable).with_name("launchprof"))
    base = statistics.median(
        peak_rss([sys.executable, "-c", "import launchprof.commands.analyze, launchprof.api"]) for _ in range(3)
    )
    print(
        f"base (imports of analyze, median of 3): {base / MIB:.0f} MiB; constants: BASE_BYTES "
        f"{BASE_BYTES / MIB:.0f} MiB, BYTES_PER_ROW {BYTES_PER_ROW}"
    )
    print("| trace | rows | peak RSS | peak - base, per row | estimate | margin |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory(prefix="lp-need-") as tmp:
        for name in args.traces:
            path = Path(name)
            if path.suffix == ".xz":
                plain = Path(tmp) / path.stem
                with lzma.open(path) as src, open(plain, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                path = plain
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = sum(table_rows(con).values())
            estimate = needed_bytes(table_rows(con))
            con.close()
            out = Path(tmp) / "out"
            cmd = [exe, "analyze", str(path), "-q", "--force", "-o", str(out), "--no-memory-check"]
            peak = statistics.median(peak_rss(cmd) for _ in range(args.repeat))
            per_row = (peak - base) / rows if rows else float("nan")
            print(
                f"| {Path(name).name} | {rows:,} | {peak / MIB:,.0f} MiB | {per_row:.0f} B | "
                f"{estimate / MIB:,.0f} MiB | {(peak - estimate) / peak:+.0%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
