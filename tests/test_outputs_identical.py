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


def _quick(case: golden.Case) -> bool:
    """In the fast subset: the mlp pair of tests/data/traces (analyze each, compare them)."""
    return case.fast and all("/mlp_" in i for i in case.inputs)


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """The quick cases, run in parallel."""
    return golden.produce([c for c in CASES if _quick(c)], Path(tmp_path_factory.mktemp("golden")))


@pytest.fixture(scope="module")
def produced_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """The other cases (the demo traces and the wider corpus), all at once, run in
    parallel (a few minutes on two cores)."""
    return golden.produce([c for c in CASES if not _quick(c)], Path(tmp_path_factory.mktemp("golden-corpus")))


def test_golden_file_lists_every_case() -> None:
    assert sorted(golden.load()) == sorted(c.name for c in CASES)


def _case_param(case: golden.Case) -> object:
    return pytest.param(case.name, id=case.name, marks=() if _quick(case) else pytest.mark.slow)


@pytest.mark.parametrize("name", [_case_param(c) for c in CASES])
def test_outputs_identical(request: pytest.FixtureRequest, name: str) -> None:
    quick = next(_quick(c) for c in CASES if c.name == name)
    got = request.getfixturevalue("produced" if quick else "produced_corpus")[name]
    expected = golden.load()[name]
    changed = sorted(f for f in set(expected) | set(got) if expected.get(f) != got.get(f))
    assert not changed, f"{name}: {changed} differ from tests/data/golden_outputs.json"


def _has_avx512() -> bool:
    try:
        return " avx512f " in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").replace("\n", " ")
    except OSError:
        return False


@pytest.mark.skipif(not _has_avx512(), reason="the BLAS picks its AVX-512 kernel only on a CPU that has it")
def test_two_shape_figures_do_not_depend_on_the_blas_kernel(tmp_path: Path) -> None:
    """The figures of a trace with two step shapes are weighted sums (analysis/prediction/expect.py);
    computed by the BLAS (np.dot) they took another last bit on a CPU with AVX-512, and
    the golden digests differed there. The same summary.json with OpenBLAS's AVX-512
    kernel and with its AVX2 one."""
    import subprocess

    case = next(c for c in CASES if c.command == "analyze" and c.inputs[0].endswith("/torch_mlp_branchy.sqlite.xz"))
    sums = []
    for kernel in ("SkylakeX", "Haswell"):
        here = tmp_path / kernel
        (here / "cache").mkdir(parents=True)
        env = {**golden._environment(here / "cache"), "OPENBLAS_CORETYPE": kernel}
        trace = golden.DATA / case.inputs[0]
        argv = [golden._launchprof(), "analyze", str(trace), "-o", str(here / "out"), "-q"]
        subprocess.run(argv, cwd=here, env=env, capture_output=True, check=False)
        sums.append((here / "out" / "summary.json").read_bytes())
    assert sums[0] == sums[1]
