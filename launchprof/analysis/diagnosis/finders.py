"""The finding kinds, one registry line each: what :func:`~launchprof.analysis.diagnosis.diagnose.diagnose`
looks for, in the order it lists findings of one severity.

A line names the kind (summary.json's ``findings[].kind``), the severities it can have and
the finder that makes it from :class:`FinderInputs` (None: not found). A new kind is its
finder (in :mod:`launchprof.analysis.diagnosis.findings` or a module of its own), its conversion code
when it has one (:mod:`launchprof.report.snippets`) and one line in :data:`FINDING_KINDS`;
docs/reference.md's table of findings lists the same kinds (``tests/test_findings_registry.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from launchprof.analysis.diagnosis import findings as F
from launchprof.analysis.diagnosis import stepshapes
from launchprof.analysis.diagnosis.findings import Finding, Severity
from launchprof.analysis.diagnosis.hostwork import host_outside_graph
from launchprof.analysis.diagnosis.sources import SyncRuns, graph_skips
from launchprof.analysis.headline import replays_graphs
from launchprof.analysis.prediction.expect import Expectation
from launchprof.analysis.stepdata import StepContext
from launchprof.analysis.timeline.core import Analysis


@dataclass(frozen=True)
class FinderInputs:
    """What every finder may read.

    Attributes:
        ctx: the steady steps (:class:`~launchprof.analysis.stepdata.StepContext`).
        analysis: the trace's :class:`~launchprof.analysis.Analysis`.
        figures: the diagnosis' figures (``graph_launches_per_step_p50``, ...).
        framework: ``pytorch`` or ``cuda``.
        values: the prediction's constants (:func:`~launchprof.analysis.prediction.predict.constants`).
        expected: the expectation without the profiler, or None.
        unprofiled: the step without the profiler (``Recommendation.step_without_profiler``), or None.
        sync: the synchronizing calls and Inductor's skips of the runs without nsys, or None.
        replaying: the steady steps replay graphs and wait for the CPU (verdict ``host-bound``).
    """

    ctx: StepContext
    analysis: Analysis
    figures: Mapping[str, Any]
    framework: str
    values: Mapping[str, float]
    expected: Expectation | None
    unprofiled: Mapping[str, Any] | None
    sync: SyncRuns | None
    replaying: bool


@dataclass(frozen=True)
class FindingKind:
    """One kind of finding.

    Attributes:
        kind: its name in summary.json.
        severities: the :class:`~launchprof.analysis.diagnosis.findings.Severity` values it can have.
        find: its finder.
        without_steps: it is looked for in a trace without steady steps too (the trace's
            recording mode, not the steps).
    """

    kind: str
    severities: tuple[Severity, ...]
    find: Callable[[FinderInputs], Finding | None]
    without_steps: bool = False


BLOCKER, WARNING, INFO = Severity.BLOCKER, Severity.WARNING, Severity.INFO

FINDING_KINDS: tuple[FindingKind, ...] = (
    # a sync outside the graph does not break its capture: host-outside-graph says it when replaying
    FindingKind("sync-in-step", (BLOCKER, WARNING), lambda i: None if i.replaying else F.sync_in_step(i.ctx)),
    FindingKind("alloc-in-step", (BLOCKER,), lambda i: F.alloc_in_step(i.ctx)),
    FindingKind("dynamic-shapes", (BLOCKER, INFO), lambda i: stepshapes.dynamic_shapes(i.ctx, i.analysis)),
    FindingKind("varying-sequence", (BLOCKER, WARNING), lambda i: stepshapes.varying_sequence(i.ctx)),
    FindingKind("reinstantiation", (BLOCKER,), lambda i: F.reinstantiation(i.ctx, i.analysis)),
    FindingKind("graph-trace-mode", (WARNING,), lambda i: F.graph_trace_mode(i.ctx, i.analysis), without_steps=True),
    FindingKind("legacy-stream", (BLOCKER, INFO), lambda i: F.legacy_stream(i.ctx, i.analysis, i.framework)),
    FindingKind("profiler-overhead", (INFO,), lambda i: F.profiler_overhead(i.ctx, i.values, i.expected, i.unprofiled)),
    FindingKind("host-outside-graph", (WARNING,), lambda i: host_outside_graph(i.ctx) if i.replaying else None),
    FindingKind(
        "cudagraph-skip",
        (BLOCKER, WARNING),
        lambda i: graph_skips(i.sync, replays_graphs(i.figures)),
    ),
)


def find_all(inputs: FinderInputs, with_steps: bool) -> list[Finding]:
    """The findings of every kind of :data:`FINDING_KINDS` (``with_steps`` False: only
    those looked for without steady steps), in registry order (the diagnosis lists them
    most severe first: :attr:`~launchprof.analysis.diagnosis.findings.Severity.rank`).

    Raises:
        ValueError: a finder gave a kind or a severity its registry line does not name
            (a bug, never a user error).
    """
    found = []
    for line in FINDING_KINDS:
        if not (with_steps or line.without_steps):
            continue
        finding = line.find(inputs)
        if finding is None:
            continue
        if finding.kind != line.kind or finding.severity not in line.severities:
            raise ValueError(f"finder of {line.kind} gave {finding.kind} ({finding.severity})")
        found.append(finding)
    return found
