"""Find the nsys executable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from launchprof.errors import NsysError


def find_nsys(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Locate nsys: ``explicit``, then ``$LAUNCHPROF_NSYS``, then PATH.

    Raises:
        NsysError: no usable nsys was found.
    """
    for candidate in (explicit, os.environ.get("LAUNCHPROF_NSYS")):
        if candidate:
            path = Path(candidate)
            if path.is_file() and os.access(path, os.X_OK):
                return path
            raise NsysError(f"nsys not found at {path}")
    found = shutil.which("nsys")
    if found:
        return Path(found)
    raise NsysError(
        "nsys (Nsight Systems) was not found: install it (Debian: apt install nsight-systems "
        "from non-free; or NVIDIA's installer), put it on PATH, or pass --nsys PATH"
    )
