"""Valid but unusual inputs and surroundings: file names that are
not UTF-8, a closed stdout, trace names with several dots, a WAL-mode trace on a
read-only mount, a full ``$TMPDIR``. Each through the installed command."""

from __future__ import annotations

import json
import lzma
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from steploop import launch_loop
from tracebuilder import TraceBuilder

LAUNCHPROF = str(Path(sys.executable).with_name("launchprof"))


def run(*args: str | bytes, cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [LAUNCHPROF, *args],
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        timeout=300,
        check=False,
        **kwargs,
    )


def loop_trace(path: Path, steps: int = 12) -> Path:
    """12 steps of 4 launches (tests/steploop.py): 48 kernels."""
    b = TraceBuilder()
    launch_loop(b, steps)
    return b.write(path)


@pytest.fixture
def tmpfs(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 1 MiB tmpfs (root only)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# ---------------------------------------------------------------- case 5: names that are not UTF-8


@pytest.mark.slow
def test_a_trace_and_folder_name_with_byte_0xff(tmp_path: Path) -> None:
    """Old: a traceback (UnicodeEncodeError in the SQLite URI), and once such a folder was
    in reports/, every later analyze crashed rewriting index.html."""
    bad = os.fsdecode(b"x\xff")
    loop_trace(tmp_path / f"{bad}.sqlite")
    loop_trace(tmp_path / "good.sqlite")
    done = run("analyze", f"{bad}.sqlite", cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    summary = json.loads((tmp_path / "reports" / bad / "summary.json").read_text(encoding="utf-8"))
    assert summary["trace"]["path"] == "x\ufffd.sqlite"  # the byte shown as U+FFFD
    assert summary["devices"][0]["kernels"] == 48
    later = run("analyze", "good.sqlite", cwd=tmp_path)  # the index now lists a folder named b"x\xff"
    assert later.returncode == 0, later.stderr
    index = (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")
    assert 'href="x%FF/report.html"' in index and 'href="good/report.html"' in index
    out = tmp_path / os.fsdecode(b"out\xff")
    done = run("analyze", "good.sqlite", "-o", str(out / "r"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # The report is written; the index goes only into a reports folder launchprof owns,
    # not into this arbitrary parent (README: the index).
    assert (out / "r" / "summary.json").is_file() and not (out / "index.html").exists()


# ---------------------------------------------------------------- case 8: a closed stdout


def closed_pipe() -> int:
    """A pipe whose reader has already gone: every write to it fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    return w


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("analyze", "t.sqlite", "-o", "r"), 0),
        (("compare", "t.sqlite", "t.sqlite", "-o", "c", "--fail-on", "none"), 0),
        (("compare", "t.sqlite", "t.sqlite", "-o", "c"), 1),  # not-converted: a failed check, as without a pipe
        (("--help",), 0),
        (("analyze", "t.sqlite", "-o", "r2", "--step", "nope"), 2),
    ],
    ids=["analyze", "compare-pass", "compare-fail", "help", "bad-step"],
)
def test_a_closed_stdout_ends_with_the_status_it_would_have_had(
    tmp_path: Path, args: tuple[str, ...], code: int
) -> None:
    """Old: exit 1 with no message (rich's broken-pipe handler), whatever the outcome."""
    loop_trace(tmp_path / "t.sqlite")
    w = closed_pipe()
    try:
        done = run(*args, cwd=tmp_path, stdout=w)
    finally:
        os.close(w)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    if code == 0:
        assert done.stderr == ""
    if args[0] == "analyze" and code == 0:
        assert json.loads((tmp_path / "r" / "summary.json").read_text())["devices"][0]["kernels"] == 48


# ---------------------------------------------------------------- case 8: default folders


@pytest.mark.slow
def test_run_v1_and_run_v2_get_folders_of_their_own(tmp_path: Path) -> None:
    """Old: both went to reports/run; the second was refused (exit 2)."""
    loop_trace(tmp_path / "run.v1.sqlite", steps=12)
    loop_trace(tmp_path / "run.v2.sqlite", steps=15)
    for name in ("run.v1", "run.v2"):
        done = run("analyze", f"{name}.sqlite", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    counts = [
        json.loads((tmp_path / "reports" / n / "summary.json").read_text())["steps"]["count"]
        for n in ("run.v1", "run.v2")
    ]
    assert counts == [12, 15]


# ---------------------------------------------------------------- case 8: WAL on a read-only mount


@pytest.mark.slow
def test_a_wal_mode_trace_on_a_read_only_mount(tmp_path: Path, tmpfs: Path) -> None:
    """Old: "is a damaged SQLite file (unable to open database file)": SQLite wanted to
    create the -shm file beside it."""
    trace = loop_trace(tmpfs / "wal.sqlite")
    con = sqlite3.connect(trace)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.close()
    assert not (tmpfs / "wal.sqlite-wal").exists()  # checkpointed on close, as nsys leaves its exports
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    done = run("analyze", str(trace), "-o", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["devices"][0]["kernels"] == 48


# ---------------------------------------------------------------- case 8: a full $TMPDIR


@pytest.mark.slow
def test_a_full_tmpdir_is_said_as_such(tmp_path: Path, tmpfs: Path) -> None:
    """Old: "cannot write the output: No space left on device", exit 1 (as if stdout were
    full). A .sqlite.xz is decompressed into $TMPDIR; here it has ~300 KiB left for a 3 MB trace."""
    trace = loop_trace(tmp_path / "big.sqlite")
    con = sqlite3.connect(trace)
    con.execute("CREATE TABLE PAD (x BLOB)")
    con.execute("INSERT INTO PAD VALUES (zeroblob(3000000))")
    con.commit()
    con.close()
    (tmp_path / "big.sqlite.xz").write_bytes(lzma.compress(trace.read_bytes()))
    (tmpfs / "filler").write_bytes(b"\0" * 700_000)
    done = run("analyze", "big.sqlite.xz", "-o", "r", cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmpfs)})
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "launchprof: error: cannot decompress big.sqlite.xz into the temporary folder"
    ), lines
    assert f"{tmpfs} ($TMPDIR): it is full" in lines[0]
    assert not (tmp_path / "r").exists()
