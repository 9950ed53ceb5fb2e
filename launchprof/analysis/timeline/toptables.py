"""The top kernels and the top CUDA API calls of the steady steps: what Nsight Systems'
``nsys stats`` reports ``cuda_gpu_kern_sum`` and ``cuda_api_sum`` give for a whole trace,
here per steady step of the process judged, beside the whole-trace figures of the same
name.

Definitions (ns; ``S`` = the number of steady steps of :class:`StepContext`):

- a kernel row of the table: the kernels of that name (the trace's kernel name,
  ``shortName``) that ran in the steady steps (``StepContext.kernels``); ``per_step`` =
  their count / S, ``time_per_step_ns`` = their summed duration (end - start) / S,
  ``share`` = their summed duration / the summed duration of every steady kernel;
  ``trace_count`` and ``trace_time_ns``: every kernel of that name in the trace (all
  processes and devices, start-up included), as ``cuda_gpu_kern_sum`` counts them;
- a call row: the CUDA API calls of that name the judged process made inside the steady
  steps (``StepContext.call_mask``: by CPU time); ``time_per_step_ns`` sums the calls'
  own durations (end - start; a synchronizing call's includes its wait); ``share`` is of
  the summed duration of those calls; ``trace_count`` / ``trace_time_ns`` over the trace.

The first :data:`TOP_ROWS` rows by time per step are kept (ties by name).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.stepdata import StepContext
from launchprof.trace.model import Trace

TOP_ROWS = 15


def _sums(keys: np.ndarray, durations: np.ndarray) -> pd.DataFrame:
    """Count and summed duration per key (index: the key, ascending). Non-negative integer
    keys of a small range (StringIds ids, category codes) are counted with ``np.bincount``:
    no sort, no hash table, no copy of the rows (10M API calls: the pandas ``groupby`` it
    replaced held about 1 GiB more at this point of ``analyze``; benchmarks/README.md)."""
    if keys.dtype.kind in "iu" and keys.size and keys.min() >= 0 and keys.max() < 4 * keys.size + (1 << 16):
        size = np.bincount(keys, minlength=0)
        summed = np.bincount(keys, weights=durations, minlength=size.size)
        present = np.flatnonzero(size)
        return pd.DataFrame({"size": size[present], "sum": summed[present]}, index=present)
    return pd.DataFrame({"key": keys, "ns": durations}).groupby("key", sort=True)["ns"].agg(["size", "sum"])


def _call_sums(calls: pd.Series, durations: np.ndarray) -> pd.DataFrame:
    """:func:`_sums` per call name (index: the name as text) of a ``call`` column, by its
    category codes when it is categorical (the trace's API frame) instead of a text copy
    of every row."""
    if isinstance(calls.dtype, pd.CategoricalDtype):
        codes = calls.cat.codes.to_numpy()
        named = codes >= 0
        by_code = _sums(codes, durations) if named.all() else _sums(codes[named], durations[named])
        names = np.asarray(calls.cat.categories.astype(str), dtype=object)[by_code.index.to_numpy()]
        return by_code.set_axis(pd.Index(names, dtype=object)).sort_index()  # categories are distinct names
    values = calls.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(values, skipna=False) == "string":  # text already (StepContext.calls)
        # By the names' codes, sorted: no text copy of every row (pandas 3's ``astype(str)``
        # makes a new string per row: 143 MiB for 2M calls; benchmarks/README.md).
        codes, names = pd.factorize(values, sort=True)
        by_code = _sums(codes, durations)
        return by_code.set_axis(pd.Index(np.asarray(names, dtype=object)[by_code.index.to_numpy()], dtype=object))
    return _sums(calls.astype(str).to_numpy(), durations)


def _rows(own: pd.DataFrame, every: pd.DataFrame, steps: int, name_of: Any, field: str) -> list[dict[str, Any]]:
    """The :data:`TOP_ROWS` rows of ``own`` (the steady steps' sums) with ``every`` (the
    trace's), keys named by ``name_of``."""
    if own.empty or steps <= 0:
        return []
    total = float(own["sum"].sum())
    named = own.assign(name=[str(name_of(k)) for k in own.index])
    named = named.sort_values(["sum", "name"], ascending=[False, True], kind="stable").head(TOP_ROWS)
    out = []
    for key, row in named.iterrows():
        count, summed = int(row["size"]), float(row["sum"])
        known = key in every.index
        out.append(
            {
                field: row["name"],
                "per_step": count / steps,
                "time_per_step_ns": summed / steps,
                "share": min(summed / total, 1.0) if total > 0 else 0.0,
                "trace_count": int(every.at[key, "size"]) if known else 0,
                "trace_time_ns": float(every.at[key, "sum"]) if known else 0.0,
            }
        )
    return out


def _durations(frame: pd.DataFrame) -> np.ndarray:
    """``end - start`` in int64, as float. Times within 2**53 ns of 0 (as float exact,
    and so is their difference): subtracted as float in one new array, without the int64
    one (10M kernels: 76 MiB less at the peak of ``analyze``; benchmarks/README.md)."""
    end, start = frame["end"].to_numpy(dtype=np.int64), frame["start"].to_numpy(dtype=np.int64)
    if end.size and max(-int(end.min()), int(end.max()), -int(start.min()), int(start.max())) < 2**53:
        out = end.astype(np.float64)
        out -= start
        return out
    return (end - start).astype(float)


def top_tables(ctx: StepContext, trace: Trace) -> dict[str, list[dict[str, Any]]]:
    """``{"kernels": [...], "calls": [...]}`` of the steady steps of ``ctx`` in ``trace``
    (module docstring; rows with ``name``/``call``, ``per_step``, ``time_per_step_ns``,
    ``share``, ``trace_count``, ``trace_time_ns``); empty lists without steady steps (or
    for the whole-trace pseudo-step, which has no steps to divide by)."""
    steps = len(ctx.steady)
    if ctx.pseudo or steps == 0 or ctx.device is None:
        return {"kernels": [], "calls": []}
    k, every_k = ctx.kernels, trace.kernels
    kernels = _rows(
        _sums(k["name_id"].to_numpy(), _durations(k)) if len(k) else pd.DataFrame(),
        _sums(every_k["name_id"].to_numpy(), _durations(every_k)) if len(every_k) else pd.DataFrame(),
        steps,
        lambda i: trace.string(int(i)),
        "name",
    )
    calls, api = ctx.calls, ctx.api
    table = _rows(
        _call_sums(calls["call"], _durations(calls)) if len(calls) else pd.DataFrame(),
        _call_sums(api["call"], _durations(api)) if len(api) else pd.DataFrame(),
        steps,
        str,
        "call",
    )
    return {"kernels": kernels, "calls": table}
