"""Golden outputs: SHA-256 digests of every file launchprof writes for the bundled traces.

A behaviour-preserving refactor must leave every byte of these outputs unchanged.
:func:`produce` runs the installed ``launchprof`` command (a separate process, as a user
runs it) on each case and returns ``{case: {file: sha256}}``;
``tests/data/golden_outputs.json`` holds the digests taken at a known-good commit
(``python scripts/golden_outputs.py --write``) and ``tests/test_outputs_identical.py``
compares against them.

What legitimately varies between machines, and how it is held fixed (nothing is rewritten
after the fact; the outputs are hashed as written):

- paths: every trace is copied into one working folder and named relative to it, so the
  trace paths written into summary.json, report.html and compare.json are bare file names;
- the user's calibration (``$XDG_CACHE_HOME/launchprof``, which also decides whether NVML
  is asked about the GPU): ``XDG_CACHE_HOME`` points to an empty folder;
- ``LAUNCHPROF_*`` variables of the caller's environment are dropped;
- ``plotly.min.js`` is a copy of the installed plotly's bundle, not launchprof's output:
  only its presence is checked;
- the output folder is always ``out`` (its name appears in some outputs).

There are no timestamps in these outputs; ``run_id`` is a digest of summary.json itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
GOLDEN = DATA / "golden_outputs.json"
VENDORED = "plotly.min.js"  # the installed plotly's file, copied: not hashed


@dataclass(frozen=True)
class Case:
    """One command: ``analyze TRACE`` or ``compare BEFORE AFTER``, on bundled files
    (paths relative to tests/data)."""

    command: str
    inputs: tuple[str, ...]
    fast: bool  # part of the quick set (tests/data/traces); the rest is the wider corpus

    @property
    def name(self) -> str:
        return f"{self.command}:" + "+".join(i.removesuffix(".sqlite.xz") for i in self.inputs)


def _analyze(folder: str, names: Iterable[str], fast: bool = False) -> list[Case]:
    return [Case("analyze", (f"{folder}/{n}.sqlite.xz",), fast) for n in names]


def _compare(folder: str, pairs: Iterable[tuple[str, str]], fast: bool = False) -> list[Case]:
    return [Case("compare", (f"{folder}/{a}.sqlite.xz", f"{folder}/{b}.sqlite.xz"), fast) for a, b in pairs]


def _stems(folder: str) -> list[str]:
    return sorted(p.name.removesuffix(".sqlite.xz") for p in (DATA / folder).glob("*.sqlite.xz"))


def cases() -> list[Case]:
    """Every bundled single-process trace analysed, and the bundled before/after pairs compared."""
    found = _analyze("traces", _stems("traces"), fast=True)
    found += _compare("traces", [("demo_A_4096", "demo_B_4096"), ("mlp_eager", "mlp_graph")], fast=True)
    for folder in ("cpu", "arrowdir", "gpu", "frameworks"):
        found += _analyze(folder, _stems(folder))
    pairs = json.loads((DATA / "frameworks" / "manifest.json").read_text())["pairs"]
    found += _compare("frameworks", [(p["before"], p["after"]) for p in pairs])
    found += _compare(
        "gpu",
        [
            ("torch_mlp_eager", "torch_mlp_graph"),
            ("small_kernels_launch", "small_kernels_graph"),
            ("matmul_eager", "matmul_graph"),
        ],
    )
    return found


def _launchprof() -> str:
    exe = Path(sys.executable).with_name("launchprof")
    return str(exe) if exe.exists() else "launchprof"


def _environment(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAUNCHPROF_")}
    env["XDG_CACHE_HOME"] = str(cache)
    return env


def _digests(folder: Path) -> dict[str, str]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return {p.name: "present" if p.name == VENDORED else hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def run_case(case: Case, work: Path) -> dict[str, str]:
    """Run one case in its own folder under ``work`` (traces copied in, named relatively)
    and hash its outputs, with the exit status (a verdict's 1, or 2 for a trace without
    CUDA activity, still writes files: those are checked too).

    Raises:
        RuntimeError: the command wrote no output folder.
    """
    here = work / case.name.replace(":", "-").replace("+", "-").replace("/", "-")
    (here / "cache").mkdir(parents=True)
    names = []
    for rel in case.inputs:
        shutil.copyfile(DATA / rel, here / Path(rel).name)
        names.append(Path(rel).name)
    argv = [_launchprof(), case.command, *names, "-o", "out", "-q"]
    done = subprocess.run(argv, cwd=here, env=_environment(here / "cache"), capture_output=True, text=True)
    if not (here / "out").is_dir():
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode} and wrote nothing: {done.stderr}")
    return {"exit": str(done.returncode), **_digests(here / "out")}


def produce(selected: Iterable[Case], work: Path, jobs: int | None = None) -> dict[str, dict[str, str]]:
    """``{case name: {"exit": status, file name: sha256}}`` for ``selected``, run ``jobs`` at a time."""
    chosen = list(selected)
    with ThreadPoolExecutor(jobs or max(1, os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda c: run_case(c, work), chosen))
    return {c.name: r for c, r in zip(chosen, results, strict=True)}


def load() -> dict[str, dict[str, str]]:
    return json.loads(GOLDEN.read_text())["outputs"]


def write(digests: dict[str, dict[str, str]]) -> None:
    doc = {
        "about": "SHA-256 of launchprof's outputs on the bundled traces; tests/golden.py says how they are "
        "produced, scripts/golden_outputs.py --write regenerates them",
        "outputs": dict(sorted(digests.items())),
    }
    GOLDEN.write_text(json.dumps(doc, indent=1) + "\n")
