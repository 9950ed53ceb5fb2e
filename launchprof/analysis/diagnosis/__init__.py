"""Diagnosis: what holds the steady steps back, and what stands in the way of a graph.

- :mod:`~launchprof.analysis.diagnosis.diagnose`: the verdict (launch-, sync-, host- or
  GPU-bound) and its reasons, then the findings and the prediction
  (:mod:`launchprof.analysis.prediction`) (docs/metrics.md, "Verdict");
- :mod:`~launchprof.analysis.diagnosis.gapcauses`: the GPU's idle gaps by cause (launch
  path, after a synchronizing call, host work) (docs/metrics.md, "Gap causes");
- :mod:`~launchprof.analysis.diagnosis.findings`: the ``Finding`` type and the capture
  breakers and skewed numbers (sync, allocation, re-instantiation, graph trace mode,
  legacy stream, profiler overhead); :mod:`~launchprof.analysis.diagnosis.stepshapes`:
  what changes between steps (shapes, sequences); :mod:`~launchprof.analysis.diagnosis.hostwork`:
  the host work around a graph replay; :mod:`~launchprof.analysis.diagnosis.sources`:
  the source lines of profile's runs without nsys;
- :mod:`~launchprof.analysis.diagnosis.finders`: the registry of finding kinds the
  diagnosis loops over (a new kind: its finder and one line there).

docs/metrics.md, "Capture breakers", and docs/reference.md's table of findings give the rules.
"""
