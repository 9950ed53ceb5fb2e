"""Shared fixtures. The tests import the installed launchprof (see scripts/test.sh)."""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
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


NSYS_FLAKE = "nsys wrote no trace"


def run_nsys_retrying(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command that starts nsys; run it once more if nsys wrote no trace at all.

    Debian's nsys 2022.4 now and then fails to reach its own agent before the workload
    starts ("Connection reset by peer", "sem_open: No such file or directory"), exits 1
    and writes nothing; launchprof then says "nsys wrote no trace". That is nsys's flake,
    not the behaviour under test, so such a run is repeated once.
    """
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0 and NSYS_FLAKE in done.stderr:
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
