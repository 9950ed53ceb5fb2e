"""Running a command again, as a script or CI job does: the report of the same trace (or the
comparison of the same two traces) is replaced without ``--force``; a folder holding the
report of another trace is refused with the other trace named. Through the installed
command, on real traces (tests/data/gpu and tests/data/frameworks both hold a
``matmul_eager``: the same default folder)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"
LAUNCHPROF = str(Path(sys.executable).parent / "launchprof")


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LAUNCHPROF, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def _traces(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "gpu").mkdir()
    (tmp_path / "frameworks").mkdir()
    a = shutil.copy(DATA / "gpu" / "matmul_eager.sqlite.xz", tmp_path / "gpu")
    b = shutil.copy(DATA / "frameworks" / "matmul_eager.sqlite.xz", tmp_path / "frameworks")
    c = shutil.copy(DATA / "gpu" / "matmul_graph.sqlite.xz", tmp_path / "gpu")
    return Path(a), Path(b), Path(c)


def test_analyze_twice_with_json_gives_the_document_both_times(tmp_path: Path) -> None:
    _traces(tmp_path)
    first = _run(tmp_path, "analyze", "gpu/matmul_eager.sqlite.xz", "--json", "-q")
    again = _run(tmp_path, "analyze", "gpu/matmul_eager.sqlite.xz", "--json", "-q")
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["headline"]["verdict"] == json.loads(first.stdout)["headline"]["verdict"]
    # The same file by another spelling of its path (resolved from the working folder) is the same trace.
    third = _run(tmp_path, "analyze", "./gpu/../gpu/matmul_eager.sqlite.xz", "-q", "-o", "reports/matmul_eager")
    assert third.returncode == 0, third.stderr


def test_a_folder_holding_another_traces_report_is_refused_with_its_name(tmp_path: Path) -> None:
    _traces(tmp_path)
    assert _run(tmp_path, "analyze", "gpu/matmul_eager.sqlite.xz", "-q").returncode == 0
    before = (tmp_path / "reports" / "matmul_eager" / "summary.json").read_bytes()
    other = _run(tmp_path, "analyze", "frameworks/matmul_eager.sqlite.xz", "-q", "--json")
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.strip() == (
        "launchprof: error: reports/matmul_eager already holds a report of gpu/matmul_eager.sqlite.xz; use --force "
        "to overwrite or --output to choose another folder"
    )
    assert (tmp_path / "reports" / "matmul_eager" / "summary.json").read_bytes() == before
    forced = _run(tmp_path, "analyze", "frameworks/matmul_eager.sqlite.xz", "-q", "--force")
    assert forced.returncode == 0, forced.stderr
    summary = json.loads((tmp_path / "reports" / "matmul_eager" / "summary.json").read_text())
    assert summary["trace"]["path"] == "frameworks/matmul_eager.sqlite.xz"


def test_compare_twice_replaces_its_own_comparison_only(tmp_path: Path) -> None:
    _traces(tmp_path)
    args = ("compare", "gpu/matmul_eager.sqlite.xz", "gpu/matmul_graph.sqlite.xz", "-o", "cmp", "-q", "--json")
    first, again = _run(tmp_path, *args), _run(tmp_path, *args)
    assert first.stdout and json.loads(again.stdout)["verdict"] == json.loads(first.stdout)["verdict"], again.stderr
    swapped = _run(tmp_path, "compare", "gpu/matmul_graph.sqlite.xz", "gpu/matmul_eager.sqlite.xz", "-o", "cmp", "-q")
    assert swapped.returncode == 2
    assert "cmp already holds a report of gpu/matmul_eager.sqlite.xz and gpu/matmul_graph.sqlite.xz" in swapped.stderr


def test_help_at_80_columns_cuts_nothing(tmp_path: Path) -> None:
    import os

    for command in ("analyze", "compare", "check", "profile", "doctor", "calibrate"):
        done = subprocess.run(
            [LAUNCHPROF, command, "--help"],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "80"},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "…" not in done.stdout, (command, [line for line in done.stdout.splitlines() if "…" in line])
        assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_the_index_headlines_a_comparisons_speedup_without_nsys(tmp_path: Path) -> None:
    import html

    _traces(tmp_path)
    done = _run(
        tmp_path, "compare", "gpu/matmul_eager.sqlite.xz", "gpu/matmul_graph.sqlite.xz", "-o", "reports/c", "-q"
    )
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads((tmp_path / "reports" / "c" / "compare.json").read_text())
    page = html.unescape((tmp_path / "reports" / "index.html").read_text())
    assert "speedup without nsys (range)" in page and "under nsys (95 % CI)" in page
    assert f"{doc['speedup_unprofiled']:.2f}x" in page and doc["speedup_unprofiled_source"] in page
    assert f"{doc['speedup']:.2f}x" in page


def test_two_kinds_of_report_never_share_a_folder(tmp_path: Path) -> None:
    a, _, c = _traces(tmp_path)
    shutil.copy(a, tmp_path / "combined.sqlite.xz")
    assert _run(tmp_path, "analyze", "combined.sqlite.xz", "-q").returncode == 0  # reports/combined
    many = _run(tmp_path, "analyze", str(a), str(c), "-q", "--workers", "0")  # default folder reports/combined
    assert many.returncode == 2
    assert many.stderr.strip() == (
        "launchprof: error: reports/combined holds an analyze report (summary.json); remove it or use --output "
        "to choose another folder"
    )
    assert not (tmp_path / "reports" / "combined" / "combined.json").exists()
    assert _run(tmp_path, "analyze", str(a), str(c), "-q", "--workers", "0", "-o", "m").returncode == 0
    single = _run(tmp_path, "analyze", str(a), "-q", "-o", "m")
    assert single.returncode == 2 and "m holds a multi-trace report (combined.json)" in single.stderr
    cmp = _run(tmp_path, "compare", str(a), str(c), "-q", "-o", "m")
    assert cmp.returncode == 2 and "m holds a multi-trace report (combined.json)" in cmp.stderr
    assert not (tmp_path / "m" / "summary.json").exists() and not (tmp_path / "m" / "compare.json").exists()
