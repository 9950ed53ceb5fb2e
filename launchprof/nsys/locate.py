"""Find the nsys executable and its QdstrmImporter, and read nsys's version.

Search order for nsys (first hit wins):

1. an explicit path (``--nsys PATH``), then ``$LAUNCHPROF_NSYS``: must be executable;
2. ``nsys`` on ``PATH``;
3. the usual install folders, each newest version first: ``/opt/nvidia/nsight-systems/*/bin``,
   ``/usr/local/cuda*/bin``, ``/opt/nvidia/nsight-compute/*/host/target-linux-x64`` (Nsight
   Compute bundles nsys there), Debian's ``/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64``
   (``$LAUNCHPROF_NSYS_INSTALL_DIRS`` replaces this list).

nsys looks for its importer only at ``<real nsys folder>/../host-linux-x64/QdstrmImporter``;
Debian (importer in ``/usr/lib/nsight-systems/host-linux-x64``) and Nsight Compute's bundle
(``host/linux-desktop-*``) put it elsewhere, so :func:`find_importer` searches wider.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from launchprof.errors import NsysError

INSTALL_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin",
    "/usr/local/cuda*/bin",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64",
    "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64",
)
IMPORTER_NAME = "QdstrmImporter"
DEBIAN_IMPORTER_DIR = "/usr/lib/nsight-systems/host-linux-x64"
_VERSION = re.compile(r"(\d{4})\.(\d+)(?:\.(\d+))?(?:\.(\d+))?")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class NsysInfo:
    """An nsys executable: ``path``, how it was found (``source``), ``version`` text
    (e.g. ``"2022.4.2.1"``, None when ``nsys --version`` failed) and its numeric tuple."""

    path: Path
    source: str
    version: str | None

    @property
    def version_tuple(self) -> tuple[int, ...]:
        """``(2022, 4, 2, 1)``; ``()`` when unknown."""
        m = _VERSION.search(self.version or "")
        return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def _version_key(path: str) -> tuple[int, ...]:
    """Sort key: every number in the path, in order (``cuda-12.4`` > ``cuda-11.8``)."""
    return tuple(int(n) for n in _DIGITS.findall(path))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def install_patterns() -> tuple[str, ...]:
    """The install-folder patterns searched after PATH: ``$LAUNCHPROF_NSYS_INSTALL_DIRS``
    (glob patterns separated by ``os.pathsep``; set but empty searches none) when set,
    else :data:`INSTALL_GLOBS`."""
    env = os.environ.get("LAUNCHPROF_NSYS_INSTALL_DIRS")
    if env is None:
        return INSTALL_GLOBS
    return tuple(p for p in env.split(os.pathsep) if p)


def install_candidates(patterns: tuple[str, ...] | None = None) -> list[Path]:
    """nsys executables in the folders matching ``patterns`` (default:
    :func:`install_patterns`), pattern by pattern, each pattern's matches newest version first."""
    found: list[Path] = []
    for pattern in install_patterns() if patterns is None else patterns:
        for folder in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            exe = Path(folder) / "nsys"
            if _executable(exe) and exe not in found:
                found.append(exe)
    return found


def locate_nsys(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """``(path, source)`` of the nsys to use; ``source`` says how it was found.

    Raises:
        NsysError: the explicit/``$LAUNCHPROF_NSYS`` path is not an executable, or no nsys
            was found anywhere.
    """
    for candidate, source in ((explicit, "--nsys"), (os.environ.get("LAUNCHPROF_NSYS"), "$LAUNCHPROF_NSYS")):
        if candidate:
            path = Path(candidate)
            if _executable(path):
                return path, source
            raise NsysError(f"nsys not found at {path} (given by {source})")
    found = shutil.which("nsys")
    if found:
        return Path(found), "PATH"
    installs = install_candidates()
    if installs:
        return installs[0], "install folder"
    raise NsysError(
        "nsys (Nsight Systems) was not found: install it (Debian: apt install nsight-systems "
        "from non-free; or NVIDIA's installer), put it on PATH, set $LAUNCHPROF_NSYS, or pass --nsys PATH"
    )


def find_nsys(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Locate nsys (search order in the module docstring).

    Raises:
        NsysError: no usable nsys was found.
    """
    return locate_nsys(explicit)[0]


@functools.lru_cache(maxsize=16)
def _version_text(path: str) -> str | None:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, errors="replace", timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(done.stdout + done.stderr)
    return m.group(0) if m else None


def nsys_info(explicit: str | os.PathLike[str] | None = None) -> NsysInfo:
    """The nsys to use with its version (``nsys --version``, cached per path).

    Raises:
        NsysError: no nsys was found.
    """
    path, source = locate_nsys(explicit)
    return NsysInfo(path, source, _version_text(str(path)))


def importer_candidates(nsys: Path) -> list[Path]:
    """Where a QdstrmImporter may be for ``nsys``, in the order tried.

    ``$LAUNCHPROF_QDSTRM_IMPORTER`` first; then, for the folder of ``nsys`` as given and of
    its real path: the folder itself, ``../host-linux-x64`` (NVIDIA's layout, where nsys
    looks), ``../linux-desktop-*`` and ``../host/linux-desktop-*`` (Nsight Compute's
    bundle), ``../../host-linux-x64``; then Debian's ``/usr/lib/nsight-systems/host-linux-x64``.
    """
    out: list[Path] = []
    env = os.environ.get("LAUNCHPROF_QDSTRM_IMPORTER")
    if env:
        out.append(Path(env))
    folders = [nsys.parent, nsys.resolve().parent]
    for folder in dict.fromkeys(folders):
        out.append(folder / IMPORTER_NAME)
        out.append(folder.parent / "host-linux-x64" / IMPORTER_NAME)
        for pattern in ("linux-desktop-*", "host/linux-desktop-*"):
            out.extend(Path(p) / IMPORTER_NAME for p in sorted(glob.glob(str(folder.parent / pattern)), reverse=True))
        out.append(folder.parent.parent / "host-linux-x64" / IMPORTER_NAME)
    out.append(Path(DEBIAN_IMPORTER_DIR) / IMPORTER_NAME)
    return list(dict.fromkeys(out))


def nsys_own_importer(nsys: Path) -> Path:
    """The one place nsys itself looks for its importer: ``<real folder>/../host-linux-x64``."""
    return nsys.resolve().parent.parent / "host-linux-x64" / IMPORTER_NAME


def check_importer_setting() -> None:
    """Refuse a ``$LAUNCHPROF_QDSTRM_IMPORTER`` that is set but not an executable file
    (``launchprof profile`` asks before the workload runs, not after).

    Raises:
        NsysError: it is set and not an executable file.
    """
    env = os.environ.get("LAUNCHPROF_QDSTRM_IMPORTER")
    if env and not _executable(Path(env)):
        raise NsysError(f"QdstrmImporter not found at {env} (given by $LAUNCHPROF_QDSTRM_IMPORTER)")


def find_importer(nsys: Path) -> Path | None:
    """The first existing, executable QdstrmImporter among :func:`importer_candidates`, or
    None. It is not run here (see :func:`launchprof.nsys.importer.check_importer`).

    Raises:
        NsysError: ``$LAUNCHPROF_QDSTRM_IMPORTER`` is set but not an executable file.
    """
    check_importer_setting()
    for path in importer_candidates(nsys):
        if _executable(path):
            return path
    return None
