"""The Python API gives the summary the command line writes: ``launchprof.analyze(T).summary``
is ``launchprof analyze T``'s summary.json but for what only a written folder has (the
step files' digests and the run id). Both come from one finished result
(:func:`launchprof.analysis.finish.finish`); the report only formats it.

Both run as fresh processes in one environment (no user calibration, no ``LAUNCHPROF_*``),
on a one-process trace, the two-rank DDP trace (whose reasons say which rank was judged)
and a trace without GPU work (NVTX step ranges only).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
WRITTEN_ONLY = ("files", "run_id")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAUNCHPROF_")}
    env["XDG_CACHE_HOME"] = str(tmp / "cache")
    return env


@pytest.mark.parametrize(
    "rel", ["traces/mlp_eager.sqlite.xz", "gpu/ddp_mlp_x2.sqlite.xz", "cpu/steps_loop_2022.sqlite.xz"]
)
def test_the_api_summary_is_the_written_one(rel: str, tmp_path: Path) -> None:
    trace = tmp_path / Path(rel).name
    shutil.copyfile(DATA / rel, trace)
    exe = Path(sys.executable).with_name("launchprof")
    done = subprocess.run(
        [str(exe), "analyze", trace.name, "-o", "out", "-q"], cwd=tmp_path, env=_env(tmp_path), capture_output=True
    )
    written = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert done.returncode in (0, 1, 2), done.stderr
    code = f"import launchprof; print(launchprof.analyze({trace.name!r}).summary.to_json(), end='')"
    api = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, check=True
    )
    mine = json.loads(api.stdout)
    assert all(k not in mine for k in WRITTEN_ONLY)
    assert {k: v for k, v in written.items() if k not in WRITTEN_ONLY} == mine
    if "ddp" in rel:  # the reasons name the rank judged: made by the analysis, not the page
        assert any(r.startswith("This verdict judges rank") for r in mine["diagnosis"]["reasons"])
    if "cpu/" in rel:
        assert mine["nvtx_steps"]["count"] > 1 and not mine["devices"]


def test_a_result_redone_with_runs_without_nsys_has_its_own_summary() -> None:
    """``with_baseline`` (what ``profile`` does with its runs without nsys) gives a result
    that shares the figures' cache with the one it was made from; its summary is still its
    own: the measured eager step, not the estimate read first from the other."""
    import numpy as np

    import launchprof
    from launchprof.api.traces import with_baseline

    first = launchprof.analyze(DATA / "traces" / "mlp_eager.sqlite.xz")
    assert first.summary.recommendation.expected["eager_source"] == "estimate"
    step_ns = 500_000
    runs = [np.array([[k * step_ns, k * step_ns + 1] for k in range(6)], dtype=np.int64)]
    redone = with_baseline(first, runs)
    assert redone.recommendation.expected is not None
    assert redone.recommendation.expected.eager_source == "measured"
    assert redone.summary.recommendation.expected["eager_source"] == "measured"
    assert redone.summary.recommendation.expected["eager_step_ns"] == step_ns
    assert first.summary.recommendation.expected["eager_source"] == "estimate"
