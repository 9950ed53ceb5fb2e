"""How close launchprof comes to the truth on the real-framework corpus.

Usage:  python benchmarks/fidelity.py [--markdown] [--corpus tests/data/frameworks]

The corpus (``tests/data/frameworks``: traces, ``manifest.json``, MANIFEST.md) holds
real framework workloads recorded on an H200, each with its own step time measured without
the profiler in the same device call as the profiled run. This script analyses every
trace and compares every pair with launchprof's library API, and prints two tables:

- per trace: the steps found (count, source) against the steps the workload ran, the
  verdict, the step period under nsys against the workload's own clock under nsys, and
  (for traces that do not replay graphs) the expected speedup with its range and the
  profiled prediction;
- per pair (before -> after): the speedup measured without nsys (the truth: the
  workloads' own step times), launchprof's expected speedup for BEFORE and its error,
  whether the range holds the truth, the prediction under nsys against ``compare``'s
  measured speedup, ``compare``'s verdict and work change, against what the pair was built
  to be.

A third table: the pairs recorded later (manifest ``whole_replays`` and ``families``: CUDA
C++ across two streams, CuPy, JAX, torch.compile without graphs), expected (estimate) and
``compare`` against each side's own clock.

Numbers only; no pass/fail: the tests (tests/test_frameworks.py) hold the contract.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "data" / "frameworks"


def _fmt(x: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "-" if x is None else f"{x:{spec}}{unit}"


def run(corpus: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import launchprof

    manifest = json.loads((corpus / "manifest.json").read_text())
    analyses: dict[str, Any] = {}
    traces = []
    for name, t in manifest["traces"].items():
        a = launchprof.analyze(corpus / f"{name}.sqlite.xz")
        analyses[name] = a
        s, d, r = a.found_steps, a.diagnosis, a.recommendation
        e = r.expected
        traces.append(
            {
                "name": name,
                "steps": s.count,
                "source": s.source,
                "steps_truth": t["steps_truth"],
                "verdict": d.verdict,
                "built_as": t.get("built_as", ""),
                "period_us": (d.figures.get("period_p50_ns") or 0) / 1e3,
                "nsys_step_us": t["nsys_step_us"],
                "bare_step_us": t["bare_step_us"],
                "expected": e.speedup if e else None,
                "range": (e.speedup_low, e.speedup_high) if e else None,
                "eager_est_us": e.eager_step_ns / 1e3 if e else None,
                "predicted": r.predicted_speedup,
                "rejected": [label for label, _ in s.rejected],
            }
        )
    pairs = []
    for p in manifest["pairs"]:
        before, after = p["before"], p["after"]
        c = launchprof.compare(corpus / f"{before}.sqlite.xz", corpus / f"{after}.sqlite.xz")
        tb, ta = manifest["traces"][before], manifest["traces"][after]
        truth = tb["bare_step_us"] / ta["bare_step_us"]
        e = analyses[before].recommendation.expected
        m = _measured(analyses[before], tb["bare_step_us"] * 1e3)
        cu = c.speedup_unprofiled
        pairs.append(
            {
                **_against(f"{before} -> {after}", p["work"], truth, e, c),
                "predicted": analyses[before].recommendation.predicted_speedup,
                "measured": m.speedup if m else None,
                "measured_error": (m.speedup / truth - 1) if m else None,
                "measured_in_range": (m.speedup_low <= truth <= m.speedup_high) if m else None,
                "compare_unprofiled_source": c.speedup_unprofiled_source,
                "compare_unprofiled_error": (cu / truth - 1) if cu else None,
                "workload_nsys": tb["nsys_step_us"] / ta["nsys_step_us"],
                "work_change": c.work_change.kind if c.work_change else None,
                "changed_share": c.work_change.changed_kernel_share if c.work_change else None,
            }
        )
    return traces, pairs


def _against(pair: str, built_as: str, truth: float, e: Any, c: Any) -> dict[str, Any]:
    """A pair's row: BEFORE's expectation ``e`` and the comparison ``c`` against ``truth``."""
    cu, cr = c.speedup_unprofiled, c.speedup_unprofiled_ci
    return {
        "pair": pair,
        "built_as": built_as,
        "truth": truth,
        "expected": e.speedup if e else None,
        "error": (e.speedup / truth - 1) if e else None,
        "in_range": (e.speedup_low <= truth <= e.speedup_high) if e else None,
        "compare_unprofiled": cu,
        "compare_unprofiled_in_range": (cr[0] <= truth <= cr[1]) if cr else None,
        "compare": c.speedup,
        "verdict": c.verdict,
    }


def other_pairs(corpus: Path) -> list[dict[str, Any]]:
    """The pairs recorded outside the main table (manifest ``whole_replays``: graphs that
    replay what eager launches as many short repeats, a CuPy loop; ``families``: CUDA C++
    across two streams, JAX, torch.compile without graphs): the truth from each side's own
    clock (``bare_step_us``, the mean of the runs before and after its profile), BEFORE's
    expected speedup (estimate: these recordings keep no measured eager step) and its range,
    and ``compare``'s verdict and speedup without nsys."""
    import launchprof

    manifest = json.loads((corpus / "manifest.json").read_text())
    bare: dict[str, list[float]] = {}
    listed: list[dict[str, Any]] = []
    for p in manifest.get("whole_replays", {}).get("pairs", []):
        bare[p["before"]], bare[p["after"]] = p["bare_step_us"]["before"], p["bare_step_us"]["after"]
        listed.append(p)
    for name, rec in manifest.get("families", {}).get("recordings", {}).items():
        bare[name] = rec["bare_step_us"]
    listed += manifest.get("families", {}).get("pairs", [])
    rows = []
    for p in listed:
        before, after = p["before"], p["after"]
        truth = (sum(bare[before]) / len(bare[before])) / (sum(bare[after]) / len(bare[after]))
        e = launchprof.analyze(corpus / f"{before}.sqlite.xz").recommendation.expected
        c = launchprof.compare(corpus / f"{before}.sqlite.xz", corpus / f"{after}.sqlite.xz")
        rows.append(_against(f"{before} -> {after}", p["work"], truth, e, c))
    return rows


def _measured(analysis: Any, eager_step_ns: float) -> Any:
    """The expectation of ``analysis`` with its eager step measured: one run without nsys
    whose steps are ``eager_step_ns`` apart (what ``profile --baseline-runs 1`` gives when
    the run's step equals the workload's own clock)."""
    import numpy as np

    from launchprof.api.traces import with_baseline

    run = np.array([[round(k * eager_step_ns), round(k * eager_step_ns) + 1] for k in range(6)], dtype=np.int64)
    return with_baseline(analysis, [run]).recommendation.expected


def markdown(traces: list[dict[str, Any]], pairs: list[dict[str, Any]]) -> str:
    out = [
        "| trace | steps found (source) | steps run | verdict | period under nsys | workload's clock under nsys "
        "| without nsys | expected speedup (range) | under nsys (predicted) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in traces:
        rng = t["range"]
        out.append(
            f"| {t['name']} | {t['steps']} ({t['source']}) | {t['steps_truth']} | {t['verdict']} "
            f"| {t['period_us']:,.1f} us | {t['nsys_step_us']:,.1f} us | {t['bare_step_us']:,.1f} us "
            f"| {_fmt(t['expected'])}x"
            + (f" ({rng[0]:.2f}-{rng[1]:.2f})" if rng else "")
            + f" | {_fmt(t['predicted'])}x |"
        )
    out += [
        "",
        "| pair | built as | speedup without nsys (truth) | expected (estimate) | error | range holds it "
        "| expected (eager measured) | error | range holds it | predicted under nsys "
        "| compare without nsys | error | range holds it | compare under nsys | workload's clock under nsys "
        "| verdict | work change (share) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def pct(x: float | None) -> str:
        return _fmt(None if x is None else x * 100, "+.0f", " %")

    def yes(x: bool | None) -> str:
        return "-" if x is None else ("yes" if x else "no")

    for p in pairs:
        out.append(
            f"| {p['pair']} | {p['built_as']} | {p['truth']:.2f}x | {_fmt(p['expected'])}x | {pct(p['error'])} "
            f"| {yes(p['in_range'])} | {_fmt(p['measured'])}x | {pct(p['measured_error'])} "
            f"| {yes(p['measured_in_range'])} | {_fmt(p['predicted'])}x "
            f"| {_fmt(p['compare_unprofiled'])}x ({p['compare_unprofiled_source'] or '-'}) "
            f"| {pct(p['compare_unprofiled_error'])} | {yes(p['compare_unprofiled_in_range'])} "
            f"| {_fmt(p['compare'])}x | {p['workload_nsys']:.2f}x | {p['verdict']} "
            f"| {p['work_change']} ({_fmt(p['changed_share'], '.1%')}) |"
        )
    same = [p for p in pairs if p["built_as"] == "same"]
    for label, key in (
        ("expected (estimate)", "error"),
        ("expected (eager measured)", "measured_error"),
        ("compare without nsys", "compare_unprofiled_error"),
    ):
        for name, group in (("same-kernel pairs", same), ("all pairs", pairs)):
            errs = [abs(p[key]) for p in group if p[key] is not None]
            if errs:
                out.append(
                    f"\n{label}, {name}: median error {sorted(errs)[len(errs) // 2] * 100:.0f} %, "
                    f"worst {max(errs) * 100:.0f} % ({len(errs)} pairs)"
                )
    return "\n".join(out) + "\n"


def markdown_other(rows: list[dict[str, Any]]) -> str:
    """:func:`other_pairs` as a table."""
    out = [
        "",
        "| pair | built as | speedup without nsys (truth) | expected (estimate, range) | error | range holds it "
        "| compare without nsys | range holds it | compare under nsys | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        err = "-" if r["error"] is None else f"{r['error'] * 100:+.0f} %"
        held = "-" if r["in_range"] is None else ("yes" if r["in_range"] else "no")
        c_held = (
            "-" if r["compare_unprofiled_in_range"] is None else ("yes" if r["compare_unprofiled_in_range"] else "no")
        )
        out.append(
            f"| {r['pair']} | {r['built_as']} | {r['truth']:.2f}x | {_fmt(r['expected'])}x | {err} | {held} "
            f"| {_fmt(r['compare_unprofiled'])}x | {c_held} | {_fmt(r['compare'])}x | {r['verdict']} |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of markdown")
    a = parser.parse_args()
    os.environ.setdefault("XDG_CACHE_HOME", "/nonexistent")  # the documented defaults, not a local calibration
    traces, pairs = run(a.corpus)
    other = other_pairs(a.corpus)
    if a.json:
        import datetime

        taken = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        doc = {"taken": taken, "traces": traces, "pairs": pairs, "other_pairs": other}
        json.dump(doc, sys.stdout, indent=1, default=str)
        print()
    else:
        sys.stdout.write(markdown(traces, pairs) + markdown_other(other))


if __name__ == "__main__":
    main()
