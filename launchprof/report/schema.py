"""The ``summary.json`` schema: versioned, with units in the names and bounds checked.

Schema id: ``launchprof.summary/1``. All durations are integer or float nanoseconds
(suffix ``_ns``); ratios are in [0, 1]. Invariants checked on validation:
``busy_ns + idle_ns == span_ns`` and ``host_wait_ns <= idle_ns`` for every device,
process and stream. Later stages add optional sections: ``steps`` (:class:`StepsSection`),
``nvtx_steps`` (:class:`NvtxStepsSection`), ``diagnosis`` (:class:`DiagnosisSection`),
``recommendation`` (:class:`RecommendationSection`), ``headline`` (:class:`Headline`),
``ranks`` (:class:`RanksSection`), ``baseline`` (:class:`Baseline`) and ``workload``
(:class:`Workload`); docs/reference.md says what each key means. Numbers the
analysis gives as int or float are typed ``int | float`` (:data:`Number`): each keeps its
type, so the JSON text is the analysis' own.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from launchprof.defaults import DIAGNOSIS_VERDICTS

SUMMARY_SCHEMA = "launchprof.summary/1"
Number = int | float


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TraceInfo(_Model):
    path: str = Field(description="the trace path as the user gave it")
    nsys_version: str | None
    schema_version: str | None = Field(description="nsys export schema version")
    time_range_ns: list[int] | None = Field(
        default=None,
        description="[start, end) ns of the trace's clock when only the rows starting in it were read "
        "(analyze --time-range): the whole-trace figures are that window's; absent for the whole trace",
    )


class HistogramBin(_Model):
    low_ns: int = Field(ge=0)
    high_ns: int | None
    count: int = Field(ge=0)


class Bubbles(_Model):
    threshold_ns: int = Field(ge=0)
    count: int = Field(ge=0)
    total_ns: int = Field(ge=0)
    p50_ns: float | None = Field(default=None, ge=0)
    p90_ns: float | None = Field(default=None, ge=0)
    max_ns: int | None = Field(default=None, ge=0)
    histogram: list[HistogramBin]


class Figures(_Model):
    kernels: int = Field(ge=0)
    memops: int = Field(ge=0)
    span_ns: int = Field(ge=0)
    busy_ns: int = Field(ge=0)
    idle_ns: int = Field(ge=0)
    utilization: float = Field(ge=0, le=1)
    bubbles: Bubbles
    host_wait_ns: int = Field(ge=0)
    cpu_bound_ratio: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _invariants(self) -> Figures:
        if self.busy_ns + self.idle_ns != self.span_ns:
            raise ValueError("busy_ns + idle_ns != span_ns")
        if self.host_wait_ns > self.idle_ns:
            raise ValueError("host_wait_ns > idle_ns")
        if self.bubbles.total_ns > self.idle_ns:
            raise ValueError("bubbles.total_ns > idle_ns")
        return self


class ProcessSummary(Figures):
    pid: int
    name: str | None


class StreamSummary(Figures):
    pid: int
    stream_id: int


class DeviceSummary(Figures):
    device_id: int
    name: str | None
    processes: list[ProcessSummary]
    streams: list[StreamSummary]


class Launches(_Model):
    kernel_launch_calls: int = Field(ge=0)
    launch_call_p50_ns: float | None = Field(ge=0)
    launch_call_p90_ns: float | None = Field(ge=0)
    launch_call_total_ns: int = Field(ge=0)
    graph_launches: int = Field(ge=0)
    graph_launch_call_p50_ns: float | None = Field(ge=0)
    graph_instantiations: int = Field(ge=0)
    graph_instantiate_p50_ns: float | None = Field(ge=0)
    graph_exec_updates: int = Field(ge=0)
    kernel_p50_ns: float | None = Field(ge=0)
    kernels_in_graphs: int = Field(ge=0)
    kernels_shorter_than_launch_ratio: float | None = Field(ge=0, le=1)


class RejectedRange(_Model):
    range: str
    reason: str


class StepsSection(_Model):
    """The ``steps`` section: how the steps were found and the steady steps' distribution
    (:func:`launchprof.analysis.steps.step_stats`; ns and counts, numpy linear percentiles;
    None without a steady step)."""

    source: str = Field(description="nvtx, graph-launch, inferred or none")
    name: str | None
    reason: str
    count: int = Field(ge=0)
    warmup: int = Field(ge=0)
    steady: int = Field(ge=0)
    device_id: int | None
    pid: int | None
    rejected_ranges: list[RejectedRange]
    kernels_per_step_p50: float | None
    memops_per_step_p50: float | None
    period_p50_ns: float | None
    busy_p50_ns: float | None
    bubble_ns_p50: float | None
    host_wait_p50_ns: float | None
    launch_calls_p50: float | None
    launch_call_ns_p50: float | None
    sync_calls_p50: float | None
    alloc_calls_p50: float | None
    graph_launches_p50: float | None
    api_ns_p50: float | None
    cpu_ns_p50: float | None
    period_p90_ns: float | None
    period_mean_ns: float | None
    period_std_ns: float | None


class SourceLine(_Model):
    """One source line of a finding (:func:`launchprof.analysis.diagnosis.sources.sync_sites`,
    :func:`launchprof.analysis.diagnosis.sources.graph_skips`)."""

    file: str = Field(description="the user's file, or a library's from its package on")
    line: int
    function: str
    library: bool
    via: str | None = Field(description="the user's frame on the way to a library line: file:line (function)")
    share: float = Field(
        ge=0, le=1, description="this line's share of the finding's counted events (syncs, skips or allocations)"
    )
    per_step: float | None = Field(
        ge=0,
        description="sync-in-step: share x the trace's synchronizing calls per steady step (p50); allocations: "
        "this line's allocations (or cudaMalloc calls) per timed step of the allocation run; null for a "
        "cudagraph-skip and for a profiler region",
    )
    outside: bool | None = Field(
        None,
        description="sync-in-step: every call came between the top-level module calls (a graph of the module call "
        "leaves it out); null without module calls",
    )
    reason: str | None = Field(
        None,
        description="cudagraph-skip: Inductor's reason for skipping CUDA Graphs there; alloc-in-step, dynamic-shapes: "
        "what the allocations there are (cudaMalloc count, sizes, growing)",
    )


class FindingDoc(_Model):
    """One finding (:meth:`launchprof.analysis.diagnosis.findings.Finding.to_dict`): ``figures``
    holds the numbers behind ``evidence``, by name (they differ by kind)."""

    kind: str
    severity: str
    steps_affected: int = Field(ge=0)
    steps: list[int]
    evidence: str
    fix: str
    figures: dict[str, Any]
    where: list[SourceLine] = Field(
        [],
        description="sync-in-step: the source lines of the synchronizing calls (launchprof.analysis.diagnosis.sources)",
    )
    where_note: str = Field("", description="why there are no source lines (one line), else empty")


class TopKernel(_Model):
    """One kernel name of the steady steps (:mod:`launchprof.analysis.timeline.toptables`; ns)."""

    name: str
    per_step: float = Field(ge=0)
    time_per_step_ns: float = Field(ge=0)
    share: float = Field(ge=0, le=1)
    trace_count: int = Field(ge=0)
    trace_time_ns: float = Field(ge=0)


class TopCall(_Model):
    """One CUDA API call of the steady steps (:mod:`launchprof.analysis.timeline.toptables`; ns)."""

    call: str
    per_step: float = Field(ge=0)
    time_per_step_ns: float = Field(ge=0)
    share: float = Field(ge=0, le=1)
    trace_count: int = Field(ge=0)
    trace_time_ns: float = Field(ge=0)


class DiagnosisSection(_Model):
    """The ``diagnosis`` section (:meth:`launchprof.analysis.diagnosis.diagnose.Diagnosis.to_dict`):
    the steady steps' verdict, the reasons (with, for several ranks, which rank was
    judged), the findings, the figures (by name; ns and ratios) and the thresholds used."""

    verdict: str = Field(description="one of: " + ", ".join(DIAGNOSIS_VERDICTS))
    reasons: list[str]
    findings: list[FindingDoc]
    figures: dict[str, Any]
    thresholds: dict[str, float]
    framework: str
    top_kernels: list[TopKernel] = Field(
        [], description="the steady steps' top kernels by time (launchprof.analysis.timeline.toptables)"
    )
    top_calls: list[TopCall] = Field([], description="the steady steps' top CUDA API calls by time")


class Blocker(_Model):
    """A blocking finding, as the recommendation lists it."""

    kind: str
    evidence: str
    fix: str
    where: list[SourceLine] = []


class CalibrationInfo(_Model):
    """Which prediction constants were used (:func:`launchprof.analysis.prediction.predict.constants`)."""

    source: str
    from_calibration: list[str]
    defaults_source: str
    values: dict[str, float]


class RecommendationSection(_Model):
    """The ``recommendation`` section (:meth:`launchprof.analysis.prediction.recommendation.Recommendation.to_dict`):
    whether to convert, the gain expected without the profiler (``expected``: every term of
    :class:`launchprof.analysis.prediction.expect.Expectation`), the profiled prediction and its
    model's terms (by name), break-even, blockers, assumptions and the constants' source."""

    convert: bool
    reason: str
    expected_speedup: Number | None
    expected_speedup_range: list[Number] | None
    expected_step_ns: Number | None
    expected: dict[str, Any] | None
    measured_step_ns: Number | None
    predicted_step_ns: Number | None
    predicted_speedup: Number | None
    break_even_iterations: int | None
    instantiate_ns: Number | None
    nodes_per_step: Number | None
    model: dict[str, Any]
    blockers: list[Blocker]
    assumptions: list[str]
    calibration: CalibrationInfo
    step_without_profiler: dict[str, Any] | None = None


class NvtxStepsSection(_Model):
    """A trace without GPU work: its NVTX step ranges
    (:meth:`launchprof.analysis.nvtx_steps.NvtxSteps.to_dict`; ns; periods None with
    fewer than two ranges)."""

    name: str
    pid: int
    tid: int
    count: int = Field(ge=0)
    period_p50_ns: float | None
    period_p90_ns: float | None
    duration_p50_ns: float | None
    total_ns: int


class Workload(_Model):
    """What ``profile`` knows of the run, written only when the workload failed."""

    exit_code: int


REGION_KEYS = ("region_ns", "regions", "region_steps", "trace_regions")
MODULE_KEYS = ("module", "module_periods")


class Baseline(_Model):
    """The ``baseline`` section: the runs without nsys against the profiled steps
    (:func:`launchprof.analysis.baseline.baseline_section`; ns). The :data:`REGION_KEYS`
    are written only for ``source`` ``profiler-region``, the :data:`MODULE_KEYS` only for
    ``module-calls`` (``module``: the ``module NAME`` whose outermost calls are the steps,
    None when none fits; ``module_periods``: each module's period, ns)."""

    source: Literal["step-markers", "profiler-region", "module-calls"]
    runs: int
    steps: list[int]
    warmup_per_run: int
    periods: int
    period_p50_ns: float | None
    period_mean_ns: float | None
    duration_p50_ns: float | None
    run_period_p50_ns: list[float | None] = []
    region_ns: list[int] | None = None
    regions: list[int] | None = None
    region_steps: int | None = None
    trace_regions: int | None = None
    module: str | None = None
    module_periods: dict[str, float] | None = None
    profiled_period_p50_ns: float | None
    profiled_source: Literal["steps", "nvtx"] | None
    host_ahead_of_gpu: bool
    slower_than_traced: bool = Field(
        False, description="the runs' step is slower than the traced one beyond the runs' spread: not used"
    )
    gpu_busy_p50_ns: float | None
    overhead_ratio: float | None
    correction: float | None
    assumption: str

    @model_serializer(mode="wrap")
    def _without_region_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.source != "profiler-region":
            for key in REGION_KEYS:
                data.pop(key, None)
        if self.source != "module-calls":
            for key in MODULE_KEYS:
                data.pop(key, None)
        return data


class HeadlineNvtxSteps(_Model):
    """The headline's view of a trace without GPU work: its NVTX step ranges (from
    :class:`NvtxStepsSection`; ns)."""

    name: str
    count: int = Field(ge=0)
    period_p50_ns: Number | None
    duration_p50_ns: Number | None


class Headline(_Model):
    """The ``headline`` section: the verdict first, over the steady steps
    (:func:`launchprof.analysis.headline.headline`; docs/reference.md, summary.json)."""

    verdict: str = Field(description="the diagnosis' verdict")
    scope: Literal["steady steps", "whole trace"] = Field(description="whole trace: no step was found")
    steady_steps: int = Field(ge=0)
    warmup_steps: int = Field(ge=0)
    period_p50_ns: float | None = Field(ge=0)
    gpu_busy_ratio: float | None = Field(ge=0)
    host_wait_ratio: float | None = Field(ge=0)
    graphs: bool = Field(description="the steady steps replay CUDA graphs (a graph launch a step or more)")
    rebuilt: bool = Field(description="and instantiate or update them every step")
    action: Literal["convert", "fix-blockers-then-convert", "build-graph-once", "none"]
    expected_speedup: float | None = Field(description="None without a prediction")
    break_even_iterations: Number | None = Field(description="None when there is nothing to convert")
    idle_bound_speedup: float | None = Field(description="step period / GPU busy time")
    nvtx_steps: HeadlineNvtxSteps | None


class RankEntry(_Model):
    """One rank of the ``ranks`` section (:meth:`launchprof.analysis.ranks.CrossRank.to_dict`):
    its process on its device (ns, ratios 0..1) and its steps."""

    rank: int = Field(ge=0)
    label: str
    path: str | None = Field(description="the report the rank comes from (None inside one trace)")
    device_id: int
    pid: int
    name: str | None
    kernels: int = Field(ge=0)
    span_ns: int = Field(ge=0)
    busy_ns: int = Field(ge=0)
    utilization: Number = Field(ge=0, le=1)
    host_wait_ns: int = Field(ge=0)
    cpu_bound_ratio: Number = Field(ge=0, le=1)
    comm_kernels: int = Field(ge=0)
    comm_busy_ns: int = Field(ge=0)
    comm_exposed_ns: int
    comm_ratio: Number = Field(ge=0, le=1, description="comm_busy_ns / span_ns")
    step_source: str
    steps: int = Field(ge=0)
    warmup: int = Field(ge=0)
    steady_host_wait_ratio: float | None
    launch_bound: bool
    period_p50_ns: float | None
    work_p50_ns: float | None
    comm_exposed_p50_ns: float | None
    straggler_steps: int = Field(ge=0)
    slowest_steps: int = Field(ge=0)


class Straggler(_Model):
    """A (step, rank) whose work exceeds ``straggler_factor`` times the step's median (ns)."""

    step: int
    rank: int
    work_ns: float
    median_work_ns: float
    ratio: float


class RankSteps(_Model):
    """The aligned steps, one list entry per step (ns)."""

    step: list[int]
    slowest_rank: list[int]
    median_work_ns: list[float]
    max_work_ns: list[float]
    stragglers: list[int]


class RanksSection(_Model):
    """The ``ranks`` section (:meth:`launchprof.analysis.ranks.CrossRank.to_dict`): the
    cross-rank view of a trace with several ranks or NCCL kernels, steps aligned by index
    (:mod:`launchprof.analysis.ranks` gives the definitions and thresholds)."""

    count: int = Field(ge=0)
    straggler_factor: float
    launch_bound_ratio: float
    comm_prefix: str
    ranks: list[RankEntry]
    launch_bound_ranks: list[int]
    most_launch_bound_rank: int | None
    critical_rank: int | None = Field(
        None, description="the rank slowest in the most aligned steps: the headline is its (None: one rank)"
    )
    aligned_steps: int = Field(ge=0)
    straggler_count: int = Field(ge=0)
    stragglers: list[Straggler] = Field(description="the first 50 at most")
    per_step: RankSteps


class Summary(_Model):
    schema_: str = Field(default=SUMMARY_SCHEMA, alias="schema")
    # The verdict first (launchprof.analysis.headline): what the steady steps say.
    headline: Headline | None = None
    trace: TraceInfo
    devices: list[DeviceSummary]
    launches: Launches
    processes_without_gpu: list[int]
    nvtx_ranges_lost: bool
    notes: list[str]
    steps: StepsSection | None = None
    diagnosis: DiagnosisSection | None = None
    recommendation: RecommendationSection | None = None
    ranks: RanksSection | None = None
    baseline: Baseline | None = None
    workload: Workload | None = None
    files: dict[str, str] | None = Field(default=None, description="SHA-256 (hex) of each step file written beside")
    run_id: str | None = Field(default=None, description="16 hex digits of the SHA-256 of this JSON without it")
    # A trace without GPU work: its NVTX step ranges (launchprof.analysis.nvtx_steps).
    nvtx_steps: NvtxStepsSection | None = None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> str:
        """Deterministic JSON text (keys in schema order, 2-space indent, newline)."""
        # ``ranks`` appears only when the trace has several ranks (older summaries unchanged).
        optional = ("headline", "ranks", "baseline", "workload", "nvtx_steps", "files", "run_id")
        exclude: dict[str, Any] = {k: True for k in optional if getattr(self, k) is None}
        if self.trace.time_range_ns is None:  # a whole trace's summary as before --time-range existed
            exclude["trace"] = {"time_range_ns": True}
        return self.model_dump_json(by_alias=True, indent=2, exclude=exclude or None) + "\n"
