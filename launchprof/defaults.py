"""Defaults that several layers share, as plain values (no import), so that the command
line and the commands can use them without importing the analysis.

- :data:`DEFAULT_BUBBLE_THRESHOLD_NS`: idle gaps on a device at least this long (ns) are
  bubbles; shorter ones are the sub-us dispatch gaps that remain between graph nodes
  (docs/metrics.md, "Bubble"). ``--bubble-threshold`` gives it in us.
- :data:`STEP_DOMAIN`, :data:`STEP_NAME`: the NVTX domain and range text of
  :func:`launchprof.step` (:mod:`launchprof.marker`), which the analysis takes as steps.
- :data:`BASELINE_STEPS`: a run without nsys of ``launchprof profile`` ends once its step
  markers have timed this many steps (:data:`STOP_AFTER_ENV`; the workload's own outputs
  of that run are not needed): 48 step periods after the warm-up one, whose median the
  prediction takes, so the extra run costs the workload's start-up and 50 steps, not its
  whole length.
- :data:`DIAGNOSIS_VERDICTS`, :data:`COMPARE_VERDICTS`: the verdicts of a diagnosis
  (:mod:`launchprof.analysis.diagnosis.diagnose`) and of a comparison
  (:mod:`launchprof.analysis.comparison.verify`), which ``--fail-on`` names;
  :data:`COMPARE_FAILING`: the verdicts ``compare`` and ``check`` exit 1 on by default
  (every one but ``verified``).
"""

from __future__ import annotations

DEFAULT_BUBBLE_THRESHOLD_NS = 1_000
STEP_DOMAIN = "launchprof"
STEP_NAME = "step"
BASELINE_STEPS = 50
STOP_AFTER_ENV = "LAUNCHPROF_STOP_AFTER"
DIAGNOSIS_VERDICTS = ("launch-bound", "gpu-bound", "sync-bound", "host-bound", "no-gpu-work")
COMPARE_VERDICTS = ("verified", "not-faster", "not-converted", "different-work", "unknown-work", "churn")
COMPARE_FAILING = tuple(v for v in COMPARE_VERDICTS if v != "verified")
