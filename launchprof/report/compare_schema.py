"""The ``compare.json`` schema (``launchprof.compare/2``): versioned, units in the names,
bounds and invariants checked on validation.

Contract keys: ``schema``, ``verdict`` (one of ``verified``, ``not-faster``,
``not-converted``, ``different-work``, ``unknown-work`` (added in this schema version's
lifetime: the kernels could not be compared), ``churn``), ``speedup`` (steady step period
BEFORE / AFTER), ``speedup_ci`` ([low, high], low <= speedup <= high),
``predicted_speedup``, ``checks[]`` (``name``, ``passed`` (true, false, or null when it
could not be evaluated), ``detail``, ``evidence``), ``work_change`` (how the kernels
changed, :mod:`launchprof.analysis.comparison.workchange`), ``speedup_parts`` (the gain split into
GPU work and host overhead, :class:`launchprof.analysis.comparison.sidefigures.SpeedupParts`). Version 2
added ``work_change``, ``speedup_parts``, the kernels' GPU time per step and
``speedup_unprofiled`` / ``speedup_unprofiled_ci`` (from the runs without nsys of both
sides, when present; the ``faster`` check then decides on it). The rest (``before``, ``after``,
``kernels``, ``notes``, ...) is documented in the README.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

COMPARE_SCHEMA = "launchprof.compare/2"
Verdict = Literal["verified", "not-faster", "not-converted", "different-work", "unknown-work", "churn"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SideDoc(_Model):
    path: str = Field(description="the trace or report folder as given")
    origin: Literal["trace", "report"]
    step_source: str
    step_name: str | None
    step_reason: str
    steps: int = Field(ge=0)
    steady: int = Field(ge=0)
    warmup: int = Field(ge=0)
    kernels_per_step: float | None = Field(ge=0)
    period_p50_ns: float | None = Field(ge=0)
    period_mean_ns: float | None = Field(ge=0)
    busy_p50_ns: float | None = Field(ge=0)
    bubble_p50_ns: float | None = Field(ge=0)
    host_wait_p50_ns: float | None = Field(ge=0)
    api_p50_ns: float | None = Field(ge=0)
    cpu_p50_ns: float | None = Field(ge=0)
    utilization: float | None = Field(ge=0, le=1)
    bubble_ratio: float | None = Field(ge=0, le=1)
    cpu_bound_ratio: float | None = Field(ge=0, le=1)
    graph_launches_per_step: float | None = Field(ge=0)
    graph_kernel_share: float | None = Field(ge=0, le=1)
    graph_launches: int = Field(ge=0)
    graph_instantiations: int = Field(ge=0)
    instantiate_ns: int = Field(ge=0)
    exec_updates: int = Field(ge=0)
    unprofiled_period_p50_ns: float | None = Field(ge=0)
    expected_eager_step_ns: float | None = Field(ge=0)
    step_without_profiler_ns: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _invariants(self) -> SideDoc:
        if self.steady + self.warmup > self.steps and self.steps:
            raise ValueError("steady + warmup > steps")
        return self


class CheckDoc(_Model):
    name: str
    passed: bool | None
    detail: str
    evidence: dict[str, float | int | str | None]


class KernelDoc(_Model):
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    before_per_step: float = Field(ge=0)
    after_per_step: float = Field(ge=0)
    before_gpu_ns_per_step: float | None = Field(ge=0)
    after_gpu_ns_per_step: float | None = Field(ge=0)
    differs: bool


class WorkChangeExample(_Model):
    name: str
    before_per_step: float = Field(ge=0)
    after_per_step: float = Field(ge=0)
    delta_gpu_ns_per_step: float | None


class WorkChangeDoc(_Model):
    kind: Literal["same", "known-transform", "fused", "different"]
    changed_kernel_share: float | None = Field(ge=0, le=1)
    before_kernel_ns_per_step: float | None = Field(ge=0)
    after_kernel_ns_per_step: float | None = Field(ge=0)
    compiler_kernels_added: int = Field(ge=0)
    summary: str
    examples: list[WorkChangeExample]


class SpeedupPartsDoc(_Model):
    before_period_ns: float = Field(gt=0)
    after_period_ns: float = Field(gt=0)
    before_busy_ns: float = Field(ge=0)
    after_busy_ns: float = Field(ge=0)
    gpu_work_saved_ns: float
    host_saved_ns: float
    from_gpu_work: float | None = Field(gt=0)
    from_host: float | None = Field(gt=0)
    gpu_work_share: float | None


class CompareDoc(_Model):
    schema_: str = Field(default=COMPARE_SCHEMA, alias="schema")
    verdict: Verdict
    speedup: float | None = Field(gt=0)
    speedup_ci: tuple[float, float] | None
    speedup_method: str
    speedup_unprofiled: float | None = Field(gt=0)
    speedup_unprofiled_ci: tuple[float, float] | None
    speedup_unprofiled_source: Literal["measured", "runs", "estimate"] | None = None
    predicted_speedup: float | None = Field(gt=0)
    min_effect: float = Field(ge=0)
    before: SideDoc
    after: SideDoc
    checks: list[CheckDoc]
    kernels: list[KernelDoc]
    work_change: WorkChangeDoc | None
    speedup_parts: SpeedupPartsDoc | None
    notes: list[str]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _invariants(self) -> CompareDoc:
        if (self.speedup is None) != (self.speedup_ci is None):
            raise ValueError("speedup and speedup_ci must both be set or both be null")
        if self.speedup is not None and self.speedup_ci is not None:
            lo, hi = self.speedup_ci
            if not (0 <= lo <= self.speedup <= hi):
                raise ValueError("speedup_ci must satisfy 0 <= low <= speedup <= high")
        if self.verdict == "verified" and not any(c.name == "faster" and c.passed for c in self.checks):
            raise ValueError("verdict 'verified' without a passed 'faster' check")
        return self

    def to_json(self) -> str:
        """Deterministic JSON text (keys in schema order, 2-space indent, newline)."""
        return self.model_dump_json(by_alias=True, indent=2) + "\n"
