"""Timeline: the figures of one trace, before any step is found.

- :mod:`~launchprof.analysis.timeline.core`: :func:`~launchprof.analysis.timeline.core.analyze_trace`,
  the figures per device, process and stream (:class:`~launchprof.analysis.timeline.core.Analysis`);
- :mod:`~launchprof.analysis.timeline.gaps`: span, busy, idle, bubbles and host-wait idle
  of a device's activity; :mod:`~launchprof.analysis.timeline.intervals`: the interval
  arithmetic under them (docs/metrics.md, "Span, busy, idle, utilization", "Bubble");
- :mod:`~launchprof.analysis.timeline.launches`: launch figures (launch calls, their
  durations, graph launches and instantiations) and the launch call names;
  :mod:`~launchprof.analysis.timeline.callkinds`: the classes of CUDA API calls
  (launch, synchronize, allocate, capture, ...);
- :mod:`~launchprof.analysis.timeline.durations`: the kernel and launch-call duration
  histogram; :mod:`~launchprof.analysis.timeline.toptables`: the top kernels and calls.
"""
