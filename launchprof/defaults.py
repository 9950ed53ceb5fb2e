"""Defaults that several layers share, as plain values (no import), so that the command
line and the commands can use them without importing the analysis.

- :data:`DEFAULT_BUBBLE_THRESHOLD_NS`: idle gaps on a device at least this long (ns) are
  bubbles; shorter ones are the sub-us dispatch gaps that remain between graph nodes
  (docs/metrics.md, "Bubble"). ``--bubble-threshold`` gives it in us.
- :data:`STEP_DOMAIN`, :data:`STEP_NAME`: the NVTX domain and range text of
  :func:`launchprof.step` (:mod:`launchprof.marker`), which the analysis takes as steps.
"""

from __future__ import annotations

DEFAULT_BUBBLE_THRESHOLD_NS = 1_000
STEP_DOMAIN = "launchprof"
STEP_NAME = "step"
