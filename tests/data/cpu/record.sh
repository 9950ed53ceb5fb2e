#!/usr/bin/env bash
# Re-record the nsys 2022.4 CPU-only fixtures in this folder (Debian's nsight-systems).
#   steps_loop_2022: examples/cpu/steps_loop.py --steps 12 --work 5000 with nvtx 0.2.11:
#                    12 NVTX ranges "step" in domain "launchprof", one process.
#   nvtx_lost_2022:  the same loop with nvtx 0.2.17 (nvtx.push_range/pop_range, domain
#                    "launchprof", 5 ranges opened): nsys 2022.4 records only the
#                    domain-create (75) and domain-destroy (76) events, no range.
# Usage (from the repository root, with .venv set up by scripts/test.sh):
#   bash tests/data/cpu/record.sh
set -euo pipefail
here=tests/data/cpu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
.venv/bin/launchprof profile -o "$tmp/steps" examples/cpu/steps_loop.py --steps 12 --work 5000
python3 -m venv "$tmp/v17" && "$tmp/v17/bin/pip" install -q "nvtx==0.2.17"
cat > "$tmp/lost.py" <<'PY'
import nvtx
for _ in range(5):
    nvtx.push_range("step", domain="launchprof")
    sum(i * i for i in range(5000))
    nvtx.pop_range(domain="launchprof")
PY
.venv/bin/launchprof profile -o "$tmp/lost" "$tmp/v17/bin/python" "$tmp/lost.py"
for pair in "steps:steps_loop_2022" "lost:nvtx_lost_2022"; do
  src="$tmp/${pair%%:*}/trace.sqlite"; dst="$tmp/${pair##*:}.sqlite"
  .venv/bin/python scripts/trim_trace.py "$src" "$dst"
  # Keep only the profiled processes in PROCESSES (the 2022.4 export lists every process of
  # the machine); everything else the loader reads is untouched.
  .venv/bin/python - "$dst" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("DELETE FROM PROCESSES WHERE pid NOT IN (SELECT DISTINCT (globalTid >> 24) & 16777215 FROM NVTX_EVENTS)")
con.commit(); con.execute("VACUUM"); con.close()
PY
  xz -9e -c "$dst" > "$here/${pair##*:}.sqlite.xz"
done
ls -l "$here"
