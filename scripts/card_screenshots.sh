#!/usr/bin/env bash
# Screenshots of the report card (the top of report.html) for docs/: an eager trace, a
# graph trace and a CPU-only trace. Needs chromium and launchprof in .venv.
#   bash scripts/card_screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lp=.venv/bin/launchprof
$lp analyze tests/data/traces/mlp_eager.sqlite.xz -q -o "$tmp/eager"
$lp analyze tests/data/traces/mlp_graph.sqlite.xz -q -o "$tmp/graph"
$lp analyze tests/data/cpu/steps_loop_2022.sqlite.xz -q -o "$tmp/cpu" 2>/dev/null || true  # exits 2: no CUDA activity
chromium=$(command -v chromium || command -v chromium-browser)
shot() {  # shot FOLDER PNG HEIGHT
  "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=15000 \
    --user-data-dir="$tmp/profile" --window-size=1100,"$3" --screenshot="$2" "file://$1/report.html" 2>/dev/null
}
shot "$tmp/eager" docs/card-eager.png 1020
shot "$tmp/graph" docs/card-graph.png 900
shot "$tmp/cpu" docs/card-cpu-only.png 560
ls -l docs/card-*.png
