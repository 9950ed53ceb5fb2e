"""The work behind each CLI command, kept out of cli.py so the commands stay short."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from launchprof.analysis import Analysis
from launchprof.api import analyze
from launchprof.errors import NoCudaActivityError, OutputError
from launchprof.report.folder import FolderWriter
from launchprof.report.index import write_index
from launchprof.report.sides import StepFilesJob, start_step_files, step_file_texts
from launchprof.report.write import commit_report, open_report_folder, render_files
from launchprof.timings import mark


def _update_index(output: Path) -> None:
    """``index.html`` beside the report folder (:func:`~launchprof.report.index.write_index`),
    only in a reports folder launchprof owns (:func:`~launchprof.report.index.owns`: the
    default ``reports/``, or a folder whose index launchprof wrote): never in an arbitrary
    parent such as a repository root. A parent folder that cannot take it (read-only,
    e.g. a writable folder under a shared read-only one) is said in one line on stderr,
    not an error: the report is written."""
    from launchprof.report.index import owns

    parent = output.resolve().parent
    if not owns(parent):
        return
    try:
        write_index(parent)
    except OutputError as exc:
        sys.stderr.write(f"launchprof: note: the index of reports was not updated: {exc}\n")
        sys.stderr.flush()


def verdict_line(summary: Any) -> str | None:
    """One line with the diagnosis and the recommendation of a summary, for the terminal."""
    diag, rec, steps = summary.diagnosis, summary.recommendation, summary.steps
    if not diag:
        return None
    line = f"verdict: {diag.get('verdict')}"
    ranks = getattr(summary, "ranks", None) or {}
    if steps and int(ranks.get("count") or 0) > 1:
        line += f" on GPU {steps.get('device_id')} pid {steps.get('pid')} of {ranks['count']} ranks"
    if steps and steps.get("period_p50_ns"):
        line += f" (step period p50 {steps['period_p50_ns'] / 1e3:,.1f} us over {steps.get('steady')} steady steps)"
    graphs = (diag.get("figures") or {}).get("graph_launches_per_step_p50") or 0
    rebuilt = any(f.get("kind") == "reinstantiation" for f in diag.get("findings") or [])
    if graphs >= 1:  # as the diagnosis decides it (analysis/diagnose.py)
        line += f"; already runs as CUDA graphs ({graphs:g} graph launch{'es' if graphs != 1 else ''} a step"
        line += ", rebuilt every step)" if rebuilt else ")"
    if graphs >= 1 and not rebuilt:
        pass  # nothing left to convert: no prediction to print
    elif rec and rec.get("expected_speedup") and rec.get("expected_step_ns"):
        lo, hi = rec.get("expected_speedup_range") or (None, None)
        line += (
            f"; CUDA Graph expected {rec['expected_speedup']:.2f}x without nsys"
            + (f" ({lo:.2f}-{hi:.2f}x)" if lo is not None and hi is not None else "")
            + f", {rec['expected_step_ns'] / 1e3:,.1f} us a step"
        )
        if rec.get("predicted_speedup"):
            line += f" (under nsys {rec['predicted_speedup']:.2f}x)"
        if rec.get("break_even_iterations") is not None:
            n = rec["break_even_iterations"]
            line += f", break-even {n} iteration{'s' if n != 1 else ''}"
    elif rec and rec.get("predicted_speedup") and rec.get("predicted_step_ns"):
        what = "a graph built once" if graphs >= 1 else "CUDA Graph"
        line += f"; {what} predicted {rec['predicted_step_ns'] / 1e3:,.1f} us a step, {rec['predicted_speedup']:.2f}x"
        if rec.get("break_even_iterations") is not None:
            n = rec["break_even_iterations"]
            line += f", break-even {n} iteration{'s' if n != 1 else ''}"
    if graphs >= 1 and rebuilt:
        line += "; build the graph once (fix the reinstantiation blocker)"
    elif rec is not None:
        blockers = len(rec.get("blockers") or [])
        line += "; convert" if rec.get("convert") else "; no conversion recommended"
        if rec.get("convert") and blockers:
            line += f" after fixing {blockers} blocker{'s' if blockers != 1 else ''}"
    bound = [r["rank"] for r in ranks.get("ranks") or [] if r.get("launch_bound")] if ranks else []
    if int(ranks.get("count") or 0) > 1 and bound and diag.get("verdict") != "launch-bound":
        line += f"; launch-bound rank{'s' if len(bound) > 1 else ''}: {', '.join(map(str, bound))} (see the ranks)"
    return line


def run_analyze(
    trace: Path,
    output: Path,
    force: bool,
    bubble_threshold_ns: int,
    nsys: str | None,
    console: Console,
    step: str | None = None,
    require_gpu: bool = False,
    baseline: list[Any] | None = None,
    early: Any = None,
    workload: dict[str, Any] | None = None,
    document: Callable[[str], None] | None = None,
) -> Any:
    """Analyse ``trace`` and write its report into ``output``; print where it went;
    return the summary (:class:`~launchprof.report.schema.Summary`).
    ``baseline``: step times of unprofiled runs (:mod:`launchprof.baseline`), or None.
    ``workload``: the summary's ``workload`` section (``profile``: the failed run's
    ``exit_code``), or None.
    ``document``: called with summary.json's text once written (``--json``), or None.
    ``early``: the analysis already made while nsys exported ``trace``
    (:class:`launchprof.early.EarlyResult`): only the files are written.

    Raises:
        NoCudaActivityError: ``require_gpu`` and the trace has no GPU activity (raised
            after the report, which holds what can be said, was written).
    """
    if early is not None:
        analysis, summary = early.analysis, _write_early(early, trace, output, force, baseline, workload)
    else:
        analysis, summary = _analyse_and_write(
            trace, output, force, bubble_threshold_ns, nsys, console, step, baseline, workload
        )
    _print_summary(summary, output, console)
    if document is not None:
        document(summary.to_json())
    if require_gpu and not summary.devices:
        raise _no_gpu_error(analysis, output)
    return summary


def _write_early(
    early: Any, trace: Path, output: Path, force: bool, baseline: list[Any] | None, workload: dict[str, Any] | None
) -> Any:
    """Write the report and step files of an early analysis (run_analyze)."""
    from launchprof.report.write import render_files

    rendered = early.rendered
    with open_report_folder(output, force) as writer:
        if rendered is None or baseline is not None or workload is not None:
            rendered = render_files(early.analysis, str(trace), baseline, early.figures, workload)
        summary, page = rendered
        for name, text in early.step_texts.items():
            writer.stage(name, text)
        commit_report(writer, summary, page)
    mark("report_done")
    mark("step_files_done")
    _update_index(output)
    mark("index_done")
    return summary


def _analyse_and_write(
    trace: Path,
    output: Path,
    force: bool,
    bubble_threshold_ns: int,
    nsys: str | None,
    console: Console,
    step: str | None,
    baseline: list[Any] | None,
    workload: dict[str, Any] | None = None,
) -> tuple[Analysis, Any]:
    """Analyse ``trace`` and write its report (run_analyze); the analysis and summary."""
    jobs: list[StepFilesJob] = []
    writers: list[FolderWriter] = []

    def steps_found(found: Analysis) -> None:
        # The step files do not depend on the diagnosis: a child process writes them into
        # the staging folder meanwhile (report.sides.start_step_files).
        writers.append(open_report_folder(output, force))
        jobs.append(start_step_files(found, writers[0].staging))

    with console.status("loading trace") as status, contextlib.ExitStack() as stack:
        try:
            analysis = analyze(
                trace,
                bubble_threshold_ns,
                nsys=nsys,
                progress=lambda msg: status.update(f"{msg}..."),
                step=step,
                steps_found=steps_found,
            )
            for writer in writers:
                stack.enter_context(writer)  # the staging folder goes, whatever happens
            mark("analysis_done")
            status.update("writing report")
            summary, page = render_files(
                analysis,
                trace_path=str(trace),
                baseline=baseline,
                device_figures=jobs[0].figures() if jobs else None,
                workload=workload,
            )
            if not writers:
                writers.append(stack.enter_context(open_report_folder(output, force)))
                for name, text in step_file_texts(analysis).items():
                    writers[0].stage(name, text)
            for job in jobs:  # the step files, staged by the child
                job.finish(True)
            mark("step_files_done")
            commit_report(writers[0], summary, page)
        except BaseException:
            for job in jobs:  # reap the child; the first error is the one to report
                with contextlib.suppress(Exception):
                    job.finish(False)
            for writer in writers:
                writer.close()
            raise
        mark("report_done")
        _update_index(output)
        mark("index_done")
    return analysis, summary


def steady_line(summary: Any) -> str | None:
    """The line after the verdict: what the steady steps show (GPU busy, waiting for the
    CPU), what is left to gain once graphs are in place, or, without GPU work, the NVTX
    step ranges."""
    head = getattr(summary, "headline", None) or {}
    nvtx = getattr(summary, "nvtx_steps", None)
    if not summary.devices and nvtx:
        n, period = nvtx["count"], nvtx.get("period_p50_ns")
        line = f"CPU only: {n} NVTX '{nvtx['name']}' range{'s' if n != 1 else ''}"
        if period:
            line += f", period p50 {period / 1e3:,.1f} us, duration p50 {nvtx['duration_p50_ns'] / 1e3:,.1f} us"
        return line
    if not summary.devices:
        return "CPU only, and no NVTX step range: mark your loop's body with `with launchprof.step():` to see its steps"
    if head.get("scope") != "steady steps" or head.get("gpu_busy_ratio") is None:
        return None
    line = (
        f"steady steps: GPU busy {head['gpu_busy_ratio']:.1%} of each step, "
        f"waiting for the CPU {head.get('host_wait_ratio') or 0:.1%}"
    )
    if head.get("graphs") and not head.get("rebuilt") and head.get("idle_bound_speedup"):
        line += f"; left to gain: at most {head['idle_bound_speedup']:.2f}x by removing the remaining idle time"
        if head.get("verdict") == "gpu-bound":
            line += " (beyond that, only faster or fused kernels)"
        else:  # the GPU waits for the CPU between graph launches: host work outside the graphs
            line += " (the GPU waits for the CPU between graph launches: the findings give the work outside them)"
    return line


def _print_summary(summary: Any, output: Path, console: Console) -> None:
    """The terminal lines of run_analyze: the verdict first, then the steady steps, then
    the whole trace's figures (start-up included), labelled as such."""
    verdict = verdict_line(summary)
    if verdict:
        console.print(verdict, markup=False, soft_wrap=True)
    steady = steady_line(summary)
    if steady:
        console.print(steady, markup=False, soft_wrap=True)
    for d in summary.devices:
        # The whole trace (first to last GPU activity), which the verdict's steady steps are not.
        console.print(
            f"GPU {d.device_id}, whole trace (incl. start-up): {d.kernels} kernels over {d.span_ns / 1e9:.3f} s, "
            f"utilization {d.utilization:.1%}, {d.bubbles.count} bubbles, CPU-bound ratio {d.cpu_bound_ratio:.1%}",
            markup=False,
            soft_wrap=True,
        )
    if not summary.devices and not verdict:
        console.print("no GPU activity in this trace", markup=False)
    for note in summary.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    if summary.baseline is not None:
        from launchprof.baseline import describe

        console.print(describe(summary.baseline), markup=False, soft_wrap=True)
    console.print(f"report: {output / 'report.html'}", markup=False)


def _no_gpu_error(analysis: Analysis, output: Path) -> NoCudaActivityError:
    # Bad input for `analyze` (exit status 2, docs/reference.md): the report holds what can be said.
    why = "no CUDA tables" if not analysis.trace.has_cuda else "no kernel, memcpy or memset rows"
    return NoCudaActivityError(f"no CUDA activity in this trace ({why}); wrote what it holds to {output}")


def run_compare(
    before: Path,
    after: Path,
    output: Path,
    force: bool,
    step: str | None,
    fail_on: str,
    min_effect: float,
    bubble_threshold_ns: int,
    nsys: str | None,
    console: Console,
) -> int:
    """Compare ``before`` and ``after``, write the comparison into ``output``, print the
    verdict and the checks; return the exit code (1 when the verdict is in ``fail_on``)."""
    from launchprof.compare_runs import compare, parse_fail_on
    from launchprof.report.compare import write_compare

    failing = parse_fail_on(fail_on)
    with console.status("loading") as status:
        result = compare(
            before,
            after,
            step=step,
            min_effect=min_effect,
            bubble_threshold_ns=bubble_threshold_ns,
            nsys=nsys,
            progress=lambda msg: status.update(f"{msg}..."),
        )
        status.update("writing comparison")
        doc = write_compare(result, output, force=force, before_path=str(before), after_path=str(after))
        _update_index(output)
    speed = "" if doc.speedup is None else f": {doc.speedup:.2f}x per step"
    if doc.speedup_ci is not None:
        speed += f" (95% CI {doc.speedup_ci[0]:.2f}-{doc.speedup_ci[1]:.2f}x)"
    console.print(f"verdict: {doc.verdict}{speed}", markup=False)
    for c in doc.checks:
        mark = "n/a " if c.passed is None else ("pass" if c.passed else "FAIL")
        console.print(f"  {mark} {c.name}: {c.detail}", markup=False, soft_wrap=True)
    for note in doc.notes:
        console.print(f"  note: {note}", markup=False, soft_wrap=True)
    console.print(f"comparison: {output / 'compare.html'}", markup=False)
    return 1 if doc.verdict in failing else 0


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


MAX_RANK_LINES = 32


def run_analyze_many(
    traces: list[str],
    output: Path,
    force: bool,
    bubble_threshold_ns: int,
    nsys: str | None,
    console: Console,
    step: str | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
) -> None:
    """Analyse many per-rank traces on Dask (:func:`launchprof.multi.analyze_many`);
    print one line per rank and where the combined report went.

    Raises:
        TraceError: some traces could not be analysed (after writing the others).
    """
    from launchprof.errors import TraceError
    from launchprof.multi import analyze_many, use_dask

    where = f"the Dask scheduler at {scheduler}" if scheduler else ("local Dask" if use_dask(traces, workers) else "")
    where = where or "this process"
    with console.status(f"analysing {len(traces)} traces on {where}") as status:
        combined = analyze_many(
            traces,
            output,
            force,
            bubble_threshold_ns,
            nsys,
            step,
            scheduler,
            workers,
            progress=lambda done, total: status.update(f"analysed {done} of {total} traces"),
        )
    ranks = combined.view.to_dict()["ranks"] if combined.view is not None else []
    for r in ranks[:MAX_RANK_LINES]:
        # Steady steps first (launch-bound or not, waiting for the CPU), then the whole trace.
        steady = r.get("steady_host_wait_ratio")
        head = "launch-bound" if r.get("launch_bound") else "not launch-bound"
        if steady is not None:
            head += f", GPU waiting for the CPU {steady:.1%} of each steady step"
        console.print(
            f"rank {r['rank']} ({r['label']}): {head}; {r['steps']} steps, {r['straggler_steps']} straggler steps; "
            f"whole trace (incl. start-up): {r['kernels']} kernels, CPU-bound ratio {r['cpu_bound_ratio']:.1%}",
            markup=False,
            soft_wrap=True,
        )
    if len(ranks) > MAX_RANK_LINES:
        console.print(f"... and {len(ranks) - MAX_RANK_LINES} more ranks in combined.json", markup=False)
    console.print(f"combined report: {output / 'combined.html'}", markup=False)
    _update_index(output)
    failed = [r for r in combined.reports if r.error is not None]
    if failed:
        raise TraceError(
            f"{len(failed)} of {len(traces)} traces could not be analysed; first: {failed[0].path}: {failed[0].error}"
        )
