"""What ``nsys profile`` does after the workload exits, on a time line.

Runs ``nsys profile <launchprof's flags> --output=DIR/trace WORKLOAD`` (or the command
given after ``--cmd``) and polls every ``--poll-ms`` (default 10 ms), from this process:

* the processes under the started one (``/proc/*/stat`` parent links): pid, name,
  first and last time seen;
* the output files (``trace.qdstrm``, ``trace.nsys-rep``, ``trace.sqlite``) and nsys's
  temporary recordings (``$TMPDIR/nsys-report-*.qdstrm``): when each appeared and when its
  size last changed.

Prints one JSON object (times in s from the start): where launchprof could start work
without competing with the workload (after the workload's process ended) and how long
nsys then takes to write the ``.nsys-rep`` and the SQLite export.

Usage::

    python benchmarks/nsys_timeline.py [--nsys PATH] [--poll-ms 10] [--cmd] -- WORKLOAD ARGS...
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, name) of every process this user can read."""
    found = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            text = Path(stat).read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text[text.rindex(")") + 2 :].split()[1])
        found[int(stat.split("/")[2])] = (ppid, name)
    return found


def cmdline(pid: int) -> str:
    """The first words of a process's command line ("" once it is gone)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return ""
    return " ".join(w.decode(errors="replace") for w in words[:4])


def descendants(root: int, table: dict[int, tuple[int, str]]) -> dict[int, str]:
    out: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, name) in table.items():
            if ppid == parent and pid not in out:
                out[pid] = name
                frontier.append(pid)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nsys", default="nsys")
    parser.add_argument("--poll-ms", type=float, default=10.0)
    parser.add_argument("--cmd", action="store_true", help="the words after -- are the whole command (no nsys)")
    parser.add_argument("workload", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    words = [w for w in args.workload if w != "--"] if args.workload[:1] == ["--"] else args.workload
    out = Path(tempfile.mkdtemp(prefix="nsys-timeline-"))
    stem = out / "trace"
    if args.cmd:
        cmd = words
    else:
        from launchprof.nsys.profile import nsys_command, workload

        cmd = nsys_command(Path(args.nsys), stem, workload(words)).argv
    tmp = os.environ.get("TMPDIR") or "/tmp"
    files: dict[str, dict[str, float]] = {}
    procs: dict[str, dict[str, object]] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sizes: dict[str, int] = {}
    while True:
        now = time.perf_counter() - t0
        done = proc.poll() is not None
        for pid, name in descendants(proc.pid, processes()).items():
            entry = procs.setdefault(str(pid), {"name": name, "first": now, "cmdline": cmdline(pid)})
            entry["last"] = now
        for path in [*(str(stem) + s for s in (".qdstrm", ".nsys-rep", ".sqlite")), *glob.glob(f"{tmp}/nsys-report-*")]:
            try:
                size = os.stat(path).st_size
            except OSError:
                continue
            entry = files.setdefault(path, {"appeared": now, "changed": now})
            if sizes.get(path) != size:
                sizes[path] = size
                entry["changed"] = now
            entry["size"] = size
        if done:
            break
        time.sleep(args.poll_ms / 1000)
    result = {"command": cmd, "exit": proc.returncode, "end_s": round(time.perf_counter() - t0, 4)}
    result["processes"] = {
        pid: {k: (round(v, 4) if isinstance(v, float) else v) for k, v in p.items()} for pid, p in procs.items()
    }
    result["files"] = {p: {k: round(v, 4) for k, v in f.items()} for p, f in files.items()}
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
