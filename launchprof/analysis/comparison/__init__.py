"""Comparison: whether a conversion did what was expected, from two sides (``compare``).

- :mod:`~launchprof.analysis.comparison.side`: one side (a trace's analysis, or a report
  folder read back): its steps' table, the kernels of a steady step, a representative
  step's timeline, its statistics and prediction (:class:`~launchprof.analysis.comparison.side.SideData`;
  the step files of a report are these tables);
- :mod:`~launchprof.analysis.comparison.regroup`: a side's steps joined ``k`` to one, and its
  figures without the profiler for such steps;
- :mod:`~launchprof.analysis.comparison.sidefigures`: the figures each check reads from a side;
- :mod:`~launchprof.analysis.comparison.speedstats`: the speedup and its interval
  (block bootstrap of the step periods), with and without the profiler;
- :mod:`~launchprof.analysis.comparison.workchange`: what changed in the GPU work (kernels
  dropped, added, fused);
- :mod:`~launchprof.analysis.comparison.checks`: the checks (faster, same work, launches
  removed, bubbles, predicted, paid back, ...);
- :mod:`~launchprof.analysis.comparison.verify`: the verdict from the checks
  (:class:`~launchprof.analysis.comparison.verify.Comparison`).

docs/metrics.md, "Verifying a conversion", gives the rules and thresholds.
"""
