"""Write a comparison (:func:`launchprof.compare`): ``compare.json`` (the
:class:`~launchprof.report.compare_schema.CompareDoc`) and ``compare.html`` with
``plotly.min.js`` next to it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np

from launchprof.analysis.comparison.side import SideData
from launchprof.analysis.comparison.verify import CI_LEVEL, Comparison, SideFigures
from launchprof.report.compare_figures import side_bars, step_timelines
from launchprof.report.compare_schema import (
    CheckDoc,
    CompareDoc,
    KernelDoc,
    SideDoc,
    SpeedupPartsDoc,
    WorkChangeDoc,
    WorkChangeExample,
)
from launchprof.report.html import embed, printable, render
from launchprof.report.outputs import COMPARE_FILES, VENDORED_JS, Output
from launchprof.text import fmt_us


def _side_doc(side: SideData, f: SideFigures) -> SideDoc:
    return SideDoc(
        path=side.path,
        origin="report" if side.origin == "report" else "trace",
        step_source=side.step_source,
        step_name=side.step_name,
        step_reason=side.step_reason,
        steps=f.steps,
        steady=f.steady,
        warmup=f.warmup,
        kernels_per_step=f.kernels_per_step,
        period_p50_ns=f.period_p50_ns,
        period_mean_ns=f.period_mean_ns,
        busy_p50_ns=f.busy_p50_ns,
        bubble_p50_ns=f.bubble_p50_ns,
        host_wait_p50_ns=f.host_wait_p50_ns,
        api_p50_ns=f.api_p50_ns,
        cpu_p50_ns=f.cpu_p50_ns,
        utilization=f.utilization,
        bubble_ratio=f.bubble_ratio,
        cpu_bound_ratio=f.cpu_bound_ratio,
        graph_launches_per_step=f.graph_launches_per_step,
        graph_kernel_share=f.graph_kernel_share,
        graph_launches=side.graph_launches,
        graph_instantiations=side.graph_instantiations,
        instantiate_ns=side.instantiate_ns,
        exec_updates=side.exec_updates,
        unprofiled_period_p50_ns=(
            float(np.median(side.unprofiled_periods)) if side.unprofiled_periods is not None else None
        ),
        expected_eager_step_ns=side.expected_eager_step_ns,
        step_without_profiler_ns=(side.step_without_profiler or {}).get("step_ns"),
    )


def build_compare_doc(c: Comparison, before_path: str | None = None, after_path: str | None = None) -> CompareDoc:
    """The ``compare.json`` document of ``c`` (paths recorded as given, if passed).

    Raises:
        pydantic.ValidationError: an invariant does not hold - a bug, never a user error.
    """
    before = _side_doc(c.before, c.before_figures)
    after = _side_doc(c.after, c.after_figures)
    if before_path is not None:
        before = before.model_copy(update={"path": printable(before_path)})
    if after_path is not None:
        after = after.model_copy(update={"path": printable(after_path)})
    return CompareDoc(
        verdict=c.verdict,  # type: ignore[arg-type]
        speedup=c.speedup,
        speedup_ci=c.speedup_ci,
        speedup_method=c.speedup_method,
        speedup_unprofiled=c.speedup_unprofiled,
        speedup_unprofiled_ci=c.speedup_unprofiled_ci,
        speedup_unprofiled_source=c.speedup_unprofiled_source,  # type: ignore[arg-type]
        predicted_speedup=c.predicted_speedup,
        min_effect=c.min_effect,
        before=before,
        after=after,
        checks=[CheckDoc(name=k.name, passed=k.passed, detail=k.detail, evidence=k.evidence_json()) for k in c.checks],
        kernels=[
            KernelDoc(
                name=str(r["name"]),
                grid=(int(r["grid_x"]), int(r["grid_y"]), int(r["grid_z"])),
                block=(int(r["block_x"]), int(r["block_y"]), int(r["block_z"])),
                before_per_step=float(r["before_per_step"]),
                after_per_step=float(r["after_per_step"]),
                before_gpu_ns_per_step=_finite(r["before_gpu_ns_per_step"]),
                after_gpu_ns_per_step=_finite(r["after_gpu_ns_per_step"]),
                differs=bool(r["differs"]),
            )
            for _, r in c.kernels.iterrows()
        ],
        work_change=_work_change_doc(c),
        speedup_parts=None if c.speedup_parts is None else SpeedupPartsDoc(**dataclasses.asdict(c.speedup_parts)),
        notes=c.notes,
    )


def _finite(value: object) -> float | None:
    f = float(value)  # type: ignore[arg-type]
    return f if math.isfinite(f) else None


def _work_change_doc(c: Comparison) -> WorkChangeDoc | None:
    w = c.work_change
    if w is None:
        return None
    return WorkChangeDoc(
        kind=w.kind,  # type: ignore[arg-type]
        changed_kernel_share=w.changed_kernel_share,
        before_kernel_ns_per_step=w.before_kernel_ns,
        after_kernel_ns_per_step=w.after_kernel_ns,
        compiler_kernels_added=w.compiler_kernels_added,
        summary=w.summary,
        examples=[
            WorkChangeExample(name=n, before_per_step=b, after_per_step=a, delta_gpu_ns_per_step=d)
            for n, b, a, d in w.examples
        ],
    )


def speedup_phrase(doc: CompareDoc) -> str:
    """The speedup a user acts on, first: without nsys when known (measured by ``check``,
    from each side's runs without nsys, or estimated with its range), the under-nsys
    ratio beside it; empty when there is no speedup. The terminal's verdict line and the
    page's headline read it."""
    under = doc.speedup
    ci = doc.speedup_unprofiled_ci
    if doc.speedup_unprofiled is not None and doc.speedup_unprofiled_source in ("estimate", "runs"):
        lo, hi = ci or (doc.speedup_unprofiled, doc.speedup_unprofiled)
        what = "estimate" if doc.speedup_unprofiled_source == "estimate" else "each side's runs without nsys"
        text = f"{doc.speedup_unprofiled:.2f}x per step without nsys ({what}, range {lo:.2f}-{hi:.2f}x)"
        return text + (f", {under:.2f}x under nsys (measured)" if under is not None else "")
    if doc.speedup_unprofiled is not None:  # measured by check: the faster check decided on it
        text = f"{doc.speedup_unprofiled:.2f}x per step without nsys"
        text += f" ({CI_LEVEL:.0%} CI {ci[0]:.2f}-{ci[1]:.2f}x)" if ci is not None else ""
        return text + (f", {under:.2f}x under nsys" if under is not None else "")
    if under is not None:
        ci = doc.speedup_ci
        return f"{under:.2f}x per step under nsys" + (f" ({CI_LEVEL:.0%} CI {ci[0]:.2f}-{ci[1]:.2f}x)" if ci else "")
    return ""


def headline(doc: CompareDoc) -> str:
    """One sentence under the verdict: the figure or the check that decided it."""
    by = {k.name: k for k in doc.checks}
    if doc.verdict == "verified" and doc.speedup is not None:
        same = by["same_work"].passed if "same_work" in by else None
        change = doc.work_change.kind if doc.work_change is not None else None
        work = {
            "same": "the same kernels",
            "known-transform": "the same work with small kernels added or replaced",
            "fused": "the work fused by a compiler (other kernels by design)",
        }.get(change or "", "the same kernels" if same else "the kernels could not be compared (see same_work)")
        launches = doc.after.graph_launches_per_step or 0
        b, a = doc.before, doc.after
        means = doc.speedup_method.startswith("ratio of mean") and b.period_mean_ns and a.period_mean_ns
        before, after = (b.period_mean_ns, a.period_mean_ns) if means else (b.period_p50_ns, a.period_p50_ns)
        return (
            f"{speedup_phrase(doc)}; step period {'mean' if means else 'p50'} under nsys "
            f"{fmt_us(before)} -> {fmt_us(after)}, {work}, "
            f"run as {launches:g} graph launch{'' if launches == 1 else 'es'} per step."
        )
    decisive = {
        "not-converted": "converted",
        "different-work": "same_work",
        "unknown-work": "same_work",
        "churn": "churn",
        "not-faster": "faster",
    }
    check = by.get(decisive.get(doc.verdict, ""))
    return check.detail if check else ""


def render_compare(c: Comparison, doc: CompareDoc) -> str:
    """The compare page: verdict first, bars, the two step timelines, checks, kernels
    (figures: :func:`~launchprof.report.compare_figures.side_bars`,
    :func:`~launchprof.report.compare_figures.step_timelines`)."""
    figures = [embed(side_bars(doc), "Median per steady step: BEFORE (grey) and AFTER (blue).")]
    tl = step_timelines(c)
    if tl is not None:
        figures.append(
            embed(
                tl,
                "One steady step of each side (the one whose period is nearest the median), on the same time scale: "
                "GPU activity per stream and CUDA API calls per CPU thread.",
            )
        )
    return render("compare.html.j2", doc=doc, headline=headline(doc), figures=figures, ci_level=CI_LEVEL)


@dataclasses.dataclass(frozen=True)
class CompareResult:
    """What a comparison folder shows: the comparison and its compare.json document."""

    comparison: Comparison
    doc: CompareDoc


# The files of a comparison folder, in the order they are staged and moved in (the page
# before the document that says the folder holds a comparison), besides plotly.min.js.
COMPARE_OUTPUTS: tuple[Output, ...] = (
    Output(COMPARE_FILES[1], lambda r: render_compare(r.comparison, r.doc)),
    Output(COMPARE_FILES[0], lambda r: r.doc.to_json()),
)


def write_compare(
    c: Comparison, folder: Path, force: bool = False, before_path: str | None = None, after_path: str | None = None
) -> CompareDoc:
    """Write the files of :data:`COMPARE_OUTPUTS` (``compare.html``, ``compare.json``) and
    ``plotly.min.js`` into ``folder``, all at once.

    A comparison of the same BEFORE and AFTER paths (compare.json's ``before.path`` and
    ``after.path``) is replaced without ``force``.

    Raises:
        OutputError: the folder holds a comparison of other paths and ``force`` is False,
            or cannot be written.
    """
    from launchprof.report.folder import FolderWriter, write_outputs
    from launchprof.report.same_input import report_of

    result = CompareResult(c, build_compare_doc(c, before_path, after_path))
    same = (
        report_of(COMPARE_FILES[0], {("before", "path"): Path(before_path), ("after", "path"): Path(after_path)})
        if before_path is not None and after_path is not None
        else None
    )
    names = (*(o.name for o in COMPARE_OUTPUTS), VENDORED_JS)
    with FolderWriter(folder, force, COMPARE_FILES, names, same_input=same) as writer:
        write_outputs(writer, COMPARE_OUTPUTS, result)
    return result.doc
