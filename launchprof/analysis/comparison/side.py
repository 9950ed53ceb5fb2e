"""One side of a comparison: the per-step figures of a run, in a form that a trace and a
report folder can both give.

:func:`side_from_analysis` turns an :class:`~launchprof.analysis.Analysis` and its
:class:`~launchprof.analysis.steps.Steps` into a :class:`SideData`; report folders are
read into the same shape by :mod:`launchprof.api.report_folder`; both take the
representative step by one rule (:func:`representative_step`). Joining a side's steps
``k`` to one is :mod:`launchprof.analysis.comparison.regroup`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.arrays import row_codes
from launchprof.analysis.stepdata import step_member
from launchprof.analysis.steps import Steps, step_stats
from launchprof.analysis.timeline.callkinds import api_classes, classify
from launchprof.analysis.timeline.core import Analysis, DeviceAnalysis
from launchprof.analysis.timeline.gaps import corr_key
from launchprof.trace.model import text

# Columns of SideData.table (and of a report folder's steps.csv), ns unless said.
STEP_COLUMNS = (
    "step",
    "warmup",
    "gpu_start",
    "gpu_end",
    "cpu_start",
    "cpu_end",
    "period_ns",
    "kernels",
    "graph_kernels",
    "graph_execs",
    "memops",
    "busy_ns",
    "bubbles",
    "bubble_ns",
    "host_wait_ns",
    "lead_gap_ns",
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
)
KERNEL_KEY = ("name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
SAMPLE_COLUMNS = ("lane", "kind", "name", "start_ns", "end_ns", "shift_ns")
MAX_SAMPLE_ROWS = 3_000
# The GPU runs a step this many periods after the CPU began it: work is queued ahead.
QUEUED_AHEAD_PERIODS = 2
# Step columns a reader may find missing (filled with 0): added after the first format.
OPTIONAL_STEP_COLUMNS = ("graph_kernels", "graph_execs")


@dataclass(frozen=True)
class SideData:
    """The figures of one run that a comparison needs.

    Attributes:
        path: the trace or report folder as the user gave it.
        origin: ``"trace"`` or ``"report"`` (a report folder).
        step_source, step_name, step_reason: how the steps were found (see
            :class:`~launchprof.analysis.steps.Steps`).
        table: one row per step, columns :data:`STEP_COLUMNS` (ns; ``graph_kernels``:
            kernels of the step submitted by a graph launch; ``graph_execs``: whole-graph
            rows of a ``--cuda-graph-trace=graph`` trace, which has no kernel rows for
            graph work; ``warmup`` bool); None when only summary figures are available.
        stats: steady-state step figures as :func:`~launchprof.analysis.steps.step_stats`
            gives them (the fallback when ``table`` is None).
        kernels: the kernels of a steady step: columns :data:`KERNEL_KEY`,
            ``per_step`` (mean count per steady step) and ``gpu_ns_per_step`` (their mean
            summed duration per steady step, ns; NaN when a report folder predates it);
            None when unknown.
        sample: the GPU activity and CUDA API calls of one representative steady step
            (the first whose period is nearest the median): columns ``lane``, ``kind``,
            ``name``, ``start_ns``, ``end_ns`` (ns from the step's first event, CPU or GPU),
            ``shift_ns`` (0, or on GPU rows how far they were moved earlier: when the GPU
            ran the step more than :data:`QUEUED_AHEAD_PERIODS` periods after the CPU began
            it, the work was queued ahead, and the GPU rows start at the step's first GPU
            activity instead);
            None when unknown.
        sample_step: the step index of ``sample``.
        bubble_threshold_ns: the bubble threshold the steps were measured with.
        graph_instantiations, instantiate_ns, exec_updates, graph_launches: whole-run
            counts and the total time in graph instantiate calls (ns) of the step's process.
        predicted_speedup, predicted_step_ns, break_even_iterations: the run's graph
            recommendation, when one was made.
        notes: what was approximated or missing.
        unprofiled_periods: the step periods of the runs without nsys (``profile
            --baseline-runs``; ns, pooled, each run's first period left out as
            :func:`launchprof.analysis.baseline.summarize_runs` does); None when there were none.
        expected_eager_step_ns: the run's step without the profiler as its recommendation
            estimates it (``recommendation.expected.eager_step_ns``), when it has one.
        step_without_profiler: the recommendation's ``step_without_profiler`` (``step_ns``,
            ``low_ns``, ``high_ns``, ``source``; a run that replays graphs has one too),
            or None.
    """

    path: str
    origin: str
    step_source: str
    step_name: str | None
    step_reason: str
    table: pd.DataFrame | None
    stats: dict[str, Any]
    kernels: pd.DataFrame | None
    sample: pd.DataFrame | None
    sample_step: int | None
    bubble_threshold_ns: int
    graph_instantiations: int
    instantiate_ns: int
    exec_updates: int
    graph_launches: int
    predicted_speedup: float | None = None
    predicted_step_ns: float | None = None
    break_even_iterations: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    unprofiled_periods: np.ndarray | None = field(default=None, repr=False)
    expected_eager_step_ns: float | None = None
    step_without_profiler: dict[str, Any] | None = None

    @property
    def steady(self) -> pd.DataFrame | None:
        """Steady-state rows of ``table`` (:func:`steady_rows`)."""
        return None if self.table is None else steady_rows(self.table)

    @property
    def kernels_per_step(self) -> float | None:
        """Median kernels per steady step."""
        s = self.steady
        if s is not None and len(s):
            return float(np.median(s["kernels"].to_numpy(dtype=float)))
        v = self.stats.get("kernels_per_step_p50")
        return None if v is None else float(v)

    def with_notes(self, *notes: str) -> SideData:
        """A copy with ``notes`` appended."""
        return dataclasses.replace(self, notes=self.notes + tuple(notes))


def steady_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Steady-state rows of a side's step table: not warm-up, with a known period."""
    return table.loc[~table["warmup"].astype(bool) & table["period_ns"].notna()]


def kernel_rows_of(analysis: Analysis, device: DeviceAnalysis) -> np.ndarray:
    """Per row of ``device.activity``: the position in ``analysis.trace.kernels`` of its
    kernel (-1 for non-kernel rows). Kernel rows of the activity are the device's kernels
    in stable (start, end) order (see :meth:`~launchprof.trace.Trace.gpu_activity`), so
    they align row by row.

    Raises:
        AssertionError: the counts disagree.
    """
    act = device.activity
    kern = analysis.trace.kernels
    device_ids = kern["device_id"].to_numpy()
    one_device = bool((device_ids == device.device_id).all())
    mine = np.arange(device_ids.size) if one_device else np.flatnonzero(device_ids == device.device_id)
    start, end = kern["start"].to_numpy()[mine], kern["end"].to_numpy()[mine]
    ds = np.diff(start)
    in_order = bool((ds > 0).all() or ((ds >= 0).all() and (np.diff(end)[ds == 0] >= 0).all()))
    by_time = mine if in_order else mine[np.lexsort((end, start))]  # the loader sorts by start
    kind = act["kind"]
    if isinstance(kind.dtype, pd.CategoricalDtype) and "kernel" in kind.cat.categories:
        is_kernel = kind.cat.codes.to_numpy() == kind.cat.categories.get_loc("kernel")
    else:
        is_kernel = (kind == "kernel").to_numpy()
    if int(is_kernel.sum()) != by_time.size:
        raise AssertionError("kernel rows of the activity do not match the device's kernels")
    rows = np.full(len(act), -1, dtype=np.int64)
    rows[is_kernel] = by_time
    return rows


def _kernel_names(analysis: Analysis, name_ids: np.ndarray) -> np.ndarray:
    """The names (object array) of kernel name ids, each distinct id looked up once;
    dangling ids (or no StringIds table) are named as :meth:`Trace.string` names them."""
    unique_ids, per_kernel = np.unique(name_ids, return_inverse=True)
    mapped = np.array(analysis.trace.strings.reindex(unique_ids).to_numpy(dtype=object), dtype=object)
    missing = pd.isna(mapped)
    mapped[missing] = [f"<unknown #{i}>" for i in unique_ids[missing]]
    return mapped[per_kernel.reshape(-1)] if mapped.size else np.empty(0, dtype=object)


def kernel_info(analysis: Analysis, device: DeviceAnalysis) -> pd.DataFrame:
    """Name and launch configuration of each row of ``device.activity``.

    Returns:
        DataFrame aligned with ``device.activity`` (same index): columns
        :data:`KERNEL_KEY` (``name`` None and grid/block -1 for non-kernel rows).

    Kernel rows of the activity are the device's kernels in stable (start, end) order
    (see :meth:`~launchprof.trace.Trace.gpu_activity`), so they align row by row.
    """
    act = device.activity
    kern = analysis.trace.kernels
    at = kernel_rows_of(analysis, device)
    is_kernel = at >= 0
    rows = at[is_kernel]
    names = np.full(len(act), None, dtype=object)
    names[is_kernel] = _kernel_names(analysis, kern["name_id"].to_numpy()[rows])
    cols: dict[str, Any] = {"name": pd.Series(names, index=act.index, dtype=object)}
    for c in KERNEL_KEY[1:]:
        values = np.full(len(act), -1, dtype=np.int64)
        values[is_kernel] = kern[c].fillna(-1).to_numpy(dtype=np.int64)[rows]
        cols[c] = values
    return pd.DataFrame(cols, index=act.index)


def call_classes(calls: pd.Series) -> pd.DataFrame:
    """:func:`~launchprof.analysis.timeline.callkinds.classify` of ``calls``, computed once per
    distinct name when ``calls`` is categorical (the trace's ``api["call"]`` is)."""
    if not isinstance(calls.dtype, pd.CategoricalDtype) or calls.isna().any():
        return classify(calls)
    per_name = classify(pd.Series(calls.cat.categories))
    codes = calls.cat.codes.to_numpy()
    return pd.DataFrame({c: per_name[c].to_numpy()[codes] for c in per_name.columns}, index=calls.index)


def _graph_submitted(analysis: Analysis, act: pd.DataFrame) -> np.ndarray:
    """Whether each activity row was submitted by a graph launch call (pid, correlation id)."""
    api = analysis.trace.api
    graph = api_classes(analysis.trace)["graph_launch"].to_numpy()
    if not graph.any():
        return np.zeros(len(act), dtype=bool)
    # One int64 key per (pid, correlation id) pair (corr_key).
    keys = corr_key(api["pid"].to_numpy()[graph], api["correlation_id"].to_numpy()[graph])
    return np.isin(corr_key(act["pid"].to_numpy(), act["correlation_id"].to_numpy()), keys)


def step_kernels(
    analysis: Analysis, kernel_rows: np.ndarray, act_step: np.ndarray, steady_steps: np.ndarray
) -> pd.DataFrame:
    """Mean count (``per_step``) and mean summed duration (``gpu_ns_per_step``, ns) per
    steady step of each (name, grid, block) among the kernels of steady
    steps (``kernel_rows``: :func:`kernel_rows_of`), sorted by :data:`KERNEL_KEY`. Counted
    per distinct (name id, grid, block) first, then grouped by name text (ids sharing a
    text are one name), as a groupby over every kernel row would."""
    kern = analysis.trace.kernels
    rows = kernel_rows[step_member(act_step, steady_steps) & (kernel_rows >= 0)]
    config = {c: _int_column(kern[c], rows) for c in KERNEL_KEY[1:]}
    name_id = kern["name_id"].to_numpy()[rows]
    codes = row_codes([name_id, *config.values()])
    counts = np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)
    first = np.zeros(counts.size, dtype=np.int64)
    first[codes] = np.arange(codes.size)  # a row of each distinct config (any: they are equal)
    dur = kern["end"].to_numpy()[rows] - kern["start"].to_numpy()[rows]
    gpu_ns = np.bincount(codes, weights=dur, minlength=counts.size) if codes.size else np.zeros(0)
    distinct = pd.DataFrame(
        {
            "name": _kernel_names(analysis, name_id[first]),
            **{c: v[first] for c, v in config.items()},
            "n": counts,
            "gpu_ns": gpu_ns,
        }
    )
    sums = distinct.groupby(list(KERNEL_KEY), sort=True)[["n", "gpu_ns"]].sum() / max(len(steady_steps), 1)
    return sums.rename(columns={"n": "per_step", "gpu_ns": "gpu_ns_per_step"}).reset_index()


def _int_column(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """``column.fillna(-1)`` as int64 at ``rows``."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu":
        return column.to_numpy()[rows].astype(np.int64)
    return column.fillna(-1).to_numpy(dtype=np.int64)[rows]


def representative_step(steady: pd.DataFrame) -> int | None:
    """The representative steady step of a side, whose timeline the comparison shows
    (:attr:`SideData.sample`): of ``steady`` (steady rows of a step table: ``step``,
    ``period_ns``, ns), the first whose period is nearest the median; None when there is
    none. One rule for a trace (:func:`side_from_analysis`) and a report folder
    (:mod:`launchprof.api.report_folder`), whose step_timeline.csv holds that step."""
    if steady.empty:
        return None
    period = steady["period_ns"].to_numpy(dtype=float)
    return int(steady["step"].to_numpy()[int(np.argmin(np.abs(period - np.median(period))))])


def _sample(
    analysis: Analysis, steps: Steps, device: DeviceAnalysis, kernel_rows: np.ndarray, step: int
) -> tuple[pd.DataFrame, bool]:
    act = device.activity
    in_step = steps.activity_step.to_numpy() == step
    gpu = act.loc[in_step]
    row = steps.table.loc[steps.table["step"] == step].iloc[0]
    api = analysis.trace.api
    calls = api.loc[(api["pid"] == steps.pid) & (api["start"] >= row["cpu_start"]) & (api["start"] < row["cpu_end"])]
    t0 = min(int(row["gpu_start"]), int(row["cpu_start"]))
    lag = int(row["gpu_start"]) - int(row["cpu_start"])
    shift = lag if lag > QUEUED_AHEAD_PERIODS * row["period_ns"] else 0
    kinds = text(gpu["kind"])
    # Kernels by name, other rows by kind.
    gpu_names = kinds.to_numpy(dtype=object).copy()
    at = kernel_rows[in_step]
    gpu_names[at >= 0] = _kernel_names(analysis, analysis.trace.kernels["name_id"].to_numpy()[at[at >= 0]])
    cls = classify(calls["call"])
    call_kind = np.select(
        [
            cls["launch"].to_numpy(),
            cls["graph_launch"].to_numpy(),
            cls["instantiate"].to_numpy(),
            cls["exec_update"].to_numpy(),
            cls["capture"].to_numpy(),
            cls["sync"].to_numpy(),
        ],
        ["launch call", "graph launch", "graph instantiate", "graph update", "capture begin/end", "sync call"],
        "other CUDA API",
    )
    frame = pd.concat(
        [
            pd.DataFrame(
                {
                    "lane": [f"GPU {device.device_id} stream {s}" for s in gpu["stream_id"]],
                    "kind": kinds.to_numpy(),
                    "name": gpu_names,
                    "start_ns": gpu["start"].to_numpy() - t0 - shift,
                    "end_ns": gpu["end"].to_numpy() - t0 - shift,
                    "shift_ns": shift,
                }
            ),
            pd.DataFrame(
                {
                    "lane": [f"CPU thread {int(t) & 0xFFFFFF}" for t in calls["tid"]],
                    "kind": call_kind,
                    "name": text(calls["call"]).to_numpy(),
                    "start_ns": calls["start"].to_numpy() - t0,
                    "end_ns": calls["end"].to_numpy() - t0,
                    "shift_ns": 0,
                }
            ),
        ],
        ignore_index=True,
    ).sort_values(["start_ns", "end_ns"], kind="stable", ignore_index=True)
    cut = len(frame) > MAX_SAMPLE_ROWS
    return frame.head(MAX_SAMPLE_ROWS), cut


def side_figures(analysis: Analysis, steps: Steps, path: str | None = None) -> dict[str, Any]:
    """The fields of :class:`SideData` besides its tables (``table``, ``kernels``,
    ``sample``, ``sample_step``, ``notes``): how the steps were found, their statistics,
    the graph calls of the step's process and the recommendation's figures
    (:func:`side_from_analysis`). ``path``: default the trace's."""
    api = analysis.trace.api
    cls = api_classes(analysis.trace)
    mine = (api["pid"] == steps.pid).to_numpy() if steps.pid is not None else np.ones(len(api), bool)
    dur = (api["end"] - api["start"]).to_numpy()
    rec = getattr(analysis, "recommendation", None)  # an AnalysisResult has one
    return dict(
        path=str(path if path is not None else analysis.trace.path),
        origin="trace",
        step_source=steps.source,
        step_name=steps.name,
        step_reason=steps.reason,
        stats=step_stats(steps),
        bubble_threshold_ns=analysis.bubble_threshold_ns,
        graph_instantiations=int((cls["instantiate"].to_numpy() & mine).sum()),
        instantiate_ns=int(dur[cls["instantiate"].to_numpy() & mine].sum()),
        exec_updates=int((cls["exec_update"].to_numpy() & mine).sum()),
        graph_launches=int((cls["graph_launch"].to_numpy() & mine).sum()),
        predicted_speedup=_opt_float(getattr(rec, "predicted_speedup", None)),
        expected_eager_step_ns=_opt_float(getattr(getattr(rec, "expected", None), "eager_step_ns", None)),
        step_without_profiler=getattr(rec, "step_without_profiler", None),
        predicted_step_ns=_opt_float(getattr(rec, "predicted_step_ns", None)),
        break_even_iterations=_opt_float(getattr(rec, "break_even_iterations", None)),
    )


def side_from_analysis(analysis: Analysis, steps: Steps, path: str | None = None) -> SideData:
    """The :class:`SideData` of an analysed trace with ``steps`` (usually
    ``analysis.found_steps``, or steps found again with a template). The side of a
    result's found steps is made once, when the analysis finishes
    (:func:`launchprof.analysis.finish.finish`: ``Shown.side``), and ``compare`` reads it
    there; this is called again only for steps found again.

    The instantiation cost is the total duration of the graph instantiate calls of the
    step's process (docs/metrics.md, "Amortized cost and break-even"). The recommendation
    is read from ``analysis.recommendation`` when it has one
    (:class:`~launchprof.analysis.result.AnalysisResult`; attributes
    ``predicted_speedup``, ``predicted_step_ns``, ``break_even_iterations``).
    """
    common = side_figures(analysis, steps, path)
    device = next((d for d in analysis.devices if d.device_id == steps.device_id), None)
    if steps.source == "none" or device is None:
        return SideData(table=None, kernels=None, sample=None, sample_step=None, **common)
    act_step = steps.activity_step.to_numpy()
    kernel_rows = kernel_rows_of(analysis, device)
    graph_rows = _graph_submitted(analysis, device.activity) & (kernel_rows >= 0)
    graph_execs = (device.activity["kind"] == "graph").to_numpy()
    stepped = act_step >= 0
    step_ids = steps.table["step"].to_numpy()

    def per_step(flags: np.ndarray) -> np.ndarray:
        """How many flagged activity rows each step of the table has."""
        counts = np.bincount(act_step[stepped & flags], minlength=int(step_ids.max(initial=-1)) + 1)
        return counts[step_ids].astype(np.int64)

    table = steps.table.assign(graph_kernels=per_step(graph_rows), graph_execs=per_step(graph_execs))
    table = table.loc[:, list(STEP_COLUMNS)].reset_index(drop=True)
    steady = steps.steady
    kernels = step_kernels(analysis, kernel_rows, act_step, steady["step"].to_numpy())
    rep = representative_step(steady)
    notes: tuple[str, ...] = ()
    sample = None
    if rep is not None:
        sample, cut = _sample(analysis, steps, device, kernel_rows, rep)
        if cut:
            notes = (f"the timeline of step {rep} shows only its first {MAX_SAMPLE_ROWS} events",)
    return SideData(table=table, kernels=kernels, sample=sample, sample_step=rep, notes=notes, **common)


def _opt_float(value: object) -> float | None:
    if value is None:
        return None
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None
