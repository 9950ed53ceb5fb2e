"""A parent that marks steps and starts a child Python process that marks steps too
(range text ``child-step``): nsys follows the child, so both processes' NVTX ranges are
in the trace. Exits with the child's exit code.

    launchprof profile examples/cpu/spawn_child.py
"""

import subprocess
import sys

import launchprof

if len(sys.argv) > 1 and sys.argv[1] == "--child":
    for _ in range(3):
        with launchprof.step("child-step"):
            sum(i * i for i in range(10_000))
    print("child done", flush=True)
    sys.exit(0)

for _ in range(2):
    with launchprof.step():
        sum(i * i for i in range(10_000))
code = subprocess.call([sys.executable, __file__, "--child"])
print(f"parent done, child exit code {code}", flush=True)
sys.exit(code)
