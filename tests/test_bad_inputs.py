"""Broken and hostile inputs: each gives one clear error line and a non-zero exit, or a
correct degraded result that says what was skipped. Never a traceback.

The degraded cases start from one hand-counted trace (three kernels, see ``base``) and
damage the row of kernel 2; the expected figures are those of the trace without that
row, counted by hand below.
"""

from __future__ import annotations

import json
import lzma
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder
from typer.testing import CliRunner

import launchprof
from launchprof.cli import app

HERE = Path(__file__).resolve().parent
TRACES = HERE / "data" / "traces"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"


def launchprof_exe() -> str:
    exe = Path(sys.executable).with_name("launchprof")
    return str(exe) if exe.exists() else (shutil.which("launchprof") or "launchprof")


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed ``launchprof`` command in a subprocess."""
    return subprocess.run(
        [launchprof_exe(), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300, check=False
    )


def assert_one_line_error(rc: int, stderr: str, *fragments: str) -> None:
    assert rc != 0
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("launchprof: error: ")
    for f in fragments:
        assert f.lower() in lines[0].lower(), lines[0]


def base(path: Path, flavour: str = "2025") -> Path:
    """Three kernels, one process, stream 7 (hand-counted, as in test_timeline_small):

    K1 [1000, 2000) launched by a call ending 900; K2 [5000, 5500) by a call ending
    4800; K3 [5700, 6000) by a call ending 3000. span 5000, busy 1800, one bubble of
    3000 ns (2000..5000) that is host-wait (K2's call ended 4800 > 2000)."""
    b = TraceBuilder(flavour)
    b.launch(100, 900, 1000, 2000, name="k1")
    b.launch(4000, 4800, 5000, 5500, name="k2")
    b.launch(2500, 3000, 5700, 6000, name="k3")
    b.range("step", 50, 6100, domain="launchprof")
    return b.write(path)


# Figures of the base trace without K2: K1 [1000,2000) and K3 [5700,6000). span 5000,
# busy 1300, one gap 2000..5700 = 3700 ns, host-wait (K3's call ended 3000 > 2000).
WITHOUT_K2 = dict(kernels=2, span_ns=5000, busy_ns=1300, idle_ns=3700, host_wait_ns=3700, bubbles=1)
BASE = dict(kernels=3, span_ns=5000, busy_ns=1800, idle_ns=3200, host_wait_ns=3000, bubbles=1)


def sql(path: Path, *statements: str) -> Path:
    con = sqlite3.connect(path)
    for s in statements:
        con.execute(s)
    con.commit()
    con.close()
    return path


K2 = f"{KERNELS} WHERE start = 5000"

# (id, SQL applied to the base trace, expected device figures, fragment of a note)
DEGRADED: list[tuple[str, list[str], dict[str, int], str]] = [
    ("null-start", [f"UPDATE {K2.replace(' WHERE', ' SET start = NULL WHERE')}"], WITHOUT_K2, "skipped"),
    ("null-end", [f"UPDATE {KERNELS} SET end = NULL WHERE start = 5000"], WITHOUT_K2, "skipped"),
    ("end-before-start", [f"UPDATE {KERNELS} SET end = 4000 WHERE start = 5000"], WITHOUT_K2, "end < start"),
    ("null-device", [f"UPDATE {KERNELS} SET deviceId = NULL WHERE start = 5000"], WITHOUT_K2, "missing device_id"),
    ("text-in-start", [f"UPDATE {KERNELS} SET start = 'abc' WHERE start = 5000"], WITHOUT_K2, "wrong type"),
    ("real-in-end", [f"UPDATE {KERNELS} SET end = 5500.5 WHERE start = 5000"], WITHOUT_K2, "wrong type"),
    ("blob-in-start", [f"UPDATE {KERNELS} SET start = x'00ff' WHERE start = 5000"], WITHOUT_K2, "wrong type"),
    (
        "duplicate-kernel-rows",
        [f"INSERT INTO {KERNELS} SELECT * FROM {KERNELS} WHERE start = 5000"] * 2,
        BASE,
        "3 duplicate row(s) skipped",  # 1 + 1, then 2 more copied: 4 rows of K2
    ),
    (
        "duplicate-api-rows",
        [f"INSERT INTO {RUNTIME} SELECT * FROM {RUNTIME}"],
        BASE,
        f"{RUNTIME}: 3 duplicate row(s)",
    ),
    (
        "unsorted-rows",
        [
            f"CREATE TABLE k2 AS SELECT * FROM {KERNELS} ORDER BY start DESC",
            f"DELETE FROM {KERNELS}",
            f"INSERT INTO {KERNELS} SELECT * FROM k2",
            f"CREATE TABLE r2 AS SELECT * FROM {RUNTIME} ORDER BY start DESC",
            f"DELETE FROM {RUNTIME}",
            f"INSERT INTO {RUNTIME} SELECT * FROM r2",
        ],
        BASE,
        "",
    ),
    # A kernel at the smallest int64 start (crashed the summary's ratio bounds): skipped, said.
    (
        "start-at-minus-2-to-the-63",
        [f"UPDATE {KERNELS} SET start = -9223372036854775808 WHERE start = 5000"],
        WITHOUT_K2,
        "start < 0",
    ),  # fmt: skip
    # Each string id twice (a reindex traceback): the first row of each stands, said.
    (
        "duplicated-string-ids",
        [
            "CREATE TABLE s2 AS SELECT * FROM StringIds",
            "DROP TABLE StringIds",
            "CREATE TABLE StringIds (id INTEGER, value TEXT)",  # nsys's has no such rows; an edit can
            "INSERT INTO StringIds SELECT * FROM s2",
            "INSERT INTO StringIds SELECT id, value || '_2' FROM s2",
            "DROP TABLE s2",
        ],
        BASE,
        "StringIds holds",
    ),
    # A table whose name holds a quote (rejected as a truncated file): read as any other.
    ("table-named-with-a-quote", ['CREATE TABLE "a""b" (x INTEGER)'], BASE, ""),
    # A kernel that references a string id that does not exist: still counted, named "<unknown #id>".
    ("dangling-kernel-name", [f"UPDATE {KERNELS} SET shortName = 9999 WHERE start = 5000"], BASE, ""),
    # NULL correlation id on K2: its gap can no longer be attributed to the host (0 host-wait).
    (
        "null-correlation",
        [f"UPDATE {KERNELS} SET correlationId = NULL WHERE start = 5000"],
        {**BASE, "host_wait_ns": 0},
        "1 GPU activity has no correlation id",  # said, not silent (plain gpu-bound, no note)
    ),
    # Without correlationId the gap cannot be attributed either; the note says the column is gone.
    (
        "missing-correlation-column",
        [f"ALTER TABLE {KERNELS} DROP COLUMN correlationId"],
        {**BASE, "host_wait_ns": 0},
        "lacks column(s) correlationId",
    ),
    (
        "missing-runtime-table",
        [f"DROP TABLE {RUNTIME}"],
        {**BASE, "host_wait_ns": 0},
        "no CUDA API calls in this trace",
    ),
    (
        "missing-stringids",
        ["DROP TABLE StringIds"],
        BASE,
        "StringIds table missing",
    ),
    ("missing-gpu-table", ["DROP TABLE TARGET_INFO_GPU"], BASE, ""),
    ("missing-meta-table", ["DROP TABLE META_DATA_EXPORT"], BASE, ""),
    ("open-nvtx-range", ["UPDATE NVTX_EVENTS SET end = NULL WHERE eventType = 59"], BASE, "NVTX range(s)"),
    ("nvtx-end-before-start", ["UPDATE NVTX_EVENTS SET end = 10 WHERE eventType = 59"], BASE, "NVTX range(s)"),
    ("null-global-pid", [f"UPDATE {KERNELS} SET globalPid = NULL"], {**BASE, "host_wait_ns": 0}, ""),
    # K2's launch call without a thread: not K2's process's, so its gap is not host-wait; said.
    (
        "null-global-tid",
        [f"UPDATE {RUNTIME} SET globalTid = NULL WHERE end = 4800"],
        {**BASE, "host_wait_ns": 0},
        "1 CUDA API call has no thread",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("mutation", "expected", "note"), [d[1:] for d in DEGRADED], ids=[d[0] for d in DEGRADED])
def test_degraded_trace_gives_correct_figures(
    tmp_path: Path, mutation: list[str], expected: dict[str, int], note: str
) -> None:
    trace = sql(base(tmp_path / "t.sqlite"), *mutation)
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    summary = json.loads((out / "summary.json").read_text())
    (dev,) = summary["devices"]
    got = {k: dev[k] for k in ("kernels", "span_ns", "busy_ns", "idle_ns", "host_wait_ns")}
    got["bubbles"] = dev["bubbles"]["count"]
    assert got == expected
    if note:
        assert any(note in n for n in summary["notes"]), summary["notes"]
        assert note in result.output  # the CLI says what was skipped


def test_dangling_api_name_is_not_counted_as_a_launch(tmp_path: Path) -> None:
    trace = sql(base(tmp_path / "t.sqlite"), f"UPDATE {RUNTIME} SET nameId = 9999 WHERE start = 4000")
    a = launchprof.analyze(trace)
    assert a.launches.kernel_launch_calls == 2  # the renamed call is "<unknown #9999>"
    assert "<unknown #9999>" in set(a.trace.api["call"].astype(str))


def test_non_utf8_strings_are_replaced_not_fatal(tmp_path: Path) -> None:
    trace = base(tmp_path / "t.sqlite")
    con = sqlite3.connect(trace)
    con.execute("UPDATE StringIds SET value = CAST(x'6b32fffe' AS TEXT) WHERE value = 'k2'")
    con.execute("UPDATE NVTX_EVENTS SET text = CAST(x'73746570ff' AS TEXT) WHERE eventType = 59")
    con.commit()
    con.close()
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    a = launchprof.analyze(trace)
    assert "step\ufffd" in set(a.trace.nvtx["text"])
    assert any("\ufffd" in s for s in a.trace.strings.tolist())
    assert json.loads((out / "summary.json").read_text())["devices"][0]["kernels"] == 3


@pytest.mark.slow
def test_empty_kernel_table(tmp_path: Path) -> None:
    trace = sql(base(tmp_path / "t.sqlite"), f"DELETE FROM {KERNELS}")
    out = tmp_path / "out"
    p = run_cli("analyze", str(trace), "-o", str(out))
    # analyze fails on a trace without GPU activity, after writing what can be said.
    assert_one_line_error(p.returncode, p.stderr, "no CUDA activity in this trace")
    assert "holds no kernel" in p.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["devices"] == []
    assert summary["launches"]["kernel_launch_calls"] == 3  # the calls are still counted


@pytest.mark.slow
def test_sqlite_without_cuda_tables_keeps_nvtx(tmp_path: Path) -> None:
    trace = sql(
        base(tmp_path / "t.sqlite"),
        f"DROP TABLE {KERNELS}",
        f"DROP TABLE {RUNTIME}",
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY",
        "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET",
    )
    out = tmp_path / "out"
    p = run_cli("analyze", str(trace), "-o", str(out))
    assert_one_line_error(p.returncode, p.stderr, "no CUDA activity in this trace", "no CUDA tables")
    assert "1 NVTX range(s) recorded" in p.stdout
    assert (out / "report.html").exists()
    assert "no CUDA activity in this trace" in (out / "report.html").read_text()


def test_sqlite_with_no_tables_at_all(tmp_path: Path) -> None:
    trace = tmp_path / "empty_db.sqlite"
    sql(trace, "CREATE TABLE x (a)", "DROP TABLE x")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out)])
    assert result.exit_code != 0
    assert "launchprof: error: no CUDA activity in this trace" in result.output
    assert "Traceback" not in result.output
    assert json.loads((out / "summary.json").read_text())["devices"] == []


def test_missing_kernel_start_column_skips_table(tmp_path: Path) -> None:
    trace = sql(base(tmp_path / "t.sqlite"), f"ALTER TABLE {KERNELS} DROP COLUMN start")
    a = launchprof.analyze(trace)
    assert a.devices == []
    assert any(f"{KERNELS} lacks column(s) start" in n for n in a.notes)


def test_missing_device_column_skips_table(tmp_path: Path) -> None:
    trace = sql(base(tmp_path / "t.sqlite"), f"ALTER TABLE {KERNELS} DROP COLUMN deviceId")
    a = launchprof.analyze(trace)
    assert a.devices == []
    assert any("lacks column(s) deviceId" in n for n in a.notes)


def test_2022_schema_without_graph_node_column(tmp_path: Path) -> None:
    a = launchprof.analyze(base(tmp_path / "t.sqlite", flavour="2022"))
    assert a.devices[0].figures.kernels == 3
    assert a.launches.kernels_in_graphs == 0
    assert not any("graphNodeId" in n for n in a.notes)


# ---------------------------------------------------------------- files that are not traces


def _truncated(tmp: Path) -> Path:
    raw = lzma.decompress((TRACES / "mlp_eager.sqlite.xz").read_bytes())
    target = tmp / "truncated.sqlite"
    target.write_bytes(raw[: len(raw) // 2])
    return target


def _header_only(tmp: Path) -> Path:
    raw = lzma.decompress((TRACES / "mlp_eager.sqlite.xz").read_bytes())
    target = tmp / "garbled.sqlite"
    target.write_bytes(raw[:100] + b"\x00" * (len(raw) - 100))
    return target


def _truncated_xz(tmp: Path) -> Path:
    data = (TRACES / "mlp_eager.sqlite.xz").read_bytes()
    target = tmp / "cut.sqlite.xz"
    target.write_bytes(data[: len(data) // 3])
    return target


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        (tmp / name).write_bytes(data)
        return tmp / name

    return make


def _folder(tmp: Path) -> Path:
    (tmp / "adir.sqlite").mkdir()
    return tmp / "adir.sqlite"


FILE_CASES: list[tuple[str, Callable[[Path], Path], tuple[str, ...]]] = [
    ("missing-file", lambda tmp: tmp / "nope.sqlite", ("no such file",)),
    ("directory", _folder, ("is a directory",)),
    ("zero-byte-file", _write("zero.sqlite", b""), ("empty",)),
    ("text-file", _write("notes.sqlite", b"this is not a database\n" * 100), ("not an SQLite file",)),
    ("png-file", _write("image.sqlite", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8), ("not an SQLite file",)),
    ("truncated-mid-file", _truncated, ("truncated",)),
    ("garbled-after-header", _header_only, ("sqlite",)),
    ("truncated-xz", _truncated_xz, ("not a valid .xz file",)),
    ("xz-suffix-not-xz", _write("fake.sqlite.xz", b"plain text"), ("not a valid .xz file",)),
]


@pytest.mark.parametrize(("make", "fragments"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_bad_file_gives_one_line_error(
    tmp_path: Path, make: Callable[[Path], Path], fragments: tuple[str, ...]
) -> None:
    trace = make(tmp_path)
    p = run_cli("analyze", str(trace), "-o", str(tmp_path / "out"))
    assert_one_line_error(p.returncode, p.stderr, *fragments)
    assert not (tmp_path / "out" / "summary.json").exists()


def _nsys_rep(tmp: Path) -> Path:
    rep = tmp / "run.nsys-rep"
    rep.write_bytes(b"not really a report")
    return rep


@pytest.mark.slow
def test_nsys_rep_with_launchprof_nsys_pointing_nowhere(tmp_path: Path) -> None:
    env = {**os.environ, "LAUNCHPROF_NSYS": str(tmp_path / "no" / "nsys")}
    p = run_cli("analyze", str(_nsys_rep(tmp_path)), "-o", str(tmp_path / "out"), env=env)
    assert_one_line_error(p.returncode, p.stderr, "nsys not found at")


@pytest.mark.slow
def test_nsys_rep_without_nsys_on_path(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LAUNCHPROF_NSYS"}
    env["PATH"] = str(tmp_path / "empty-bin")
    env["LAUNCHPROF_NSYS_INSTALL_DIRS"] = ""  # nor in the usual install folders
    p = run_cli("analyze", str(_nsys_rep(tmp_path)), "-o", str(tmp_path / "out"), env=env)
    assert_one_line_error(p.returncode, p.stderr, "nsys (Nsight Systems) was not found")


@pytest.mark.nsys
def test_nsys_rep_that_nsys_cannot_read(tmp_path: Path) -> None:
    if not shutil.which("nsys"):
        pytest.skip("nsys not installed")
    p = run_cli("analyze", str(_nsys_rep(tmp_path)), "-o", str(tmp_path / "out"))
    assert_one_line_error(p.returncode, p.stderr, "nsys export of")
    assert (tmp_path / "run.nsys-rep").read_bytes() == b"not really a report"  # never deleted


def test_an_export_that_dies_midway_leaves_no_sqlite_to_reuse(tmp_path: Path) -> None:
    """An nsys export interrupted halfway (here: a stand-in nsys that writes part of the
    file, then dies) left a truncated run.sqlite that every later analyze reused ("not an
    SQLite file"): now nothing is left, and the next run exports again."""
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "NVIDIA Nsight Systems version 2025.3.1"; exit 0; fi\n'
        'while [ "$1" != "--output" ]; do shift; done; printf "SQLite format 3" > "$2"; kill -9 $$\n'
    )
    fake.chmod(0o755)
    env = {**os.environ, "LAUNCHPROF_NSYS": str(fake)}
    p = run_cli("analyze", str(_nsys_rep(tmp_path)), "-o", str(tmp_path / "out"), env=env)
    assert_one_line_error(p.returncode, p.stderr, "nsys export of")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bin", "run.nsys-rep"]  # no run.sqlite, no partial


# ---------------------------------------------------------------- output folders


@pytest.mark.slow
def test_read_only_output_folder(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits; a folder on a read-only path still fails: use /proc.
        out = Path("/proc/launchprof-report")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        out = ro / "report"
    p = run_cli("analyze", str(base(tmp_path / "t.sqlite")), "-o", str(out))
    assert_one_line_error(p.returncode, p.stderr, "cannot create")


@pytest.fixture
def tmpfs(tmp_path: Path):
    """Mount a small tmpfs (root only); yields a function remounting it read-only."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
def test_read_only_existing_output_folder(tmp_path: Path, tmpfs: Path) -> None:
    trace = base(tmp_path / "t.sqlite")
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    p = run_cli("analyze", str(trace), "-o", str(tmpfs))
    assert_one_line_error(p.returncode, p.stderr, "not writable")


@pytest.mark.slow
def test_full_disk_never_replaces_a_good_report(tmp_path: Path, tmpfs: Path) -> None:
    """A real full file system (tmpfs): the new report cannot be written, the old one stays."""
    good = base(tmp_path / "good.sqlite")
    out = tmpfs / "out"
    assert run_cli("analyze", str(good), "-o", str(out)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    filler = tmpfs / "filler"
    with filler.open("wb") as fh:  # fill the file system up
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    other = sql(base(tmp_path / "other.sqlite"), f"DELETE FROM {KERNELS} WHERE start = 5000")
    p = run_cli("analyze", str(other), "-o", str(out), "--force")
    assert_one_line_error(p.returncode, p.stderr, "cannot write", "no space left")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_output_path_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("x")
    result = CliRunner().invoke(app, ["analyze", str(base(tmp_path / "t.sqlite")), "-o", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert result.output.strip() == f"launchprof: error: {tmp_path / 'out'} exists and is not a folder"


def test_existing_report_needs_force(tmp_path: Path) -> None:
    trace = base(tmp_path / "t.sqlite")
    runner = CliRunner()
    assert runner.invoke(app, ["analyze", str(trace), "-o", str(tmp_path / "out")]).exit_code == 0
    other = shutil.copy(trace, tmp_path / "other.sqlite")  # another trace: its report would replace this one
    again = runner.invoke(app, ["analyze", str(other), "-o", str(tmp_path / "out")])
    assert again.exit_code != 0
    assert "--force" in again.output and "Traceback" not in again.output


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.slow
@pytest.mark.parametrize("limit", [0, 3000], ids=["fails-on-first-file", "fails-on-page"])
def test_disk_full_never_replaces_a_good_report(tmp_path: Path, limit: int) -> None:
    """A file-size limit (RLIMIT_FSIZE, as a full disk: write() fails with EFBIG) hits
    while writing the new report: the old summary.json and report.html stay as they were,
    and no temporary file is left behind."""
    good = base(tmp_path / "good.sqlite")
    out = tmp_path / "out"
    assert run_cli("analyze", str(good), "-o", str(out)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # A different trace whose report differs (K2 removed).
    other = sql(base(tmp_path / "other.sqlite"), f"DELETE FROM {KERNELS} WHERE start = 5000")
    summary_size = len((out / "summary.json").read_bytes())
    assert limit < summary_size or limit < len((out / "report.html").read_bytes())
    p = subprocess.run(
        [launchprof_exe(), "analyze", str(other), "-o", str(out), "--force"],
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size(limit),
        check=False,
    )
    assert_one_line_error(p.returncode, p.stderr, "cannot write")
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after == before


# ---------------------------------------------------------------- hostile strings

HOSTILE = [
    "<img src=x onerror=\"document.title='pwned'\">",
    "</script><script>document.title='pwned'</script>",
    "'\"><svg onload=alert(1)>&amp;",
]


def test_hostile_strings_are_escaped_in_html_and_json(tmp_path: Path) -> None:
    b = TraceBuilder()
    for i, name in enumerate(HOSTILE):
        b.launch(100 + 10_000 * i, 900 + 10_000 * i, 1000 + 10_000 * i, 2000 + 10_000 * i, name=name)
        b.range(name, 50 + 10_000 * i, 2100 + 10_000 * i, domain=HOSTILE[0])
    b.call(HOSTILE[1], 40_000, 41_000)
    b.gpus = [(0, HOSTILE[0])]
    trace = b.write(tmp_path / "hostile.sqlite")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    for s in HOSTILE:
        assert s not in page
    assert "<img" not in page and "<svg" not in page
    assert page.count("</script>") == page.count("<script")  # no script element closed early
    summary = json.loads((out / "summary.json").read_text())
    assert summary["devices"][0]["name"] == HOSTILE[0]  # JSON keeps the text, as data


@pytest.mark.slow
def test_report_leaks_no_environment_or_absolute_paths(tmp_path: Path) -> None:
    """report.html and summary.json hold the trace path as given (relative here) and no
    environment value, home folder or absolute path of the machine."""
    base(tmp_path / "t.sqlite")
    secret = "s3cr3t-token-value-0123456789"
    env = {**os.environ, "LAUNCHPROF_TEST_SECRET": secret, "HOME": str(tmp_path / "home-of-user")}
    p = run_cli("analyze", "t.sqlite", "-o", "out", env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for name in ("report.html", "summary.json"):
        text = (tmp_path / "out" / name).read_text()
        assert secret not in text
        assert str(tmp_path) not in text
        assert str(Path.home()) not in text
        values = {v for v in env.values() if len(v) >= 8 and "/" in v or v == secret}
        leaked = [v for v in values if v in text]
        assert leaked == [], (name, leaked)
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["trace"]["path"] == "t.sqlite"


def test_a_fifo_named_like_a_compressed_trace_is_refused_at_once(tmp_path: Path) -> None:
    """It kept the decompression waiting for a writer for ever (a FIFO named f.sqlite was
    refused already)."""
    fifo = tmp_path / "f.sqlite.xz"
    os.mkfifo(fifo)
    result = CliRunner().invoke(app, ["analyze", str(fifo), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and "is not a regular file" in result.output


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e30])
def test_an_unusable_bubble_threshold_is_one_clear_error_in_the_api(value: float) -> None:
    trace = Path(__file__).resolve().parent / "data" / "traces" / "mlp_eager.sqlite.xz"
    with pytest.raises(ValueError, match="bubble threshold must be from 0 to"):
        launchprof.analyze(trace, bubble_threshold_ns=value)  # type: ignore[arg-type]


def test_a_min_effect_of_nan_is_refused(tmp_path: Path) -> None:
    traces = Path(__file__).resolve().parent / "data" / "traces"
    a, b = str(traces / "mlp_eager.sqlite.xz"), str(traces / "mlp_graph.sqlite.xz")
    result = CliRunner().invoke(app, ["compare", a, b, "--min-effect", "nan", "-o", str(tmp_path / "c")])
    assert result.exit_code == 2 and "--min-effect must be a finite number" in result.output
    with pytest.raises(ValueError, match="min_effect must be a finite number"):
        launchprof.compare(a, b, min_effect=float("nan"))


def test_write_report_takes_a_folder_given_as_text(tmp_path: Path) -> None:
    from launchprof.report.write import write_report

    trace = Path(__file__).resolve().parent / "data" / "traces" / "mlp_eager.sqlite.xz"
    write_report(launchprof.analyze(trace), str(tmp_path / "r"))
    assert (tmp_path / "r" / "summary.json").exists()


def test_control_characters_of_names_are_escapes_on_the_page(tmp_path: Path) -> None:
    """A kernel name, an NVTX range and a GPU name holding ESC sequences (set the title,
    clear the screen), a NUL and a C1 control reached report.html as raw characters (the
    terminal already wrote them as escapes); the page now writes ``\\x1b`` as text, and
    summary.json keeps the name as data."""
    kernel, step, gpu = "k\x1b]0;pwned\x07", "step\x1b[2J\x00", "H200\x9b31m"
    b = TraceBuilder()
    for i in range(6):
        b.launch(100 + 10_000 * i, 900 + 10_000 * i, 1000 + 10_000 * i, 2000 + 10_000 * i, name=kernel)
        b.range(step, 50 + 10_000 * i, 9_000 + 10_000 * i)
    b.gpus = [(0, gpu)]
    trace = b.write(tmp_path / "controls.sqlite")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(out), "--step", step])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    bad = [c for c in page if (ord(c) < 32 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F]
    assert bad == []
    assert "k\\x1b]0;pwned\\x07" in page and "H200\\x9b31m" in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["devices"][0]["name"] == gpu
