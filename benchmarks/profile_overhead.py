"""Wall time of ``launchprof profile`` vs the bare ``nsys profile`` command with the same
flags on the same workload (issue 3: at most +5 %).

Interleaved, ``--repeats`` times each; medians reported:

* ``workload alone``: the workload without nsys (for scale).
* ``nsys``: ``nsys profile <launchprof's flags> --output X WORKLOAD`` (the flags of
  :func:`launchprof.nsys.profile.nsys_command`, ``--export=sqlite`` included). Where nsys
  cannot find its importer (Debian's 2022.4) it leaves only a ``.qdstrm``: less work than
  launchprof, which ends with a ``.nsys-rep``, a ``.sqlite`` and the report.
* ``nsys+import+export``: only where nsys left a ``.qdstrm``: the same, then
  ``QdstrmImporter`` and ``nsys export --type sqlite`` (the same files by hand).
* ``launchprof``: ``launchprof profile -o X WORKLOAD``, with ``LAUNCHPROF_TIMINGS`` set
  (:mod:`launchprof.timings`) to split its time into before nsys (interpreter, imports,
  argument parsing), nsys, and after nsys (import/export if needed, analysis, report).

Usage::

    python benchmarks/profile_overhead.py [--repeats 5] [--launchprof "python3 -m launchprof"]
        [--json FILE] [--profile-args ARGS] [--variant-args NAME:ARGS] [-- WORKLOAD ARGS...]

``launchprof profile`` runs the workload once more without nsys by default (its baseline
run, the measured step); bare nsys does not: ``--profile-args=--no-baseline`` times the
same work as the bare command, ``--variant-args "default:"`` the default beside it.

The default workload is ``examples/cpu/steps_loop.py --steps 400 --work 20000`` (no GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from launchprof.nsys.locate import find_importer, nsys_info
from launchprof.nsys.profile import nsys_command, workload

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [str(ROOT / "examples" / "cpu" / "steps_loop.py"), "--steps", "400", "--work", "20000"]


RETRIES: list[str] = []  # commands run again after nsys failed to reach its agent


def timed(
    cmd: list[str],
    env: dict[str, str] | None = None,
    watch: Path | None = None,
    again: Path | None = None,
    remake: bool = False,
) -> tuple[float, float, float]:
    """(wall seconds, time.time() at the start, seconds until ``watch`` appeared or nan) of
    ``cmd``; exits on failure. ``watch`` is polled every 2 ms in a thread of this process
    (the same cost for every command timed): nsys creates ``STEM.sqlite`` once
    ``STEM.nsys-rep`` is complete, so it splits nsys's time into recording and export.

    A run in which nsys failed to start its agent (nsys exit 1, no trace: "End of file"
    from nsys 2025.3 now and then, "Connection reset by peer" from 2022.4) is run once
    more, with ``again`` (the run's folder) removed first (made again, empty, with
    ``remake``), and counted in ``RETRIES``."""
    try:
        return _timed(cmd, env, watch)
    except SystemExit:
        if again is None:
            raise
        RETRIES.append(" ".join(cmd))
        shutil.rmtree(again, ignore_errors=True)
        if remake:
            again.mkdir()
        return _timed(cmd, env, watch)


def _timed(cmd: list[str], env: dict[str, str] | None, watch: Path | None) -> tuple[float, float, float]:
    seen: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        while watch is not None and not stop.wait(0.002):
            if watch.exists():
                seen.append(time.perf_counter())
                return

    poller = threading.Thread(target=poll, daemon=True)
    began = time.time()
    t0 = time.perf_counter()
    poller.start()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    stop.set()
    poller.join()
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, began, (seen[0] - t0) if seen else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--launchprof", default=str(Path(sys.executable).parent / "launchprof"))
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--skip-alone", action="store_true", help="do not time the workload without nsys")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:VAR=VALUE[,VAR=VALUE]",
        help="also time launchprof with these environment variables set (repeatable)",
    )
    parser.add_argument(
        "--profile-args",
        default="",
        metavar="ARGS",
        help="arguments after 'launchprof profile' for every launchprof run, e.g. '--no-baseline' "
        "(bare nsys makes no run without the profiler)",
    )
    parser.add_argument(
        "--variant-args",
        action="append",
        default=[],
        metavar="NAME:ARGS",
        help="also time 'launchprof profile ARGS' instead of --profile-args (repeatable; '' for none)",
    )
    parser.add_argument("workload", nargs="*", help="the workload and its arguments (after --)")
    args = parser.parse_args()
    info = nsys_info()
    target = args.workload or DEFAULT
    work = workload(target)
    launchprof = shlex.split(args.launchprof)
    common = shlex.split(args.profile_args)
    variants: dict[str, dict[str, str]] = {"launchprof": {}}
    flags: dict[str, list[str]] = {"launchprof": common}  # each launchprof run's arguments after 'profile'
    for spec in args.variant:
        name, _, assignments = spec.partition(":")
        variants[f"launchprof {name}"] = dict(a.split("=", 1) for a in assignments.split(",") if a)
        flags[f"launchprof {name}"] = common
    for spec in args.variant_args:
        name, _, extra = spec.partition(":")
        variants[f"launchprof {name}"] = {}
        flags[f"launchprof {name}"] = shlex.split(extra)
    times: dict[str, list[float]] = {"workload alone": [], "nsys": [], "nsys+import+export": []}
    times.update({name: [] for name in variants})
    recorded: dict[str, list[float]] = {name: [] for name in ["nsys", *variants]}  # until STEM.sqlite appeared
    phases: dict[str, list[float]] = {"before nsys": [], "nsys": [], "after nsys": []}
    raw: list[dict[str, float]] = []  # every mark of each launchprof run, seconds after nsys ended
    manual = True
    with tempfile.TemporaryDirectory(prefix="launchprof-bench-") as tmp:
        base = Path(tmp)
        marks = base / "timings.jsonl"
        for i in range(args.repeats):
            if not args.skip_alone:
                times["workload alone"].append(timed(work.argv)[0])
            order = ["nsys", *variants]
            if i % 2:
                order.reverse()  # bare first, then last: neither side always runs second
            for name in order:
                if name == "nsys":
                    stem = base / f"bare{i}" / "trace"
                    stem.parent.mkdir()
                    argv = nsys_command(info.path, stem, work).argv
                    wall, _, rec = timed(argv, watch=stem.with_suffix(".sqlite"), again=stem.parent, remake=True)
                    times["nsys"].append(wall)
                    recorded["nsys"].append(rec)
                    if stem.with_suffix(".nsys-rep").exists() and stem.with_suffix(".sqlite").exists():
                        manual = False
                    continue
                marks.unlink(missing_ok=True)
                env = {**os.environ, **variants[name], "LAUNCHPROF_TIMINGS": str(marks)}
                out = base / f"lp{i}-{len(times[name])}-{name.replace(' ', '_')}"
                wall, began, rec = timed(
                    [*launchprof, "profile", *flags[name], "-o", str(out), *target],
                    env=env,
                    watch=out / "trace.sqlite",
                    again=out,
                )
                times[name].append(wall)
                recorded[name].append(rec)
                if name == "launchprof":
                    m = json.loads(marks.read_text().splitlines()[-1])
                    phases["before nsys"].append(m["nsys_start"] - began)
                    phases["nsys"].append(m["nsys_end"] - m["nsys_start"])
                    phases["after nsys"].append(m["exit"] - m["nsys_end"])
                    raw.append({k: round(v - m["nsys_end"], 4) for k, v in m.items()})
            if manual:  # nsys left a .qdstrm: the same files by hand
                stem = base / f"manual{i}" / "trace"
                stem.parent.mkdir()
                t0 = time.perf_counter()
                timed(nsys_command(info.path, stem, work).argv)
                if not stem.with_suffix(".nsys-rep").exists():
                    importer = find_importer(info.path)
                    assert importer is not None
                    timed([str(importer), "-i", str(stem.with_suffix(".qdstrm"))])
                if not stem.with_suffix(".sqlite").exists():
                    rep, out = stem.with_suffix(".nsys-rep"), stem.with_suffix(".sqlite")
                    timed([str(info.path), "export", "--type", "sqlite", "-o", str(out), str(rep)])
                times["nsys+import+export"].append(time.perf_counter() - t0)
            for entry in base.iterdir():  # run folders, and the index launchprof keeps beside them
                if entry != marks:
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    times = {k: v for k, v in times.items() if v}
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"nsys {info.version} ({info.path}); workload: {' '.join(target)}; {args.repeats} repeats, medians")
    for name, values in times.items():
        print(f"  {name:<20} {med[name]:7.3f} s   (min {min(values):.3f}, max {max(values):.3f})")
    print(
        "  launchprof's own phases: "
        + ", ".join(f"{k} {statistics.median(v):.3f} s" for k, v in phases.items())
        + " (time.time() marks, medians)"
    )
    after = [k for k in raw[0] if raw[0][k] > 0]
    print(
        "  after nsys, by mark (s after nsys ended, medians): "
        + ", ".join(f"{k} {statistics.median(r.get(k, float('nan')) for r in raw):.3f}" for k in after)
    )
    print(
        "  until STEM.sqlite appeared (the .nsys-rep complete; s after the command started, medians): "
        + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in recorded.items() if v)
    )
    best = {k: min(v) for k, v in times.items()}
    result = {
        "nsys": info.version,
        "workload": target,
        "repeats": args.repeats,
        "times_s": times,
        "phases_s": phases,
        "until_sqlite_s": recorded,
        "variants": variants,
        "profile_args": flags,
        "marks_after_nsys_end_s": raw,
        "retried": RETRIES,
    }
    for ref in ("nsys", "nsys+import+export"):
        if ref not in times:
            continue
        for name in variants:
            over, over_best = med[name] / med[ref] - 1, best[name] / best[ref] - 1
            paired = statistics.median(b / a - 1 for a, b in zip(times[ref], times[name], strict=True))
            key = "" if name == "launchprof" else "_" + name.split(" ", 1)[1]
            result[f"overhead_vs_{ref}{key}"] = over
            result[f"paired_overhead_vs_{ref}{key}"] = paired
            print(
                f"  {name} vs {ref:<20} {over:+.1%} (medians), {over_best:+.1%} (best of each), "
                f"{paired:+.1%} (median of the runs' ratios, each against the bare run of its round)"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
