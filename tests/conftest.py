"""Shared fixtures. The tests import the installed launchprof (see scripts/test.sh)."""

from __future__ import annotations

import lzma
import shutil
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
