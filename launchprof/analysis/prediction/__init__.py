"""Prediction: what a CUDA Graph would make of the steady steps, and whether to convert.

- :mod:`~launchprof.analysis.prediction.predict`: the graph step under nsys from the
  step's figures and the launch constants (defaults, or the user's calibration), with
  its assumptions (docs/metrics.md, "Prediction");
- :mod:`~launchprof.analysis.prediction.expect`: the one prediction a user acts on, for
  a run without the profiler: the eager step (measured by ``profile``'s runs without
  nsys, else estimated: :mod:`~launchprof.analysis.prediction.unprofiled`), the part a
  graph can capture (:mod:`~launchprof.analysis.prediction.captureregion`), the graph
  step, the speedup and its range; steps of several shapes weighted
  (:mod:`~launchprof.analysis.prediction.stepmix`);
- :mod:`~launchprof.analysis.prediction.decision`: convert or not, and a verdict that
  agrees with it; :mod:`~launchprof.analysis.prediction.recommendation`: the
  recommendation summary.json gives (speedups, break-even, blockers).

The diagnosis (:mod:`launchprof.analysis.diagnosis.diagnose`) calls these after the steps and
findings; changing the model touches ``expect.py`` (the formula users act on),
``predict.py`` (the constants) and ``decision.py`` (the rule), docs/architecture.md,
"Where to change".
"""
