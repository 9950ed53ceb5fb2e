"""Step times without nsys for a PyTorch workload with neither step markers nor a profiler
region: its outermost ``torch.nn.Module`` calls (``launchprof/profiler_region.py`` with
``LAUNCHPROF_MODULE_CALLS``), matched to the trace's steps by their period.

The run-through test needs torch (skipped here, where CI has none; it ran on the H200, issue
note); the end-to-end check on real recordings of a plain ``generate()`` script is in
tests/test_frameworks.py.
"""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from launchprof.analysis.baseline import (
    MODULE_MATCH,
    ModuleRuns,
    RegionRuns,
    baseline_section,
    module_match,
    module_periods,
    runs_of,
)
from launchprof.commands.baseline import baseline_argv, nothing_to_time, timing
from launchprof.commands.text import describe_baseline
from launchprof.marker import STEP_TIMES_ENV
from launchprof.nsys.profile import Workload
from launchprof.profiler_region import MODULE_CALLS_ENV, MODULE_PREFIX, OBSERVE_CALLS
from launchprof.report.schema import Baseline
from launchprof.trace.steptimes import module_step_times, timed_sources


def _calls(period_ns: float, count: int, jitter: float = 0.02, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    starts = np.cumsum(period_ns * (1 + jitter * rng.standard_normal(count))).astype(np.int64)
    return np.stack([starts, starts + int(period_ns * 0.8)], axis=1)


def _runs() -> ModuleRuns:
    # A decode step: the model called once a token (10 ms), its decoder layers eight times
    # as often, a logits head once every four tokens (a shape the trace's steps are not).
    return ModuleRuns(
        [
            {
                "module LlamaForCausalLM": _calls(10e6, 51, seed=1),
                "module Head": _calls(40e6, 13, seed=2),
                "module Layer": _calls(1.25e6, 400, seed=3),
            },
            {"module LlamaForCausalLM": _calls(10.5e6, 51, seed=4)},
        ]
    )


def test_the_module_whose_period_fits_the_steps_is_taken() -> None:
    runs = _runs()
    periods = module_periods(runs)
    assert periods["module LlamaForCausalLM"] == pytest.approx(10.25e6, rel=0.05)  # pooled over both runs
    # Under nsys the token took 1.6x longer: only the model's calls are within nsys' range.
    assert module_match(runs, 16e6) == "module LlamaForCausalLM"
    # A step under nsys shorter than any plausible share of the model's period is the layer's.
    assert module_match(runs, 1.9e6) == "module Layer"
    # No module fits a step of 5 ms under nsys: nsys does not make a step faster.
    low, high = MODULE_MATCH
    assert 5e6 / 10.25e6 < low and 5e6 / 1.25e6 > high
    assert module_match(runs, 5e6) is None
    assert module_match(runs, None) is None


def test_a_warm_up_longer_than_any_fixed_count_is_left_out() -> None:
    """A plain generate() script timed on an H200: its first generate() call (32 tokens) met
    every sequence length for the first time and ran about 7x slower a token; with those
    calls pooled the model's period was 50 ms, the trace's step 16.7 ms, and no module
    matched. The later half of the run stands for the steady steps."""
    warm, steady = _calls(50e6, 32, seed=5), _calls(7e6, 96, seed=6)
    run = np.concatenate([warm, steady + warm[-1, 0] + int(50e6)])
    runs = ModuleRuns([{"module LlamaForCausalLM": run}])
    assert np.median(np.diff(run[:51, 0])) > 40e6  # the first 51 calls: what a stop after 50 periods kept
    assert module_periods(runs)["module LlamaForCausalLM"] == pytest.approx(7e6, rel=0.05)
    assert module_match(runs, 16.7e6) == "module LlamaForCausalLM"


def test_the_baseline_section_of_module_calls() -> None:
    runs = _runs()
    steps = {"period_p50_ns": 16e6, "busy_p50_ns": 3e6}
    section = baseline_section(runs, steps)
    assert section["source"] == "module-calls" and section["module"] == "module LlamaForCausalLM"
    assert section["runs"] == 2 and section["steps"] == [26, 26]  # the later half of each run's 51 calls
    assert section["overhead_ratio"] == pytest.approx(16e6 / section["period_p50_ns"])
    dumped = Baseline.model_validate(section).model_dump()
    assert dumped["module"] == "module LlamaForCausalLM" and "region_ns" not in dumped
    line = describe_baseline(dumped)
    assert "the period of the top-level LlamaForCausalLM calls, 2 runs" in line and "1.5" in line

    none = baseline_section(runs, {"period_p50_ns": 5e6, "busy_p50_ns": 3e6})
    assert none["module"] is None and none["period_p50_ns"] is None and none["overhead_ratio"] is None
    line = describe_baseline(Baseline.model_validate(none).model_dump())
    assert "none at the pace of the trace's steps (5,000.0 us under nsys)" in line
    assert "LlamaForCausalLM every 10," in line and "launchprof.step()" in line
    # The step-marker section keeps its keys as before.
    marked = Baseline.model_validate(baseline_section([_calls(1e6, 10)], {"period_p50_ns": 1.5e6})).model_dump()
    assert "module" not in marked and "module_periods" not in marked


def test_markers_then_regions_then_module_calls() -> None:
    steps, none = [_calls(1e6, 5)], [np.empty((0, 2), dtype=np.int64)]
    modules = [{"module M": _calls(1e6, 5)}]
    assert runs_of(steps, none, modules) is steps
    assert isinstance(runs_of(none, [np.array([[0, 10]])], modules), RegionRuns)
    assert isinstance(runs_of(none, none, modules), ModuleRuns)
    assert runs_of(none, none, [{}]) is none


def test_module_lines_are_read_per_module(tmp_path: Path) -> None:
    path = tmp_path / "baseline-1.steps"
    path.write_text("step 1 2\nmodule A 10 20\nmodule A#2 15 16\nmodule A 30 40\nprofiler region 0 99\n")
    got = module_step_times(path)
    assert list(got) == ["module A", "module A#2"]
    assert got["module A"].tolist() == [[10, 20], [30, 40]]
    assert module_step_times(tmp_path / "missing.steps") == {}


def _trace(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    con.executemany("INSERT INTO StringIds (value) VALUES (?)", [(n,) for n in names])
    con.commit()
    con.close()
    return path


def test_a_pytorch_trace_without_markers_or_region_is_timed_by_its_module_calls(tmp_path: Path) -> None:
    torch_trace = _trace(tmp_path, "cudaLaunchKernel", "void at::native::vectorized_elementwise_kernel<4>(int)")
    assert timed_sources(torch_trace) == frozenset({"pytorch"})
    python = Workload([sys.executable, "generate.py"], "generate")
    assert nothing_to_time(python, torch_trace) is None and timing(torch_trace) == "module-calls"
    # Not Python: nothing runs it through the timing wrapper.
    assert "no launchprof.step() range to time" in (nothing_to_time(Workload(["/opt/app"], "app"), torch_trace) or "")
    # A Python program without PyTorch kernels: no module to time, no second run.
    (tmp_path / "t.sqlite").unlink()
    cuda_only = _trace(tmp_path, "cudaLaunchKernel", "add_kernel")
    assert "no profiler region and no PyTorch kernel" in (nothing_to_time(python, cuda_only) or "")


TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.skipif(not TORCH, reason="torch is not installed (it runs on the GPU machine)")
def test_outermost_module_calls_are_timed_with_torch(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            from torch.nn.modules import module as M

            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
            loss = torch.nn.MSELoss()
            compiled = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8)), backend="eager")
            x, y = torch.randn(4, 8), torch.randn(4, 1)
            for i in range(int(sys.argv[1])):
                loss(model(x), y).backward()
                compiled(x)
            print("hooks left", len(M._global_forward_hooks), len(M._global_forward_pre_hooks))
            print("done")
            """
        )
    )
    times = tmp_path / "run.steps"

    def run(*extra: str, **env: str) -> subprocess.CompletedProcess[str]:
        times.unlink(missing_ok=True)
        full = {**os.environ, STEP_TIMES_ENV: str(times), MODULE_CALLS_ENV: "1", **env}
        return subprocess.run(
            baseline_argv([sys.executable, str(script), *extra]), env=full, capture_output=True, text=True, check=False
        )

    done = run("30")
    assert done.returncode == 0, done.stderr
    assert "hooks left 0 0" in done.stdout  # the global hooks were removed after the first calls
    got = module_step_times(times)
    assert set(got) == {MODULE_PREFIX + "Sequential", MODULE_PREFIX + "MSELoss", MODULE_PREFIX + "OptimizedModule"}
    assert all(len(a) == 30 for a in got.values())  # outermost calls only: no Linear, no ReLU
    assert OBSERVE_CALLS < 30
    for a in got.values():
        assert (a[:, 1] >= a[:, 0]).all() and (np.diff(a[:, 0]) > 0).all()
    # Ended once one module has N + 1 calls: N periods.
    done = run("30", LAUNCHPROF_STOP_AFTER="10:step")
    assert done.returncode == 0 and "done" not in done.stdout, done.stderr
    assert max(len(a) for a in module_step_times(times).values()) == 11
    # Without the variable, nothing is timed.
    done = run("3", **{MODULE_CALLS_ENV: ""})
    assert done.returncode == 0 and not times.exists()
