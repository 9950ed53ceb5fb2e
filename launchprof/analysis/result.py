"""An :class:`~launchprof.analysis.Analysis` with the results of the later stages: the
steps found, the cross-rank view, the diagnosis and the graph recommendation, and what the
outputs show of them (:class:`Shown`).

:func:`~launchprof.analysis.analyze_trace` gives the figures; the later stages take that
:class:`~launchprof.analysis.Analysis` and return their own results
(:func:`~launchprof.analysis.steps.find_steps`, :func:`~launchprof.analysis.ranks.rank_view`,
:func:`~launchprof.analysis.diagnosis.diagnose.diagnose`); :meth:`AnalysisResult.of` puts them
together and :func:`launchprof.analysis.finish.finish` adds :class:`Shown`: the analysis is
then over. The report (:mod:`launchprof.report`) reads a finished :class:`AnalysisResult`
and formats it: it takes only result types and constants from :mod:`launchprof.analysis`
(``tests/test_layers.py``), so it finds no step and makes no figure, table or verdict
again. What it still chooses is how to draw: the timeline's window and the charts'
bars.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from launchprof.analysis.comparison.side import SideData
from launchprof.analysis.diagnosis.diagnose import Diagnosis
from launchprof.analysis.nvtx_steps import NvtxSteps
from launchprof.analysis.prediction.recommendation import Recommendation
from launchprof.analysis.ranks import CrossRank
from launchprof.analysis.steps import Steps
from launchprof.analysis.timeline.core import Analysis

R = TypeVar("R", bound="AnalysisResult")

# The utilization-over-time series of each device (Shown.utilization): equal time bins over
# its span (the report's chart; 200 bins draw a one-second trace at 5 ms a bin).
UTILIZATION_BINS = 200


@dataclass(frozen=True, kw_only=True)
class Shown:
    """What the outputs (summary.json, report.html, the step files, the notebook card)
    show besides the figures of :class:`~launchprof.analysis.Analysis` and the diagnosis:
    computed once, by :func:`launchprof.analysis.finish.finish`, before any output is made.

    Attributes:
        step_stats: the found steps' statistics (summary.json's ``steps``:
            :func:`~launchprof.analysis.steps.step_stats`), None without steps.
        host_steps: the NVTX step ranges on the host
            (:func:`~launchprof.analysis.nvtx_steps.nvtx_steps`) of a trace without GPU
            work (no device, or the verdict ``no-gpu-work``); else None.
        reasons: the verdict's reasons as the outputs give them: the diagnosis' own, then,
            with several ranks, which rank the verdict judged
            (:func:`launchprof.analysis.finish.rank_scope`); empty without a diagnosis.
        headline: summary.json's ``headline`` (:func:`launchprof.analysis.headline.headline`
            of the sections above), None without a diagnosis.
        durations: the histogram of the diagnosis' kernel and launch-call durations
            (:func:`~launchprof.analysis.timeline.durations.duration_histogram`: ``low_ns``,
            ``high_ns``, ``kernels``, ``launch_calls``); its bins all zero without a
            diagnosis.
        skip_causes: for each ``where`` line of the ``cudagraph-skip`` finding, the cause
            its fix is chosen by (:func:`~launchprof.analysis.diagnosis.sources.skip_cause`), else None.
        utilization: per device id, the busy share of
            :data:`UTILIZATION_BINS` equal time bins
            (:func:`~launchprof.analysis.timeline.core.utilization_series`: ``start_ns``,
            ``end_ns``, ``utilization``).
        side: the found steps as one side of a comparison
            (:func:`~launchprof.analysis.comparison.side.side_from_analysis`): ``compare``
            of a trace reads it here, and its ``table``, ``kernels`` and ``sample`` are the
            step files' tables (:attr:`step_table`, :attr:`step_kernels`,
            :attr:`step_sample`).
    """

    step_stats: dict[str, Any] | None
    host_steps: NvtxSteps | None
    reasons: list[str]
    headline: dict[str, Any] | None
    durations: pd.DataFrame
    skip_causes: list[str | None]
    utilization: dict[int, pd.DataFrame]
    side: SideData

    @property
    def step_table(self) -> pd.DataFrame | None:
        """steps.csv's table: :attr:`side`'s ``table``; None without steps."""
        return self.side.table

    @property
    def step_kernels(self) -> pd.DataFrame | None:
        """step_kernels.csv's table: :attr:`side`'s ``kernels``; None without steps."""
        return self.side.kernels

    @property
    def step_sample(self) -> pd.DataFrame | None:
        """step_timeline.csv's table: :attr:`side`'s ``sample``; None without steps."""
        return self.side.sample


@dataclass(frozen=True, kw_only=True)
class AnalysisResult(Analysis):
    """The analysis of one trace with its later stages' results.

    Attributes (besides :class:`~launchprof.analysis.Analysis`'s):
        found_steps: the :class:`~launchprof.analysis.steps.Steps` found
            (``source`` ``none`` when there is none).
        step_name: the NVTX range text asked for as the step (``--step``), or None.
        ranks: the cross-rank view (:class:`~launchprof.analysis.ranks.CrossRank`) with
            several ranks or NCCL kernels, else None.
        diagnosis: the :class:`~launchprof.analysis.diagnosis.diagnose.Diagnosis` of the steady
            steps; None when made without one (:meth:`of` called before diagnosing).
        recommendation: the :class:`~launchprof.analysis.prediction.recommendation.Recommendation`; None
            before the diagnosis.
        shown: what the outputs show (:class:`Shown`); None until
            :func:`launchprof.analysis.finish.finish` (the outputs need it: :meth:`outputs`).
    """

    found_steps: Steps
    step_name: str | None = None
    ranks: CrossRank | None = None
    diagnosis: Diagnosis | None = None
    recommendation: Recommendation | None = None
    shown: Shown | None = None

    def outputs(self) -> Shown:
        """:attr:`shown`.

        Raises:
            ValueError: the result is not finished (:func:`launchprof.analysis.finish.finish`
                was not called): a bug, never a user error.
        """
        if self.shown is None:
            raise ValueError(
                "the analysis is not finished: launchprof.analysis.finish.finish() makes what outputs show"
            )
        return self.shown

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
        each rank) are shared with it, not computed again. Not finished: :attr:`shown` is
        None."""
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
