"""``launchprof calibrate``: measure this GPU's launch and graph costs and save them."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console


def run_calibrate(output: Path | None, console: Console, profiler: bool = False, nsys: str | None = None) -> None:
    """Run :func:`launchprof.calibrate.run_calibration` (and, with ``profiler``,
    :func:`launchprof.calibrate.profiler.measure_profiler_overhead` under the nsys that
    ``nsys`` or the usual search finds), save it, print the medians.

    Raises:
        CalibrateFailed: no GPU, no cuda-python, or a CUDA call failed.
        NsysError: ``profiler`` and no nsys was found.
    """
    from rich.table import Table

    from launchprof.calibrate import CalibrationError, run_calibration, save_calibration
    from launchprof.errors import CalibrateFailed

    info = None
    if profiler:
        from launchprof.nsys.locate import nsys_info

        info = nsys_info(nsys)  # before the GPU work: a missing nsys fails at once
    try:
        with console.status("measuring launch and graph costs on GPU 0"):
            result = run_calibration()
        if info is not None:
            from launchprof.calibrate.profiler import measure_profiler_overhead

            with console.status(f"timing launches without and under {info.path}"):
                result["profiler"] = measure_profiler_overhead(info.path, info.version)
        path = save_calibration(result, output)
    except CalibrationError as exc:
        raise CalibrateFailed(str(exc)) from None
    dev = result.get("device", {})
    table = Table(title=f"{dev.get('name', 'GPU')} (driver {dev.get('driver_version', '?')})")
    table.add_column("quantity")
    table.add_column("median", justify="right")
    for key, value in sorted(result.get("medians", {}).items()):
        table.add_row(key.removesuffix("_ns"), f"{value / 1e3:.2f} us")
    for key, fit in sorted(result.get("fits", {}).items()):
        table.add_row(f"{key} (fit)", f"{fit['intercept'] / 1e3:.2f} us + {fit['slope'] / 1e3:.3f} us/node")
    prof = result.get("profiler")
    if prof:
        table.add_row("nsys adds per launch call", f"{prof['launch_overhead_ns'] / 1e3:.2f} us")
        fit = prof["graph_launch_cpu_fit"]
        table.add_row(
            "graph launch under nsys (fit)", f"{fit['intercept'] / 1e3:.2f} us + {fit['slope'] / 1e3:.3f} us/node"
        )
    console.print(table)
    console.print(f"calibration: {path}", markup=False)
