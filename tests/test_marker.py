"""launchprof.step(): context manager and decorator forms, and the no-op without a profiler.

That the ranges reach a real nsys trace with text ``step`` in domain ``launchprof`` is
checked end to end in test_profile_e2e.py (sqlite3 on the export)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import launchprof
from launchprof.marker import STEP_DOMAIN, STEP_NAME, Step


def test_documented_name_and_domain() -> None:
    assert (STEP_NAME, STEP_DOMAIN) == ("step", "launchprof")
    assert launchprof.step().name == "step"
    assert launchprof.step("decode").name == "decode"


def test_context_manager_and_decorators_return_values_and_propagate_errors() -> None:
    with launchprof.step() as s:
        assert isinstance(s, Step)

    @launchprof.step
    def bare(x: int) -> int:
        return x + 1

    @launchprof.step("named")
    def named(x: int) -> int:
        return x * 2

    assert bare(1) == 2 and bare.__name__ == "bare"
    assert named(3) == 6

    @launchprof.step()
    def boom() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError):
        boom()
    with pytest.raises(ValueError), launchprof.step():
        raise ValueError("inside")


@pytest.mark.parametrize("injection", [None, "/nonexistent/libToolsInjection64.so", "/bin/sh"])
def test_without_a_profiler_step_is_a_no_op(injection: str | None) -> None:
    """No NVTX injection (no profiler), one that cannot be loaded, or a library without
    ``InitializeInjectionNvtx2``: the markers do nothing and say so, without an error."""
    code = (
        "import sys\n"
        "import launchprof, launchprof.marker as m\n"
        "assert m.nvtx_active() is False\n"
        "with launchprof.step():\n    pass\n"
        "f = launchprof.step(lambda: 5)\nassert f() == 5\n"
        "assert 'pandas' not in sys.modules, 'import launchprof must stay light'\n"
        "print('ok')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"}
    if injection:
        env["NVTX_INJECTION64_PATH"] = injection
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "ok" and not done.stderr, done.stderr


def test_analyze_still_reachable_lazily() -> None:
    code = (
        "import launchprof, sys\nassert 'pandas' not in sys.modules\n"
        "launchprof.analyze\nassert 'pandas' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_command_line_starts_light() -> None:
    """`launchprof profile` starts nsys right after its own imports: no nvtx, numpy or pandas by then."""
    code = (
        "import sys, launchprof.cli.entry, launchprof.commands.profile\n"
        "print(sorted(m for m in ('nvtx', 'numpy', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


def test_an_unwritable_step_times_file_is_one_line(tmp_path: Path) -> None:
    code = "import launchprof\nwith launchprof.step():\n    pass\n"
    env = {**os.environ, "LAUNCHPROF_STEP_TIMES": str(tmp_path / "missing-folder" / "t.steps")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0
    target = tmp_path / "missing-folder" / "t.steps"
    assert done.stderr.strip().splitlines() == [
        f"launchprof: cannot write the step times to {target} (No such file or directory)"
    ]
