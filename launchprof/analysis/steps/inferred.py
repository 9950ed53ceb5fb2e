"""Inferred steps: without NVTX ranges or graph launches, the repeating sequence of the
busiest process's kernels cut into steps (docs/metrics.md, "Step")."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import kind_in, row_codes, sorted_by
from launchprof.analysis.steps.model import Assignment
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis

MATCH_RATIO = 0.9

MAX_PERIOD = 4096
WINDOW = 16384


def _period(tokens: np.ndarray) -> int | None:
    """Shortest p with >= MATCH_RATIO of tokens equal to the token p later (middle window)."""
    n = tokens.size
    if n < 6:
        return None
    lo = max(0, n // 2 - WINDOW // 2)
    w = tokens[lo : lo + WINDOW]
    for p in range(1, min(MAX_PERIOD, w.size // 3) + 1):
        if np.mean(w[:-p] == w[p:]) >= MATCH_RATIO:
            return p
    return None


def _sequence_steps(
    start: np.ndarray, end: np.ndarray, tokens: np.ndarray, p: int, template: np.ndarray | None
) -> np.ndarray:
    """Step index for each kernel of a periodic sequence (kernels sorted by start)."""
    n = tokens.size
    if template is not None:
        windows = np.lib.stride_tricks.sliding_window_view(tokens, p) if n >= p else np.empty((0, p))
        hits = np.flatnonzero((windows == template).all(axis=1)) if len(windows) else np.empty(0, int)
        i0 = int(hits[0]) if hits.size else 0
    else:
        # Phase: the rotation whose first kernel follows the longest median idle gap.
        gap = np.r_[0, start[1:] - end[:-1]]
        lo = max(0, n // 2 - WINDOW // 2)
        scores = [
            np.median(gap[lo + r : lo + WINDOW : p]) if gap[lo + r : lo + WINDOW : p].size else 0 for r in range(p)
        ]
        r = int(np.argmax(scores))
        # Without a clearly longer pause (within 10 %), start where the trace starts.
        starts_first = [q for q in range(p) if tokens[lo + q] == tokens[0]]
        if starts_first and scores[starts_first[0]] >= 0.9 * scores[r]:
            r = starts_first[0]
        first_tokens = tokens[lo + r]
        i0 = int(np.flatnonzero(tokens == first_tokens)[0])
    idx = np.arange(n)
    return np.where(idx >= i0, (idx - i0) // p, -1)


def inferred_steps(
    analysis: Analysis, device: DeviceAnalysis, pid: int, template: Sequence[str] | None
) -> Assignment | None:
    """Steps of process ``pid``'s kernels on ``device`` from their repeating sequence
    (kernel name and launch configuration; kernel names alone when that shows no period),
    or cut by ``template`` (kernel names of one
    step); None when the process's kernels show no period (or do not line up with the
    device's activity)."""
    act = device.activity
    mask = (act["pid"].to_numpy() == pid) & kind_in(act["kind"], ("kernel",))
    kernels = analysis.trace.kernels
    # The process's kernels on the device, sorted by (start, end) (stable).
    rows = np.flatnonzero((kernels["pid"].to_numpy() == pid) & (kernels["device_id"].to_numpy() == device.device_id))
    start, end = kernels["start"].to_numpy()[rows], kernels["end"].to_numpy()[rows]
    if not sorted_by(start, end):
        order = np.lexsort((end, start))
        rows, start, end = rows[order], start[order], end[order]
    if rows.size != int(mask.sum()) or rows.size == 0:
        return None
    if template is not None:
        # Kernel names: each name id looked up once.
        ids, of_id = np.unique(kernels["name_id"].to_numpy()[rows], return_inverse=True)
        names = np.array([analysis.trace.string(i) for i in ids], dtype=object)[of_id]
        codes, uniques = pd.factorize(names)
        lookup = {str(u): i for i, u in enumerate(uniques)}
        wanted = np.array([lookup.get(str(t), -2) for t in template], dtype=np.int64)
        p = len(template)
        step_of_kernel = _sequence_steps(start, end, codes.astype(np.int64), p, wanted)
        how = f"kernel sequence cut into steps of {p} kernels by the given template"
    else:
        cols = ["name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        tokens = row_codes([kernels[c].to_numpy()[rows] for c in cols])
        found, by = _period(tokens), ""
        if found is None:
            # Launch configurations that change every step (a decode step's attention and
            # cache copy grow with the sequence) hide the period; the names repeat.
            tokens = pd.factorize(kernels["name_id"].to_numpy()[rows])[0].astype(np.int64)
            found, by = _period(tokens), " of kernel names (their launch configurations change from step to step)"
        if found is None:
            return None
        p = found
        step_of_kernel = _sequence_steps(start, end, tokens, p, None)
        how = (
            f"no NVTX step ranges and no graph launches: steps inferred from the repeating "
            f"kernel sequence{by} (period {p} kernels)"
        )
    # Map back to activity rows (same order: both sorted by (start, end) and stable).
    out = np.full(len(act), -1, dtype=np.int64)
    out[np.flatnonzero(mask)] = step_of_kernel
    return Assignment("inferred", f"repeating sequence of {p} kernels", how, pid, out)
