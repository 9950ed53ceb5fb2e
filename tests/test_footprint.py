"""A whole trace too large for the memory available is refused before it is read
(launchprof.trace.footprint): the rows counted against sqlite3, the memory available read
from /proc and cgroup files as the kernel writes them, the estimate held below the
measured peak of real traces it was not fitted on, and the refusal in a real memory
cgroup, where the same run without the check is killed for memory."""

from __future__ import annotations

import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from launchprof.trace.footprint import BYTES_PER_ROW, available_bytes, needed_bytes, table_rows
from launchprof.trace.tables import NUMERIC_TABLES

TRACES = Path(__file__).parent / "data" / "traces"
BUNDLED = sorted(TRACES.glob("*.sqlite.xz"))
LAUNCHPROF = str(Path(sys.executable).with_name("launchprof"))


def _plain(xz: Path, folder: Path) -> Path:
    out = folder / xz.stem
    if not out.exists():
        with lzma.open(xz) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


@pytest.mark.parametrize("xz", BUNDLED, ids=lambda p: p.name)
def test_rows_are_the_tables_row_counts(xz: Path, tmp_path: Path) -> None:
    """nsys numbers a table's rows without holes: the rowid span is sqlite3's count."""
    con = sqlite3.connect(_plain(xz, tmp_path))
    rows = table_rows(con)
    tables = {name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table, _, _ in NUMERIC_TABLES:
        count = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] if table in tables else 0
        assert rows.get(table, 0) == count, table
    assert sum(rows.values()) > 10_000
    con.close()


def _peak_of(cmd: list[str]) -> tuple[int, int]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), int(usage.ru_maxrss) * 1024


@pytest.mark.slow
@pytest.mark.parametrize("xz", BUNDLED, ids=lambda p: p.name)
def test_the_estimate_stays_below_what_analyze_takes(xz: Path, tmp_path: Path) -> None:
    """The refusal is safe only if the estimate is a low end: on real traces it was not
    fitted on, ``launchprof analyze`` peaked above it."""
    trace = _plain(xz, tmp_path)
    con = sqlite3.connect(trace)
    need = needed_bytes(table_rows(con))
    con.close()
    rc, peak = _peak_of([LAUNCHPROF, "analyze", str(trace), "-q", "--force", "-o", str(tmp_path / "out")])
    assert rc == 0
    assert need < peak, (need, peak)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _proc(root: Path, cgroup: str, available_kib: int = 8 << 20) -> Path:
    _write(root / "proc" / "meminfo", f"MemTotal:       16000000 kB\nMemAvailable:   {available_kib} kB\n")
    _write(root / "proc" / "self" / "cgroup", cgroup)
    return root / "proc"


def test_available_is_memavailable_without_a_memory_limit(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "4:memory:/job\n0::/\n")
    v1 = tmp_path / "cg" / "memory" / "job"
    _write(v1 / "memory.limit_in_bytes", "9223372036854771712\n")  # v1's "no limit"
    _write(v1 / "memory.usage_in_bytes", str(5 << 30))
    assert available_bytes(proc, tmp_path / "cg") == (8 << 20) * 1024


def test_available_is_the_v1_limit_less_usage_plus_reclaimable_cache(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "9:name=systemd:/\n4:memory:/slurm/job_7\n")
    v1 = tmp_path / "cg" / "memory" / "slurm" / "job_7"
    _write(v1 / "memory.limit_in_bytes", str(2 << 30))
    _write(v1 / "memory.usage_in_bytes", str(1536 << 20))
    _write(v1 / "memory.stat", f"cache 300\ninactive_file 5\ntotal_inactive_file {100 << 20}\n")
    assert available_bytes(proc, tmp_path / "cg") == (512 + 100) << 20


def test_available_is_the_v2_limit_less_usage_plus_reclaimable_cache(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/user.slice/job\n")
    v2 = tmp_path / "cg" / "user.slice" / "job"
    _write(v2 / "memory.max", f"{1 << 30}\n")
    _write(v2 / "memory.current", f"{768 << 20}\n")
    _write(v2 / "memory.stat", f"anon 1\nactive_file {8 << 20}\ninactive_file {16 << 20}\n")
    assert available_bytes(proc, tmp_path / "cg") == (256 + 8 + 16) << 20


def test_a_limit_on_a_parent_cgroup_counts(tmp_path: Path) -> None:
    """Slurm sets the job's limit above the task's cgroup: the least headroom up the tree."""
    proc = _proc(tmp_path, "0::/slurm/job_1/step_0/task_0\n")
    job = tmp_path / "cg" / "slurm" / "job_1"
    _write(job / "memory.max", f"{1 << 30}\n")
    _write(job / "memory.current", f"{700 << 20}\n")
    _write(job / "step_0" / "task_0" / "memory.max", "max\n")
    _write(job / "step_0" / "task_0" / "memory.current", f"{100 << 20}\n")
    assert available_bytes(proc, tmp_path / "cg") == 324 << 20
    v1 = tmp_path / "v1"
    proc = _proc(v1, "4:memory:/docker/abc\n")  # v1 inside a container without a cgroup namespace
    _write(v1 / "cg" / "memory" / "memory.limit_in_bytes", f"{2 << 30}\n")  # the container's, at the root
    _write(v1 / "cg" / "memory" / "memory.usage_in_bytes", f"{1 << 30}\n")
    _write(v1 / "cg" / "memory" / "memory.stat", f"total_active_file {1 << 20}\ntotal_inactive_file {2 << 20}\n")
    assert available_bytes(proc, v1 / "cg") == (1024 + 3) << 20


def test_odd_cgroup_and_meminfo_lines_are_skipped(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "\ngarbage\n4:memory\n0::/job\n")
    _write(tmp_path / "proc" / "meminfo", "MemTotal: 1 kB\nMemAvailable: lots kB\n")
    _write(tmp_path / "cg" / "job" / "memory.max", f"{1 << 30}\n")
    _write(tmp_path / "cg" / "job" / "memory.current", "\u00b2\n")  # isdigit() but not a number
    assert available_bytes(proc, tmp_path / "cg") is None
    _write(tmp_path / "cg" / "job" / "memory.current", f"{1 << 29}\n")
    assert available_bytes(proc, tmp_path / "cg") == 1 << 29  # the cgroup's, though MemAvailable is garbled


def test_a_limit_above_memavailable_leaves_memavailable(tmp_path: Path) -> None:
    proc = _proc(tmp_path, "0::/job\n", available_kib=1 << 20)  # 1 GiB available on the machine
    v2 = tmp_path / "cg" / "job"
    _write(v2 / "memory.max", "max\n")
    _write(v2 / "memory.current", "0\n")
    assert available_bytes(proc, tmp_path / "cg") == 1 << 30
    _write(v2 / "memory.max", f"{64 << 30}\n")
    assert available_bytes(proc, tmp_path / "cg") == 1 << 30


def test_unknown_memory_means_no_check(tmp_path: Path) -> None:
    assert available_bytes(tmp_path / "no-proc", tmp_path / "no-cgroup") is None


def _own_v1_memory_cgroup() -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, group = line.split(":", 2)
            if "memory" in controllers.split(","):
                folder = Path("/sys/fs/cgroup/memory") / group.lstrip("/")
                return folder if (folder / "memory.limit_in_bytes").exists() else None
    except OSError:
        return None
    return None


@pytest.fixture
def small_cgroup():
    """A child memory cgroup (v1) of this process's own, to run a command in; skipped
    where one cannot be made (not root, cgroup v2 only)."""
    own = _own_v1_memory_cgroup()
    if own is None or os.geteuid() != 0:
        pytest.skip("needs root and a cgroup v1 memory controller")
    folder = own / f"launchprof-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup here: {exc}")
    yield folder
    for _ in range(50):  # its processes have exited; the kernel may take a moment to let go
        try:
            folder.rmdir()
            break
        except OSError:
            import time

            time.sleep(0.1)


def _in_cgroup(cgroup: Path, *args: str) -> subprocess.CompletedProcess[str]:
    procs = str(cgroup / "cgroup.procs")
    return subprocess.run(
        ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", LAUNCHPROF, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_trace_that_fits_the_cgroup_runs(small_cgroup: Path, tmp_path: Path) -> None:
    """Above the measured peak (286 MiB for demo_A, benchmarks/README.md), the run is not
    refused: the memory the process holds already (its imports, the rows read ahead) is
    part of the need, not taken from what is left."""
    trace = _plain(TRACES / "demo_A_4096.sqlite.xz", tmp_path)
    (small_cgroup / "memory.limit_in_bytes").write_text(str(310 << 20))
    done = _in_cgroup(small_cgroup, "analyze", str(trace), "-q", "-o", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report" / "summary.json").is_file()


def test_a_trace_larger_than_the_cgroup_is_refused_before_it_is_read(small_cgroup: Path, tmp_path: Path) -> None:
    """In a memory cgroup whose limit is below the estimate, ``analyze`` says so in one
    line and exits 2 with nothing written; the same run with ``--no-memory-check`` is
    killed for memory: the refused trace would not have fitted."""
    trace = _plain(TRACES / "demo_A_4096.sqlite.xz", tmp_path)
    con = sqlite3.connect(trace)
    rows = table_rows(con)
    con.close()
    need = needed_bytes(rows)
    assert sum(rows.values()) * BYTES_PER_ROW > 40 << 20  # the rows, not the base, decide here
    limit = str(need - (6 << 20))
    (small_cgroup / "memory.limit_in_bytes").write_text(limit)
    swap_limited = True  # the forced run is killed, not swapped out, where swap is limited too or absent
    try:
        (small_cgroup / "memory.memsw.limit_in_bytes").write_text(limit)
    except OSError:
        swap_limited = len(Path("/proc/swaps").read_text().splitlines()) <= 1

    def in_cgroup(*args: str) -> subprocess.CompletedProcess[str]:
        return _in_cgroup(small_cgroup, "analyze", str(trace), *args)

    out = tmp_path / "report"
    refused = in_cgroup("-o", str(out))
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launchprof: error: demo_A_4096.sqlite:"), refused.stderr
    assert "--per-process" in lines[0] and "--time-range" in lines[0] and "--no-memory-check" in lines[0]
    assert not out.exists()
    if not swap_limited:
        return
    forced = in_cgroup("-o", str(out), "--no-memory-check")
    assert forced.returncode in (-9, 137), (forced.returncode, forced.stderr[-500:])


def test_a_hole_in_the_rowids_does_not_refuse_a_trace_that_fits(tmp_path: Path) -> None:
    """One kernel row moved to rowid 2**62 makes the span say 4.6e18 rows: the exact count,
    taken before refusing, says the trace fits."""
    trace = _plain(TRACES / "mlp_eager.sqlite.xz", tmp_path)
    con = sqlite3.connect(trace)
    con.execute(
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = ? "
        "WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
        (2**62,),
    )
    con.commit()
    assert table_rows(con)["CUPTI_ACTIVITY_KIND_KERNEL"] > 2**61
    con.close()
    done = subprocess.run(
        [LAUNCHPROF, "analyze", str(trace), "-q", "-o", str(tmp_path / "report")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_a_part_is_counted_exactly(tmp_path: Path) -> None:
    """The rows of one window or one process, counted as the loader keeps them (against
    sqlite3's own count of the same condition)."""
    from launchprof.trace.columns import Rows, window_ns

    trace = _plain(TRACES / "demo_A_4096.sqlite.xz", tmp_path)
    con = sqlite3.connect(trace)
    window = Rows(window=window_ns((0.7, 0.9)))
    rows = table_rows(con, exact=True, kept=window)
    begin, end = window_ns((0.7, 0.9))
    kernels = con.execute(
        'SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE "start" >= ? AND "start" < ?', (begin, end)
    ).fetchone()[0]
    assert rows["CUPTI_ACTIVITY_KIND_KERNEL"] == kernels == 25848  # what --time-range 0.7:0.9 reads
    pid = con.execute("SELECT globalPid >> 24 FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    whole = table_rows(con, exact=True)
    assert table_rows(con, exact=True, kept=Rows(pid=pid)) == whole  # its one process holds every row
    assert table_rows(con, exact=True, kept=Rows(pid=pid + 1)) == {t: 0 for t in whole}
    con.close()


def test_a_part_too_large_for_the_cgroup_is_refused_and_a_small_one_runs(small_cgroup: Path, tmp_path: Path) -> None:
    """--per-process of a trace of one process, and a window covering the whole trace,
    need what the whole trace needs: refused in the cgroup that refuses the whole trace
    (they were killed for memory before); a window of a fifth of the kernels runs."""
    trace = _plain(TRACES / "demo_A_4096.sqlite.xz", tmp_path)
    con = sqlite3.connect(trace)
    need = needed_bytes(table_rows(con))
    con.close()
    (small_cgroup / "memory.limit_in_bytes").write_text(str(need - (20 << 20)))
    for args, says in (
        (["--per-process"], "analysing the rows of process"),
        (["--time-range", "0:2"], "analysing the rows starting in 0-2 s"),
    ):
        done = _in_cgroup(small_cgroup, "analyze", str(trace), "-q", "-o", str(tmp_path / "out"), *args)
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert says in done.stderr and done.stderr.count("\n") == 1, done.stderr
    done = _in_cgroup(
        small_cgroup, "analyze", str(trace), "-q", "-o", str(tmp_path / "window"), "--time-range", "0.7:0.9"
    )
    assert done.returncode == 0, done.stderr
