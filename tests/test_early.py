"""``launchprof profile``'s analysis while nsys writes its SQLite export (launchprof.commands.early).

nsys 2022.4, the one installed here, cannot export ``arrowdir``; the real path was run on
the H200 machine with nsys 2025.3.1 (benchmarks/README.md). Here a shell script stands in
for nsys 2025: ``profile`` writes ``STEM.nsys-rep``, creates ``STEM.sqlite`` and fills it
``$EXPORT_S`` seconds later (what nsys does while it exports), ``export --type arrowdir``
copies the real arrowdir export of the same report after ``$ARROW_S`` seconds
(tests/data/arrowdir). The report must be the one ``launchprof analyze`` writes from the
SQLite file, whichever path produced it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_arrowdir import unpack

from launchprof.commands.early import wanted
from launchprof.nsys.profile import PROFILE_FLAGS

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "examples" / "cpu" / "steps_loop.py"
LAUNCHPROF = [sys.executable, "-m", "launchprof"]


def stand_in(tmp: Path, sqlite: Path, arrowdir: Path) -> Path:
    nsys = tmp / "nsys"
    options = "".join(f"\t{f.split('=')[0]}=\n" for f in PROFILE_FLAGS) + "\t-o, --output=\n"
    nsys.write_text(
        f"""#!/bin/bash
if [ "$1" = "--version" ]; then echo "NVIDIA Nsight Systems version 2025.3.1.0"; exit 0; fi
if [ "$1" = "profile" ] && [ "$2" = "--help" ]; then printf '%s' '{options}'; exit 0; fi
if [ "$1" = "export" ] && [ "$2" = "--help" ]; then
  echo "-t, --type= sqlite, arrow, arrowdir"; echo "--tables=<pattern>"; exit 0
fi
if [ "$1" = "export" ]; then
  for a in "$@"; do if [ "$prev" = "--output" ]; then out=$a; fi; prev=$a; done
  echo "$*" > "{tmp}/export-args"
  sleep $ARROW_S; cp -r "{arrowdir}" "$out"; exit 0
fi
for a in "$@"; do case $a in --output=*) stem=${{a#--output=}};; esac; done
trap '' INT  # as nsys: a Ctrl-C stops the workload, the report is still written
echo recorded > "$stem.nsys-rep"
: > "$stem.sqlite"
sleep $EXPORT_S
cp "{sqlite}" "$stem.sqlite.part" && mv "$stem.sqlite.part" "$stem.sqlite"
"""
    )
    nsys.chmod(0o755)
    return nsys


def profile(tmp: Path, nsys: Path, export_s: float, arrow_s: float) -> tuple[Path, dict[str, float]]:
    out = tmp / "run"
    marks = tmp / "marks.jsonl"
    env = {
        **os.environ,
        "LAUNCHPROF_NSYS": str(nsys),
        "LAUNCHPROF_EARLY": "1",
        "LAUNCHPROF_TIMINGS": str(marks),
        "EXPORT_S": str(export_s),
        "ARROW_S": str(arrow_s),
        "XDG_CACHE_HOME": str(tmp / "cache"),
    }
    done = subprocess.run(
        [*LAUNCHPROF, "profile", "-o", str(out), str(WORKLOAD)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out, json.loads(marks.read_text().splitlines()[-1])


@pytest.mark.slow
def test_an_interrupted_run_analyses_the_sqlite_file(tmp_path: Path) -> None:
    """Ctrl-C while nsys exports: the early analysis is dropped, what nsys wrote is analysed, exit 130."""
    import signal
    import time

    sqlite, arrowdir = unpack("graph30", tmp_path)
    nsys = stand_in(tmp_path, sqlite, arrowdir)
    out, marks_file = tmp_path / "run", tmp_path / "marks.jsonl"
    env = {
        **os.environ,
        "LAUNCHPROF_NSYS": str(nsys),
        "LAUNCHPROF_EARLY": "1",
        "LAUNCHPROF_TIMINGS": str(marks_file),
        "EXPORT_S": "3",
        "ARROW_S": "0.1",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.Popen(
        [*LAUNCHPROF, "profile", "-o", str(out), str(WORKLOAD)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.time() + 20
    while not (out / "trace.sqlite").exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout.decode() + stderr.decode()
    assert b"interrupted" in stdout + stderr
    marks = json.loads(marks_file.read_text().splitlines()[-1])
    assert "analysis_done" in marks  # the usual path analysed trace.sqlite
    # The workload had finished (exit 0) when the Ctrl-C came: the command exits 130, the
    # report does not say the workload exited 130.
    same_report(out, tmp_path)


def same_report(out: Path, tmp: Path, exit_code: int = 0) -> None:
    """``out`` holds what ``launchprof analyze out/trace.sqlite`` writes (and, for a run
    whose workload exited ``exit_code`` != 0, the summary's ``workload`` section and the
    page's card that says so)."""
    import re

    ref = tmp / "reference"
    done = subprocess.run(
        [*LAUNCHPROF, "analyze", "-o", str(ref), str(out / "trace.sqlite")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    names = ["summary.json", "report.html", "steps.csv", "step_kernels.csv", "step_timeline.csv"]
    if exit_code:
        got = json.loads((out / "summary.json").read_text())
        want = json.loads((ref / "summary.json").read_text())
        assert got.pop("workload") == {"exit_code": exit_code}
        # The run id follows the summary's content, which the workload section changes.
        assert len(got.pop("run_id")) == len(want.pop("run_id")) == 16
        assert got == want
        card = re.compile(r'<div class="card" id="workload-failed".*?</div>', re.S)
        run = re.compile(r'<meta name="launchprof-run" content="[0-9a-f]{16}">')
        page = (out / "report.html").read_text()
        assert len(card.findall(page)) == 1 and len(run.findall(page)) == 1
        assert run.sub("", card.sub("", page)) == run.sub("", (ref / "report.html").read_text())
        names = names[2:]
    for name in names:
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert not (out / ".launchprof-arrowdir").exists()
    # The early path's step files are staged by a forked child as hidden files: none is left
    # (written, or removed when the early result was dropped).
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


@pytest.mark.slow
def test_the_report_is_made_while_nsys_exports(tmp_path: Path) -> None:
    sqlite, arrowdir = unpack("mlp10", tmp_path)
    nsys = stand_in(tmp_path, sqlite, arrowdir)
    out, marks = profile(tmp_path, nsys, export_s=2.0, arrow_s=0.1)
    assert "early_done" in marks and marks["early_done"] < marks["nsys_end"]
    assert "--tables=" in (tmp_path / "export-args").read_text()
    same_report(out, tmp_path)


@pytest.mark.slow
def test_an_export_slower_than_nsys_is_stopped_and_the_sqlite_analysed(tmp_path: Path) -> None:
    sqlite, arrowdir = unpack("graph30", tmp_path)
    nsys = stand_in(tmp_path, sqlite, arrowdir)
    out, marks = profile(tmp_path, nsys, export_s=0.3, arrow_s=5.0)
    assert "early_export_start" in marks and "early_done" not in marks
    assert marks["exit"] - marks["nsys_end"] < 4.0  # did not wait for the stand-in's 5 s export
    same_report(out, tmp_path)


def test_when_to_analyse_early(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["nsys", "profile", "--trace=cuda", "--export=sqlite", "--output=x", "prog"]
    monkeypatch.setenv("LAUNCHPROF_EARLY", "0")
    assert not wanted(argv)
    monkeypatch.setenv("LAUNCHPROF_EARLY", "1")
    assert wanted(argv)
    assert not wanted([a for a in argv if not a.startswith("--export")])  # no SQLite export: nothing to overlap
    assert not wanted([*argv[:3], "--export=sqlite", "--export=none", *argv[4:]])  # the last one counts
    monkeypatch.delenv("LAUNCHPROF_EARLY")
    assert wanted(argv) == ((os.cpu_count() or 1) >= 4)


def test_background_priority_lowers_only_the_calling_thread() -> None:
    import threading

    from launchprof.commands.early import BACKGROUND_NICE, background_priority

    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: list[int] = []

    def work() -> None:
        background_priority()
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [max(BACKGROUND_NICE, main_before)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before


def test_the_export_asks_only_for_the_loaded_tables_at_low_priority(tmp_path: Path) -> None:
    from launchprof.commands.early import BACKGROUND_NICE, export_command
    from launchprof.trace.tables import LOADED_TABLES

    sqlite, arrowdir = unpack("graph30", tmp_path)
    cmd = export_command(str(stand_in(tmp_path, sqlite, arrowdir)), tmp_path / "t.nsys-rep", tmp_path / "out")
    assert cmd[:3] == [shutil.which("nice"), "-n", str(BACKGROUND_NICE)]
    tables = next(a for a in cmd if a.startswith("--tables=")).split("=", 1)[1].split(",")
    assert [t.strip("^$") for t in tables] == list(LOADED_TABLES)
    assert cmd[-2:] == [str(tmp_path / "out"), str(tmp_path / "t.nsys-rep")]
