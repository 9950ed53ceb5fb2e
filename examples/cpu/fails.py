"""Runs a few marked steps (the decorator form of launchprof.step), then exits with a
non-zero code (default 3): ``launchprof profile`` must keep and analyse the trace and exit
with the same code.

    launchprof profile examples/cpu/fails.py 3
"""

import sys

import launchprof


@launchprof.step
def work() -> int:
    return sum(i * i for i in range(10_000))


code = int(sys.argv[1]) if len(sys.argv) > 1 else 3
for _ in range(4):
    work()
print(f"failing on purpose with exit code {code}", file=sys.stderr, flush=True)
sys.exit(code)
