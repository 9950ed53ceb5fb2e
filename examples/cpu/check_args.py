"""Checks that its arguments arrived unchanged. The first argument is a JSON list of the
arguments expected after it; exits 0 when they match, 1 (printing both) when not.

    launchprof profile examples/cpu/check_args.py '["a b", "--output", "x"]' "a b" --output x
"""

import json
import sys

import launchprof

with launchprof.step():
    expected = json.loads(sys.argv[1])
    got = sys.argv[2:]
if got != expected:
    print(f"arguments changed: expected {expected!r}, got {got!r}", file=sys.stderr, flush=True)
    sys.exit(1)
print(f"arguments ok: {got!r}", flush=True)
