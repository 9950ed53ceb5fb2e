"""Where calibration results live: one JSON file per GPU model and driver version.

Default folder: ``$XDG_CACHE_HOME/launchprof`` (``~/.cache/launchprof`` when unset).
File name: ``calibration-<gpu>-<driver>.json``, both parts reduced to ``[a-z0-9._-]``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from launchprof.cache import cache_dir

SCHEMA = "launchprof.calibration/1"


class CalibrationError(RuntimeError):
    """Calibration cannot run or a saved result cannot be read (one-line message)."""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.strip().lower()).strip("-") or "unknown"


def calibration_path(gpu_name: str, driver_version: str, folder: Path | None = None) -> Path:
    """The file for one GPU model and driver version, inside ``folder`` (default cache_dir())."""
    return (folder or cache_dir()) / f"calibration-{_slug(gpu_name)}-{_slug(driver_version)}.json"


def save_calibration(result: dict[str, Any], path: str | os.PathLike[str] | None = None) -> Path:
    """Write ``result`` (as returned by run_calibration) as JSON and return the path.

    Without ``path`` the file goes to ``calibration_path(device name, driver version)``.
    Raises CalibrationError if ``result`` lacks the schema key or the device identity.
    """
    if result.get("schema") != SCHEMA:
        raise CalibrationError(f"not a calibration result (schema is not {SCHEMA!r})")
    if path is None:
        device = result.get("device") or {}
        if "name" not in device or "driver_version" not in device:
            raise CalibrationError("calibration result has no device name or driver version")
        path = calibration_path(str(device["name"]), str(device["driver_version"]))
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def read_calibration(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Read one calibration file: None if it does not exist, CalibrationError if unreadable."""
    target = Path(path)
    if not target.is_file():
        return None
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"cannot read calibration {target}: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CalibrationError(f"{target} is not a {SCHEMA} file")
    return data


def newest_calibration_file(folder: Path | None = None) -> Path | None:
    """The most recently written ``calibration-*.json`` in ``folder`` (default cache_dir())."""
    files = sorted((folder or cache_dir()).glob("calibration-*.json"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None
