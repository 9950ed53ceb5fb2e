"""An :class:`~launchprof.analysis.Analysis` with the results of the later stages: the
steps found, the cross-rank view, the diagnosis and the graph recommendation.

:func:`~launchprof.analysis.analyze_trace` gives the figures; the later stages take that
:class:`~launchprof.analysis.Analysis` and return their own results
(:func:`~launchprof.analysis.steps.find_steps`, :func:`~launchprof.analysis.ranks.rank_view`,
:func:`~launchprof.analysis.diagnose.diagnose`); :meth:`AnalysisResult.of` puts them
together. The report (:mod:`launchprof.report`) reads an :class:`AnalysisResult`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from launchprof.analysis.core import Analysis
from launchprof.analysis.diagnose import Diagnosis, Recommendation
from launchprof.analysis.ranks import CrossRank
from launchprof.analysis.steps import Steps

R = TypeVar("R", bound="AnalysisResult")


@dataclass(frozen=True, kw_only=True)
class AnalysisResult(Analysis):
    """The analysis of one trace with its later stages' results.

    Attributes (besides :class:`~launchprof.analysis.Analysis`'s):
        found_steps: the :class:`~launchprof.analysis.steps.Steps` found
            (``source`` ``none`` when there is none).
        step_name: the NVTX range text asked for as the step (``--step``), or None.
        ranks: the cross-rank view (:class:`~launchprof.analysis.ranks.CrossRank`) with
            several ranks or NCCL kernels, else None.
        diagnosis: the :class:`~launchprof.analysis.diagnose.Diagnosis` of the steady
            steps; None when made without one (:meth:`of` called before diagnosing).
        recommendation: the :class:`~launchprof.analysis.diagnose.Recommendation`; None
            before the diagnosis.
    """

    found_steps: Steps
    step_name: str | None = None
    ranks: CrossRank | None = None
    diagnosis: Diagnosis | None = None
    recommendation: Recommendation | None = None

    @classmethod
    def of(
        cls: type[R],
        analysis: Analysis,
        found_steps: Steps,
        step_name: str | None = None,
        ranks: CrossRank | None = None,
        diagnosis: Diagnosis | None = None,
        recommendation: Recommendation | None = None,
    ) -> R:
        """``analysis``'s figures with these results. The values computed once for
        ``analysis`` (:meth:`~launchprof.analysis.Analysis.cached`: the steps found for
        each rank) are shared with it, not computed again."""
        figures = {f.name: getattr(analysis, f.name) for f in dataclasses.fields(Analysis) if f.init}
        made = cls(
            **figures,
            found_steps=found_steps,
            step_name=step_name,
            ranks=ranks,
            diagnosis=diagnosis,
            recommendation=recommendation,
        )
        object.__setattr__(made, "_derived", analysis._derived)
        return made
