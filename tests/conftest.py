"""Shared fixtures. The tests import the installed launchprof (see scripts/test.sh)."""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # tracebuilder.py
DATA = HERE / "data"
TRACES = DATA / "traces"
# Headless Chromium as root in a closed network: no sandbox, no GPU, no background traffic.
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


# What launchprof says when nsys 2022.4 flakes (run_nsys_retrying's docstring says when).
NSYS_FLAKES = ("nsys wrote no trace", "QdstrmImporter failed:")


def nsys_flaked(output: str) -> bool:
    """Whether ``output`` says nsys flaked (:data:`NSYS_FLAKES`)."""
    return any(flake in output for flake in NSYS_FLAKES)


# Table-driven tests whose cases each cost a run of the installed command or an analysis of
# a real trace (a few tenths of a second to a second apiece): the fast subset
# (scripts/test-fast.sh) runs the first case of each; the others are marked slow.
FIRST_CASE_ONLY = frozenset(
    {
        "test_bad_inputs.py::test_bad_file_gives_one_line_error",
        "test_cli.py::test_bad_input_gives_one_error_line_installed",
        "test_compare_cli.py::test_fail_on_chooses_the_failing_verdicts",
        "test_compare_small.py::test_prediction_in_a_report_folder_is_checked",
        "test_compare_small.py::test_small_gain_is_judged_against_the_minimum_effect",
        "test_diagnose.py::test_conversion_code_follows_the_framework_seen_in_the_trace",
        "test_diagnose.py::test_graph_runs_are_not_told_to_convert",
        "test_diagnose_speed_parts.py::test_step_context_frames_match_the_pandas_ones",
        "test_diagnose_speed_parts.py::test_kernels_per_step_match_a_groupby_of_the_names",
        "test_entry.py::test_a_usage_error_is_one_line",
        "test_first_hour.py::test_fail_on_and_min_gain_exit_codes",
        "test_frameworks.py::test_kernel_count_matches_sqlite",
        "test_frameworks.py::test_steps_are_the_workloads_steps",
        "test_frameworks.py::test_a_library_range_is_never_the_step",
        "test_frameworks.py::test_expected_speedup_of_a_same_kernel_pair_is_within_30_percent",
        "test_frameworks.py::test_other_pairs_are_held_by_the_range_or_explained_by_the_comparison",
        "test_frameworks.py::test_a_replaying_decode_loop_is_host_bound_with_its_copies_and_syncs",
        "test_frameworks.py::test_compare_verdict_and_work_change_match_the_construction",
    }
)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    seen: set[str] = set()
    for item in items:
        key = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if key in FIRST_CASE_ONLY:
            if key in seen:
                item.add_marker(pytest.mark.slow)
            seen.add(key)


def run_nsys_retrying(
    argv: list[str], before_retry: Callable[[], None] | None = None, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run a command that starts nsys; run it once more if nsys wrote no trace at all.

    Debian's nsys 2022.4 now and then fails to reach its own agent before the workload
    starts ("Connection reset by peer", "sem_open: No such file or directory"), exits 1
    and writes nothing; launchprof then says "nsys wrote no trace". Under load its
    QdstrmImporter (which this nsys leaves to launchprof) now and then fails on a recording
    that imports on the next try ("QdstrmImporter failed:"; seen once in a full run beside
    another profile). Those are nsys's flakes, not the behaviour under test, so such a run
    is repeated once, after ``before_retry`` (e.g. removing the folder a command that never
    writes over one made).
    """
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0 and nsys_flaked(done.stderr):
        if before_retry is not None:
            before_retry()
        done = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    return done


@pytest.fixture(scope="session")
def real_trace(tmp_path_factory: pytest.TempPathFactory):
    """Decompress a bundled real trace once per session: ``real_trace("mlp_eager")``."""
    folder = tmp_path_factory.mktemp("real")
    cache: dict[str, Path] = {}

    def get(name: str, where: Path = TRACES) -> Path:
        if name not in cache:
            target = folder / f"{name}.sqlite"
            with lzma.open(where / f"{name}.sqlite.xz") as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            cache[name] = target
        return cache[name]

    return get
