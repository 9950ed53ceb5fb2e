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
    # small_launch summary: step 282816 ns, GPU side 58640 ns, CPU side 3259.6 ns, predicted 4.82x;
    # without nsys 206.42 us: factor 206420 / 282816 = 0.730; corrected step 206420 ns,
    # graph max(58640, 3259.6 x 0.730 = 2379) = 58640 ns: 206420 / 58640 = 3.52x; measured 206.42 / 38.09 = 5.42x
    assert "| small_launch | 282.8 us | 206.4 us | 0.730 | 4.82x | 3.52x | 5.42x | 58.6 us | 38.1 us |" in page
