"""Compare two runs: load each side (a trace or a report folder), cut their steps to the
same unit of work, and verify the conversion (:mod:`launchprof.analysis.comparison.verify`).

Steps of the same work: when the two sides' steady steps hold different numbers of
kernels and one is a whole multiple of the other (a per-launch run without NVTX whose
inferred step is one repeat of a short kernel sequence, against a graph whose step is the
whole captured loop body), the side with the smaller step is cut again: a trace with the
kernel names of one step of the other side as the template
(:func:`~launchprof.analysis.steps.find_steps`), a report folder by joining that many
consecutive steps (:func:`~launchprof.analysis.comparison.regroup.regroup`). Steps given by NVTX
ranges are never re-cut: they are the user's own definition.

A BEFORE trace re-cut that way is also diagnosed again on its new steps
(:func:`~launchprof.analysis.diagnosis.diagnose.diagnose`), so the ``predicted`` check compares the
measured gain with the prediction for the graph that AFTER actually launches (one graph of
that many nodes per step, its launch cost paid once a step) rather than with the
amortized prediction made for the short repeat.

Writing ``compare.json`` and ``compare.html`` is :mod:`launchprof.report.compare`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from launchprof.analysis.comparison.regroup import regroup, unprofiled_times
from launchprof.analysis.comparison.side import SideData, side_from_analysis
from launchprof.analysis.comparison.verify import DEFAULT_MIN_EFFECT, Comparison, verify
from launchprof.analysis.diagnosis.diagnose import diagnose
from launchprof.analysis.prediction.predict import break_even
from launchprof.analysis.result import AnalysisResult
from launchprof.analysis.steps import Steps, find_steps
from launchprof.analysis.timeline.gaps import DEFAULT_BUBBLE_THRESHOLD_NS
from launchprof.api.calibration import user_calibration
from launchprof.api.report_folder import ReportFolderError, side_from_folder
from launchprof.api.traces import analyze
from launchprof.errors import LaunchprofError
from launchprof.malloc import MallocTuning


# params: one side of compare: the API's options for it, and the side's label
def _load(
    label: str,
    path: Path,
    step: str | None,
    bubble_threshold_ns: int,
    nsys: str | None,
    progress: Callable[[str], None] | None,
    memory: MallocTuning | None = None,
) -> tuple[SideData, AnalysisResult | None]:
    try:
        if path.is_dir():
            side = side_from_folder(path)
            if step and side.step_name not in (step, f"launchprof:{step}") and side.step_source == "nvtx":
                side = side.with_notes(
                    f"{path}: --step {step!r} ignored for a report folder (its steps: {side.step_name})"
                )
            return side, None
        analysis = analyze(
            path,
            bubble_threshold_ns,
            nsys=nsys,
            progress=(lambda msg: progress(f"{label}: {msg}")) if progress else None,
            step=step,
            memory=memory,
        )
    except LaunchprofError as exc:
        raise type(exc)(f"{label} {path}: {exc}") from None
    # The side of the found steps was made when the analysis finished (Shown.side).
    return dataclasses.replace(analysis.outputs().side, path=str(path)), analysis


def _template(side: SideData) -> list[str] | None:
    """Kernel names of ``side``'s representative step, in start order (None when its
    timeline is missing or cut short)."""
    if side.sample is None:
        return None
    kern = side.sample.loc[side.sample["kind"] == "kernel"].sort_values(["start_ns", "end_ns"], kind="stable")
    names = [str(n) for n in kern["name"]]
    kps = side.kernels_per_step
    return names if names and kps is not None and len(names) == round(kps) else None


def _predict_again(side: SideData, analysis: AnalysisResult, steps: Steps, old: float | None) -> SideData:
    """``side`` with the graph prediction of ``analysis`` diagnosed on ``steps``, for one
    graph per step (re-cut steps count as inferred, whose headline prediction amortizes the
    graph's launch over many steps: its single-repeat figures are the ones for one graph)."""
    calibration, source = user_calibration()
    _, rec = diagnose(analysis, steps, calibration=calibration, calibration_source=source)
    speedup, step_ns = rec.predicted_speedup, rec.predicted_step_ns
    if rec.model.get("amortized") and "single_repeat_step_ns" in rec.model:
        speedup, step_ns = rec.model["single_repeat_speedup"], rec.model["single_repeat_step_ns"]
    if speedup is None or step_ns is None or rec.measured_step_ns is None or rec.instantiate_ns is None:
        return side
    n_star = break_even(rec.instantiate_ns, step_ns, rec.measured_step_ns)
    side = dataclasses.replace(
        side,
        predicted_speedup=float(speedup),
        predicted_step_ns=float(step_ns),
        break_even_iterations=None if n_star is None else float(n_star),
        # the step without the profiler estimated for the re-cut steps themselves
        step_without_profiler=rec.step_without_profiler or side.step_without_profiler,
        expected_eager_step_ns=rec.expected.eager_step_ns if rec.expected is not None else None,
    )
    was = f" (the short repeat's amortized prediction was {old:.2f}x)" if old else ""
    return side.with_notes(
        f"BEFORE's graph prediction was made again for its re-cut steps: {speedup:.2f}x for one graph of "
        f"{rec.nodes_per_step:g} nodes a step{was}"
    )


def align(
    before: SideData, after: SideData, before_analysis: AnalysisResult | None, after_analysis: AnalysisResult | None
) -> tuple[SideData, SideData]:
    """Cut the smaller-step side again when the kernels per step differ by a whole
    multiple (see the module docstring), its figures without the profiler made for the
    new steps (:func:`~launchprof.analysis.comparison.regroup.unprofiled_times`). Returns the two sides,
    changed or not."""
    kb, ka = before.kernels_per_step, after.kernels_per_step
    if not kb or not ka or round(kb) == round(ka):
        return before, after
    small_is_before = kb < ka
    small, big = (before, after) if small_is_before else (after, before)
    small_a = before_analysis if small_is_before else after_analysis
    ks, kg = round(min(kb, ka)), round(max(kb, ka))
    if ks == 0 or kg % ks:
        return before, after
    label = "BEFORE" if small_is_before else "AFTER"
    other = "AFTER" if small_is_before else "BEFORE"
    if small.step_source == "nvtx":
        small = small.with_notes(
            f"{label}'s steps ({ks} kernels) are 1/{kg // ks} of {other}'s ({kg}) but are NVTX ranges: not re-cut"
        )
    elif small_a is not None and (template := _template(big)) is not None:
        steps = find_steps(small_a, template=template, device_id=None)
        if steps.source == "none":
            return before, after
        old_prediction = small.predicted_speedup
        small = side_from_analysis(small_a, steps, path=small.path).with_notes(
            f"{label}'s steps ({ks} kernels, {small.step_source}) were re-cut into steps of {kg} kernels: the kernel "
            f"sequence of one {other} step is the template"
        )
        cut = small.step_without_profiler
        if small_is_before:
            small = _predict_again(small, small_a, steps, old_prediction)
        if small.step_without_profiler is cut:  # not estimated again: the short steps' times k
            small = unprofiled_times(small, kg // ks)
    elif small.origin == "report" and small.table is not None:
        small = unprofiled_times(regroup(small, kg // ks), kg // ks)
    return (small, big) if small_is_before else (big, small)


# params: the Python API: keyword options named as the command line's, each with its default
def compare(
    before: str | Path,
    after: str | Path,
    step: str | None = None,
    min_effect: float = DEFAULT_MIN_EFFECT,
    bubble_threshold_ns: int = DEFAULT_BUBBLE_THRESHOLD_NS,
    nsys: str | None = None,
    progress: Callable[[str], None] | None = None,
    memory: MallocTuning | None = None,
) -> Comparison:
    """Compare a run before and after its CUDA Graph conversion.

    Args:
        before, after: traces (``.sqlite``, ``.sqlite.xz``, ``.nsys-rep``) or report folders.
        step: NVTX range text that marks one step (both traces).
        min_effect: minimum speedup - 1 that counts as faster (0.05 = 5 %).
        bubble_threshold_ns: minimum idle gap counted as a bubble (traces).
        nsys: nsys executable for ``.nsys-rep`` inputs.
        progress: optional callback given a short text before each stage.
        memory: malloc settings for loading and analysing each trace (:func:`launchprof.analyze`).

    Returns:
        :class:`~launchprof.analysis.comparison.verify.Comparison`.

    Raises:
        TraceError, NsysError, StepError: a trace cannot be read (message names the side).
        ReportFolderError: a folder lacks summary.json, or a side has no steps.
    """
    b_side, b_an = _load("BEFORE", Path(before), step, bubble_threshold_ns, nsys, progress, memory)
    a_side, a_an = _load("AFTER", Path(after), step, bubble_threshold_ns, nsys, progress, memory)
    for label, side in (("BEFORE", b_side), ("AFTER", a_side)):
        if side.table is None and not side.stats.get("period_p50_ns"):
            # Steps are GPU work between NVTX ranges (or graph launches): without GPU work
            # there is nothing to compare, however the steps are marked.
            hint = (
                "compare needs traces with GPU work (kernels, memcpy or memset)"
                if side.step_reason == "no GPU activity in this trace"
                else "mark steps with NVTX ranges and give --step"
            )
            raise ReportFolderError(f"{label} {side.path}: no steps found ({side.step_reason}); {hint}")
    if progress:
        progress("comparing steps")
    b_side, a_side = align(b_side, a_side, b_an, a_an)
    try:
        result = verify(b_side, a_side, min_effect)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        folders = [s.path for s in (b_side, a_side) if s.origin == "report"]
        if not folders:
            raise
        raise ReportFolderError(
            f"{' and '.join(map(str, folders))}: figures in the report folder are damaged ({type(exc).__name__}: {exc})"
        ) from None
    return _with_hints(result, Path(before), Path(after))


def _with_hints(result: Comparison, before: Path, after: Path) -> Comparison:
    """``result`` with a note when the sides look mixed up: the same file twice, or a
    BEFORE that replays graphs against an AFTER that does not (swapped?)."""
    import dataclasses

    notes = list(result.notes)
    try:
        same = before.resolve() == after.resolve() or before.samefile(after)
    except OSError:
        same = False
    conv = result.check("converted").evidence
    b_share, a_share = conv.get("before_graph_kernel_share"), conv.get("after_graph_kernel_share")
    shares = isinstance(b_share, (int, float)) and isinstance(a_share, (int, float))
    if same:
        notes.insert(0, "BEFORE and AFTER are the same trace: give the run after the conversion as AFTER")
    elif shares and float(b_share) >= 0.5 > float(a_share):  # type: ignore[arg-type]
        notes.insert(0, "BEFORE replays CUDA graphs and AFTER does not: were BEFORE and AFTER swapped?")
    return dataclasses.replace(result, notes=notes) if notes != result.notes else result
