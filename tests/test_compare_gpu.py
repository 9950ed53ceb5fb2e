"""compare on the project's own H200 traces (tests/data/gpu/MANIFEST.md): the failure kinds.

Expected step periods are the ``steady.step_period_median_ns`` of tests/data/gpu/facts.json,
computed with plain sqlite3 by tests/data/gpu/trace_facts.py (no launchprof code; median
over the steps after the first tenth, so they may differ from launchprof's steady steps by
a step or two: 3 % tolerance). Call counts are construction facts from MANIFEST.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from launchprof import compare
from launchprof.analysis.comparison.verify import Comparison
from launchprof.report.compare import build_compare_doc, headline

GPU = Path(__file__).resolve().parent / "data" / "gpu"
FACTS = json.loads((GPU / "facts.json").read_text())


def period(name: str) -> float:
    return float(FACTS[name]["steady"]["step_period_median_ns"])


@pytest.fixture(scope="module")
def cmp(real_trace: Callable[..., Path]) -> Callable[[str, str], Comparison]:
    cache: dict[tuple[str, str], Comparison] = {}

    def run(before: str, after: str) -> Comparison:
        if (before, after) not in cache:
            cache[(before, after)] = compare(real_trace(before, GPU), real_trace(after, GPU))
        return cache[(before, after)]

    return run


def test_small_kernels_graph_is_verified(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("small_kernels_launch", "small_kernels_graph")
    assert c.verdict == "verified"
    assert c.speedup == pytest.approx(period("small_kernels_launch") / period("small_kernels_graph"), rel=0.03)
    assert c.before_figures.kernels_per_step == c.after_figures.kernels_per_step == 36
    assert c.after.graph_instantiations == 1  # captured and instantiated once


def test_reinstantiating_every_step_is_churn_and_slower(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("small_kernels_launch", "small_kernels_reinstantiate")
    assert c.verdict == "churn"
    churn = c.check("churn")
    # Construction: every step captures, instantiates and launches once (100 of each).
    assert churn.evidence["instantiations_per_graph_launch"] == 1.0
    assert churn.evidence["captures_per_graph_launch"] == 1.0
    assert c.after.graph_instantiations == 100
    assert "re-instantiates" in churn.detail and "per step" in churn.detail
    assert c.check("faster").passed is False
    assert c.speedup == pytest.approx(period("small_kernels_launch") / period("small_kernels_reinstantiate"), rel=0.03)
    assert c.speedup < 1  # the graph is slower than per-launch


def test_recapture_with_update_every_step_is_churn(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("small_kernels_launch", "small_kernels_update")
    assert c.verdict == "churn"
    churn = c.check("churn")
    # Construction: 1 instantiation before the loop; every step re-captures and updates.
    assert churn.evidence["instantiations_per_graph_launch"] == 0.0
    assert churn.evidence["captures_per_graph_launch"] == 1.0
    assert churn.evidence["exec_updates_per_graph_launch"] == 1.0
    assert "re-captures" in churn.detail


def test_pytorch_capture_every_step_is_churn(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("torch_mlp_eager", "torch_mlp_capture-every-step")
    assert c.verdict == "churn"
    assert c.check("churn").evidence["instantiations_per_graph_launch"] == 1.0
    # The 2 fill kernels torch issues around each capture show as extra work per step.
    extra = c.kernels.loc[c.kernels["differs"]]
    assert (extra["after_per_step"] - extra["before_per_step"]).sum() == 2


def test_gpu_bound_small_kernels_gain_little(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("small_kernels_big", "small_kernels_big-graph")
    expected = period("small_kernels_big") / period("small_kernels_big-graph")
    assert c.speedup == pytest.approx(expected, rel=0.03)
    assert c.speedup < 1.1  # the manifest: ~7 %
    assert c.verdict == ("verified" if c.speedup_ci and c.speedup_ci[0] >= 1.05 else "not-faster")


def test_gpu_bound_matmul_is_not_faster(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("matmul_eager", "matmul_graph")
    assert c.verdict == "not-faster"
    assert c.speedup == pytest.approx(period("matmul_eager") / period("matmul_graph"), rel=0.03)
    assert c.check("same_work").passed and c.check("converted").passed
    assert c.before_figures.kernels_per_step == 4  # 4 bf16 matmuls a step


def test_pytorch_graph_is_verified(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("torch_mlp_eager", "torch_mlp_graph")
    assert c.verdict == "verified"
    assert c.speedup == pytest.approx(period("torch_mlp_eager") / period("torch_mlp_graph"), rel=0.03)


def test_whole_graph_trace_mode_cannot_compare_kernels(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("small_kernels_launch", "graph_trace_mode")
    same = c.check("same_work")
    assert same.passed is None and "--cuda-graph-trace=node" in same.detail
    assert "the work cannot be compared; record with --cuda-graph-trace=node" in headline(build_compare_doc(c))
    assert c.verdict == "unknown-work"  # not "verified": the same work is not shown
    assert c.speedup == pytest.approx(period("small_kernels_launch") / period("graph_trace_mode"), rel=0.03)


def test_graph_pool_over_buckets_is_not_churn(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("torch_mlp_eager", "decode_buckets_graph")
    assert c.after.graph_instantiations == 4  # one per bucket
    assert c.check("churn").passed
    assert c.verdict == "different-work"  # an unrelated workload


def test_same_gpu_trace_twice_is_not_converted(cmp: Callable[[str, str], Comparison]) -> None:
    c = cmp("small_kernels_launch", "small_kernels_launch")
    assert c.verdict == "not-converted"
