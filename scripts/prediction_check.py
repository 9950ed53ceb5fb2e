"""Predicted vs measured graph speedups on the bundled H200 trace pairs.

For each pair (tests/data/traces: demo_A_4096 -> demo_B_4096, mlp_eager -> mlp_graph) and
for each set of constants (the built-in defaults; the H200 calibration with its
``profiler`` section, docs/data/calibration_h200_profiler_2026-11-29.json), it records:

- ``predicted_analyze``: ``launchprof analyze BEFORE``'s predicted speedup (for inferred
  steps: the amortized one);
- ``predicted_compare`` and ``measured_nsys``: ``launchprof compare BEFORE AFTER``'s
  prediction (made again for AFTER's graph when BEFORE's steps were re-cut) and the
  measured step-period ratio, both under nsys;
- ``predicted_unprofiled``: the ``profiler-overhead`` finding's ``unprofiled_speedup`` for
  BEFORE's steps as compare cuts them (per-launch step less what nsys adds per launch
  call, against the graph step predicted without the profiler);
- ``measured_unprofiled``: the ratio measured without the profiler on the same H200, where
  one exists (demo: 619.7 ms vs 144.6 ms for 2000 steps, tests/data/traces/README.md).

The calibration is given to launchprof the way a user's is: a file in
``$XDG_CACHE_HOME/launchprof`` (a temporary folder here).

Usage: ``python scripts/prediction_check.py [--out docs/data/prediction_check_2026-11-29.json]``.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
CALIBRATION = ROOT / "docs" / "data" / "calibration_h200_profiler_2026-11-29.json"
PAIRS = (
    ("demo_A_4096", "demo_B_4096", 619.7 / 144.6),
    ("mlp_eager", "mlp_graph", None),
)


def _unpack(name: str, folder: Path) -> Path:
    target = folder / f"{name}.sqlite"
    with lzma.open(TRACES / f"{name}.sqlite.xz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def _row(before: Path, after: Path) -> dict[str, Any]:
    import launchprof
    from launchprof.analysis.diagnosis.diagnose import diagnose
    from launchprof.analysis.steps import find_steps
    from launchprof.api.compare_runs import _template, compare

    analysis = launchprof.analyze(before)
    rec = analysis.recommendation
    c = compare(before, after)
    steps = analysis.found_steps
    if any("re-cut" in n for n in c.notes):
        template = _template(c.after)
        steps = find_steps(analysis, template=template, device_id=None) if template else steps
    diagnosis, _ = diagnose(analysis, steps)
    finding = next((f for f in diagnosis.findings if f.kind == "profiler-overhead"), None)
    return {
        "predicted_analyze": rec.predicted_speedup,
        "predicted_compare": c.predicted_speedup,
        "measured_nsys": c.speedup,
        "predicted_unprofiled": finding.figures.get("unprofiled_speedup") if finding else None,
        "constants": rec.calibration["source"],
    }


def check() -> dict[str, Any]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        empty, calibrated = folder / "empty", folder / "calibrated"
        (calibrated / "launchprof").mkdir(parents=True)
        empty.mkdir()
        shutil.copy(CALIBRATION, calibrated / "launchprof" / "calibration-h200.json")
        for before, after, unprofiled in PAIRS:
            b, a = _unpack(before, folder), _unpack(after, folder)
            row: dict[str, Any] = {"before": before, "after": after, "measured_unprofiled": unprofiled}
            for label, cache in (("defaults", empty), ("calibration", calibrated)):
                os.environ["XDG_CACHE_HOME"] = str(cache)
                row[label] = _row(b, a)
            rows.append(row)
    return {
        "note": "Written by scripts/prediction_check.py (its docstring says what each figure is) from the bundled "
        "H200 traces, with launchprof's built-in defaults and with the H200 calibration "
        f"{CALIBRATION.name} (`launchprof calibrate --profiler`).",
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "data" / "prediction_check_2026-11-29.json")
    args = parser.parse_args()
    args.out.write_text(json.dumps(check(), indent=1) + "\n")
    print(args.out.read_text())


if __name__ == "__main__":
    main()
