"""Every byte launchprof writes on the bundled traces is unchanged: summary.json,
report.html, the step files (steps.csv, step_kernels.csv, step_timeline.csv), and
compare.json/compare.html of the bundled before/after pairs, with each exit status.

The digests in tests/data/golden_outputs.json were taken at a known-good commit; a change
of output that is meant must come with new digests (``python scripts/golden_outputs.py
--write``) and a reason in its commit. Nothing is normalised after the fact: what varies
between machines (absolute paths, the user's calibration, ``LAUNCHPROF_*`` settings) is
held fixed when the commands run, and the vendored plotly.min.js is only checked to be
there (tests/golden.py).
"""

from __future__ import annotations

from pathlib import Path

import golden
import pytest

CASES = golden.cases()


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """All cases at once, run in parallel (about a minute on two cores)."""
    return golden.produce(CASES, Path(tmp_path_factory.mktemp("golden")))


def test_golden_file_lists_every_case() -> None:
    assert sorted(golden.load()) == sorted(c.name for c in CASES)


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_outputs_identical(produced: dict[str, dict[str, str]], name: str) -> None:
    expected = golden.load()[name]
    got = produced[name]
    changed = sorted(f for f in set(expected) | set(got) if expected.get(f) != got.get(f))
    assert not changed, f"{name}: {changed} differ from tests/data/golden_outputs.json"
