"""The same trace gives byte-identical summary.json and report.html, run after run (in
separate processes, so hash seeds and import order differ)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tracebuilder import TraceBuilder


def _launchprof() -> str:
    exe = Path(sys.executable).with_name("launchprof")
    return str(exe) if exe.exists() else "launchprof"


def _two_process_trace(path: Path) -> Path:
    b = TraceBuilder()
    for pid in (100, 200):
        for i in range(50):
            t = 1000 * i + pid
            b.launch(t, t + 400, t + 500, t + 800 + (i % 3) * 100, pid=pid, stream=7 + (i % 2), name=f"k{i % 4}")
        b.range("step", pid, 60_000, pid=pid, domain="launchprof")
    return b.write(path)


@pytest.mark.slow
@pytest.mark.parametrize("source", ["built", "mlp_eager"])
def test_same_trace_gives_identical_files(tmp_path: Path, real_trace, source: str) -> None:
    trace = _two_process_trace(tmp_path / "t.sqlite") if source == "built" else real_trace(source)
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"out{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [_launchprof(), "analyze", str(trace), "-o", str(out)], capture_output=True, text=True, env=env, check=False
        )
        assert done.returncode == 0, done.stderr
        outputs.append(out)
    for name in ("summary.json", "report.html"):
        first, second = (o / name for o in outputs)
        assert first.read_bytes() == second.read_bytes(), name
