"""Write docs/results.md from measured data only (no number is typed into the page).

Inputs, all under docs/data/ unless given otherwise:

- ``calibration_h200_2026-11-29.json``: ``launchprof calibrate`` on one NVIDIA H200
  (schema ``launchprof.calibration/1``; its ``method`` says how each figure was taken);
- ``runs/*.summary.json``: ``launchprof profile`` summaries of the examples on the same
  H200 under nsys 2025.3;
- ``gpu_log_2026-11-29.txt``: the device sessions' logs (doctor output, the workloads'
  ``RESULT`` lines with ``per_step_us``, wall times, the bare-nsys vs launchprof timings);
- ``prediction_check_2026-11-29.json``: predicted vs measured speedups (source in its note);
- ``tests/data/gpu/facts.json``: figures read from the bundled GPU traces with plain
  sqlite3 (tests/data/gpu/MANIFEST.md);
- ``fidelity_2026-12-03.json``: ``benchmarks/fidelity.py --json`` on the real-framework
  corpus (tests/data/frameworks), the prediction against each pair's truth.

Model used for the "by node count" table (calibration figures only, a step of N empty
1-block kernels): per-launch step = max(N x launch_cpu, N x stream_kernel_interval) (the
host issues one launch call per kernel; the GPU runs one kernel per stream interval);
graph step = max(cudaGraphLaunch host time for N nodes, N x graph_node_interval);
break-even N* from :func:`launchprof.analysis.prediction.predict.break_even` with the measured
instantiation time for N nodes.

Usage: ``python scripts/results_page.py [--out docs/results.md]``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from launchprof.analysis.prediction.predict import break_even

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
CALIBRATION = DATA / "calibration_h200_2026-11-29.json"
LOG = DATA / "gpu_log_2026-11-29.txt"
CHECK = DATA / "prediction_check_2026-11-29.json"
FACTS = ROOT / "tests" / "data" / "gpu" / "facts.json"
FIDELITY = DATA / "fidelity_2026-12-03.json"
RUNS = (
    ("small_launch", "examples/small_kernels.py launch"),
    ("small_graph", "examples/small_kernels.py graph"),
    ("reinst", "examples/small_kernels.py reinstantiate"),
    ("big", "examples/small_kernels.py with large kernels, per-launch"),
    ("big_graph", "examples/small_kernels.py with large kernels, graph"),
    ("mlp_eager", "examples/torch_mlp.py eager"),
    ("mlp_graph", "examples/torch_mlp.py graph"),
)
PAIRS = (("small_launch", "small_graph"), ("big", "big_graph"), ("mlp_eager", "mlp_graph"))


def us(ns: float | None, digits: int = 2) -> str:
    return "-" if ns is None else f"{ns / 1e3:,.{digits}f} us"


def x(ratio: float | None, digits: int = 2) -> str:
    return "-" if ratio is None else f"{ratio:.{digits}f}x"


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out + [""]


def parse_log(text: str) -> dict[str, Any]:
    """RESULT lines without the profiler (the ``=== without the profiler`` section), the
    RESULT line printed by each workload under nsys (the one before ``NAME wall``), the
    calibrate wall time, and the bare nsys vs launchprof profile timings."""
    unprofiled: list[dict[str, Any]] = []
    under_nsys: dict[str, dict[str, Any]] = {}
    section, last = "", None
    for line in text.splitlines():
        if line.startswith("==="):
            section = line
            continue
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
            if "without the profiler" in section:
                unprofiled.append(result)
            else:
                last = result
        wall = re.match(r"^(\w+) wall ([\d.]+) s$", line)
        if wall and last is not None and wall.group(1) != "calibrate":
            under_nsys[wall.group(1)] = {**last, "profile_wall_s": float(wall.group(2))}
            last = None
    calibrate = re.search(r"(?m)^calibrate wall ([\d.]+) s$", text)
    overhead = [
        (int(m.group(1)), float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"(?m)^run (\d+): bare nsys ([\d.]+) s, launchprof profile ([\d.]+) s$", text)
    ]
    return {
        "unprofiled": unprofiled,
        "under_nsys": under_nsys,
        "calibrate_wall_s": float(calibrate.group(1)) if calibrate else None,
        "overhead": overhead,
    }


def calibration_section(cal: dict[str, Any], calibrate_wall_s: float | None) -> list[str]:
    dev, med, fits, by = cal["device"], cal["medians"], cal["fits"], cal["by_nodes"]
    lines = [
        "## Calibration (`launchprof calibrate`)",
        "",
        f"{dev['name']} (driver {dev['driver_version']}, compute capability {dev['compute_capability']}), "
        f"cuda-bindings {cal['software']['cuda_bindings']}, created {cal['created_utc']}. "
        f"The measurement itself took {cal['duration_s']:.2f} s"
        + (f"; the whole command {calibrate_wall_s:.2f} s wall." if calibrate_wall_s is not None else "."),
        "",
    ]
    lines += table(
        ["quantity", "median", "how"],
        [[k.removesuffix("_ns"), us(v), cal["method"].get(k, "")] for k, v in sorted(med.items())],
    )
    lines += table(
        ["cost (fit over node counts)", "intercept", "per node", "r2"],
        [
            [k.removesuffix("_ns"), us(f["intercept"]), f"{f['slope'] / 1e3:.3f} us", f"{f['r2']:.3f}"]
            for k, f in sorted(fits.items())
        ],
    )
    lines += ["### Per-launch vs graph step, by node count (model from the calibration)", ""]
    lines += [
        "A step of N empty 1-block kernels. Per-launch step = max(N x launch_cpu, N x stream_kernel_interval); "
        "graph step = max(cudaGraphLaunch host time for N nodes, N x graph_node_interval); "
        "N* = the fewest replays after which instantiate + N* graph steps beats N* per-launch steps.",
        "",
    ]
    rows = []
    for i, n in enumerate(by["nodes"]):
        per_launch = max(n * med["launch_cpu_ns"], n * med["stream_kernel_interval_ns"])
        graph = max(by["launch_cpu_ns"][i], n * med["graph_node_interval_ns"])
        inst = by["instantiate_ns"][i]
        n_star = break_even(inst, graph, per_launch)
        rows.append([n, us(per_launch), us(graph), x(per_launch / graph), us(inst), n_star if n_star else "never"])
    lines += table(["nodes N", "per-launch step", "graph step", "speedup", "instantiate", "break-even N*"], rows)
    lines += ["### Update vs re-instantiate (host time, measured by node count)", ""]
    rows = [
        [
            n,
            us(by["update_ns"][i]),
            us(by["reinstantiate_ns"][i]),
            us(by["instantiate_ns"][i]),
            x(by["reinstantiate_ns"][i] / by["update_ns"][i], 1),
        ]
        for i, n in enumerate(by["nodes"])
    ]
    lines += table(
        ["nodes", "cudaGraphExecUpdate", "re-instantiate", "first instantiate", "re-instantiate / update"], rows
    )
    return lines


def unprofiled_section(log: dict[str, Any]) -> list[str]:
    lines = ["## Without the profiler", ""]
    lines += [
        "Each example times its own steady-state steps (`per_step_us`: wall time of the timed steps / their "
        "count, after warm-up), run without nsys on the H200:",
        "",
    ]
    by_workload: dict[str, dict[str, float]] = {}
    rows = []
    for r in log["unprofiled"]:
        rows.append([r["workload"], r["mode"], r["timed_steps"], f"{r['per_step_us']:.1f} us"])
        by_workload.setdefault(r["workload"], {})[r["mode"]] = r["per_step_us"]
    lines += table(["example", "mode", "timed steps", "per step"], rows)
    for workload, modes in by_workload.items():
        eager = modes.get("launch", modes.get("eager"))
        if eager is not None and "graph" in modes:
            lines.append(
                f"- {workload}: per-launch {eager:.1f} us vs graph {modes['graph']:.1f} us per step: "
                f"{x(eager / modes['graph'], 1)}."
            )
    return lines + [""]


def runs_section(summaries: dict[str, dict[str, Any]], log: dict[str, Any]) -> list[str]:
    lines = ["## End to end: `launchprof profile` on the H200", ""]
    lines += [
        "Each example ran under `launchprof profile` (nsys 2025.3, the summaries are in `docs/data/runs/`). "
        "Step period and GPU busy are the analysis' steady-state medians under nsys; the prediction is the "
        "report's (the calibration above was installed). `per step (printed)` is what the example printed about "
        "itself in an earlier `launchprof profile` run of the same command (first device session; the summaries "
        "are from the second), so it is a separate measurement under nsys.",
        "",
    ]
    rows = []
    for name, what in RUNS:
        s = summaries[name]
        st, rec = s["steps"], s.get("recommendation") or {}
        printed = log["under_nsys"].get(name, {}).get("per_step_us")
        rows.append(
            [
                name,
                what,
                f"{st['count']} ({st['source']})",
                f"{st['kernels_per_step_p50']:.0f}",
                us(st["period_p50_ns"], 1),
                us(st["busy_p50_ns"], 1),
                f"{printed:.1f} us" if printed is not None else "-",
                s["diagnosis"]["verdict"],
                x(rec.get("predicted_speedup")) if rec.get("convert") else "not recommended",
            ]
        )
    lines += table(
        ["run", "workload", "steps", "kernels/step", "step period", "GPU busy/step", "per step (printed)", "verdict",
         "predicted graph speedup"],
        rows,
    )  # fmt: skip
    for eager, graph in PAIRS:
        e, g = summaries[eager], summaries[graph]
        measured = e["steps"]["period_p50_ns"] / g["steps"]["period_p50_ns"]
        rec = e.get("recommendation") or {}
        predicted = rec.get("predicted_speedup") if rec.get("convert") else None
        lines.append(
            f"- {eager} -> {graph}: measured {x(measured)} under nsys"
            + (f", predicted {x(predicted)}" if predicted else ", no conversion recommended")
            + "."
        )
    return lines + [""]


CORRECTED = (
    ("small_launch", "small_graph", "small_kernels", "launch"),
    ("mlp_eager", "mlp_graph", "torch_mlp", "eager"),
)


def corrected_section(session2: Path) -> list[str]:
    """Second session: profiled and overhead-corrected predictions against the steps
    measured under nsys and without it (docs/data/session2/README.md)."""
    runs = {p.name.split(".")[0]: json.loads(p.read_text()) for p in sorted((session2 / "runs").glob("*.summary.json"))}
    bare: dict[tuple[str, str], list[float]] = {}
    for r in parse_log((session2 / "without_profiler.txt").read_text())["unprofiled"]:
        bare.setdefault((r["workload"], r["mode"]), []).append(r["per_step_us"] * 1e3)
    med = {k: sorted(v)[len(v) // 2] for k, v in bare.items()}
    lines = ["## Profiled and overhead-corrected predictions (second session, calibration with `--profiler`)", ""]
    lines += [
        "`launchprof profile --baseline-runs 3` of the per-launch and graph examples with the "
        "`calibrate --profiler` file installed (docs/data/session2). The profiled prediction is the report's; the "
        "corrected one was the summary's `baseline.corrected` (removed since: the measured step now goes into "
        "`recommendation.expected`, the one prediction without the profiler): the per-launch step measured by the "
        "3 runs without nsys against the graph step then predicted without the profiler (`model.unprofiled_*`, "
        "read from these stored summaries). They are compared with "
        "the step periods under nsys (the two summaries) and with the examples' own per-step wall time without "
        "nsys (median of 3 runs of 2000 steps).",
        "",
    ]
    rows = []
    for eager, graph, workload, mode in CORRECTED:
        e, g = runs[eager], runs[graph]
        rec, base = e["recommendation"], e.get("baseline") or {}
        corrected = (base.get("corrected") or {}).get("speedup")
        nsys = e["steps"]["period_p50_ns"] / g["steps"]["period_p50_ns"]
        per_launch, graph_step = med.get((workload, mode)), med.get((workload, "graph"))
        measured = per_launch / graph_step if per_launch and graph_step else None

        def err(pred: float | None, meas: float | None) -> str:
            return f"{x(pred)} ({(pred - meas) / meas:+.0%})" if pred and meas else x(pred)

        rows.append(
            [
                f"{eager} -> {graph}",
                us(e["steps"]["period_p50_ns"], 1),
                us(g["steps"]["period_p50_ns"], 1),
                err(rec.get("predicted_speedup"), nsys),
                x(nsys),
                us(base.get("period_p50_ns"), 1),
                us(rec["model"].get("unprofiled_graph_step_ns"), 1),
                us(graph_step, 1),
                err(corrected, measured),
                x(measured),
            ]
        )
    lines += table(
        ["pair", "per-launch step (nsys)", "graph step (nsys)", "predicted (nsys)", "measured (nsys)",
         "per-launch step (baseline runs)", "predicted graph step (no nsys)", "graph step (no nsys)",
         "corrected prediction", "measured (no nsys)"],
        rows,
    )  # fmt: skip
    lines += [
        "The baseline runs time the host's steps; for a graph a step the host runs ahead of the GPU, so the graph "
        "runs' own baselines are not used (these summaries predate it; launchprof now marks such a baseline "
        "`host_ahead_of_gpu` and makes no correction from it). PyTorch's graph step spends "
        "host time outside `cudaGraphLaunch` (the input copy and `CUDAGraph.replay`), which the model does not "
        "count: its profiled prediction is high.",
        "",
    ]
    return lines


def facts_section(facts: dict[str, Any]) -> list[str]:
    lines = ["## Bundled GPU traces (`tests/data/gpu/`, read with plain sqlite3)", ""]
    rows = [
        [
            name,
            f["steps"],
            f"{f['per_step']['kernels_median']:.0f}",
            us(f["kernel_duration_ns"]["median"]),
            us(f["steady"]["step_period_median_ns"], 1),
            f"{f['steady']['gpu_busy_ratio']:.1%}",
        ]
        for name, f in sorted(facts.items())
    ]
    lines += table(["trace", "steps", "kernels/step", "kernel p50", "step period (nsys)", "GPU busy"], rows)
    pairs = [("small_kernels_launch", "small_kernels_graph"), ("torch_mlp_eager", "torch_mlp_graph")]
    for a, b in pairs:
        if a in facts and b in facts:
            ratio = facts[a]["steady"]["step_period_median_ns"] / facts[b]["steady"]["step_period_median_ns"]
            lines.append(f"- {a} / {b} step period under nsys: {x(ratio)}.")
    return lines + [""]


def check_section(check: dict[str, Any]) -> list[str]:
    lines = ["## Prediction check", "", check["note"], ""]

    def err(pred: float | None, meas: float | None) -> str:
        return f"{x(pred)} ({(pred - meas) / meas:+.0%})" if pred and meas else x(pred) if pred else "-"

    rows = []
    for r in check["rows"]:
        nsys, bare = r["defaults"]["measured_nsys"], r["measured_unprofiled"]
        for label in ("defaults", "calibration"):
            f = r[label]
            rows.append(
                [
                    f"{r['before']} -> {r['after']}",
                    label,
                    err(f["predicted_analyze"], nsys),
                    err(f["predicted_compare"], nsys),
                    x(nsys),
                    err(f["predicted_unprofiled"], bare),
                    x(bare) if bare else "-",
                ]
            )
    lines += table(
        ["pair", "constants", "predicted by analyze", "predicted by compare", "measured under nsys",
         "predicted without profiler", "measured without profiler"],
        rows,
    )  # fmt: skip
    lines += [
        "Errors are against the measurement in the same column group. `analyze` predicts for the steps it finds "
        "(the demo's are inferred 3-kernel repeats, so its prediction amortizes the graph launch); `compare` "
        "predicts again for the graph AFTER launches (75 nodes). The prediction without the profiler takes what "
        "nsys adds per launch call off the per-launch step and uses the graph launch's unprofiled cost.",
        "",
    ]
    return lines


def overhead_section(log: dict[str, Any]) -> list[str]:
    if not log["overhead"]:
        return []
    lines = ["## Cost of `launchprof profile` over bare `nsys profile`", ""]
    lines += ["small_kernels launch, 2000 steps, wall time of the whole command:", ""]
    rows = [[n, f"{bare:.2f} s", f"{lp:.2f} s", f"{lp - bare:+.2f} s"] for n, bare, lp in log["overhead"]]
    lines += table(["run", "bare nsys profile", "launchprof profile (+ export, analysis, report)", "difference"], rows)
    return lines


def fidelity_section(path: Path) -> list[str]:
    """The prediction's error per corpus pair: ``benchmarks/fidelity.py --json`` output,
    rendered by that script's own table (its pair table and error lines)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fidelity", ROOT / "benchmarks" / "fidelity.py")
    assert spec is not None and spec.loader is not None
    fidelity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fidelity)
    doc = json.loads(path.read_text())
    text = fidelity.markdown(doc["traces"], doc["pairs"])
    pairs = text[text.index("| pair |") :].rstrip().splitlines()
    return [
        "",
        f"## The prediction's error on the real-framework corpus ({doc['taken']})",
        "",
        "`python benchmarks/fidelity.py --json` on tests/data/frameworks (lent H200s, nsys 2025.3.1; each truth "
        "is the workloads' own step without nsys, timed in the recording's device call), stored in "
        f"docs/data/{path.name}. Per pair: the expected speedup from the trace alone (`estimate`), the same with "
        "the eager step measured without nsys (what `profile`'s run without nsys gives: here one run whose step "
        "is the workload's own clock), the profiled prediction, and `compare`'s headline without nsys (estimated "
        "from each side's step without the profiler: the corpus' traces carry no runs), beside the speedups "
        "under nsys. The early-exit pair's steps take two paths (26 and 74 kernels): each is predicted on its "
        "own and weighed by its steps, as the workload's clock (the mean step) weighs them. "
        "The ViT pairs are the estimate's known misses "
        "(nsys inflated their eager Python 1.0x-1.3x, not 2.0x); the measurement closes them.",
        "",
        *pairs,
        *_other_pairs(fidelity, doc),
    ]


def _other_pairs(fidelity: Any, doc: dict[str, Any]) -> list[str]:
    """The table of the pairs recorded later (``other_pairs``: graphs replaying many short
    eager repeats, CuPy, CUDA C++ across two streams, JAX, torch.compile without graphs)."""
    if not doc.get("other_pairs"):
        return []
    return [
        "",
        "Pairs recorded later (tests/data/frameworks/manifest.json `whole_replays` and `families`), the "
        "expected speedup from the trace alone (their recordings keep no measured eager step) and compare's, "
        "against each side's own clock (the mean of its runs before and after the profile). The LSTM's expected "
        "speedup is for one cell (the step found), its truth for a whole sequence; the JAX and compile pairs are "
        "no graph conversions (jit fuses, `default` fuses without graphs), so their expected figure (a graph of "
        "the eager step) has no truth there. The fork/join steps (C++ and PyTorch, two streams) are predicted "
        'from their critical path (docs/metrics.md, "Prediction"); nsys added 0.3 us a launch to the first C++ '
        "recording and 2.3 us to the second, so its estimate's error moves with the machine while the range "
        "holds both. compare's estimate for them is short: nsys's node-level graph tracing slows the converted "
        "step (23-30 us a step for a 14.4 us graph), and that traced step is what it divides.",
        *fidelity.markdown_other(doc["other_pairs"]).splitlines(),
    ]


def build(out: Path) -> str:
    cal = json.loads(CALIBRATION.read_text())
    log = parse_log(LOG.read_text())
    summaries = {name: json.loads((DATA / "runs" / f"{name}.summary.json").read_text()) for name, _ in RUNS}
    facts = json.loads(FACTS.read_text())
    check = json.loads(CHECK.read_text())
    lines = [
        "# Results on an NVIDIA H200",
        "",
        "Generated by `python scripts/results_page.py` from the files in `docs/data/` and "
        "`tests/data/gpu/facts.json`; do not edit by hand. Measured on 2026-11-29 on one NVIDIA H200.",
        "",
    ]
    lines += unprofiled_section(log)
    lines += calibration_section(cal, log["calibrate_wall_s"])
    lines += runs_section(summaries, log)
    lines += corrected_section(DATA / "session2")
    lines += check_section(check)
    lines += facts_section(facts)
    lines += overhead_section(log)
    lines += fidelity_section(FIDELITY)
    text = "\n".join(lines).rstrip() + "\n"
    out.write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results.md")
    args = parser.parse_args()
    build(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
