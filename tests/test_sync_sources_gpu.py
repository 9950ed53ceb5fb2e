"""Source lines of synchronizing calls on real recordings (tests/data/frameworks, manifest
``sources``): a trace and the run without nsys that ``profile`` made of it on an H200,
whose collector wrote the Python stack of every synchronizing call (real torch, real
``set_sync_debug_mode``). Ground truth is the workloads' source: the line of the planted
``.item()`` and the user's ``generate()`` calls, found by their text, not written here."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path
from typing import Any

import pytest

import launchprof

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "frameworks"
SOURCES: dict[str, Any] = json.loads((CORPUS / "manifest.json").read_text())["sources"]


@pytest.fixture(autouse=True)
def _no_calibration_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


def _folder(name: str, tmp_path: Path) -> Path:
    """The recording's runs as ``profile`` left them: steps and sources side by side."""
    src = CORPUS / SOURCES[name]["baseline_folder"]
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(src / "baseline-1.steps", folder)
    (folder / "baseline-1.sources").write_bytes(lzma.decompress((src / "baseline-1.sources.xz").read_bytes()))
    return folder


def _lines(path: str, marker: str) -> set[int]:
    text = (ROOT / path).read_text().splitlines()
    return {i for i, line in enumerate(text, start=1) if marker in line}


def _sync_finding(a: Any) -> Any:
    return next(f for f in a.diagnosis.findings if f.kind == "sync-in-step")


def test_a_planted_item_is_pinned_to_its_line(tmp_path: Path) -> None:
    rec = SOURCES["planted_sync_rec1"]
    a = launchprof.analyze(CORPUS / "planted_sync_rec1.sqlite.xz", baseline=_folder("planted_sync_rec1", tmp_path))
    f = _sync_finding(a)
    planted = rec["planted"]
    (line,) = _lines(planted["file"], planted["marker"])
    top = f.where[0]
    assert top["file"].endswith(planted["file"]) and top["line"] == line and not top["library"]
    assert top["function"] == "main" and top["per_step"] == pytest.approx(planted["per_step"], rel=0.05)
    assert f.where_note == ""
    # the blocker (or warning) in summary.json carries the same lines
    doc = json.loads(a.summary.to_json())
    found = next(x for x in doc["diagnosis"]["findings"] if x["kind"] == "sync-in-step")
    assert found["where"][0]["line"] == line
    # the conversion code on the page starts from the user's own line
    from launchprof.report.snippets import choose

    first = choose(a.diagnosis, a.recommendation, a.outputs().skip_causes)[0]
    assert first.title.startswith("Your synchronizing calls") and f"planted_sync.py:{line} (main)" in first.code


def test_a_generate_script_s_stopping_check_is_pinned_in_transformers_via_the_user_s_call(tmp_path: Path) -> None:
    rec = SOURCES["gpt2_b1_eager_plain_sync"]
    folder = _folder("gpt2_b1_eager_plain_sync", tmp_path)
    a = launchprof.analyze(CORPUS / "gpt2_b1_eager_plain_sync.sqlite.xz", baseline=folder)
    f = _sync_finding(a)
    calls = _lines(rec["user_call"]["file"], rec["user_call"]["marker"])
    in_generate = [w for w in f.where if w["library"] and w["file"] == rec["library_file"]]
    assert in_generate, f.where
    for w in in_generate:  # each reached from one of the script's generate() calls
        file, _, rest = w["via"].partition(":")
        assert file.endswith(rec["user_call"]["file"]) and int(rest.split()[0]) in calls
    # generate()'s own syncs (its stopping check first) come between the model's forward
    # calls: outside a graph of the forward; a sync the forward makes is inside
    assert all(w["outside"] is True for w in in_generate)
    in_forward = [w for w in f.where if w["file"] != rec["library_file"]]
    assert in_forward and all(w["outside"] is False for w in in_forward)
    # the user's own lines come first, then the library's; per step they add up to the trace's count
    flags = [w["library"] for w in f.where]
    assert flags == sorted(flags)
    assert sum(w["share"] for w in f.where) <= 1 + 1e-9
    assert sum(w["per_step"] for w in f.where) <= f.figures["sync_calls_p50"] * (1 + 1e-9)


def test_without_the_runs_the_finding_says_so_in_one_line() -> None:
    a = launchprof.analyze(CORPUS / "planted_sync_rec1.sqlite.xz")
    f = _sync_finding(a)
    assert f.where == [] and f.where_note.startswith("source lines: not collected")
    assert "\n" not in f.where_note


SKIPS: dict[str, Any] = json.loads((CORPUS / "manifest.json").read_text())["graph_skips"]


def _skip_folder(name: str, tmp_path: Path) -> Path:
    src = CORPUS / SKIPS["recordings"][name]["baseline_folder"]
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(src / "baseline-1.steps", folder)
    (folder / "baseline-1.sources").write_bytes(lzma.decompress((src / "baseline-1.sources.xz").read_bytes()))
    return folder


@pytest.mark.parametrize("name", ["compile_mutate_rec1", "compile_mutate_rec2"])
def test_an_inductor_skip_is_a_blocker_at_the_line_it_names(tmp_path: Path, name: str) -> None:
    """torch.compile(mode="reduce-overhead") of a step that changes an input in place ran
    without CUDA Graphs on the H200 (PyTorch 2.11 logged why, and where): the finding is a
    blocker that names the planted line (found by its text in the example), the function
    and Inductor's reason; the trace itself launches no graph."""
    planted = SKIPS["planted"]
    (line,) = _lines(planted["file"], planted["marker"])
    a = launchprof.analyze(CORPUS / f"{name}.sqlite.xz", baseline=_skip_folder(name, tmp_path))
    f = next(x for x in a.diagnosis.findings if x.kind == "cudagraph-skip")
    assert f.severity == "blocker"
    assert a.diagnosis.figures.get("graph_launches_per_step_p50", 0) == 0
    (w,) = f.where
    assert w["file"].endswith(planted["file"]) and w["line"] == line and not w["library"]
    assert w["function"] == planted["function"] and w["reason"] == planted["reason"]
    assert "changes an input in place" in f.fix
    doc = json.loads(a.summary.to_json())
    found = next(x for x in doc["diagnosis"]["findings"] if x["kind"] == "cudagraph-skip")
    assert found["where"][0]["line"] == line and found["where"][0]["per_step"] is None
    # the page's code starts with that line and the change, named by the user's function
    from launchprof.report.snippets import choose

    first = choose(a.diagnosis, a.recommendation, a.outputs().skip_causes)[0]
    assert f"{planted['file']}:{line} (step_mutate)" in first.code and "in step_mutate():" in first.code


def test_the_fixed_step_replays_a_graph_and_has_no_skip(tmp_path: Path) -> None:
    a = launchprof.analyze(
        CORPUS / "compile_fixed_rec1.sqlite.xz", baseline=_skip_folder("compile_fixed_rec1", tmp_path)
    )
    assert all(x.kind != "cudagraph-skip" for x in a.diagnosis.findings)
    assert a.diagnosis.figures["graph_launches_per_step_p50"] >= 1


def test_a_run_slower_than_its_trace_is_not_taken_as_the_step(tmp_path: Path) -> None:
    """compile_mutate_rec2's run without nsys timed 772.8 us a step where its trace shows
    468.0 us (its bare runs in that call: 573 and 406 us): the expectation is the
    estimate, and the verdict agrees with the decision (no 'gpu-bound' beside 2.01x)."""
    a = launchprof.analyze(
        CORPUS / "compile_mutate_rec2.sqlite.xz", baseline=_skip_folder("compile_mutate_rec2", tmp_path)
    )
    doc = json.loads(a.summary.to_json())
    assert doc["baseline"]["slower_than_traced"] is True
    expected = doc["recommendation"]["expected"]
    assert expected["eager_source"] == "estimate"
    bare = SKIPS["recordings"]["compile_mutate_rec2"]["bare_step_us"]
    fixed = SKIPS["recordings"]["compile_fixed_rec1"]["bare_step_us"]
    truth = min(bare) / max(fixed), max(bare) / min(fixed)
    assert expected["speedup_low"] <= truth[0] and expected["speedup"] < 1.25
    assert doc["recommendation"]["convert"] is False and doc["diagnosis"]["verdict"] != "launch-bound"


ALLOCS: dict[str, Any] = json.loads((CORPUS / "manifest.json").read_text())["allocations"]


def test_a_growing_cache_and_a_sync_are_pinned_to_their_lines(tmp_path: Path) -> None:
    """planted_allocs.py on an H200: the step grows a cache with torch.cat (its copy
    kernel's grid changes every step, and now and then the allocator calls cudaMalloc),
    reads a value back with .item(), and makes a buffer with torch.zeros. The allocation
    run pins the cudaMalloc and the growing shape to the cat line, the sync to the .item()
    line; the fixed-size buffer is no finding's line (inside a capture it comes from the
    graph's own pool). Lines found by their text in the example."""
    rec = ALLOCS["planted_allocs_rec1"]
    planted = rec["planted"]
    src = CORPUS / rec["baseline_folder"]
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("baseline-1.steps", "allocations-1.steps"):
        shutil.copy(src / name, folder)
    for name in ("baseline-1.sources", "allocations-1.sources"):
        (folder / name).write_bytes(lzma.decompress((src / f"{name}.xz").read_bytes()))
    a = launchprof.analyze(CORPUS / "planted_allocs_rec1.sqlite.xz", baseline=folder)
    found = {f.kind: f for f in a.diagnosis.findings}
    (cat,) = _lines(planted["file"], planted["cat"])
    (sync,) = _lines(planted["file"], planted["sync"])
    (zeros,) = _lines(planted["file"], planted["zeros"])
    malloc = found["alloc-in-step"].where
    assert [w["line"] for w in malloc] == [cat] and malloc[0]["reason"].startswith("cudaMalloc")
    shapes = found["dynamic-shapes"]
    assert shapes.where[0]["line"] == cat and shapes.where[0]["reason"].startswith("growing")
    assert shapes.figures["growing"] is True  # the trace's own view agrees: a static cache, not buckets
    assert found["sync-in-step"].where[0]["line"] == sync
    listed = {w["line"] for f in found.values() for w in f.where}
    assert zeros not in listed
    assert all(w["file"].endswith(planted["file"]) for f in found.values() for w in f.where)
