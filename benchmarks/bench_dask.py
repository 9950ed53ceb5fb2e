"""Benchmark: many per-rank reports analysed on Dask vs one after another.

Makes ``--copies`` copies of one trace (default the bundled real H200 trace
tests/data/traces/demo_B_4096.sqlite.xz, 150,000 kernels) named rank00.sqlite, ...,
then times, in the same run:

- serial: :func:`launchprof.commands.many.analyze_many` with ``workers=0`` (one after another in
  this process, no Dask);
- dask: the same call on a fresh ``LocalCluster`` of ``--workers`` processes (default
  the CPU count), cluster start-up included; and the start-up alone.

and checks that both wrote the same bytes (combined.json and every summary.json).

    python benchmarks/bench_dask.py                 # 8 copies on this machine
    python benchmarks/bench_dask.py --copies 16     # e.g. on a 16-core machine

Prints one JSON object: machine (CPUs), trace, copies, workers, seconds per mode
(best of ``--repeat``), speedup = serial / dask, and the 1-minute load average before
and after (other programs running at the same time make both modes slower, Dask more).
"""

from __future__ import annotations

import argparse
import json
import logging
import lzma
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from launchprof.commands.many import analyze_many

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "tests" / "data" / "traces" / "demo_B_4096.sqlite.xz"


def make_copies(trace: Path, copies: int, folder: Path) -> list[str]:
    """``copies`` copies of ``trace`` (decompressed once if .xz) in ``folder``."""
    first = folder / "rank00.sqlite"
    if trace.name.endswith(".xz"):
        with lzma.open(trace) as src, first.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    else:
        shutil.copyfile(trace, first)
    paths = [first]
    for i in range(1, copies):
        target = folder / f"rank{i:02d}.sqlite"
        shutil.copyfile(first, target)
        paths.append(target)
    return [str(p) for p in paths]


def cluster_startup(workers: int) -> float:
    """Seconds to start and stop a LocalCluster of ``workers`` processes with a client."""
    from dask.distributed import Client, LocalCluster

    t0 = time.perf_counter()
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(workers)
    return time.perf_counter() - t0


def outputs(folder: Path) -> dict[str, bytes]:
    """combined.json and every rank's summary.json, by relative path."""
    files = [folder / "combined.json", *sorted(folder.glob("*/summary.json"))]
    return {str(f.relative_to(folder)): f.read_bytes() for f in files}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help="trace to copy (.sqlite or .sqlite.xz)")
    ap.add_argument("--copies", type=int, default=8, help="number of per-rank copies (default 8)")
    ap.add_argument("--workers", type=int, default=None, help="Dask worker processes (default: CPU count)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per mode; the best is reported")
    args = ap.parse_args()
    workers = args.workers or os.cpu_count() or 1
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="launchprof-bench-dask-") as tmp:
        folder = Path(tmp)
        (folder / "traces").mkdir()
        paths = make_copies(args.trace, args.copies, folder / "traces")
        times: dict[str, list[float]] = {"serial": [], "dask": []}
        results: dict[str, dict[str, bytes]] = {}
        for r in range(args.repeat):
            for mode in ("serial", "dask"):
                out = folder / f"{mode}-{r}"
                t0 = time.perf_counter()
                analyze_many(paths, out, workers=0 if mode == "serial" else workers)
                times[mode].append(time.perf_counter() - t0)
                results[mode] = outputs(out)
                shutil.rmtree(out)
        startup = cluster_startup(min(workers, args.copies))
    same = results["serial"] == results["dask"]
    serial, dask = min(times["serial"]), min(times["dask"])
    print(
        json.dumps(
            {
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    # other programs' load skews the timings: compare it with the CPU count
                    "load_avg_1min_before": round(load_before, 2),
                    "load_avg_1min_after": round(os.getloadavg()[0], 2),
                },
                "trace": args.trace.name,
                "copies": args.copies,
                "workers": min(workers, args.copies),
                "serial_s": round(serial, 2),
                "dask_s": round(dask, 2),
                "dask_cluster_startup_s": round(startup, 2),
                "speedup": round(serial / dask, 2),
                "per_trace_serial_s": round(serial / args.copies, 2),
                "identical_outputs": same,
                "runs": {k: [round(v, 2) for v in vs] for k, vs in times.items()},
            },
            indent=2,
        )
    )
    if not same:
        raise SystemExit("the Dask path wrote different bytes than the serial path")


if __name__ == "__main__":
    main()
