#!/usr/bin/env bash
# The headline of `launchprof profile --baseline-runs RUNS` (the expected speedup without
# nsys, the eager step measured in RUNS runs without nsys; default 1) against the speedup
# measured without nsys, on a GPU machine.
#
# Usage (repository root; launchprof and nsys on PATH):
#     [RUNS=N] bash benchmarks/expected_vs_truth.sh OUTDIR LIST
#
# LIST: lines "NAME|BEFORE|AFTER" (script and arguments, run with python3), e.g.
#     vit_b1|examples/frameworks/vision.py vit_small eager --batch 1|examples/frameworks/vision.py vit_small graph --batch 1
# Per line, one after the other: BEFORE and AFTER without nsys (each prints its own
# `RESULT {json}` line: its CUDA-synchronised step time), `launchprof profile
# --baseline-runs RUNS BEFORE` (the nsys run, then its runs without nsys), then BEFORE and AFTER
# without nsys again. The truth is the median of BEFORE's runs over the median of AFTER's.
# One JSON line per NAME goes to OUTDIR/results.jsonl: the RESULT lines, launchprof's
# lines about runs without nsys, and summary.json's recommendation; the folder of each
# profile stays in OUTDIR/NAME.
set -u
out=$1
list=$2
mkdir -p "$out"
result() { python3 $1 2>/dev/null | grep '^RESULT ' | tail -1 | cut -c8-; }
while IFS='|' read -r name before after; do
  case "$name" in '' | \#*) continue ;; esac
  echo "== $name"
  b1=$(result "$before"); a1=$(result "$after")
  launchprof profile -o "$out/$name" --baseline-runs "${RUNS:-1}" $before >"$out/$name.log" 2>&1
  b2=$(result "$before"); a2=$(result "$after")
  B1=$b1 B2=$b2 A1=$a1 A2=$a2 NAME=$name DIR="$out/$name" LOG="$out/$name.log" python3 - >>"$out/results.jsonl" <<'PY'
import json, os, statistics
def res(k):
    try:
        return json.loads(os.environ[k])["step_us"]
    except Exception:
        return None
log = open(os.environ["LOG"]).read().splitlines()
inner = [json.loads(l[7:])["step_us"] for l in log if l.startswith("RESULT ")]
try:
    s = json.load(open(os.path.join(os.environ["DIR"], "summary.json")))
except Exception:
    s = {}
rec = s.get("recommendation") or {}
bl = s.get("baseline") or {}
before = [x for x in (res("B1"), res("B2")) if x]
after = [x for x in (res("A1"), res("A2")) if x]
truth = statistics.median(before) / statistics.median(after) if before and after else None
print(json.dumps({
    "name": os.environ["NAME"], "before_us": before, "after_us": after, "truth": truth,
    "profile_results_us": inner,
    "launchprof_lines": [l for l in log if l.startswith("launchprof:") or l.startswith("verdict:")],
    "expected_speedup": rec.get("expected_speedup"), "expected_speedup_range": rec.get("expected_speedup_range"),
    "predicted_speedup": rec.get("predicted_speedup"), "expected": rec.get("expected"),
    "baseline_period_p50_ns": bl.get("period_p50_ns"), "baseline_source": bl.get("source"),
}))
PY
  tail -1 "$out/results.jsonl" | cut -c1-400
done <"$list"
