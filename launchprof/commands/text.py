"""What ``analyze`` prints on the terminal: the verdict line, the steady-steps line, the
devices' whole-trace figures, the notes and the baseline line (all from the summary)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from launchprof.text import scope_text, us_text


def verdict_line(summary: Any) -> str | None:
    """One line with the diagnosis and the recommendation of a summary, for the terminal."""
    diag, rec, steps = summary.diagnosis, summary.recommendation, summary.steps
    if not diag:
        return None
    line = f"verdict: {diag.verdict}"
    ranks = summary.ranks
    if steps and ranks is not None and ranks.count > 1:
        line += f" on GPU {steps.device_id} pid {steps.pid} of {ranks.count} ranks"
        crit = ranks.critical_rank
        if crit is not None and 0 <= crit < len(ranks.ranks) and ranks.ranks[crit].pid == steps.pid:
            slowest = ranks.ranks[crit].slowest_steps
            line += f", the critical rank (slowest in {slowest} of {ranks.aligned_steps} steps)"
    if steps and steps.period_p50_ns:
        line += f" (step period p50 {us_text(steps.period_p50_ns)} over {steps.steady} steady steps)"
    graphs = (diag.figures or {}).get("graph_launches_per_step_p50") or 0
    # Replays graphs, rebuilt every step: the headline's (launchprof.analysis.headline.replays_graphs).
    head = summary.headline
    replays, rebuilt = (head.graphs, head.rebuilt) if head is not None else (False, False)
    if replays:
        line += f"; already runs as CUDA graphs ({graphs:g} graph launch{'es' if graphs != 1 else ''} a step"
        line += ", rebuilt every step)" if rebuilt else ")"
    if replays and not rebuilt:
        pass  # nothing left to convert: no prediction to print
    elif rec and rec.expected_speedup and rec.expected_step_ns:
        lo, hi = rec.expected_speedup_range or (None, None)
        measured = (rec.expected or {}).get("eager_source") == "measured"
        eager = (rec.expected or {}).get("eager_step_ns")
        line += (
            f"; CUDA Graph expected {rec.expected_speedup:.2f}x without nsys"
            + (
                f" ({'eager step measured' if measured else 'estimate'}, {lo:.2f}-{hi:.2f}x)"
                if lo is not None and hi is not None
                else ""
            )
            + f", {us_text(rec.expected_step_ns)} a step"
            + (f" vs {us_text(eager)} eager" if eager else "")
        )
        if rec.predicted_speedup:
            line += f" (under nsys {rec.predicted_speedup:.2f}x)"
        if rec.break_even_iterations is not None and rec.convert:  # no pay-back to speak of without a conversion
            n = rec.break_even_iterations
            line += f", break-even {n} iteration{'s' if n != 1 else ''}"
    elif rec and rec.predicted_speedup and rec.predicted_step_ns:
        what = "a graph built once" if replays else "CUDA Graph"
        line += f"; {what} predicted {us_text(rec.predicted_step_ns)} a step, {rec.predicted_speedup:.2f}x"
        if rec.break_even_iterations is not None:
            n = rec.break_even_iterations
            line += f", break-even {n} iteration{'s' if n != 1 else ''}"
    if replays and rebuilt:
        line += "; build the graph once (fix the reinstantiation blocker)"
    elif rec is not None:
        blockers = len(rec.blockers or [])
        line += "; convert" if rec.convert else "; no conversion recommended"
        if rec.convert and blockers:
            kinds = ", ".join(dict.fromkeys(b.kind for b in rec.blockers))
            line += f" after fixing {blockers} blocker{'s' if blockers != 1 else ''} ({kinds})"
    line += _waiting_ranks(summary)
    return line


def _waiting_ranks(summary: Any) -> str:
    """With several ranks, the ranks whose GPU waits for the CPU when the judged one's does
    not (:func:`launchprof.analysis.finish.waiting_ranks`, as the diagnosis says it); else "".
    Not called launch-bound: that word means a graph is expected to pay, which only a
    rank's own verdict says."""
    from launchprof.analysis.finish import waiting_ranks

    ranks, steps = summary.ranks, summary.steps
    if ranks is None or ranks.count < 2 or steps is None:
        return ""
    if not any((r.device_id, r.pid) == (steps.device_id, steps.pid) for r in ranks.ranks):
        return ""
    flags = [(r.rank, r.device_id, r.pid, bool(r.launch_bound)) for r in ranks.ranks]
    waiting = [str(rank) for rank in waiting_ranks((steps.device_id, steps.pid), flags)]
    if not waiting:
        return ""
    many = len(waiting) > 1
    return (
        f"; the GPU of rank{'s' if many else ''} {', '.join(waiting)} waits for the CPU {ranks.launch_bound_ratio:.0%} "
        "or more of each steady step (see the ranks)"
    )


def steady_line(summary: Any) -> str | None:
    """The line after the verdict: what the steady steps show (GPU busy, waiting for the
    CPU), what is left to gain once graphs are in place, or, without GPU work, the NVTX
    step ranges."""
    head = summary.headline
    nvtx = summary.nvtx_steps
    if not summary.devices and nvtx:
        n, period = nvtx.count, nvtx.period_p50_ns
        line = f"CPU only: {n} NVTX '{nvtx.name}' range{'s' if n != 1 else ''}"
        if period:
            line += f", period p50 {us_text(period)}, duration p50 {us_text(nvtx.duration_p50_ns)}"
        return line
    if not summary.devices and getattr(summary.trace, "time_range_ns", None) is not None:
        return f"no GPU work in the {scope_text(summary.trace.time_range_ns)} (see the notes)"
    if not summary.devices:
        code = getattr(getattr(summary, "workload", None), "exit_code", None)
        if code:  # it may have failed before its first step: marking steps is not the advice
            return f"CPU only, and no NVTX step range; the workload exited with code {code}"
        return "CPU only, and no NVTX step range: mark your loop's body with `with launchprof.step():` to see its steps"
    if head is None or head.scope != "steady steps" or head.gpu_busy_ratio is None:
        return None
    line = (
        f"steady steps: GPU busy {head.gpu_busy_ratio:.1%} of each step, "
        f"waiting for the CPU {head.host_wait_ratio or 0:.1%}"
    )
    if head.graphs and not head.rebuilt and head.idle_bound_speedup:
        line += f"; left to gain: at most {head.idle_bound_speedup:.2f}x by removing the remaining idle time"
        if head.verdict == "gpu-bound":
            line += " (beyond that, only faster or fused kernels)"
        else:  # the GPU waits for the CPU between graph launches: host work outside the graphs
            line += " (the GPU waits for the CPU between graph launches: the findings give the work outside them)"
    return line


def where_lines(summary: Any) -> list[str]:
    """The source lines of the steady steps' synchronizing calls (the ``sync-in-step``
    finding's ``where``, :mod:`launchprof.analysis.diagnosis.sources`), of Inductor's skipped CUDA
    Graphs (``cudagraph-skip``) and of allocations in the step (``alloc-in-step``,
    ``dynamic-shapes``, from the allocation run), the user's own first; none without the
    findings or the lines."""
    from launchprof.analysis.diagnosis.sources import ALLOCATION_KINDS
    from launchprof.text import count_text, one_line

    diag = summary.diagnosis
    out = []
    labels = dict(zip(ALLOCATION_KINDS, ("allocates", "changes shape"), strict=True))
    for finding in (diag.findings if diag else None) or []:
        if finding.kind not in ("sync-in-step", "cudagraph-skip", *labels):
            continue
        for w in finding.where:
            at = one_line(f"{w.file}:{w.line} ({w.function})")
            rate = f", {count_text(w.per_step)} a step" if w.per_step is not None else ""
            if finding.kind == "sync-in-step":
                line = f"  sync at {at}{rate}"
            elif finding.kind == "cudagraph-skip":
                line = f"  CUDA Graphs skipped at {at}: {one_line(w.reason or '')}"
            else:
                line = f"  {labels[finding.kind]} at {at}{rate}: {one_line(w.reason or '')}"
            if w.library:
                line += " [library" + (f"; called from {one_line(w.via)}" if w.via else "") + "]"
            if w.outside:
                line += "; between the top-level module calls: outside a graph of them"
            out.append(line)
    return out


def print_summary(summary: Any, output: Path, console: Console) -> None:
    """The terminal lines of run_analyze: the verdict first, then the steady steps, then
    the whole trace's figures (start-up included), labelled as such."""
    verdict = verdict_line(summary)
    if verdict:
        console.print(verdict, markup=False, soft_wrap=True)
    for line in where_lines(summary):
        console.print(line, markup=False, soft_wrap=True)
    steady = steady_line(summary)
    if steady:
        console.print(steady, markup=False, soft_wrap=True)
    for d in summary.devices:
        # The whole trace (first to last GPU activity), which the verdict's steady steps are not.
        console.print(
            f"GPU {d.device_id}, {scope_text(summary.trace.time_range_ns)}: {d.kernels} kernels over "
            f"{d.span_ns / 1e9:.3f} s, "
            f"utilization {d.utilization:.1%}, {d.bubbles.count} bubbles, CPU-bound ratio {d.cpu_bound_ratio:.1%}",
            markup=False,
            soft_wrap=True,
        )
    if not summary.devices and not verdict:
        console.print("no GPU activity in this trace", markup=False)
    for note in summary.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    if summary.baseline is not None:
        console.print(describe_baseline(summary.baseline.model_dump()), markup=False, soft_wrap=True)
    console.print(f"report: {output / 'report.html'}", markup=False)


def describe_baseline(section: Mapping[str, Any]) -> str:
    """One line for the terminal: the step period without nsys vs under nsys."""
    unprof, prof = section.get("period_p50_ns"), section.get("profiled_period_p50_ns")
    region = section.get("source") == "profiler-region"
    module = section.get("module") if section.get("source") == "module-calls" else None
    if unprof is None or prof is None:
        runs = int(section.get("runs", 0) or 0)
        if section.get("source") == "module-calls" and not module:
            periods = section.get("module_periods") or {}
            seen = ", ".join(f"{_module(n)} every {us_text(v)}" for n, v in list(periods.items())[:4])
            under = f" ({us_text(prof)} under nsys)" if prof else ""
            return (
                f"baseline: {runs} run{'' if runs == 1 else 's'} without nsys timed the top-level module calls "
                f"({seen or 'none'}); none at the pace of the trace's steps{under}: no step time without nsys "
                "(mark the loop with launchprof.step() to measure it)"
            )
        if region:
            return (
                f"baseline: {runs} run{'' if runs == 1 else 's'} without nsys timed the workload's profiler region, "
                f"but the trace shows {section.get('trace_regions', 0)} profiler regions with "
                f"{section.get('region_steps', 0)} steps found in them: no step time without nsys"
            )
        if not any(section.get("steps") or []):
            return (
                f"baseline: {runs} run{'' if runs == 1 else 's'} without nsys, no step times: no step markers "
                "(launchprof.step()) and no torch.cuda.profiler region timed"
            )
        return f"baseline: {runs} run{'' if runs == 1 else 's'} without nsys, too few steps to compare"
    if section.get("slower_than_traced"):
        return (
            f"baseline: step p50 {us_text(unprof)} without nsys vs {us_text(prof)} under nsys: slower "
            "without the profiler than with it, so the two runs ran at different paces; the expected speedup is "
            "the estimate" + (" (--baseline-runs 3 gives a spread)" if (section.get("runs") or 0) < 3 else "")
        )
    if section.get("overhead_ratio") is None and not section.get("host_ahead_of_gpu"):
        return (
            f"baseline: step p50 {us_text(unprof)} without nsys vs {us_text(prof)} under nsys: no ratio (a zero period)"
        )
    if section.get("host_ahead_of_gpu"):
        return (
            f"baseline: host step p50 {us_text(unprof)} without nsys, shorter than the GPU's busy time a step "
            f"({us_text(section['gpu_busy_p50_ns'])} under nsys): the host ran ahead of the GPU, so host step "
            "times do not show the step's pace and no correction is made"
        )
    line = (
        f"baseline: step p50 {us_text(unprof)} without nsys vs {us_text(prof)} under nsys "
        f"(under nsys / without: {section['overhead_ratio']:.2f}x; {_runs(section['runs'])}, steps {section['steps']})"
    )
    if module:
        line = (
            f"baseline: step {us_text(unprof)} without nsys (no step markers: the period of the top-level "
            f"{_module(module)} calls, {_runs(section['runs'])}) vs {us_text(prof)} under nsys (under nsys / "
            f"without: {section['overhead_ratio']:.2f}x)"
        )
    if region:
        line = (
            f"baseline: step {us_text(unprof)} without nsys (no step markers: the workload's profiler region, "
            f"median of {_runs(section['periods'])}, / the {section['region_steps']} steps found in it) vs "
            f"{us_text(prof)} under nsys (under nsys / without: {section['overhead_ratio']:.2f}x)"
        )
    # The speedup with this measured step is the verdict line's expected one
    # (recommendation.expected): the one prediction, not repeated here.
    return line


def _module(name: str) -> str:
    """A module of the ``module-calls`` baseline by its class name (``module NAME``)."""
    return name.removeprefix("module ")


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"
