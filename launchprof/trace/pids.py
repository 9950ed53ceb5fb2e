"""Process ids of an nsys export: its globalTid/globalPid values hold a host and VM id above
the 24-bit pid (the "Serialized GlobalId" layout; :mod:`launchprof.trace.model`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from launchprof.trace.tables import PID_MASK


def pid_array(values: np.ndarray) -> np.ndarray:
    """The process of each globalTid/globalPid: ``value >> 24``, the host and VM bits above
    the 24-bit pid kept (int64); :func:`plain_pids` then keeps the pid alone where that
    merges no two processes."""
    return np.asarray(values, dtype=np.int64) >> 24


def plain_pids(frames: list[pd.DataFrame], notes: list[str]) -> None:
    """Replace the ``pid`` columns of ``frames`` (``value >> 24`` of a globalPid) by the
    pid alone (the low 24 bits; int32) when no two processes share it; else keep them
    apart by their host and VM bits (``(host/VM << 24) | pid``, int64), with a note: two
    processes with one pid on two hosts or VMs were merged into one."""
    with_pid = [f for f in frames if "pid" in f.columns and len(f)]
    if not with_pid:
        return
    full = np.unique(np.concatenate([pd.unique(f["pid"].to_numpy(dtype=np.int64)) for f in with_pid]))
    low = full & PID_MASK
    if np.unique(low).size == full.size:
        for f in with_pid:
            f["pid"] = (f["pid"].to_numpy(dtype=np.int64) & PID_MASK).astype(np.int32)
        return
    shared = sorted(int(x) for x, n in zip(*np.unique(low, return_counts=True), strict=True) if n > 1)
    notes.append(
        f"pid {', '.join(map(str, shared[:5]))} belongs to processes on different hosts or VMs (nsys's host/VM "
        "bits differ): they are kept apart and shown as (host/VM << 24) | pid"
    )


def shown_pids(processes: Sequence[int]) -> list[int]:
    """How ``processes`` (``globalPid >> 24`` values: host and VM ids above the pid) are
    shown, by the rule of :func:`plain_pids`: the pid alone when no two share it, else the
    whole value."""
    low = [p & PID_MASK for p in processes]
    return low if len(set(low)) == len(set(processes)) else list(processes)
