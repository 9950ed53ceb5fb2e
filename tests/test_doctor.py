"""launchprof doctor on this machine (real nsys, real importer, no GPU) and its rules."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from launchprof.cli import app
from launchprof.commands.doctor import check_gpu
from launchprof.nsys.locate import find_importer, nsys_own_importer

runner = CliRunner()
NSYS = shutil.which("nsys")
needs_nsys = pytest.mark.skipif(NSYS is None, reason="nsys is not installed")


@pytest.mark.nsys
@needs_nsys
def test_doctor_on_this_machine() -> None:
    version = subprocess.run([str(NSYS), "--version"], capture_output=True, text=True).stdout.split()[-1]
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert version.split("-")[0] in result.output
    assert "profiling can work here" in result.output
    assert "QdstrmImporter" in result.output
    if not nsys_own_importer(Path(str(NSYS))).exists():
        assert f"{find_importer(Path(str(NSYS)))} runs" in result.output
        assert "not where nsys looks" in result.output


def test_no_nsys_fails_and_says_what_to_install(tmp_path: Path) -> None:
    result = runner.invoke(app, ["doctor", "--nsys", str(tmp_path / "nsys")], env={"COLUMNS": "250"})
    assert result.exit_code == 1
    assert "apt install nsight-systems" in result.output
    assert "profiling cannot work here: fix nsys" in result.output


@pytest.mark.nsys
@needs_nsys
def test_unloadable_importer_fails_with_the_missing_library(tmp_path: Path) -> None:
    real = find_importer(Path(str(NSYS)))
    if real is None or nsys_own_importer(Path(str(NSYS))).exists():
        pytest.skip("needs an nsys that does not find its importer by itself")
    copy = tmp_path / "QdstrmImporter"
    shutil.copy2(real, copy)
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "250", "LAUNCHPROF_QDSTRM_IMPORTER": str(copy)})
    assert result.exit_code == 1
    assert "is missing" in result.output and "QdstrmImporter: install" in result.output


def test_gpu_check_answers_without_crashing() -> None:
    check = check_gpu()
    assert check.status in ("ok", "warn")
    try:
        import cuda  # noqa: F401
    except ImportError:
        assert check.detail == "cuda-python is not installed: GPU not checked"
    else:
        assert check.status == "ok" or check.detail.startswith("no GPU")


@pytest.mark.nsys
@needs_nsys
def test_check_nvtx_probes_that_this_nsys_records_the_steps() -> None:
    """The probe profiles one ``launchprof.step()`` with this machine's nsys (2022.4 in CI,
    which records no range from the PyPI nvtx package >= 0.2.12, installed here by the
    test extra): the step is recorded."""
    result = runner.invoke(app, ["doctor", "--check-nvtx"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if "│ NVTX" in ln)
    assert "records launchprof.step() (probed)" in line, line


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ('Importer error status: the importer binary was not found.\n{\n  "code": 3\n}\n', '"code": 3'),
        ("Importer error status: the importer binary was not found.\n}\n", "Importer error status: the importer"),
        ("}\n]\n", "exit code 7"),
        ("", "exit code 7"),
    ],
)
def test_a_failing_tool_is_quoted_by_its_last_line_with_words(output: str, said: str) -> None:
    from launchprof.nsys.importer import last_message

    assert last_message(output, 7).startswith(said)
