"""What nsys adds to launch calls on this machine (``launchprof calibrate --profiler``).

The same host loop runs twice in a fresh Python process: once on its own and once under
``nsys profile`` with the flags ``launchprof profile`` uses (without the export). The loop
times, with ``time.perf_counter_ns`` around each cuda-python call on an idle stream,
``LAUNCHES`` launches of an empty 1-block kernel (``cuLaunchKernel``) and, for each node
count in ``NODE_COUNTS``, ``GRAPH_LAUNCHES`` launches of an uploaded graph of that many
empty kernels (``cudaGraphLaunch``, each followed by a stream synchronize). Both runs pay
the Python binding's own cost, so the difference is the profiler's:

- ``launch_overhead_ns`` = median launch under nsys - median launch without;
- ``graph_launch_cpu_fit`` = the line (intercept, slope per node) through the medians of
  the graph launch under nsys by node count: the CPU side of a graph step in a profiled run
  (with ``--cuda-graph-trace=node`` nsys records every node, so the call grows with them);
- ``graph_launch_overhead_fit`` = the same for (under nsys - without).

The section is stored as ``profiler`` in the calibration document; the predictor
(:mod:`launchprof.analysis.prediction.predict`, ``CALIBRATION_KEYS``) takes ``launch_overhead_ns``
and ``graph_launch_cpu_fit`` from it. The trace nsys writes is its own and is removed with
its temporary folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import model
from .store import CalibrationError

LAUNCHES = 2000
GRAPH_LAUNCHES = 100
NODE_COUNTS = (1, 16, 64, 256)
TIMEOUT_S = 300


def host_loop(out: Path) -> None:
    """Time the launches described in the module docstring and write them to ``out``
    (JSON: ``launch_cpu_ns`` list, ``graph_launch_cpu_ns`` {nodes: list}).

    Raises:
        CalibrationError: no cuda-python, no GPU, or a CUDA call failed.
    """
    from .measure import _check, _Gpu

    gpu = _Gpu()
    rt = gpu.rt
    clock = time.perf_counter_ns
    for _ in range(10):  # module loading and first-launch costs, untimed
        gpu.launch("lp_empty", gpu.empty_args)
    gpu.sync()
    launches = []
    for i in range(LAUNCHES):
        t0 = clock()
        gpu.launch("lp_empty", gpu.empty_args)
        launches.append(clock() - t0)
        if i % 100 == 99:
            gpu.sync()
    gpu.sync()
    graphs: dict[str, list[int]] = {}
    for nodes in NODE_COUNTS:
        graph = gpu.capture([("lp_empty", gpu.empty_args)] * nodes)
        exec_ = _check(rt.cudaGraphInstantiate(graph, 0))
        _check(rt.cudaGraphUpload(exec_, gpu.stream))
        gpu.sync()
        _check(rt.cudaGraphLaunch(exec_, gpu.stream))  # first launch, untimed
        gpu.sync()
        samples = []
        for _ in range(GRAPH_LAUNCHES):
            t0 = clock()
            _check(rt.cudaGraphLaunch(exec_, gpu.stream))
            samples.append(clock() - t0)
            gpu.sync()
        graphs[str(nodes)] = samples
        _check(rt.cudaGraphExecDestroy(exec_))
        _check(rt.cudaGraphDestroy(graph))
    out.write_text(json.dumps({"launch_cpu_ns": launches, "graph_launch_cpu_ns": graphs}))


def _run(argv: list[str], out: Path, what: str) -> dict[str, Any]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CalibrationError(f"the launch loop {what} did not finish within {TIMEOUT_S} s") from None
    except OSError as exc:
        raise CalibrationError(f"cannot run the launch loop {what}: {exc.strerror}") from None
    if not out.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise CalibrationError(f"the launch loop {what} wrote no timings ({tail[0]})")
    try:
        data = json.loads(out.read_text())
    except ValueError:
        raise CalibrationError(f"the launch loop {what} wrote unreadable timings") from None
    return dict(data)


def summarize(unprofiled: dict[str, Any], profiled: dict[str, Any]) -> dict[str, Any]:
    """The ``profiler`` section from the two runs' timings (module docstring).

    Args:
        unprofiled, profiled: :func:`host_loop` documents (``launch_cpu_ns`` list of ns,
            ``graph_launch_cpu_ns`` {node count as text: list of ns}).

    Raises:
        CalibrationError: a run without launch samples, or the two runs' node counts differ.
    """
    if not unprofiled.get("launch_cpu_ns") or not profiled.get("launch_cpu_ns"):
        raise CalibrationError("the launch loop recorded no launches")
    g0, g1 = unprofiled.get("graph_launch_cpu_ns") or {}, profiled.get("graph_launch_cpu_ns") or {}
    if sorted(g0) != sorted(g1) or not g0:
        raise CalibrationError("the two launch loops timed different graphs")
    nodes = sorted(int(n) for n in g0)
    med0 = [model.median(g0[str(n)]) for n in nodes]
    med1 = [model.median(g1[str(n)]) for n in nodes]
    launch0, launch1 = model.median(unprofiled["launch_cpu_ns"]), model.median(profiled["launch_cpu_ns"])
    return {
        "launch_cpu_ns": {"unprofiled": launch0, "profiled": launch1},
        "launch_overhead_ns": launch1 - launch0,
        "graph_launch_cpu_ns": {"nodes": nodes, "unprofiled": med0, "profiled": med1},
        "graph_launch_cpu_fit": model.linear_fit(nodes, med1).as_dict(),
        "graph_launch_overhead_fit": model.linear_fit(
            nodes, [b - a for a, b in zip(med0, med1, strict=True)]
        ).as_dict(),
        "samples": {"unprofiled": unprofiled, "profiled": profiled},
    }


def measure_profiler_overhead(nsys: Path, nsys_version: str | None = None) -> dict[str, Any]:
    """Run the host loop without and under nsys and return the ``profiler`` section
    (:func:`summarize` plus ``nsys``, ``nsys_version`` and ``flags``).

    Raises:
        CalibrationError: either run failed or wrote no timings.
    """
    from launchprof.nsys.profile import PROFILE_FLAGS, profile_options

    known = profile_options(str(nsys))
    flags = [f for f in PROFILE_FLAGS if not f.startswith("--export") and (not known or f.split("=")[0] in known)]
    loop = [sys.executable, "-m", "launchprof.calibrate.profiler"]
    with tempfile.TemporaryDirectory(prefix="launchprof-calibrate-") as tmp:
        folder = Path(tmp)
        bare = _run([*loop, str(folder / "unprofiled.json")], folder / "unprofiled.json", "without nsys")
        argv = [str(nsys), "profile", *flags, f"--output={folder / 'trace'}", *loop, str(folder / "profiled.json")]
        under = _run(argv, folder / "profiled.json", "under nsys")
    section = summarize(bare, under)
    return {"nsys": str(nsys), "nsys_version": nsys_version, "flags": flags, **section}


def main() -> None:  # pragma: no cover - the child process of measure_profiler_overhead
    try:
        host_loop(Path(sys.argv[1]))
    except CalibrationError as exc:
        sys.exit(f"launchprof calibrate: {exc}")


if __name__ == "__main__":  # pragma: no cover
    main()
