"""Turn a ``.qdstrm`` that nsys left behind into a ``.nsys-rep`` with QdstrmImporter.

nsys records into a ``.qdstrm`` stream and then runs ``QdstrmImporter`` to make the
``.nsys-rep``. When it cannot find or load the importer it prints "Unable to retrieve the
importer version: skipping importation of the QDSTRM file" and leaves only the ``.qdstrm``
(Debian's nsys 2022.4 and Nsight Compute's bundled nsys 2025.3 both do). This module
finds the importer where those installs put it (:func:`launchprof.nsys.locate.find_importer`)
and runs ``QdstrmImporter -i FILE.qdstrm`` (it writes ``FILE.nsys-rep``).

When the importer cannot start because a shared library is missing, the dynamic loader
says ``error while loading shared libraries: X: cannot open shared object file``; the
error raised names ``X`` and the Debian/Ubuntu package that provides it.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from launchprof.errors import NsysError
from launchprof.nsys.locate import find_importer

_MISSING_LIB = re.compile(r"error while loading shared libraries: ([^:\s]+): cannot open shared object file")
# Libraries seen missing on real machines (libdw.so.1 for the importer bundled
# with Nsight Compute 2025.3, on an Ubuntu 24.04 GPU machine) -> the Debian/Ubuntu package that has them.
LIBRARY_PACKAGES = {
    "libdw.so.1": "libdw1",
    "libelf.so.1": "libelf1",
    "libasound.so.2": "libasound2",
    "libnss3.so": "libnss3",
    "libxkbfile.so.1": "libxkbfile1",
}


@dataclass(frozen=True)
class ImporterCheck:
    """The outcome of trying an importer: ``ok``, its ``version`` text when it ran, the
    ``missing_library`` when the loader could not start it, and a one-line ``message``."""

    path: Path | None
    ok: bool
    version: str | None
    missing_library: str | None
    message: str


def missing_library(output: str) -> str | None:
    """The shared library the dynamic loader could not find, from its error text, or None."""
    m = _MISSING_LIB.search(output)
    return m.group(1) if m else None


def library_hint(lib: str) -> str:
    """How to get ``lib``: the Debian/Ubuntu package when known, else how to find it."""
    pkg = LIBRARY_PACKAGES.get(lib)
    if pkg:
        return f"install {lib} (Debian/Ubuntu: apt install {pkg})"
    return f"install the package that provides {lib} (Debian/Ubuntu: apt-file search {lib})"


def last_message(output: str, returncode: int) -> str:
    """The last line of a tool's output that holds a word (an importer that fails can end
    its output with the closing ``}`` of a record it printed), at most 300 characters, or
    ``exit code N`` when there is none."""
    lines = [ln.strip() for ln in output.splitlines() if any(c.isalnum() for c in ln)]
    return lines[-1][:300] if lines else f"exit code {returncode}"


def _failure(path: Path, output: str, returncode: int, what: str) -> tuple[str | None, str]:
    lib = missing_library(output)
    if lib:
        return lib, f"{what} {path} cannot start: {lib} is missing; {library_hint(lib)}"
    return None, f"{what} {path} failed: {last_message(output, returncode)}"


def check_importer(path: Path | None) -> ImporterCheck:
    """Run ``QdstrmImporter --version`` to see that it loads (its libraries resolve)."""
    if path is None:
        return ImporterCheck(None, False, None, None, "no QdstrmImporter found")
    try:
        done = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, errors="replace", timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ImporterCheck(path, False, None, None, f"cannot run {path}: {exc}")
    output = done.stdout + done.stderr
    if done.returncode != 0:
        lib, msg = _failure(path, output, done.returncode, "QdstrmImporter")
        return ImporterCheck(path, False, None, lib, msg)
    version = output.strip().splitlines()[-1].strip() if output.strip() else None
    return ImporterCheck(path, True, version, None, f"{path} runs ({version or 'version unknown'})")


def import_qdstrm(qdstrm: Path, nsys: Path, importer: Path | None = None) -> Path:
    """Import ``qdstrm`` into ``<same stem>.nsys-rep`` next to it and return that path.

    The ``.qdstrm`` is kept when the import fails. After a successful import it is removed,
    as nsys itself does, since the ``.nsys-rep`` holds the same recording.

    Raises:
        NsysError: no importer found, it cannot start (the missing library and its package
            are named), or it failed / wrote no report.
    """
    try:
        exe = importer or find_importer(nsys)
    except NsysError as exc:
        raise NsysError(f"{exc} (the .qdstrm is kept: {qdstrm})") from None
    if exe is None:
        raise NsysError(
            f"nsys left only {qdstrm} and no QdstrmImporter was found near {nsys}; set "
            "$LAUNCHPROF_QDSTRM_IMPORTER to its path (the .qdstrm is kept)"
        )
    target = qdstrm.with_suffix(".nsys-rep")
    cmd = [str(exe), "-i", str(Path(qdstrm).absolute()), "-o", str(Path(target).absolute())]  # no path read as option
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        raise NsysError(f"cannot run {exe}: {exc.strerror} (the .qdstrm is kept: {qdstrm})") from None
    if done.returncode != 0 or not target.is_file() or target.stat().st_size == 0:
        _, msg = _failure(exe, done.stdout + done.stderr, done.returncode, "importing with")
        raise NsysError(f"{msg} (the .qdstrm is kept: {qdstrm})")
    qdstrm.unlink(missing_ok=True)
    return target
