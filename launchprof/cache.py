"""The user's cache folder of launchprof (calibration files, nsys's profile options)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/launchprof``, or ``~/.cache/launchprof`` when that variable is unset,
    empty or relative (the XDG Base Directory spec: relative paths are invalid and ignored)."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "launchprof"
