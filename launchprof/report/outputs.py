"""Every file launchprof writes into a folder, in one place: the registry of an analysis
report's outputs and the file lists of each kind of folder.

An analysis report folder holds ``summary.json`` and ``report.html`` (made together by
:func:`launchprof.report.write.commit_report`: the summary lists the digests of the other
outputs and the page carries the summary's run id) and the outputs of
:data:`ANALYSIS_OUTPUTS`, each a name and a renderer of a finished
:class:`~launchprof.analysis.result.AnalysisResult`. A new output format is a renderer
and one line there: the folder writer stages it, ``summary.json``'s ``files`` lists its
SHA-256, a later run that does not write it removes it, and ``profile`` refuses a folder
that holds it (docs/architecture.md, "Where to change").

No pandas at import: ``profile`` reads the file lists before the workload starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from launchprof.report import stepfiles

if TYPE_CHECKING:
    from launchprof.analysis.result import AnalysisResult


@dataclass(frozen=True)
class Output:
    """One file a folder's writer stages: of an analysis report folder besides
    ``summary.json`` and ``report.html`` (:data:`ANALYSIS_OUTPUTS`, rendered from a
    finished :class:`~launchprof.analysis.result.AnalysisResult`), or of a comparison or
    multi-trace folder (``COMPARE_OUTPUTS`` of :mod:`launchprof.report.compare`,
    ``COMBINED_OUTPUTS`` of :mod:`launchprof.report.combined`, each rendered from that
    module's result and named from :data:`COMPARE_FILES` / :data:`COMBINED_FILES`).

    Attributes:
        name: the file's name in the folder.
        render: its text (UTF-8 when written) from the folder's result, or None when the
            result has nothing for it (then the folder holds no such file).
    """

    name: str
    render: Callable[[Any], str | None]


# The outputs of an analysis report, in the order they are staged (the step files that
# compare reads: launchprof.report.stepfiles).
ANALYSIS_OUTPUTS: tuple[Output, ...] = (
    Output("steps.csv", stepfiles.steps_csv),
    Output("step_kernels.csv", stepfiles.step_kernels_csv),
    Output("step_timeline.csv", stepfiles.step_timeline_csv),
)

SUMMARY = "summary.json"
PAGE = "report.html"
# The installed plotly's script beside every page that draws charts (a hard link where possible).
VENDORED_JS = "plotly.min.js"
# A folder holding these holds an analysis report (refused without --force).
REPORT_FILES = (SUMMARY, PAGE)
COMPARE_FILES = ("compare.json", "compare.html")
COMBINED_FILES = ("combined.json", "combined.html")
INDEX_FILE = "index.html"
# The document each kind of report writes: a folder holding one holds that kind of report.
REPORT_DOCUMENTS = {
    SUMMARY: "an analyze report",
    COMPARE_FILES[0]: "a comparison",
    COMBINED_FILES[0]: "a multi-trace report",
}


def analysis_files() -> tuple[str, ...]:
    """Every name an analysis report run may write into its folder (those it does not
    write this time are removed when it commits): the report, :data:`ANALYSIS_OUTPUTS`,
    the plotly script. Read when called, so a line added to the registry counts."""
    return (*REPORT_FILES, *(o.name for o in ANALYSIS_OUTPUTS), VENDORED_JS)


def output_names() -> tuple[str, ...]:
    """The names of :data:`ANALYSIS_OUTPUTS` (``summary.json``'s ``files`` lists their digests)."""
    return tuple(o.name for o in ANALYSIS_OUTPUTS)


def render_outputs(result: AnalysisResult) -> dict[str, str]:
    """The outputs of a finished ``result``, name -> text, in registry order; an output
    whose renderer gives None is left out.

    Raises:
        ValueError: ``result`` is not finished (:func:`launchprof.analysis.finish.finish`).
    """
    texts = {}
    for output in ANALYSIS_OUTPUTS:
        text = output.render(result)
        if text is not None:
            texts[output.name] = text
    return texts
