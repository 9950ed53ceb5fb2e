"""The user's calibration, read for the analysis: the file ``launchprof calibrate`` saved
(:func:`launchprof.calibrate.load_calibration`, which asks NVML which GPU this is), named
by what it measured. The analysis itself reads no file: it is given the calibration
(:func:`launchprof.analysis.diagnosis.diagnose.diagnose`, ``calibration=``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULTS_SOURCE = "defaults"


def user_calibration() -> tuple[dict[str, Any] | None, str]:
    """``(calibration, source)``: the saved calibration (None when there is none, or it
    cannot be read: a broken calibration file must not stop an analysis) and how the
    report names it (``calibration file (GPU, date)``; no local paths in reports)."""
    try:
        from launchprof.calibrate import load_calibration
    except ImportError:
        return None, DEFAULTS_SOURCE
    try:
        data = load_calibration()
    except Exception:  # noqa: BLE001 - a broken calibration file must not stop an analysis
        return None, DEFAULTS_SOURCE
    if not data:
        return None, DEFAULTS_SOURCE
    found = data.get("device")
    device: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    label = ", ".join(str(x) for x in (device.get("name"), data.get("created_utc")) if x)
    return data, f"calibration file ({label})" if label else "calibration file"
