"""What the host does per step outside the CUDA graph, in a run that already replays graphs.

A step that launches its work as graph replays and still leaves the GPU waiting for the
CPU is host-bound: a graph removed the launches it holds, not the loop around it. This
module lists, per steady step (medians over the steady steps, ns), what remains on the
submitting process's CPU side:

- ``input_copies``: asynchronous copy calls (``cudaMemcpyAsync`` and the driver's
  ``cuMemcpy*Async``) less the device-to-host copies among them (read-backs, counted as
  ``read_backs_per_step``), e.g. torch's ``cudagraphs`` backend copying each input into
  the graph's static buffers on every replay; cost: the time in all those calls;
- ``syncs``: synchronizing calls (:data:`~launchprof.analysis.timeline.callkinds.SYNC_CALLS` and
  synchronous copies: ``.item()``, a stopping check every token); cost: the time blocked
  in them;
- ``eager_launches``: kernel launch calls outside graphs (work around the captured
  region, e.g. logits processing); cost: the time in those calls;
- ``host_gaps``: CPU time of the step outside any CUDA API call (the loop's own Python);
  cost: step period - time in CUDA API calls.

Each item comes with the usual fix (torch and Hugging Face terms).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from launchprof.analysis.diagnosis.findings import COPY_DTOH, Finding, Severity
from launchprof.analysis.stepdata import StepContext
from launchprof.text import us_text

ASYNC_COPY = re.compile(r"^(cudaMemcpy\w*Async|cuMemcpy\w*Async)(_ptsz|_ptds)?$")  # per-thread forms too
FIXES = {
    "input_copies": (
        "inputs copied into the graph's static buffers on every replay (torch.compile's cudagraphs backend and "
        "cudagraph trees do this for inputs whose address changes): keep inputs in the same tensors across steps "
        "(write into them in place; mark static buffers with torch._dynamo.mark_static_address)"
    ),
    "syncs": (
        "a synchronizing call every step (.item(), a stopping check, a host-side condition): check every k steps, "
        "or keep the decision on the GPU"
    ),
    "eager_launches": (
        "kernels launched one by one around the replay (pre/post-processing outside the captured region): capture "
        "them too, or fuse them"
    ),
    "host_gaps": (
        "the loop's own Python between replays: move work out of the loop, or capture more per replay (several "
        "iterations or the whole step in one graph)"
    ),
}


def _median_per_step(calls: pd.DataFrame, steps: np.ndarray) -> tuple[float, float]:
    """Median over ``steps`` of the count and of the summed duration (ns) of ``calls``."""
    if calls.empty:
        return 0.0, 0.0
    dur = (calls["end"] - calls["start"]).groupby(calls["step"]).sum().reindex(steps, fill_value=0)
    n = calls.groupby("step").size().reindex(steps, fill_value=0)
    return float(n.median()), float(dur.median())


def host_outside_graph(ctx: StepContext) -> Finding | None:
    """The ``host-outside-graph`` finding (module docstring), for steady steps of one or more
    graph launches; None when the steps launch no graph or have no calls."""
    s = ctx.steady
    if s.empty or "graph_launches" not in s or float(s["graph_launches"].median()) < 1:
        return None
    calls = ctx.calls_where(None)
    if calls.empty:
        return None
    steps = s["step"].to_numpy()
    period = float(s["period_ns"].median())
    names = calls["call"].astype(str)
    copies = _median_per_step(calls.loc[names.str.match(ASYNC_COPY).to_numpy()], steps)
    # Device-to-host copies among them are read-backs (a stopping check, .item()), not inputs.
    m = ctx.memops
    d2h = m.loc[(m["kind"] == "memcpy") & (m["copy_kind"] == COPY_DTOH)] if len(m) else m
    read_backs = float(d2h.groupby("step").size().reindex(steps, fill_value=0).median()) if len(d2h) else 0.0
    parts: dict[str, tuple[float, float]] = {
        "input_copies": (max(copies[0] - read_backs, 0.0), copies[1]),
        "syncs": _median_per_step(calls.loc[calls["sync"].to_numpy(dtype=bool)], steps),
        "eager_launches": _median_per_step(calls.loc[calls["launch"].to_numpy(dtype=bool)], steps),
    }
    api_ns = float(s["api_ns"].median()) if "api_ns" in s else 0.0
    parts["host_gaps"] = (0.0, max(period - api_ns, 0.0))
    shown = {k: v for k, v in parts.items() if v[1] > 0}
    if not shown:
        return None
    labels = {
        "input_copies": "async copy calls",
        "syncs": "synchronizing calls",
        "eager_launches": "eager launch calls",
        "host_gaps": "CPU time outside CUDA calls",
    }
    items = []
    for key, (n, ns) in sorted(shown.items(), key=lambda kv: -kv[1][1]):
        count = f"{n:g} " if key != "host_gaps" else ""
        items.append(f"{count}{labels[key]} {us_text(ns)} ({ns / period:.0%})" if period > 0 else labels[key])
    top = max(shown, key=lambda k: shown[k][1])
    figures: dict[str, Any] = {f"{k}_per_step": v[0] for k, v in parts.items() if k != "host_gaps"}
    figures.update({f"{k}_ns_per_step": v[1] for k, v in parts.items()})
    figures["period_ns"] = period
    figures["read_backs_per_step"] = read_backs
    return Finding(
        "host-outside-graph",
        Severity.WARNING,
        int(len(s)),
        [int(x) for x in steps[:10]],
        f"Each step replays {float(s['graph_launches'].median()):g} graph(s); per step the host still spends "
        + ", ".join(items)
        + f" of the {us_text(period)} step",
        "; ".join(f"{labels[k]}: {FIXES[k]}" for k in sorted(shown, key=lambda k: -shown[k][1]))
        + f". The largest is {labels[top]}.",
        figures,
    )
