"""Wall time of ``launchprof profile`` vs the bare ``nsys profile`` command with the same
flags on the same CPU-only workload (examples/cpu/steps_loop.py).

Three ways, interleaved, ``--repeats`` times each; medians reported:

* ``nsys``: ``nsys profile <launchprof's flags> -o X python steps_loop.py ...`` alone. Where
  nsys cannot find its importer (Debian's 2022.4) it leaves only a ``.qdstrm``: less work
  than the other two, which end with a ``.nsys-rep`` and a ``.sqlite``.
* ``nsys+import+export``: the same, then ``QdstrmImporter`` and ``nsys export --type sqlite``
  when nsys left only a ``.qdstrm`` (what a user must do by hand to get the same files).
* ``launchprof``: ``launchprof profile -o X steps_loop.py ...`` (trace + summary + report).

Usage: .venv/bin/python benchmarks/profile_overhead.py [--repeats 5] [--steps 400] [--work 20000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from launchprof.nsys.locate import find_importer, nsys_info
from launchprof.nsys.profile import nsys_command, workload

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cpu" / "steps_loop.py"


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--work", type=int, default=20_000)
    args = parser.parse_args()
    info = nsys_info()
    launchprof = str(Path(sys.executable).parent / "launchprof")
    target = [str(EXAMPLE), "--steps", str(args.steps), "--work", str(args.work)]
    work = workload(target)
    times: dict[str, list[float]] = {"nsys": [], "nsys+import+export": [], "launchprof": [], "workload alone": []}
    with tempfile.TemporaryDirectory(prefix="launchprof-bench-") as tmp:
        base = Path(tmp)
        for i in range(args.repeats):
            times["workload alone"].append(timed(work.argv))
            stem = base / f"bare{i}" / "trace"
            stem.parent.mkdir()
            times["nsys"].append(timed(nsys_command(info.path, stem, work).argv))
            stem = base / f"manual{i}" / "trace"
            stem.parent.mkdir()
            t0 = time.perf_counter()
            timed(nsys_command(info.path, stem, work).argv)
            if not stem.with_suffix(".nsys-rep").exists():
                importer = find_importer(info.path)
                assert importer is not None
                timed([str(importer), "-i", str(stem.with_suffix(".qdstrm"))])
            if not stem.with_suffix(".sqlite").exists():
                timed(
                    [
                        str(info.path),
                        "export",
                        "--type",
                        "sqlite",
                        "-o",
                        str(stem.with_suffix(".sqlite")),
                        str(stem.with_suffix(".nsys-rep")),
                    ]
                )
            times["nsys+import+export"].append(time.perf_counter() - t0)
            times["launchprof"].append(timed([launchprof, "profile", "-o", str(base / f"lp{i}"), *target]))
            for entry in base.iterdir():  # run folders, and the index launchprof keeps beside them
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"nsys {info.version} ({info.path}); workload: steps_loop.py --steps {args.steps} --work {args.work}; "
        f"{args.repeats} repeats, medians"
    )
    for name, values in times.items():
        print(f"  {name:<20} {med[name]:7.3f} s   (min {min(values):.3f}, max {max(values):.3f})")
    best = {k: min(v) for k, v in times.items()}
    for ref in ("nsys", "nsys+import+export"):
        print(
            f"  launchprof vs {ref:<20} {med['launchprof'] / med[ref] - 1:+.1%} (medians), "
            f"{best['launchprof'] / best[ref] - 1:+.1%} (best of each)"
        )


if __name__ == "__main__":
    main()
