#!/usr/bin/env bash
# Record the real-framework corpus (tests/data/frameworks) on a GPU machine with nsys.
#
# Usage (from the repository root, nsys on PATH):  bash scripts/record_corpus.sh OUTDIR LIST
#
# LIST is a file of lines "NAME|RANGE|COMMAND": for each line the command runs once
# without the profiler (its RESULT line is the truth without nsys) and then once under
#   nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node
# (RANGE "api": plus --capture-range=cudaProfilerApi --capture-range-end=stop, so the
# trace holds only what the workload brackets with cudaProfilerStart/Stop; RANGE "bare":
# no nsys run, only the truth without the profiler), in the same call, one after the other. Each trace is trimmed to the tables launchprof reads
# (scripts/trim_trace.py) and compressed with xz -9e into OUTDIR/NAME.sqlite.xz; the
# RESULT lines go to OUTDIR/results.jsonl as {"name", "run": "bare"|"nsys", "result"}.
set -uo pipefail
out=$1
list=$2
mkdir -p "$out" /tmp/corpus
while IFS='|' read -r name range cmd; do
  [ -z "$name" ] && continue
  case "$name" in \#*) continue ;; esac
  echo "== $name: $cmd"
  t0=$(date +%s)
  bare=$(eval "$cmd" 2>"/tmp/corpus/$name.bare.err" | grep '^RESULT ' | tail -1 | cut -c8-)
  [ -n "$bare" ] && echo "{\"name\": \"$name\", \"run\": \"bare\", \"result\": $bare}" >>"$out/results.jsonl" \
    || { echo "   bare run failed:"; tail -5 "/tmp/corpus/$name.bare.err"; }
  if [ "$range" = bare ]; then echo "   bare: ${bare:0:160}"; continue; fi
  flags=(--trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node --export=sqlite --force-overwrite=true)
  [ "$range" = api ] && flags+=(--capture-range=cudaProfilerApi --capture-range-end=stop)
  prof=$(eval "nsys profile ${flags[*]} -o /tmp/corpus/$name $cmd" 2>"/tmp/corpus/$name.nsys.err" | grep '^RESULT ' | tail -1 | cut -c8-)
  [ -n "$prof" ] && echo "{\"name\": \"$name\", \"run\": \"nsys\", \"result\": $prof}" >>"$out/results.jsonl" \
    || { echo "   nsys run failed:"; tail -5 "/tmp/corpus/$name.nsys.err"; }
  if [ -f "/tmp/corpus/$name.sqlite" ]; then
    python3 scripts/trim_trace.py "/tmp/corpus/$name.sqlite" "/tmp/corpus/$name.trim.sqlite" &&
      xz -9e -T4 -c "/tmp/corpus/$name.trim.sqlite" >"$out/$name.sqlite.xz"
  fi
  echo "   bare: ${bare:0:160}"
  echo "   nsys: ${prof:0:160}"
  echo "   $(( $(date +%s) - t0 )) s, $(du -h "$out/$name.sqlite.xz" 2>/dev/null | cut -f1)"
done <"$list"
