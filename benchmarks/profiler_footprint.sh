#!/usr/bin/env bash
# How much each nsys flag inflates a workload's own step time (issue: profiler footprint).
#
# Usage (repository root, nsys on PATH):  bash benchmarks/profiler_footprint.sh OUT.jsonl LIST
#
# LIST has lines "NAME|COMMAND" of workloads that print "RESULT {json}" with "step_us"
# measured by their own clock (examples/frameworks/*). Each runs bare, then under nsys
# with each flag set below (no --capture-range: the timed loop itself is traced; no
# export), in that order, one after the other. One JSON line per run goes to OUT.jsonl:
# {"name", "variant", "step_us", "wall_s"}. benchmarks/README.md tabulates them.
set -uo pipefail
out=$1
list=$2
base="--sample=none --cpuctxsw=none"
variants=(
  "bare|"
  "cuda,nvtx,osrt+node|--trace=cuda,nvtx,osrt $base --cuda-graph-trace=node"
  "cuda,nvtx+node|--trace=cuda,nvtx $base --cuda-graph-trace=node"
  "cuda+node|--trace=cuda $base --cuda-graph-trace=node"
  "cuda,nvtx+graph|--trace=cuda,nvtx $base --cuda-graph-trace=graph"
)
while IFS='|' read -r name cmd; do
  [ -z "$name" ] && continue
  for v in "${variants[@]}"; do
    label=${v%%|*}
    flags=${v#*|}
    t0=$(date +%s.%N)
    if [ -z "$flags" ]; then
      line=$(eval "$cmd" 2>/dev/null | grep '^RESULT ' | tail -1 | cut -c8-)
    else
      line=$(eval "nsys profile $flags --force-overwrite=true -o /tmp/footprint_$name $cmd" 2>/dev/null | grep '^RESULT ' | tail -1 | cut -c8-)
    fi
    t1=$(date +%s.%N)
    step=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['step_us'])" "$line" 2>/dev/null || echo null)
    echo "{\"name\": \"$name\", \"variant\": \"$label\", \"step_us\": $step, \"wall_s\": $(python3 -c "print(round($t1-$t0,2))")}" | tee -a "$out"
  done
done <"$list"
