"""Several traces analysed together are taken as the ranks of one job; when they do not look
like one (different programs, or one replaying CUDA graphs and another not), combined.json,
the page and the terminal say so. Real traces of tests/data."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from launchprof.analysis.ranks import SAME_PROGRAM_MIN_SHARED, ProgramSignature, not_one_job
from launchprof.commands.many import analyze_many

DATA = Path(__file__).parent / "data"


def _many(tmp_path: Path, *traces: Path) -> dict:
    paths = []
    for i, t in enumerate(traces):
        target = tmp_path / f"r{i}_{t.name}"
        shutil.copy(t, target)
        paths.append(str(target))
    combined = analyze_many(paths, tmp_path / "out", workers=0)
    doc = json.loads((tmp_path / "out" / "combined.json").read_text())
    assert doc["notes"] == combined.notes
    return doc


def test_a_conversions_before_and_after_are_not_taken_for_one_job(tmp_path: Path) -> None:
    doc = _many(tmp_path, DATA / "traces" / "mlp_eager.sqlite.xz", DATA / "traces" / "mlp_graph.sqlite.xz")
    assert len(doc["notes"]) == 1
    assert "r1_mlp_graph replays CUDA graphs, the others launch each kernel" in doc["notes"][0]
    assert "launchprof compare" in doc["notes"][0]
    page = html.unescape((tmp_path / "out" / "combined.html").read_text())
    assert doc["notes"][0] in page


def test_different_programs_are_not_taken_for_one_job(tmp_path: Path) -> None:
    doc = _many(tmp_path, DATA / "traces" / "mlp_eager.sqlite.xz", DATA / "gpu" / "matmul_eager.sqlite.xz")
    assert any("kernel names in common with r0_mlp_eager: r1_matmul_eager (" in n for n in doc["notes"])


def test_ranks_of_one_program_get_no_note(tmp_path: Path) -> None:
    trace = DATA / "traces" / "mlp_eager.sqlite.xz"
    assert _many(tmp_path, trace, trace)["notes"] == []


def test_the_kernel_share_threshold() -> None:
    a = ProgramSignature(frozenset("abcd"), False)
    near = ProgramSignature(frozenset("abce"), False)  # 3 of 5 names in common: 60 %
    far = ProgramSignature(frozenset("adxy"), False)  # 2 of 6: 33 %
    assert 2 / 6 < SAME_PROGRAM_MIN_SHARED < 3 / 5
    assert not_one_job([("a", a), ("near", near)]) == []
    assert "far (33%)" in not_one_job([("a", a), ("near", near), ("far", far)])[0]
    assert not_one_job([("a", a)]) == []
