"""Many reports, one per rank: the Dask path gives the bytes the one-by-one path gives.

The per-rank traces are the two processes of tests/data/gpu/two_procs.sqlite.xz, split
into one SQLite file each with plain sqlite3 (every row of the other process deleted).
"""

from __future__ import annotations

import json
import lzma
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import DATA
from typer.testing import CliRunner

import launchprof
from launchprof.cli import app
from launchprof.commands.many import analyze_many, expand_traces, folder_names

PIDS = (2482, 2483)
runner = CliRunner()


def split_by_process(src: Path, pid: int, target: Path) -> Path:
    """A copy of ``src`` holding only process ``pid``'s rows (pid = bits 24..47 of the
    nsys global thread/process id)."""
    shutil.copyfile(src, target)
    con = sqlite3.connect(target)
    for table, col in (
        ("CUPTI_ACTIVITY_KIND_KERNEL", "globalPid"),
        ("CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid"),
        ("NVTX_EVENTS", "globalTid"),
        ("OSRT_API", "globalTid"),
    ):
        con.execute(f"DELETE FROM {table} WHERE (({col} >> 24) & 16777215) != ?", (pid,))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return target


@pytest.fixture(scope="module")
def rank_traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("ranks")
    whole = folder / "two_procs.sqlite"
    with lzma.open(DATA / "gpu" / "two_procs.sqlite.xz") as src, whole.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    traces = folder / "traces"
    traces.mkdir()
    parts = [split_by_process(whole, pid, traces / f"rank{i}.sqlite") for i, pid in enumerate(PIDS)]
    return whole, parts


@pytest.fixture(scope="module")
def dask_run(rank_traces, tmp_path_factory: pytest.TempPathFactory):
    """``launchprof analyze 'traces/*.sqlite' --workers 2`` in-process (a LocalCluster)."""
    _, parts = rank_traces
    out = tmp_path_factory.mktemp("dask") / "combined"
    pattern = str(parts[0].parent / "*.sqlite")
    result = runner.invoke(app, ["analyze", pattern, "--workers", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_split_traces_hold_one_process_each(rank_traces) -> None:
    _, parts = rank_traces
    for part, pid in zip(parts, PIDS, strict=True):
        con = sqlite3.connect(part)
        sql = "SELECT DISTINCT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL"
        pids = {r[0] for r in con.execute(sql)}
        n = con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        con.close()
        assert pids == {pid} and n == 1605  # MANIFEST.md: 3210 kernels, two equal processes


@pytest.mark.dask
def test_dask_path_writes_the_bytes_of_the_serial_path(rank_traces, dask_run, tmp_path: Path) -> None:
    _, parts = rank_traces
    out, _ = dask_run
    for part in parts:
        single = tmp_path / part.stem
        result = runner.invoke(app, ["analyze", str(part), "--output", str(single)])
        assert result.exit_code == 0, result.output
        for name in ("summary.json", "report.html", "plotly.min.js"):
            assert (out / part.stem / name).read_bytes() == (single / name).read_bytes(), name


@pytest.mark.dask
def test_combined_json_is_the_same_with_and_without_dask(rank_traces, dask_run, tmp_path: Path) -> None:
    _, parts = rank_traces
    out, _ = dask_run
    combined = analyze_many([str(p) for p in parts], tmp_path / "serial", workers=0)
    assert combined.view is not None
    serial = (tmp_path / "serial" / "combined.json").read_bytes()
    assert serial == (out / "combined.json").read_bytes()


@pytest.mark.dask
def test_combined_view_equals_the_view_of_the_whole_trace(rank_traces, dask_run) -> None:
    whole, _ = rank_traces
    out, _ = dask_run
    doc = json.loads((out / "combined.json").read_text())
    inside = launchprof.analyze(whole).ranks.to_dict()
    assert doc["schema"] == "launchprof.combined/1" and doc["failed"] == 0
    assert [r["folder"] for r in doc["reports"]] == ["rank0", "rank1"]
    across = doc["ranks"]
    assert [r["label"] for r in across["ranks"]] == ["rank0", "rank1"]
    assert [r["pid"] for r in across["ranks"]] == list(PIDS)
    # Each process has the same GPU work and API calls alone as inside the whole trace,
    # so the per-step comparison is the same.
    assert across["per_step"] == inside["per_step"]
    assert across["stragglers"] == inside["stragglers"]
    for a, b in zip(across["ranks"], inside["ranks"], strict=True):
        for key in ("kernels", "steps", "warmup", "period_p50_ns", "straggler_steps", "slowest_steps"):
            assert a[key] == b[key], key


@pytest.mark.dask
def test_combined_page_and_rank_folders(dask_run) -> None:
    out, output = dask_run
    page = (out / "combined.html").read_text()
    assert 'href="rank0/report.html"' in page and "<h2>Ranks</h2>" in page
    assert "rank 0 (rank0)" in output and "combined report:" in output
    # one plotly.js on disk: the rank folders hold hard links to it
    assert (out / "rank0" / "plotly.min.js").samefile(out / "plotly.min.js")


@pytest.mark.browser
@pytest.mark.dask
def test_combined_page_renders_in_chromium(dask_run, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed")
    out, _ = dask_run
    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"]
        + [(out / "combined.html").as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "main-svg" in proc.stdout  # plotly drew the heatmap
    assert 'class="plot">plotly.min.js did not load' not in proc.stdout  # the fallback text


def test_a_bad_trace_is_reported_and_the_others_written(rank_traces, tmp_path: Path) -> None:
    _, parts = rank_traces
    bad = tmp_path / "broken.sqlite"
    bad.write_text("not a database")
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(parts[0]), str(bad), "--workers", "0", "--output", str(out)])
    assert result.exit_code != 0
    assert "launchprof: error: 1 of 2 traces could not be analysed" in result.output
    doc = json.loads((out / "combined.json").read_text())
    assert doc["failed"] == 1 and doc["reports"][1]["error"]
    assert (out / "rank0" / "summary.json").exists() and bad.exists()


def test_glob_without_match_is_a_user_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["analyze", str(tmp_path / "*.sqlite")])
    assert result.exit_code != 0 and "no trace matches" in result.output


@pytest.mark.slow
def test_the_same_traces_again_replace_their_report_and_other_traces_need_force(rank_traces, tmp_path: Path) -> None:
    whole, parts = rank_traces
    out = tmp_path / "c"
    args = ["analyze", str(parts[0]), str(parts[1]), "--workers", "0", "--output", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    first = (out / "combined.json").read_bytes()
    (out / "rank0" / "steps.csv").unlink()  # the rerun writes the report anew
    again = runner.invoke(app, args)  # as `analyze TRACE` replaces its own report
    assert again.exit_code == 0, again.output
    assert (out / "combined.json").read_bytes() == first
    assert (out / "rank0" / "steps.csv").is_file()
    for other in (
        ["analyze", str(parts[1]), str(parts[0])],  # the same traces in another order: other folders' ranks
        ["analyze", str(parts[0]), str(whole)],
        ["analyze", str(whole), "--per-process"],
    ):
        refused = runner.invoke(app, [*other, "--workers", "0", "--output", str(out)])
        assert refused.exit_code == 2 and "--force" in refused.output, other
        assert (out / "combined.json").read_bytes() == first
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0


def test_expand_traces(tmp_path: Path) -> None:
    for name in ("b.sqlite", "a.sqlite", "c.txt"):
        (tmp_path / name).write_text("")
    assert expand_traces([str(tmp_path / "a.sqlite")]) is None  # one trace: the single-trace command
    assert expand_traces([str(tmp_path / "*.sqlite")]) == [str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")]
    both = [str(tmp_path / "b.sqlite"), str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite")]
    assert expand_traces(both) == both[:2]
    assert folder_names(["x/rank0.sqlite", "y/rank0.sqlite.xz", "rank1.nsys-rep"]) == ["rank0-0", "rank0-1", "rank1"]
    # A name made for a repeated stem that another trace already has: one folder each.
    names = folder_names(["x/a.sqlite", "y/a.sqlite", "a-1.sqlite"])
    assert len(set(names)) == 3 and names[2] == "a-1"


@pytest.mark.dask
@pytest.mark.parametrize("address", ["tcp://127.0.0.1:9", "garbage"])  # garbage: a ValueError traceback once
def test_unreachable_scheduler_is_a_user_error(rank_traces, tmp_path: Path, address: str) -> None:
    _, parts = rank_traces
    result = runner.invoke(
        app,
        ["analyze", str(parts[0]), str(parts[1]), "--scheduler", address, "--output", str(tmp_path / "o")],
    )
    assert result.exit_code == 2 and "cannot reach the Dask scheduler" in result.output


@pytest.mark.dask
def test_existing_scheduler_gives_the_same_report(rank_traces, dask_run, tmp_path: Path) -> None:
    import logging

    from dask.distributed import LocalCluster

    _, parts = rank_traces
    out, _ = dask_run
    with LocalCluster(
        n_workers=1, threads_per_worker=1, host="127.0.0.1", dashboard_address=None, silence_logs=logging.ERROR
    ) as cluster:
        args = ["analyze", *map(str, parts), "--scheduler", cluster.scheduler_address]
        result = runner.invoke(app, args + ["--output", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "s" / "combined.json").read_bytes() == (out / "combined.json").read_bytes()
    assert (tmp_path / "s" / "rank1" / "summary.json").read_bytes() == (out / "rank1" / "summary.json").read_bytes()


def test_a_trace_without_gpu_work_counts_as_failed(rank_traces, tmp_path: Path) -> None:
    from tracebuilder import TraceBuilder

    _, parts = rank_traces
    b = TraceBuilder()
    b.call("cudaMalloc_v3020", 100, 200)
    idle = b.write(tmp_path / "idle.sqlite")
    out = tmp_path / "out"
    result = runner.invoke(app, ["analyze", str(parts[0]), str(idle), "--workers", "0", "--output", str(out)])
    assert result.exit_code != 0 and "no CUDA activity" in result.output
    doc = json.loads((out / "combined.json").read_text())
    assert [r["ranks"] for r in doc["reports"]] == [1, 0] and doc["failed"] == 1
    assert (out / "idle" / "summary.json").exists()  # written, as the single-trace command does


@pytest.mark.dask
def test_installed_command_runs_the_dask_path(rank_traces, dask_run, tmp_path: Path) -> None:
    import sys

    _, parts = rank_traces
    out, _ = dask_run
    exe = Path(sys.executable).parent / "launchprof"
    pattern = str(parts[0].parent / "rank*.sqlite")
    proc = subprocess.run(
        [str(exe), "analyze", pattern, "--workers", "2", "--output", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "combined report:" in proc.stdout
    assert (tmp_path / "o" / "combined.json").read_bytes() == (out / "combined.json").read_bytes()


WITHOUT_DASK = """
import sys
sys.modules["dask"] = None  # as without the extra: pip install launchprof (no [dask])
sys.modules["distributed"] = None
from launchprof.cli.entry import main
sys.argv = ["launchprof", *sys.argv[1:]]
main()
"""


def test_many_traces_without_dask_run_one_by_one(rank_traces, tmp_path: Path) -> None:
    """Dask is an extra: without it several traces are analysed one after another, and
    asking for workers or a scheduler says what to install."""
    import sys

    _, parts = rank_traces
    run = [sys.executable, "-c", WITHOUT_DASK, "analyze", str(parts[0]), str(parts[1])]
    done = subprocess.run([*run, "-o", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    combined = json.loads((tmp_path / "o" / "combined.json").read_text())
    assert combined["ranks"]["count"] == 2
    done = subprocess.run([*run, "-o", str(tmp_path / "w"), "--workers", "2"], capture_output=True, text=True)
    assert done.returncode == 2 and "pip install '.[dask]'" in done.stderr and "use --workers 0" in done.stderr
    assert not (tmp_path / "w").exists()  # refused before any folder was made


@pytest.mark.slow
def test_a_failed_trace_keeps_no_report_of_the_earlier_trace_in_its_folder(tmp_path: Path) -> None:
    """x/a.sqlite, then (with --force) y/a.sqlite that cannot be read: folder ``a`` must not
    go on holding x/a.sqlite's report beside combined.json saying ``a`` failed."""
    import lzma

    good = tmp_path / "x" / "a.sqlite"
    good.parent.mkdir()
    good.write_bytes(lzma.decompress((DATA / "traces" / "mlp_eager.sqlite.xz").read_bytes()))
    bad = tmp_path / "y" / "a.sqlite"
    bad.parent.mkdir()
    bad.write_text("not a trace")
    other = DATA / "traces" / "mlp_graph.sqlite.xz"
    out = tmp_path / "w"
    first = runner.invoke(app, ["analyze", str(good), str(other), "--workers", "0", "-o", str(out), "-q"])
    assert first.exit_code == 0, first.output
    assert (out / "a" / "summary.json").is_file()
    second = runner.invoke(app, ["analyze", str(bad), str(other), "--workers", "0", "-o", str(out), "-q", "--force"])
    assert second.exit_code == 2 and "could not be analysed" in second.output, second.output
    doc = json.loads((out / "combined.json").read_text())
    assert [r["folder"] for r in doc["reports"] if r["error"]] == ["a"]
    assert not (out / "a" / "summary.json").exists()
