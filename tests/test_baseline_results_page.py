"""scripts/results_page.py: docs/results.md is what the script writes from docs/data/, and
its figures match hand computations from the same inputs."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("results_page", ROOT / "scripts" / "results_page.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_page_is_the_generated_one(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    load_script().build(out)
    assert out.read_text() == (ROOT / "docs" / "results.md").read_text()


def test_figures_match_hand_computation() -> None:
    page = (ROOT / "docs" / "results.md").read_text()
    log = (ROOT / "docs" / "data" / "gpu_log_2026-11-29.txt").read_text()
    section = log.split("=== without the profiler", 1)[1].split("===", 1)[0]
    per_step = {
        (r["workload"], r["mode"]): r["per_step_us"]
        for r in (json.loads(m) for m in re.findall(r"(?m)^RESULT (.*)$", section))
    }
    assert per_step[("small_kernels", "launch")] == 206.42 and per_step[("small_kernels", "graph")] == 38.09
    assert "per-launch 206.4 us vs graph 38.1 us per step: 5.4x" in page  # 206.42 / 38.09 = 5.42
    assert "per-launch 409.1 us vs graph 68.7 us per step: 6.0x" in page  # 409.1 / 68.7 = 5.95
    # N = 1 from the calibration file: per-launch max(4436.5, 1424) = 4436.5 ns, graph max(3960, 672) = 3960 ns,
    # 4436.5 / 3960 = 1.12x; instantiate 4924 ns; N* = floor(4924 / 476.5) + 1 = 11
    assert "| 1 | 4.44 us | 3.96 us | 1.12x | 4.92 us | 11 |" in page
    # 256 nodes: update 38761 ns, re-instantiate 264083 ns: 6.8x
    assert "| 256 | 38.76 us | 264.08 us | 255.41 us | 6.8x |" in page
    assert "the whole command 2.76 s wall" in page
    # mlp_eager / mlp_graph step period under nsys, from the two summaries: 706687 / 73279 = 9.64
    assert "mlp_eager -> mlp_graph: measured 9.64x under nsys" in page


def test_corrected_prediction_row_by_hand() -> None:
    page = (ROOT / "docs" / "results.md").read_text()
    # docs/data/session2, small_launch: GPU busy 34272 ns a step of 36 kernels; the calibration's node gap
    # (%globaltimer) 608 ns and graph-launch gap 1504 ns give an unprofiled graph launch gap of
    # 80 + (1504 - 608) = 976 ns; node floor 36 x 665 = 23940 ns does not bind: 34272 + 35 x 80 + 976 = 38048 ns.
    # Baseline runs: 193500.5 ns a step -> 193500.5 / 38048 = 5.09x. Without nsys the example printed
    # 224.71, 205.64, 203.22 us (launch) and 38.46, 38.29, 38.62 us (graph): medians 205.64 / 38.46 = 5.35x,
    # so the corrected prediction is (5.0857 - 5.3469) / 5.3469 = -5 % off. Under nsys 273630 / 53647.5 = 5.10x.
    row = (
        "| small_launch -> small_graph | 273.6 us | 53.6 us | 5.65x (+11%) | 5.10x | 193.5 us | 38.0 us | 38.5 us "
        "| 5.09x (-5%) | 5.35x |"
    )
    assert row in page
