"""summary.json: the contract keys (docs/reference.md), the invariants, and the pydantic model
refusing documents that break them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pydantic
import pytest
from tracebuilder import TraceBuilder

import launchprof
from launchprof.report.schema import SUMMARY_SCHEMA, Figures, Summary
from launchprof.report.summary import build_summary
from launchprof.report.write import write_report

# Keys scripts and CI gates rely on (docs/reference.md, "summary.json").
CONTRACT_TOP = ["schema", "trace.path", "trace.nsys_version", "devices", "launches"]
CONTRACT_DEVICE = [
    "device_id",
    "kernels",
    "span_ns",
    "busy_ns",
    "idle_ns",
    "utilization",
    "bubbles.count",
    "bubbles.total_ns",
    "host_wait_ns",
    "cpu_bound_ratio",
]
CONTRACT_LAUNCHES = [
    "kernel_launch_calls",
    "launch_call_p50_ns",
    "graph_launches",
    "graph_instantiations",
    "graph_exec_updates",
]
INT_NS = ["span_ns", "busy_ns", "idle_ns", "host_wait_ns"]


def _get(doc: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        assert isinstance(doc, dict) and part in doc, f"missing key {dotted}"
        doc = doc[part]
    return doc


@pytest.fixture(scope="module")
def written(real_trace, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """summary.json as written for two real traces and a built two-process trace."""
    docs = {}
    for name in ("mlp_eager", "mlp_graph"):
        folder = tmp_path_factory.mktemp(name)
        write_report(launchprof.analyze(real_trace(name)), folder)
        docs[name] = json.loads((folder / "summary.json").read_text())
    b = TraceBuilder()
    b.launch(0, 100, 1000, 2000, pid=1, stream=3)
    b.launch(0, 2500, 3000, 3500, pid=2, stream=3)
    b.memcpy(4000, 4100, b.call("cudaMemcpyAsync_v3020", 3600, 3700, pid=1), pid=1, stream=4)
    folder = tmp_path_factory.mktemp("built")
    trace = b.write(folder / "built.sqlite")
    write_report(launchprof.analyze(trace), folder / "r")
    docs["built"] = json.loads((folder / "r" / "summary.json").read_text())
    return docs


def _all_figures(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for d in doc["devices"]:
        out += [d, *d["processes"], *d["streams"]]
    return out


@pytest.mark.parametrize("name", ["mlp_eager", "mlp_graph", "built"])
def test_contract_keys_present_with_types(name: str, written) -> None:
    doc = written[name]
    for key in CONTRACT_TOP:
        _get(doc, key)
    assert doc["schema"] == SUMMARY_SCHEMA == "launchprof.summary/1"
    assert doc["devices"], "every trace here has GPU activity"
    for d in doc["devices"]:
        for key in CONTRACT_DEVICE:
            _get(d, key)
        for key in INT_NS + ["kernels", "device_id"]:
            assert type(d[key]) is int, key
        assert type(d["bubbles"]["count"]) is int and type(d["bubbles"]["total_ns"]) is int
        assert type(d["utilization"]) is float and type(d["cpu_bound_ratio"]) is float
    for key in CONTRACT_LAUNCHES:
        _get(doc["launches"], key)
    for key in ("kernel_launch_calls", "graph_launches", "graph_instantiations", "graph_exec_updates"):
        assert type(doc["launches"][key]) is int


@pytest.mark.parametrize("name", ["mlp_eager", "mlp_graph", "built"])
def test_invariants_hold_everywhere(name: str, written) -> None:
    for f in _all_figures(written[name]):
        assert f["busy_ns"] + f["idle_ns"] == f["span_ns"]
        assert 0 <= f["host_wait_ns"] <= f["idle_ns"]
        assert 0 <= f["bubbles"]["total_ns"] <= f["idle_ns"]
        assert 0.0 <= f["utilization"] <= 1.0 and 0.0 <= f["cpu_bound_ratio"] <= 1.0
        assert f["utilization"] == (f["busy_ns"] / f["span_ns"] if f["span_ns"] else 0.0)
        assert sum(b["count"] for b in f["bubbles"]["histogram"]) == f["bubbles"]["count"]
    ratio = written[name]["launches"]["kernels_shorter_than_launch_ratio"]
    assert ratio is None or 0.0 <= ratio <= 1.0


def test_built_trace_processes_and_streams(written) -> None:
    d = written["built"]["devices"][0]
    assert [(p["pid"], p["kernels"], p["memops"]) for p in d["processes"]] == [(1, 1, 1), (2, 1, 0)]
    assert [(s["pid"], s["stream_id"], s["kernels"], s["memops"]) for s in d["streams"]] == [
        (1, 3, 1, 0),
        (1, 4, 0, 1),
        (2, 3, 1, 0),
    ]


@pytest.mark.parametrize("name", ["mlp_eager", "built"])
def test_written_json_validates_and_round_trips(name: str, written) -> None:
    text = json.dumps(written[name])
    model = Summary.model_validate_json(text)
    assert json.loads(model.to_json()) == written[name]


def test_same_trace_gives_the_same_json_byte_for_byte(real_trace) -> None:
    path = real_trace("mlp_graph")
    first = build_summary(launchprof.analyze(path)).to_json()
    assert build_summary(launchprof.analyze(path)).to_json() == first


# ------------------------------------------------------------------ the model refuses


def _figures(**change: Any) -> dict[str, Any]:
    base = {
        "kernels": 2,
        "memops": 0,
        "span_ns": 1000,
        "busy_ns": 600,
        "idle_ns": 400,
        "utilization": 0.6,
        "bubbles": {"threshold_ns": 100, "count": 1, "total_ns": 400, "histogram": []},
        "host_wait_ns": 400,
        "cpu_bound_ratio": 0.4,
    }
    base.update(change)
    return base


def test_valid_figures_accepted() -> None:
    Figures.model_validate(_figures())


@pytest.mark.parametrize(
    "change",
    [
        {"busy_ns": 601},  # busy + idle != span
        {"idle_ns": 399},
        {"span_ns": 999},
        {"utilization": 1.0000001},
        {"utilization": -0.1},
        {"cpu_bound_ratio": 1.5},
        {"cpu_bound_ratio": -1e-9},
        {"host_wait_ns": 401},  # more host-wait than idle
        {"kernels": -1},
        {"bubbles": {"threshold_ns": 100, "count": 1, "total_ns": 401, "histogram": []}},
        {"bubbles": {"threshold_ns": 100, "count": -1, "total_ns": 0, "histogram": []}},
        {"surprise": 1},  # unknown keys are refused
    ],
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())[:40],
)
def test_figures_model_rejects(change: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        Figures.model_validate(_figures(**change))


def test_summary_rejects_a_device_breaking_the_invariant(written) -> None:
    doc = copy.deepcopy(written["built"])
    Summary.model_validate(doc)
    doc["devices"][0]["busy_ns"] += 1
    with pytest.raises(pydantic.ValidationError, match="busy_ns \\+ idle_ns != span_ns"):
        Summary.model_validate(doc)


def test_summary_rejects_a_stream_ratio_out_of_bounds(written) -> None:
    doc = copy.deepcopy(written["built"])
    doc["devices"][0]["streams"][0]["cpu_bound_ratio"] = 1.01
    with pytest.raises(pydantic.ValidationError):
        Summary.model_validate(doc)


def test_summary_rejects_a_launch_ratio_out_of_bounds(written) -> None:
    doc = copy.deepcopy(written["built"])
    doc["launches"]["kernels_shorter_than_launch_ratio"] = 2.0
    with pytest.raises(pydantic.ValidationError):
        Summary.model_validate(doc)


def test_reference_documents_every_contract_key() -> None:
    """docs/reference.md (linked from the README) lists every summary.json key."""
    reference = Path(__file__).resolve().parent.parent / "docs" / "reference.md"
    if not reference.exists():
        pytest.skip("docs/reference.md is not next to tests/ (installed-only run)")
    text = reference.read_text()
    headline = ["headline", "scope", "steady_steps", "gpu_busy_ratio", "host_wait_ratio", "idle_bound_speedup"]
    keys = CONTRACT_DEVICE + CONTRACT_LAUNCHES + ["processes_without_gpu", "nvtx_ranges_lost", "nvtx_steps", *headline]
    for key in keys:
        assert f"`{key}`" in text or f"`{key.split('.')[0]}`" in text, key
    assert "docs/reference.md" in (reference.parent.parent / "README.md").read_text()


def test_the_compare_schema_names_the_comparison_verdicts() -> None:
    """compare.json's ``Verdict`` type is written out for pydantic; the verdicts are
    defined once (launchprof.defaults), which verify and the command line read."""
    from typing import get_args

    from launchprof.analysis.comparison import verify
    from launchprof.defaults import COMPARE_VERDICTS
    from launchprof.report.compare_schema import Verdict

    assert get_args(Verdict) == COMPARE_VERDICTS == verify.VERDICTS
