"""Steps: one iteration of the user's loop, found in the trace and projected onto the GPU.

Three sources, in order of preference (DOMAIN.md, "Step"):

1. ``nvtx``: NVTX ranges. By default launchprof's own marker (range ``step`` in domain
   ``launchprof``, see :mod:`launchprof.marker`); ``step_name`` picks ranges by text;
   otherwise the one repeating range text that covers the most GPU work. A GPU activity
   belongs to the range, on the thread that submitted it, that contains the start of the
   submitting API call (joined on (pid, correlation id)). Calls on the process's other
   threads, which carry no step range (PyTorch's autograd threads launch the backward
   pass), go to the step range that contains their start in time.
2. ``graph-launch``: without NVTX, each ``cudaGraphLaunch`` of the busiest process is one
   step (a graph is the captured step).
3. ``inferred``: without either, the shortest period ``p`` of the busiest process's
   kernel sequence (kernel name and launch configuration) over a window in the middle
   of the trace, accepted when at least 90 % of kernels match the kernel ``p`` later.
   A ``template`` (kernel name ids of one step, e.g. from the graph of a converted run)
   fixes the period and phase instead.

Warm-up: the leading steps (at most a quarter of them) whose period, GPU duration or CPU
time exceeds 1.5x the median of the second half of the steps, whose kernel count differs
from the most common one, or that capture or instantiate a graph. The 1.5x factor is a heuristic: start-up costs (module
loading, library handles, allocator growth, capture, instantiation) are typically
several times a steady step.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from launchprof.analysis.callkinds import api_classes, classify
from launchprof.analysis.core import Analysis, DeviceAnalysis
from launchprof.analysis.timeline import api_end_keyed, call_index, corr_key, last_call_rows, lookup_end
from launchprof.errors import LaunchprofError

STEP_DOMAIN = "launchprof"
STEP_NAME = "step"
MATCH_RATIO = 0.9
WARMUP_FACTOR = 1.5
MAX_PERIOD = 4096
WINDOW = 16384


class StepError(LaunchprofError):
    """The steps asked for (``--step NAME``) are not in the trace."""


@dataclass(frozen=True)
class Steps:
    """Steps of one device.

    Attributes:
        source: ``"nvtx"``, ``"graph-launch"``, ``"inferred"`` or ``"none"``.
        name: the NVTX range text, or a description of the inferred step.
        reason: one sentence on how the steps were found (or why none were).
        device_id, pid: the device and the process whose steps these are.
        table: one row per step, in time order, columns (ns unless said):
            ``step`` (0..n-1), ``cpu_start``, ``cpu_end`` (the step on the CPU: NVTX
            range, or first launch call to next step's), ``gpu_start``, ``gpu_end``
            (first activity start, last activity end), ``kernels``, ``memops``,
            ``busy_ns`` (union inside the step), ``bubbles``, ``bubble_ns`` (gaps inside
            the step >= threshold), ``host_wait_ns`` (gaps inside the step, and the gap
            before it, whose next activity's submitting call ended after the gap began),
            ``lead_gap_ns`` (idle from the previous step's last activity to this step's
            first; 0 for the first step), ``period_ns`` (next step's gpu_start - this
            one's; NaN for the last), ``launch_calls``, ``launch_call_ns``,
            ``graph_launches``, ``sync_calls``, ``alloc_calls``, ``instantiations``,
            ``exec_updates``, ``captures``, ``api_ns`` (time in CUDA API calls),
            ``cpu_ns`` (cpu_end - cpu_start), ``warmup`` (bool).
        activity_step: step index of each row of the device's ``activity`` (-1: none).
        warmup: number of warm-up steps (the first ``warmup`` rows of ``table``).
    """

    source: str
    name: str | None
    reason: str
    device_id: int | None
    pid: int | None
    table: pd.DataFrame
    activity_step: pd.Series = field(repr=False)
    warmup: int = 0

    @functools.cached_property
    def steady(self) -> pd.DataFrame:
        """The steady-state steps: ``table`` without warm-up steps and without the last
        step (its period is unknown). Computed once (read it, do not modify it)."""
        t = self.table.loc[~self.table["warmup"]]
        return t.loc[t["period_ns"].notna()] if len(t) > 1 else t

    @property
    def count(self) -> int:
        return int(len(self.table))


def _busiest(device: DeviceAnalysis) -> int:
    kernels = device.activity.loc[device.activity["kind"] == "kernel", "pid"]
    counts = (kernels if len(kernels) else device.activity["pid"]).value_counts()
    return int(counts.index[0])


def _outermost(ranges: pd.DataFrame) -> pd.DataFrame:
    """``ranges`` without those nested inside an earlier range of the same thread (a
    recursive or re-entered range text would otherwise hide its outer range)."""
    r = ranges.sort_values(["tid", "start"], kind="stable")
    prev_end = r.groupby("tid")["end"].cummax().groupby(r["tid"]).shift(1)
    return r.loc[~(prev_end > r["start"])].sort_values("start", kind="stable")


def _project(api: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """Index (into ``ranges``, sorted by start) of the range on the same thread that
    contains each API call's start; -1 where none does. ``ranges`` must not nest on a
    thread (see :func:`_outermost`)."""
    if ranges.empty or api.empty:
        return np.full(len(api), -1, dtype=np.int64)
    left = pd.DataFrame(
        {"start": api["start"].to_numpy(), "tid": api["tid"].to_numpy(), "row": np.arange(len(api))}
    ).sort_values("start", kind="stable")
    right = pd.DataFrame(
        {
            "r_start": ranges["start"].to_numpy(),
            "r_end": ranges["end"].to_numpy(),
            "tid": ranges["tid"].to_numpy(),
            "idx": np.arange(len(ranges)),
        }
    )
    right = right.sort_values("r_start", kind="stable")
    m = pd.merge_asof(left, right, left_on="start", right_on="r_start", by="tid", direction="backward")
    inside = m["idx"].notna() & (m["start"] < m["r_end"])
    out = np.full(len(api), -1, dtype=np.int64)
    out[m.loc[inside, "row"].to_numpy()] = m.loc[inside, "idx"].to_numpy(dtype=np.int64)
    return out


def _with_helper_threads(api: pd.DataFrame, ranges: pd.DataFrame, api_step: np.ndarray, pid: int) -> np.ndarray:
    """Extend the same-thread projection to the process's helper threads.

    CUDA calls of process ``pid`` made on a thread that carries none of the step ranges
    (PyTorch runs the backward pass on autograd engine threads; DDP's reducer launches its
    all-reduces from them) belong to the step whose range, on any thread of the process,
    contains the call's start in time. Calls on a thread that has step ranges keep the
    same-thread rule of DOMAIN.md. ``ranges`` are the chosen process's step ranges, sorted
    by start and not nested.
    """
    calls_pid = api["pid"].to_numpy()
    mask = (calls_pid == pid) & ~api["tid"].isin(ranges["tid"].unique()).to_numpy() & (api_step < 0)
    if not mask.any() or ranges.empty:
        return api_step
    starts = ranges["start"].to_numpy()
    ends = ranges["end"].to_numpy()
    t = api["start"].to_numpy()[mask]
    k = np.searchsorted(starts, t, side="right") - 1
    inside = (k >= 0) & (t < ends[np.clip(k, 0, None)])
    out = api_step.copy()
    rows = np.flatnonzero(mask)
    out[rows[inside]] = k[inside]
    return out


def _activity_from_api(device: DeviceAnalysis, api: pd.DataFrame, api_step: np.ndarray) -> np.ndarray:
    keyed = pd.DataFrame(
        {"pid": api["pid"].to_numpy(), "correlation_id": api["correlation_id"].to_numpy(), "step": api_step}
    )
    keyed = keyed.loc[(keyed["step"] >= 0) & (keyed["correlation_id"] > 0)]
    keyed = keyed.drop_duplicates(["pid", "correlation_id"], keep="last")
    act = device.activity[["pid", "correlation_id"]]
    merged = act.merge(keyed, on=["pid", "correlation_id"], how="left")
    return merged["step"].fillna(-1).to_numpy(dtype=np.int64)


def _nvtx_candidates(analysis: Analysis, device: DeviceAnalysis, step_name: str | None) -> pd.DataFrame | None:
    nvtx = analysis.trace.nvtx
    if nvtx.empty:
        if step_name:
            raise StepError(f"no NVTX range named {step_name!r}: this trace has no NVTX ranges")
        return None
    if step_name:
        chosen = nvtx.loc[nvtx["text"] == step_name]
        if chosen.empty:
            texts = ", ".join(sorted(map(repr, nvtx["text"].unique()))[:8])
            raise StepError(f"no NVTX range named {step_name!r} in this trace (ranges: {texts})")
        return _outermost(chosen)
    own = nvtx.loc[(nvtx["domain"] == STEP_DOMAIN) & (nvtx["text"] == STEP_NAME)]
    if len(own):
        return _outermost(own)
    counts = nvtx.groupby(["domain", "text"]).size()
    best, best_cover = None, 0
    for (domain, text), n in counts.items():
        if n < 3:
            continue
        rows = _outermost(nvtx.loc[(nvtx["domain"] == domain) & (nvtx["text"] == text)])
        cover = int((_activity_from_api(device, analysis.trace.api, _project(analysis.trace.api, rows)) >= 0).sum())
        # Equal cover: prefer the finer range (more ranges: one iteration, not an epoch).
        if cover > best_cover or (cover == best_cover and best is not None and len(rows) > len(best)):
            best, best_cover = rows, cover
    return best if best_cover > 0 else None


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


def _sequence_steps(kern: pd.DataFrame, tokens: np.ndarray, p: int, template: np.ndarray | None) -> np.ndarray:
    """Step index for each kernel of a periodic sequence (kern sorted by start)."""
    n = tokens.size
    if template is not None:
        windows = np.lib.stride_tricks.sliding_window_view(tokens, p) if n >= p else np.empty((0, p))
        hits = np.flatnonzero((windows == template).all(axis=1)) if len(windows) else np.empty(0, int)
        i0 = int(hits[0]) if hits.size else 0
    else:
        # Phase: the rotation whose first kernel follows the longest median idle gap.
        gap = np.r_[0, kern["start"].to_numpy()[1:] - kern["end"].to_numpy()[:-1]]
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


def _inferred(
    analysis: Analysis, device: DeviceAnalysis, pid: int, template: Sequence[str] | None
) -> tuple[np.ndarray, str, str] | None:
    act = device.activity
    mask = (act["pid"] == pid) & (act["kind"] == "kernel")
    rows = act.loc[mask]
    kern = analysis.trace.kernels
    kern = kern.loc[(kern["pid"] == pid) & (kern["device_id"] == device.device_id)]
    kern = kern.sort_values(["start", "end"], kind="stable")
    if len(kern) != len(rows) or kern.empty:
        return None
    if template is not None:
        names = kern["name_id"].map(analysis.trace.string).to_numpy(dtype=object)
        codes, uniques = pd.factorize(names)
        lookup = {str(u): i for i, u in enumerate(uniques)}
        wanted = np.array([lookup.get(str(t), -2) for t in template], dtype=np.int64)
        p = len(template)
        step_of_kernel = _sequence_steps(kern, codes.astype(np.int64), p, wanted)
        how = f"kernel sequence cut into steps of {p} kernels by the given template"
    else:
        keys = kern[["name_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]]
        # Codes in order of first appearance, as MultiIndex.factorize gives, but faster.
        tokens = keys.groupby(list(keys.columns), sort=False, dropna=False).ngroup().to_numpy(dtype=np.int64)
        found = _period(tokens)
        if found is None:
            return None
        p = found
        step_of_kernel = _sequence_steps(kern, tokens, p, None)
        how = (
            f"no NVTX step ranges and no graph launches: steps inferred from the repeating "
            f"kernel sequence (period {p} kernels)"
        )
    # Map back to activity rows (same order: both sorted by (start, end) and stable).
    out = np.full(len(act), -1, dtype=np.int64)
    out[np.flatnonzero(mask.to_numpy())] = step_of_kernel
    return out, f"repeating sequence of {p} kernels", how


def _assign_by_time(starts: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Index of the last bound <= start (-1 before the first)."""
    return np.searchsorted(bounds, starts, side="right") - 1


def find_steps(
    analysis: Analysis,
    step_name: str | None = None,
    template: Sequence[str] | None = None,
    device_id: int | None = None,
    pid: int | None = None,
) -> Steps:
    """Find the steps of the busiest device (or ``device_id``).

    Args:
        analysis: from :func:`launchprof.analyze`.
        step_name: NVTX range text to use as the step (``--step``).
        template: kernel names of one step, in order (e.g. the kernels of one graph
            launch of a converted run); forces inferred steps of that length aligned on
            the template's first occurrence.
        device_id: the device to analyse; default the one with the most kernels.
        pid: the process whose steps to find (one rank, :mod:`launchprof.analysis.ranks`);
            default the busiest process. Only that process's GPU activity is used.

    Returns:
        :class:`Steps` (``source == "none"`` with a reason when no step is found).
        Without ``template``, computed once per (step_name, device, process) for an
        analysis (shared: read it, do not modify it); when the busiest device runs a
        single process, its steps are that process's (the same result the cross-rank
        view finds for it).

    Raises:
        StepError: ``step_name`` was given and no such NVTX range exists.
    """
    if template is not None:
        return _find_steps(analysis, step_name, template, device_id, pid)
    if device_id is None and pid is None and analysis.devices:
        busiest = max(analysis.devices, key=lambda d: (d.figures.kernels, -d.device_id))
        if len(busiest.processes) == 1:  # the same device and process, so the same steps
            device_id, pid = busiest.device_id, busiest.processes[0].pid
    key = ("steps", step_name, device_id, pid)
    found: Steps = analysis.cached(key, lambda: _find_steps(analysis, step_name, None, device_id, pid))
    return found


def _find_steps(
    analysis: Analysis,
    step_name: str | None = None,
    template: Sequence[str] | None = None,
    device_id: int | None = None,
    pid: int | None = None,
) -> Steps:
    """:func:`find_steps`, computed."""
    devices = [d for d in analysis.devices if device_id is None or d.device_id == device_id]
    if pid is not None:
        devices = _only_pid(devices, pid)
    if not devices:
        return _no_steps("no GPU activity in this trace", None, None)
    device = max(devices, key=lambda d: (d.figures.kernels, -d.device_id))
    pid = _busiest(device)
    api = analysis.trace.api
    act = device.activity
    source, name, reason = "none", None, ""
    skipped = ""
    activity_step = None
    cpu_start = cpu_end = None
    api_step = np.full(len(api), -1, dtype=np.int64)
    ranges = None if template is not None else _nvtx_candidates(analysis, device, step_name)
    if ranges is not None:
        projected = _project(api, ranges.sort_values("start", kind="stable"))
        cover = _activity_from_api(device, api, projected)
        pids = pd.Series(act["pid"].to_numpy()[cover >= 0]).value_counts()
        pid = int(pids.index[0]) if len(pids) else pid
        text, domain = str(ranges["text"].iloc[0]), str(ranges["domain"].iloc[0])
        label = text if not domain else f"{domain}:{text}"
        if not (cover >= 0).any():
            # Ranges on another thread than the CUDA calls (or around no GPU work): they
            # cannot be projected onto the GPU (DOMAIN.md: same thread).
            if step_name:
                raise StepError(
                    f"NVTX ranges {label!r} hold no GPU work: no CUDA call on their thread starts inside them"
                )
            skipped = f"NVTX ranges {label!r} hold no GPU work (no CUDA call on their thread starts inside them); "
        else:
            ranges = ranges.loc[ranges["pid"] == pid].sort_values("start", kind="stable").reset_index(drop=True)
            api_step = _with_helper_threads(api, ranges, _project(api, ranges), pid)
            activity_step = _activity_from_api(device, api, api_step)
            cpu_start, cpu_end = ranges["start"].to_numpy(), ranges["end"].to_numpy()
            source = "nvtx"
            name = label
            reason = f"NVTX ranges {name!r} on pid {pid} ({len(ranges)} ranges)"
    if activity_step is None and template is None:
        graph = api.loc[(api["pid"] == pid) & api_classes(analysis.trace)["graph_launch"]]
        if len(graph):
            api_step = np.full(len(api), -1, dtype=np.int64)
            api_step[np.flatnonzero(api.index.isin(graph.index))] = np.arange(len(graph))
            activity_step = _activity_from_api(device, api, api_step)
            source, name = "graph-launch", "cudaGraphLaunch"
            reason = f"{skipped}no NVTX step ranges: each of the {len(graph)} graph launches of pid {pid} is a step"
            cpu_start = graph["start"].to_numpy()
    if activity_step is None:
        found = _inferred(analysis, device, pid, template)
        if found is None:
            return _no_steps(
                "no NVTX step ranges, no graph launches and no repeating kernel sequence",
                device.device_id,
                pid,
                len(act),
            )
        activity_step, name, reason = found
        reason = skipped + reason
        source = "inferred"
    assert activity_step is not None
    n_steps = int(activity_step.max()) + 1 if (activity_step >= 0).any() else 0
    if source == "nvtx" and cpu_start is not None:
        n_steps = len(cpu_start)
    if n_steps == 0:
        return _no_steps(f"{reason}, but none of them holds GPU work", device.device_id, pid, len(act))
    table = _step_table(
        analysis, device, pid, activity_step, n_steps, api_step if source == "nvtx" else None, cpu_start, cpu_end
    )
    table, warmup = _mark_warmup(table)
    return Steps(
        source,
        name,
        reason,
        device.device_id,
        pid,
        table,
        pd.Series(activity_step, index=act.index, name="step"),
        warmup,
    )


def _only_pid(devices: list[DeviceAnalysis], pid: int) -> list[DeviceAnalysis]:
    """The devices where ``pid`` has GPU activity, reduced to that activity (index kept)
    and to that process's figures."""
    out = []
    for d in devices:
        figures = [p.figures for p in d.processes if p.pid == pid]
        if figures:
            out.append(dataclasses.replace(d, figures=figures[0], activity=d.activity.loc[d.activity["pid"] == pid]))
    return out


def _no_steps(reason: str, device_id: int | None, pid: int | None, n: int = 0) -> Steps:
    return Steps(
        "none",
        None,
        reason,
        device_id,
        pid,
        pd.DataFrame(columns=["step", "warmup", "period_ns"]),
        pd.Series(np.full(n, -1, dtype=np.int64), name="step"),
        0,
    )


def _step_table(
    analysis: Analysis,
    device: DeviceAnalysis,
    pid: int,
    activity_step: np.ndarray,
    n_steps: int,
    api_step: np.ndarray | None,
    cpu_start: np.ndarray | None,
    cpu_end: np.ndarray | None,
) -> pd.DataFrame:
    act = device.activity.assign(step=activity_step)
    api = analysis.trace.api
    steps = pd.RangeIndex(n_steps, name="step")
    stepped = act.loc[act["step"] >= 0]
    g = stepped.groupby("step")
    kind = stepped["kind"]
    table = pd.DataFrame(index=steps)
    table["gpu_start"] = g["start"].min()
    table["gpu_end"] = g["end"].max()
    table["kernels"] = (kind == "kernel").groupby(stepped["step"]).sum()
    table["memops"] = kind.isin(["memcpy", "memset"]).groupby(stepped["step"]).sum()
    api_end = analysis.trace.cached("api_end_keyed", lambda: api_end_keyed(api))
    busy, bubbles, bubble_ns, inner_wait = _inner(stepped, api_end, analysis.bubble_threshold_ns, n_steps)
    table["busy_ns"], table["bubbles"], table["bubble_ns"] = busy, bubbles, bubble_ns
    table = table.fillna({"kernels": 0, "memops": 0})
    first = _first_rows(stepped)
    # The gap before each step (from the previous step's last activity) and whether it was host-wait.
    lead = table["gpu_start"] - table["gpu_end"].shift(1)
    table["lead_gap_ns"] = lead.clip(lower=0).fillna(0)
    lead_wait = _lead_wait(stepped, first, api_end, table)
    table["host_wait_ns"] = inner_wait + lead_wait
    table["period_ns"] = table["gpu_start"].shift(-1) - table["gpu_start"]
    # CPU side of each step.
    if cpu_start is None:
        first_call = _first_call_start(
            stepped, first, api, analysis.trace.cached("call_index", lambda: call_index(api))
        )
        # Without the submitting call (an export without the API table), the GPU start.
        first = first_call.reindex(steps).astype("float64").fillna(table["gpu_start"].astype("float64"))
        cpu_start = first.ffill().bfill().fillna(0).to_numpy(dtype=np.int64)
    if cpu_end is None:
        cpu_end = np.r_[cpu_start[1:], table["gpu_end"].iloc[-1] if len(table) else 0]
    table["cpu_start"], table["cpu_end"] = cpu_start, cpu_end
    calls = api.loc[api["pid"] == pid]
    if api_step is None:
        call_step = _assign_by_time(calls["start"].to_numpy(), np.asarray(cpu_start))
    else:
        call_step = api_step[np.flatnonzero((api["pid"] == pid).to_numpy())]
    cls = classify(calls["call"])
    dur = (calls["end"] - calls["start"]).to_numpy()
    keep = call_step >= 0
    per_call = {
        "launch_calls": cls["launch"].to_numpy(),
        "launch_call_ns": np.where(cls["launch"].to_numpy(), dur, 0),
        "graph_launches": cls["graph_launch"].to_numpy(),
        "sync_calls": cls["sync"].to_numpy(),
        "alloc_calls": cls["alloc"].to_numpy(),
        "instantiations": cls["instantiate"].to_numpy(),
        "exec_updates": cls["exec_update"].to_numpy(),
        "captures": cls["capture"].to_numpy(),
        "api_ns": dur,
    }
    for col, values in per_call.items():
        table[col] = _sum_by_step(call_step[keep], values[keep], n_steps)
    table["cpu_ns"] = table["cpu_end"] - table["cpu_start"]
    int_cols = [
        "kernels",
        "memops",
        "busy_ns",
        "bubbles",
        "bubble_ns",
        "lead_gap_ns",
        "host_wait_ns",
        "launch_calls",
        "launch_call_ns",
        "graph_launches",
        "sync_calls",
        "alloc_calls",
        "instantiations",
        "exec_updates",
        "captures",
        "api_ns",
        "cpu_ns",
    ]
    for c in int_cols:
        table[c] = table[c].fillna(0).astype("int64")
    return table.reset_index()


def _sum_by_step(step: np.ndarray, values: np.ndarray, n_steps: int) -> np.ndarray:
    """int64 sum of ``values`` per step 0..n_steps-1 (steps outside that range dropped)."""
    inside = (step >= 0) & (step < n_steps)
    values = np.asarray(values)[inside]
    step = step[inside]
    if values.dtype == bool:  # a count: exact
        return np.bincount(step[values], minlength=n_steps)[:n_steps].astype(np.int64)
    values = values.astype(np.int64)
    if int(np.abs(values).sum()) < 2**53:  # float64 sums are exact below 2**53
        return np.rint(np.bincount(step, weights=values, minlength=n_steps)[:n_steps]).astype(np.int64)
    out = np.zeros(n_steps, dtype=np.int64)
    np.add.at(out, step, values)
    return out


def _first_rows(stepped: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(steps, row positions in ``stepped``) of each step's earliest activity (by start,
    ties in row order), steps ascending."""
    step = stepped["step"].to_numpy()
    order = np.lexsort((stepped["start"].to_numpy(), step))
    first = np.ones(order.size, bool)
    first[1:] = step[order][1:] != step[order][:-1]
    return step[order][first], order[first]


def _inner(stepped: pd.DataFrame, api_end: pd.Series, threshold: int, n_steps: int):  # type: ignore[no-untyped-def]
    """Per step (arrays over 0..n_steps-1): busy ns (union of its activity), bubbles and
    bubble ns (gaps inside it >= threshold), host-wait ns of the gaps inside it."""
    step = stepped["step"].to_numpy()
    start = stepped["start"].to_numpy()
    end = stepped["end"].to_numpy()
    order = np.lexsort((end, start, step))
    step, start, end = step[order], start[order], end[order]
    new_step = np.ones(step.size, bool)
    new_step[1:] = step[1:] != step[:-1]
    run_end = pd.Series(end).groupby(step, sort=False).cummax().to_numpy()
    # A segment (busy interval of the step) opens where the activity starts after all earlier ones ended.
    opens = new_step.copy()
    opens[1:] |= start[1:] > run_end[:-1]
    first = np.flatnonzero(opens)
    seg_step, seg_start = step[first], start[first]
    seg_end = np.maximum.reduceat(run_end, first) if first.size else run_end[:0]
    seg_pid = stepped["pid"].to_numpy()[order][first]
    seg_corr = stepped["correlation_id"].to_numpy()[order][first]
    busy = _sum_by_step(seg_step, seg_end - seg_start, n_steps)
    same = seg_step[1:] == seg_step[:-1]
    gap = (seg_start[1:] - seg_end[:-1])[same]
    gap_step = seg_step[1:][same]
    submit_end = _submit_end(api_end, seg_pid[1:][same], seg_corr[1:][same])
    wait = np.nan_to_num(submit_end, nan=-np.inf) > seg_end[:-1][same]
    is_bubble = gap >= threshold
    bubbles = _sum_by_step(gap_step, is_bubble, n_steps)
    bubble_ns = _sum_by_step(gap_step, np.where(is_bubble, gap, 0), n_steps)
    inner_wait = _sum_by_step(gap_step, np.where(wait, gap, 0), n_steps)
    return busy, bubbles, bubble_ns, inner_wait


def _submit_end(api_end: pd.Series, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """End (float ns) of the API call that submitted each (pid, correlation id); NaN if none."""
    out = lookup_end(api_end, corr_key(pid, corr))
    out[np.asarray(corr) <= 0] = np.nan
    return out


def _lead_wait(
    stepped: pd.DataFrame, first: tuple[np.ndarray, np.ndarray], api_end: pd.Series, table: pd.DataFrame
) -> pd.Series:
    steps, rows = first
    submit_end = pd.Series(
        _submit_end(api_end, stepped["pid"].to_numpy()[rows], stepped["correlation_id"].to_numpy()[rows]), index=steps
    )
    prev_end = table["gpu_end"].shift(1)
    wait = submit_end.reindex(table.index) > prev_end
    return table["lead_gap_ns"].where(wait, 0)


def _first_call_start(
    stepped: pd.DataFrame, first: tuple[np.ndarray, np.ndarray], api: pd.DataFrame, index: tuple[np.ndarray, np.ndarray]
) -> pd.Series:
    """Start of the call that submitted each step's earliest activity (NaN: none)."""
    steps, rows = first
    call = last_call_rows(api, stepped["pid"].to_numpy()[rows], stepped["correlation_id"].to_numpy()[rows], index)
    if not len(api):
        return pd.Series(np.nan, index=steps)
    call_start = api["start"].to_numpy()[np.maximum(call, 0)].astype(np.float64)
    return pd.Series(np.where(call >= 0, call_start, np.nan), index=steps)


def _mark_warmup(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    n = len(table)
    table = table.assign(warmup=False)
    if n < 4:
        return table, 0
    ref = table.iloc[n // 2 :]
    period_ref = ref["period_ns"].median()
    dur_ref = (ref["gpu_end"] - ref["gpu_start"]).median()
    mode = table["kernels"].mode().iloc[0]
    cpu_ref = ref["cpu_ns"].median()
    # Start-up work on the CPU before a step's first launch (module loading inside the
    # first range) does not lengthen its GPU period: the step's CPU time shows it.
    slow = (
        (table["period_ns"] > WARMUP_FACTOR * period_ref)
        | ((table["gpu_end"] - table["gpu_start"]) > WARMUP_FACTOR * dur_ref)
        | (table["cpu_ns"] > WARMUP_FACTOR * cpu_ref)
    )
    odd = slow | (table["kernels"] != mode)
    # Capture and instantiation mark warm-up only when the steady steps do not repeat them
    # (a loop that re-captures every step is churn, not warm-up).
    for col in ("instantiations", "captures"):
        if (ref[col] == 0).all():
            odd |= table[col] > 0
    limit = n // 4
    warm = 0
    while warm < limit and bool(odd.iloc[warm]):
        warm += 1
    table.loc[: warm - 1, "warmup"] = True if warm else False
    return table, warm


def step_stats(steps: Steps) -> dict[str, float | int | str | None]:
    """Steady-state distribution figures of ``steps`` for the summary (ns, counts).

    Returns a dict with ``source``, ``name``, ``reason``, ``count``, ``warmup``,
    ``steady``, and for the steady steps ``kernels_per_step_p50``, ``memops_per_step_p50``,
    ``period_p50_ns``, ``period_p90_ns``, ``period_mean_ns``, ``period_std_ns``,
    ``busy_p50_ns``, ``bubble_ns_p50``, ``host_wait_p50_ns``, ``launch_calls_p50``,
    ``launch_call_ns_p50``, ``sync_calls_p50``, ``alloc_calls_p50``,
    ``graph_launches_p50``, ``api_ns_p50``, ``cpu_ns_p50`` (numpy linear percentiles).
    """
    s = steps.steady
    out: dict[str, float | int | str | None] = {
        "source": steps.source,
        "name": steps.name,
        "reason": steps.reason,
        "count": steps.count,
        "warmup": steps.warmup,
        "steady": int(len(s)),
        "device_id": steps.device_id,
        "pid": steps.pid,
    }

    def pct(col: str, q: float) -> float | None:
        v = s[col].dropna().to_numpy(dtype=float) if col in s else np.empty(0)
        return float(np.percentile(v, q)) if v.size else None

    for col, key in (
        ("kernels", "kernels_per_step_p50"),
        ("memops", "memops_per_step_p50"),
        ("period_ns", "period_p50_ns"),
        ("busy_ns", "busy_p50_ns"),
        ("bubble_ns", "bubble_ns_p50"),
        ("host_wait_ns", "host_wait_p50_ns"),
        ("launch_calls", "launch_calls_p50"),
        ("launch_call_ns", "launch_call_ns_p50"),
        ("sync_calls", "sync_calls_p50"),
        ("alloc_calls", "alloc_calls_p50"),
        ("graph_launches", "graph_launches_p50"),
        ("api_ns", "api_ns_p50"),
        ("cpu_ns", "cpu_ns_p50"),
    ):
        out[key] = pct(col, 50)
    out["period_p90_ns"] = pct("period_ns", 90)
    period = s["period_ns"].dropna().to_numpy(dtype=float) if "period_ns" in s else np.empty(0)
    out["period_mean_ns"] = float(period.mean()) if period.size else None
    out["period_std_ns"] = float(period.std(ddof=1)) if period.size > 1 else None
    return out
