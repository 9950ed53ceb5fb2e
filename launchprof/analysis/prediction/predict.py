"""Predict what a CUDA Graph would make of a launch-bound step (docs/metrics.md, "Prediction").

The model, per steady-state step of ``nodes`` GPU activities (kernels + memcpys + memsets):

- GPU side: ``max(gpu_work + node_gap_ns x (nodes - 1), node_interval_ns x nodes)
  + graph_launch_gap_ns`` - the step's GPU busy time (graphs do not make kernels faster;
  for kernels on several streams, the critical path and its kernels in place of the busy
  time and ``nodes`` in the gap term: :func:`gpu_work`),
  the dispatch gap the GPU still leaves between consecutive graph nodes, never faster than
  the GPU dispatches graph nodes at all (``node_interval_ns``: back-to-back empty kernels
  in one graph, measured by ``launchprof calibrate``; 0 = no floor), and the idle time
  between two graph launches queued back to back (the GPU-side cost of starting a graph);
- CPU side: ``graph_launch_call_base_ns + graph_launch_call_per_node_ns x nodes`` plus
  the host time a graph does not remove (host work between launches, waits after
  synchronizing calls) - the host can submit no faster than one ``cudaGraphLaunch`` call
  per step (under nsys with ``--cuda-graph-trace=node`` that call grows with the node
  count);
- predicted graph step = max(GPU side, CPU side); predicted speedup = measured step
  period / predicted graph step.
- Instantiation: ``instantiate_base_ns + instantiate_per_node_ns x nodes``. Break-even
  (the chapter's exercise 2): the smallest N with (instantiate + N x graph step) / N <
  per-launch step, i.e. N* = floor(instantiate / (per-launch - graph step)) + 1; None
  when the graph step is not shorter.

Two runs are predicted from one profiled trace. The *profiled* prediction (the headline:
what the same run under nsys will show after conversion, which ``launchprof compare``
verifies) uses the constants as they are under nsys. The *unprofiled* prediction
(:func:`unprofiled_values`) uses the ``unprofiled_*`` constants for the graph side, and
the per-launch step less ``profiler_launch_overhead_ns`` per launch call (what nsys adds
to each launch call; :mod:`launchprof.analysis.diagnosis.findings`, ``profiler-overhead``).

Steps inferred from a repeating kernel sequence are the shortest repeat, not necessarily
the user's loop body; for them the per-graph terms (``graph_launch_gap_ns``,
``graph_launch_call_base_ns``) are assumed amortized over many repeats in one graph, and
the single-repeat figure is given as an assumption.

Constants: a calibration dict (the user's ``launchprof calibrate`` file, read by the API
layer: :func:`launchprof.api.calibration.user_calibration`, or an explicit argument)
overrides :data:`DEFAULTS` key by key; this module reads no file. :data:`DEFAULTS` were measured on one H200 under
nsys 2025.3 from the bundled traces by ``scripts/derive_defaults.py`` (see its docstring
for each one), except the ``unprofiled_graph_launch_call_*`` pair, which is the H200
calibration in docs/data/calibration_h200_2026-11-29.json, ``unprofiled_graph_launch_gap_ns``
(two H200 calibrations, docs/data/calibration_h200_2026-12-03_run*.json), and
``profiler_launch_overhead_ns`` (2.76 us: docs/metrics.md, "Launch overhead and the
profiler"). A ``launchprof.calibration/1`` file is
measured without the profiler; only its ``profiler`` section (``launchprof calibrate
--profiler``) is measured under nsys. :data:`CALIBRATION_KEYS` says which figure of it
sets which constant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from launchprof.text import us_text

DEFAULTS: dict[str, float] = {
    "node_gap_ns": 80,
    "node_interval_ns": 0,
    "graph_launch_gap_ns": 5648,
    "graph_launch_call_base_ns": 16759,
    "graph_launch_call_per_node_ns": 1002,
    "instantiate_base_ns": 0,
    "instantiate_per_node_ns": 29929,
    "launch_call_ns": 5605,
    "profiler_launch_overhead_ns": 2760,
    "profiler_call_overhead_ns": 0,
    "profiler_torch_inflation": 2.0,
    "profiler_torch_inflation_low": 1.0,  # nsys never speeds the host up; one ViT step ran as fast under it
    "profiler_torch_inflation_high": 2.9,  # the most seen: 2.86x (benchmarks/README.md)
    # A PyTorch run that replays graphs: the host work around the replays (a few launches,
    # copies, syncs, the loop's Python) is inflated less. Set on the corpus' three HF
    # static-graph replays (1.34x-1.77x beyond their graph launch's own cost); held to the
    # NumPy loop's graph replays recorded later (tests/data/frameworks/MANIFEST.md).
    "profiler_torch_replay_inflation": 1.4,
    "profiler_torch_replay_inflation_low": 1.0,
    "profiler_torch_replay_inflation_high": 2.0,
    "unprofiled_graph_launch_gap_ns": 848,
    "unprofiled_graph_launch_call_base_ns": 2926,
    "unprofiled_graph_launch_call_per_node_ns": 9.3,
}
DEFAULTS_SOURCE = "defaults measured on an NVIDIA H200 under nsys 2025.3 (scripts/derive_defaults.py)"


# launchprof.calibration/1 documents (launchprof.calibrate): (section, key, field) -> constant.
# The calibration's %globaltimer gaps (medians.graph_node_gap_ns) include each kernel's
# prologue and epilogue, which a trace counts inside the kernel: they are not the trace's
# node gap, so only their difference is used (unprofiled_graph_launch_gap_ns below).
CALIBRATION_KEYS = {
    ("medians", "graph_node_interval_ns", None): "node_interval_ns",
    ("fits", "launch_cpu_ns", "intercept"): "unprofiled_graph_launch_call_base_ns",
    ("fits", "launch_cpu_ns", "slope"): "unprofiled_graph_launch_call_per_node_ns",
    ("fits", "instantiate_ns", "intercept"): "instantiate_base_ns",
    ("fits", "instantiate_ns", "slope"): "instantiate_per_node_ns",
    ("profiler", "launch_overhead_ns", None): "profiler_launch_overhead_ns",
    ("profiler", "graph_launch_cpu_fit", "intercept"): "graph_launch_call_base_ns",
    ("profiler", "graph_launch_cpu_fit", "slope"): "graph_launch_call_per_node_ns",
}


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _numbers(calibration: Mapping[str, Any]) -> dict[str, float]:
    """The known constants found in ``calibration``: keys of :data:`DEFAULTS` at top level
    or under ``constants``, and a ``launchprof.calibration/1`` document's
    sections named in :data:`CALIBRATION_KEYS`, and ``unprofiled_graph_launch_gap_ns`` =
    ``node_gap_ns`` + max(0, ``medians.graph_launch_gap_ns`` - ``medians.graph_node_gap_ns``)."""
    found: dict[str, float] = {}
    for (section, key, part), target in CALIBRATION_KEYS.items():
        scope = calibration.get(section)
        value = scope.get(key) if isinstance(scope, Mapping) else None
        if part is not None:
            value = value.get(part) if isinstance(value, Mapping) else None
        number = _number(value)
        if number is not None:
            found[target] = max(number, 0.0)
    # The GPU-side cost of starting the next graph, in the trace's terms: the node gap plus
    # what a graph boundary adds to the %globaltimer gap of two nodes of one graph.
    medians = calibration.get("medians")
    if isinstance(medians, Mapping):
        between = _number(medians.get("graph_launch_gap_ns"))
        within = _number(medians.get("graph_node_gap_ns"))
        if between is not None and within is not None:
            found["unprofiled_graph_launch_gap_ns"] = DEFAULTS["node_gap_ns"] + max(between - within, 0.0)
    for scope in (calibration, calibration.get("constants")):  # not medians: calibration names, not constants
        if not isinstance(scope, Mapping):
            continue
        for key in DEFAULTS:
            number = _number(scope.get(key))
            if number is not None:
                found[key] = number
    return found


def constants(
    calibration: Mapping[str, Any] | None = None, source: str = "argument"
) -> tuple[dict[str, float], dict[str, Any]]:
    """The prediction constants and where each came from.

    Args:
        calibration: a calibration dict (keys as in :data:`DEFAULTS`, at top level or
            under ``constants``, or a ``launchprof.calibration/1`` document); None: the
            defaults.
        source: what ``calibration`` is, for ``calibration_info["source"]`` (the API
            names the user's file: :func:`launchprof.api.calibration.user_calibration`).

    Returns:
        ``(values, calibration_info)``: values in ns by key; info has ``source``
        (``source``, or ``"defaults"`` when no constant was taken from ``calibration``),
        ``from_calibration`` (the keys taken from it), ``defaults_source`` and ``values``.
    """
    values = {k: float(v) for k, v in DEFAULTS.items()}
    taken: dict[str, float] = _numbers(calibration) if calibration else {}
    values.update(taken)
    info = {
        "source": source if taken else "defaults",
        "from_calibration": sorted(taken),
        "defaults_source": DEFAULTS_SOURCE,
        "values": {k: values[k] for k in sorted(values)},
    }
    return values, info


@dataclass(frozen=True)
class Prediction:
    """The graph step predicted for one step shape (all ns)."""

    per_launch_step_ns: float
    nodes: float
    gpu_work_ns: float
    gpu_side_ns: float
    cpu_side_ns: float
    graph_step_ns: float
    speedup: float
    instantiate_ns: float
    break_even_iterations: int | None
    amortized: bool


def break_even(instantiate_ns: float, graph_step_ns: float, per_launch_step_ns: float) -> int | None:
    """Smallest N with (instantiate + N x graph step) / N < per-launch step (exercise 2).

    None when the graph step is not shorter than the per-launch step (never pays back).
    """
    saving = per_launch_step_ns - graph_step_ns
    if saving <= 0:
        return None
    return int(math.floor(instantiate_ns / saving)) + 1


def gpu_work(fig: Mapping[str, Any]) -> tuple[float, float | None]:
    """The GPU work a graph of the step runs one after another (ns) and the activities on
    that chain (None: all of them): the critical path and its kernels where the step's
    kernels run on several streams and the critical path was found
    (:func:`~launchprof.analysis.prediction.stepmix.critical_paths`: a fork/join step's branches run
    side by side in a graph), else the busy time (``busy_p50_ns``). Raises KeyError without
    ``busy_p50_ns``."""
    busy = float(fig["busy_p50_ns"] or 0.0)
    path, path_nodes = fig.get("critical_path_p50_ns"), fig.get("critical_path_nodes_p50")
    if path is None or path_nodes is None or not 0 < path < busy:
        return busy, None
    return float(path), float(path_nodes)


def gpu_work_note(fig: Mapping[str, Any]) -> list[str]:
    """The assumption to state when :func:`gpu_work` takes a several-stream step's critical
    path (one line), else none."""
    work, path = gpu_work(fig)
    if path is None:
        return []
    return [
        f"The step's kernels run on {fig['streams_per_step_p50']:g} streams: the GPU side takes their critical "
        f"path, {us_text(work)} over {path:g} of {fig['kernels_per_step_p50']:g} kernels (kernels of a stream "
        "in order; a stream-wait-event call holds the kernels launched after it behind each stream's last kernel "
        f"before it), in place of the busy time ({us_text(fig['busy_p50_ns'])}): a graph runs independent "
        "branches side by side. The expected speedup's low end takes the busy time (the branches overlapping no "
        "more than in this run: kernels that each fill the GPU do not run side by side)."
    ]


# params: the step's figures the formula reads, each a number
def predict_graph_step(
    per_launch_step_ns: float,
    gpu_work_ns: float,
    nodes: float,
    values: Mapping[str, float],
    amortized: bool = False,
    host_ns: float = 0.0,
    path_nodes: float | None = None,
) -> Prediction:
    """Predict the graph step for a step of ``nodes`` activities (module docstring).

    Args:
        per_launch_step_ns: the measured steady-state step period (ns).
        gpu_work_ns: the step's GPU busy time (ns).
        nodes: GPU activities per step (kernels + memops).
        values: constants from :func:`constants`.
        amortized: drop the per-graph terms (a graph holding many repeats of the step).
        host_ns: host time per step that a graph does not remove (host work between
            launches, waits after synchronizing calls); added to the CPU side.
        path_nodes: the activities on the chain ``gpu_work_ns`` runs (:func:`gpu_work`):
            the dispatch gaps of the GPU side are theirs; default ``nodes``.

    Raises:
        ValueError: a negative input.
    """
    if per_launch_step_ns < 0 or gpu_work_ns < 0 or nodes < 0:
        raise ValueError("step figures must be >= 0")
    chain = nodes if path_nodes is None else min(path_nodes, nodes)
    gaps = max(chain - 1.0, 0.0) if not amortized else chain
    dispatch = max(gpu_work_ns + values["node_gap_ns"] * gaps, values.get("node_interval_ns", 0.0) * nodes)
    gpu_side = dispatch + (0.0 if amortized else values["graph_launch_gap_ns"])
    cpu_side = (
        values["graph_launch_call_per_node_ns"] * nodes
        + (0.0 if amortized else values["graph_launch_call_base_ns"])
        + max(host_ns, 0.0)
    )
    graph_step = max(gpu_side, cpu_side)
    instantiate = values["instantiate_base_ns"] + values["instantiate_per_node_ns"] * nodes
    return Prediction(
        per_launch_step_ns=per_launch_step_ns,
        nodes=nodes,
        gpu_work_ns=gpu_work_ns,
        gpu_side_ns=gpu_side,
        cpu_side_ns=cpu_side,
        graph_step_ns=graph_step,
        speedup=per_launch_step_ns / graph_step if graph_step > 0 else float("inf"),
        instantiate_ns=instantiate,
        break_even_iterations=break_even(instantiate, graph_step, per_launch_step_ns),
        amortized=amortized,
    )


UNPROFILED_KEYS = ("graph_launch_gap_ns", "graph_launch_call_base_ns", "graph_launch_call_per_node_ns")


def unprofiled_values(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` with the graph launch's constants replaced by their ``unprofiled_*``
    counterparts (module docstring): pass the result to :func:`predict_graph_step` to
    predict a run without the profiler."""
    out = dict(values)
    for key in UNPROFILED_KEYS:
        out[key] = float(values.get(f"unprofiled_{key}", values[key]))
    return out
