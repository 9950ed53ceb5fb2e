"""``launchprof calibrate``: measure this GPU's launch and graph costs with cuda-python.

Public functions (the CLI command is a thin wrapper over these):

``run_calibration() -> dict``
    Measure GPU 0 (a few seconds) and return the result document. Raises
    CalibrationError (one-line message) when cuda-python is missing, no GPU is visible,
    or a CUDA call fails. Keys: ``schema`` ("launchprof.calibration/1"), ``created_utc``,
    ``units`` ("ns"), ``device`` (name, compute_capability, multiprocessors,
    driver_version, cuda_driver_api, cuda_runtime), ``software``, ``method`` (how each
    number is measured), ``medians`` (launch_cpu_ns, stream_kernel_interval_ns,
    stream_kernel_gap_ns, graph_node_interval_ns, graph_node_gap_ns,
    graph_launch_cpu_ns, graph_launch_interval_ns, graph_launch_gap_ns), ``by_nodes``
    (``nodes`` and, per node count, the medians of
    capture_ns, instantiate_ns, update_ns, reinstantiate_ns, first_launch_cpu_ns,
    launch_cpu_ns), ``fits`` (capture, instantiate, update, reinstantiate and launch
    cost: intercept, slope per node, r2, points), ``checks``
    (globaltimer_resolution_ns, spin_ns, max_queue_ns, back_to_back), ``samples`` (raw
    values) and ``duration_s``. ``launchprof calibrate --profiler`` adds a ``profiler``
    section measured under nsys (:mod:`launchprof.calibrate.profiler`).

``save_calibration(result, path=None) -> pathlib.Path``
    Write the document as JSON; by default to
    ``$XDG_CACHE_HOME/launchprof/calibration-<gpu>-<driver>.json`` (``~/.cache`` when
    XDG_CACHE_HOME is unset). Raises CalibrationError for a document without the schema.

``load_calibration(path=None) -> dict | None``
    Read a saved document. With ``path``: that file (None if it does not exist).
    Without: the file for the current GPU and driver when cuda-python can tell them,
    else the most recently written calibration file in the cache folder; None if there
    is none. Raises CalibrationError for an unreadable file or a wrong schema.

``CalibrationError``
    The one exception raised for "cannot calibrate / cannot read".

The pure arithmetic (medians, line fit, break-even N*) is in ``launchprof.calibrate.model``.
"""

from __future__ import annotations

import os
from typing import Any

from .store import (
    SCHEMA,
    CalibrationError,
    cache_dir,
    calibration_path,
    newest_calibration_file,
    read_calibration,
    save_calibration,
)

__all__ = [
    "SCHEMA",
    "CalibrationError",
    "cache_dir",
    "calibration_path",
    "current_device_path",
    "load_calibration",
    "run_calibration",
    "save_calibration",
]


def run_calibration() -> dict[str, Any]:
    """Measure GPU 0 with cuda-python; see the module docstring for the result's keys."""
    from .measure import run_calibration as _run

    return _run()


def current_device_path() -> os.PathLike[str] | None:
    """The cache file for the visible GPU (device 0) and driver, as NVML names them, or
    None if they cannot be told (no cuda-python, no NVML, no GPU)."""
    try:
        from cuda.bindings import nvml

        nvml.init_v2()
        handle = nvml.device_get_handle_by_index_v2(0)
        name = nvml.device_get_name(handle)
        driver = nvml.system_get_driver_version()
    except Exception:  # noqa: BLE001 - no cuda-python, no NVML, no GPU: fall back
        return None
    return calibration_path(str(name), str(driver))


def load_calibration(path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """Read a saved calibration; see the module docstring for how the file is chosen."""
    if path is not None:
        return read_calibration(path)
    newest = newest_calibration_file(cache_dir())
    if newest is None:
        return None  # no file at all: no need to ask NVML which GPU this is (~50 ms)
    current = current_device_path()
    if current is not None:
        found = read_calibration(current)
        if found is not None:
            return found
    return read_calibration(newest)
