"""The combined report of many per-rank traces: ``combined.json`` and ``combined.html``.

``combined.json`` (schema ``launchprof.combined/1``): ``reports[]`` (``path`` as given,
``folder`` of its report, ``ranks`` found in it, ``error`` or null), ``notes`` (why the
traces do not look like the ranks of one job, if so) and ``ranks``, the
cross-rank view over all ranks of the reports that worked (the same object as the
``ranks`` section of summary.json, see :meth:`launchprof.analysis.ranks.CrossRank.to_dict`;
each rank carries the ``path`` of its report). Deterministic: the same traces in the same
order give the same bytes, whatever the number of workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from launchprof.analysis.ranks import ProgramSignature, RankRecord
from launchprof.errors import OutputError
from launchprof.report.checks import unreplaceable
from launchprof.report.figures import HEATMAP_MAX_STEPS, work_heatmap
from launchprof.report.folder import FolderWriter, commit_together, stage_rendered
from launchprof.report.html import embed, render
from launchprof.report.outputs import COMBINED_FILES, SUMMARY, VENDORED_JS, Output, analysis_files
from launchprof.report.same_input import resolved_path
from launchprof.report.schema import SUMMARY_SCHEMA
from launchprof.report.write import REPORT_ORDER, open_report_folder

if TYPE_CHECKING:
    from launchprof.analysis.ranks import CrossRank

COMBINED_SCHEMA = "launchprof.combined/1"


@dataclass(frozen=True)
class ReportResult:
    """What one task returns: the trace as given, its folder name, its ranks, or the
    one-line error that stopped it."""

    path: str
    folder: str
    ranks: list[RankRecord]
    error: str | None = None
    signature: ProgramSignature | None = None


@dataclass(frozen=True)
class Combined:
    """The result of :func:`launchprof.commands.many.analyze_many`: one :class:`ReportResult` per trace, in the
    order given, the cross-rank view over all ranks of the traces that worked
    (None when none did), and ``notes``: why the traces do not look like one job
    (:func:`launchprof.analysis.ranks.not_one_job`), if so."""

    reports: list[ReportResult]
    view: CrossRank | None
    notes: list[str] = dataclasses.field(default_factory=list)


class ReportEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    folder: str
    ranks: int = Field(ge=0)
    error: str | None


class CombinedSummary(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(default=COMBINED_SCHEMA, alias="schema")
    reports: list[ReportEntry]
    failed: int = Field(ge=0)
    ranks: dict[str, Any] | None
    notes: list[str] = []

    def to_json(self) -> str:
        """Deterministic JSON text (keys in schema order, 2-space indent, newline)."""
        return self.model_dump_json(by_alias=True, indent=2) + "\n"


def build_combined(combined: Combined) -> CombinedSummary:
    """The ``combined.json`` document of ``combined``."""
    return CombinedSummary(
        reports=[
            ReportEntry(path=r.path, folder=r.folder, ranks=len(r.ranks), error=r.error) for r in combined.reports
        ],
        failed=sum(1 for r in combined.reports if r.error is not None),
        ranks=combined.view.to_dict() if combined.view is not None else None,
        notes=list(combined.notes),
    )


@dataclass(frozen=True)
class CombinedResult:
    """What a multi-trace folder shows: the run's :class:`Combined` and its combined.json
    document."""

    combined: Combined
    doc: CombinedSummary


def _combined_page(result: CombinedResult) -> str:
    """combined.html: the document's tables and the work heatmap of the aligned steps."""
    view, figures = result.combined.view, []
    if view is not None and len(view.per_step):
        fig, cut = work_heatmap(view)
        caption = (
            "Each cell: a rank's work in a step (period minus communication-only time) over the median of that step."
        )
        if cut:
            caption += f" Only the first {HEATMAP_MAX_STEPS} aligned steps are drawn."
        figures.append(embed(fig, caption))
    return render("combined.html.j2", doc=result.doc, figures=figures)


# The files of a multi-trace folder, in the order they are staged and moved in (the page
# before the document that says the folder holds a multi-trace report), besides plotly.min.js.
COMBINED_OUTPUTS: tuple[Output, ...] = (
    Output(COMBINED_FILES[1], _combined_page),
    Output(COMBINED_FILES[0], lambda r: r.doc.to_json()),
)


def _report_pairs(folder: Path) -> list[tuple[Any, Any]] | None:
    """The ``(path, folder)`` values of ``reports[]`` in ``folder``'s ``combined.json`` as
    written (not checked), or None when there is none or it cannot be read (RecursionError:
    absurdly nested JSON)."""
    try:
        doc = json.loads((folder / COMBINED_FILES[0]).read_text(encoding="utf-8"))
        return [(r["path"], r["folder"]) for r in doc["reports"]]
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None


def same_reports(reports: Sequence[tuple[str, str]]) -> Callable[[Path], str | None]:
    """A ``same_input`` check for :class:`~launchprof.report.folder.FolderWriter`: the
    folder's ``combined.json`` lists the same ``(path, folder)`` pairs as ``reports``, in
    the same order, each path naming the same file (:func:`~launchprof.report.same_input.resolved_path`):
    the same command run again, whose report it replaces without ``--force``.
    Else it says "another run"."""
    wanted = [(resolved_path(p), f) for p, f in reports]

    def check(folder: Path) -> str | None:
        pairs = _report_pairs(folder)
        if pairs is None:
            return "another run"
        return None if [(resolved_path(p), f) for p, f in pairs] == wanted else "another run"

    return check


def listed_reports(folder: Path) -> list[tuple[str, str]]:
    """The ``(path, folder)`` of each report the multi-trace report in ``folder`` lists
    (its ``combined.json``'s ``reports[]``), each folder a plain name inside ``folder`` (no
    separator, not ``.`` or ``..``, at most 255 characters: a damaged or edited document
    names nothing outside it); ``[]`` when there is no such report or it cannot be read."""
    return [
        (p, n)
        for p, n in _report_pairs(folder) or []
        if isinstance(p, str)
        and isinstance(n, str)
        and 0 < len(n) <= 255
        and n not in (".", "..")
        and os.sep not in n
        and "/" not in n
        and "\0" not in n
    ]


def holds_report_of(folder: Path, path: str) -> bool:
    """Whether ``folder`` (not a link) holds launchprof's analysis report of the trace
    ``path`` (as given): its summary.json parses, is of :data:`SUMMARY_SCHEMA` and names
    that trace. A folder whose files the user replaced is not one."""
    try:
        if folder.is_symlink() or not folder.is_dir() or not (folder / SUMMARY).is_file():
            return False  # not a regular file (a FIFO would block the read under the lock)
        doc = json.loads((folder / SUMMARY).read_text(encoding="utf-8"))
        return bool(doc.get("schema") == SUMMARY_SCHEMA and doc.get("trace", {}).get("path") == path)
    except (OSError, ValueError, TypeError, AttributeError, RecursionError):
        return False


def remove_report(folder: Path) -> None:
    """Remove the analysis report in ``folder``: the files an analysis run writes
    (:func:`~launchprof.report.outputs.analysis_files`), ``summary.json`` last, then the
    folder itself when nothing else is left in it (a file of the user's own keeps it).
    Check first that it is one (:func:`holds_report_of`).

    Raises:
        OutputError: a file or the folder cannot be removed.
    """
    names = [n for n in analysis_files() if n != SUMMARY] + [SUMMARY]  # the document last: what is left is still one
    try:
        for name in names:
            (folder / name).unlink(missing_ok=True)
        if not any(folder.iterdir()):
            folder.rmdir()
    except OSError as exc:
        raise OutputError(f"cannot remove the earlier report in {folder}: {exc.strerror or exc}") from None


def unlisted_reports(folder: Path, reports: Sequence[ReportResult]) -> list[Path]:
    """The earlier reports a multi-trace run into ``folder`` removes: those the replaced
    ``combined.json`` lists in folders that none of ``reports`` (this run's) names, and
    the report of the earlier run's trace left in the folder of a trace of this run that
    failed (a trace of another path under the same folder name: this run wrote nothing
    there). Each only while it is still that trace's report (:func:`holds_report_of`).
    Read under the folder's lock (:func:`write_combined`)."""
    kept = {r.folder for r in reports}
    failed = [r for r in reports if r.error is not None]
    gone = []
    for path, name in dict.fromkeys(listed_reports(folder)):
        replaced = name in kept and any(r.folder == name and r.path != path for r in failed)
        if (name not in kept or replaced) and holds_report_of(folder / name, path):
            gone.append(folder / name)
    return gone


def check_removable(folders: Sequence[Path]) -> None:
    """Refuse earlier reports that could not be removed (:func:`~launchprof.report.checks.unreplaceable`).

    Raises:
        OutputError: "cannot remove the earlier report in FOLDER: why; ...".
    """
    for old in folders:
        why = unreplaceable(old, analysis_files())
        if why is not None:
            raise OutputError(
                f"cannot remove the earlier report in {old}: {why}; fix it or use --output to choose another folder"
            )


def remove_reports(folders: Sequence[Path]) -> None:
    """Remove the earlier reports in ``folders`` (:func:`unlisted_reports`; a ``before_move``
    of :func:`write_combined`, their locks held): every one checked first
    (:func:`check_removable`), so one that cannot be removed stops the run before anything
    changed; one whose removal still fails (an I/O error) leaves the replaced document,
    which still names what is left, and the next run removes it (:func:`remove_report`).

    Raises:
        OutputError: "cannot remove the earlier report in FOLDER: why".
    """
    check_removable(folders)
    for old in folders:
        remove_report(old)


RANK_REPORTS = "ranks"  # the side folder of the multi-trace writer that holds the rank reports until they move in


def open_combined_folder(
    folder: Path, force: bool = False, same_input: Callable[[Path], str | None] | None = None
) -> FolderWriter:
    """The writer of a multi-trace folder, opened before the traces are analysed: each
    trace's report is written into its :meth:`~launchprof.report.folder.FolderWriter.side_folder`
    (:func:`rank_reports`) and moves into ``folder`` with ``combined.json``
    (:func:`write_combined`), so an interrupted or failed run leaves the earlier report,
    rank folders included, as it was. ``same_input`` (e.g. :func:`same_reports`): a
    multi-trace report of this run's inputs is replaced without ``force``.

    Raises:
        OutputError: as :class:`~launchprof.report.folder.FolderWriter`.
    """
    names = (*(o.name for o in COMBINED_OUTPUTS), VENDORED_JS)
    return FolderWriter(folder, force, COMBINED_FILES, names, same_input=same_input)


def rank_reports(writer: FolderWriter) -> Path:
    """The folder to write the rank reports into (``<rank reports>/<report folder>``, as
    ``launchprof analyze TRACE --output`` writes one), inside ``writer``'s staging folder.

    Raises:
        OutputError: it cannot be made.
    """
    return writer.side_folder(RANK_REPORTS)


def write_combined(combined: Combined, writer: FolderWriter, force: bool = False) -> CombinedSummary:
    """Write the files of :data:`COMBINED_OUTPUTS` (``combined.html``, ``combined.json``)
    and ``plotly.min.js`` with ``writer`` (:func:`open_combined_folder`), and the rank
    reports written into :func:`rank_reports`, as one
    (:func:`~launchprof.report.folder.commit_together`): the folder's lock, then those of
    the rank folders and of the earlier reports this run removes (:func:`unlisted_reports`:
    a report of a trace or process of the earlier run must not stay beside this run's);
    every rank folder checked as ``launchprof analyze TRACE`` checks its folder (a report
    of another trace needs ``force``: :func:`~launchprof.report.write.open_report_folder`;
    one that cannot take the files); then, with Ctrl-C and SIGTERM held, the earlier
    reports are removed (:func:`remove_reports`), the rank reports move in, then this
    run's files. Last, each rank folder's ``plotly.min.js`` becomes a hard link to the
    folder's (one copy).

    Raises:
        OutputError: the folder holds a multi-trace report of other inputs and ``force``
            is False (one written since the run began), holds another kind of report, or
            cannot be written; a rank folder holds a report of another trace and ``force``
            is False, or cannot take the files; an earlier report cannot be removed. Each
            before anything of this run's moved in.
    """
    folder = writer.folder
    result = CombinedResult(combined, build_combined(combined))
    staged = rank_reports(writer)
    order = stage_rendered(writer, COMBINED_OUTPUTS, result)
    with contextlib.ExitStack() as opened:
        ranks = []
        for rep in combined.reports:
            written = staged / rep.folder
            if not (written / SUMMARY).is_file():
                continue  # the trace failed before its report was written
            rank = opened.enter_context(open_report_folder(folder / rep.folder, force, Path(rep.path)))
            rank.adopt(written)
            ranks.append((rank, REPORT_ORDER))
        gone: list[Path] = []

        def earlier() -> list[Path]:  # read under the folder's lock; their locks are taken with the ranks'
            gone[:] = unlisted_reports(folder, combined.reports)
            return gone

        def remove() -> None:  # read again under their locks: one may hold another trace's report by now
            remove_reports([old for old in unlisted_reports(folder, combined.reports) if old in gone])

        commit_together((writer, order), ranks, before_move=remove, also_locked=earlier)
    for rep in combined.reports:
        if rep.error is None:
            _link_plotlyjs(folder, folder / rep.folder)
    return result.doc


def _link_plotlyjs(top: Path, folder: Path) -> None:
    """Replace ``folder/plotly.min.js`` by a hard link to ``top/plotly.min.js`` (same
    bytes, one copy on disk); left as written where links are not possible."""
    src, dst = top / VENDORED_JS, folder / VENDORED_JS
    tmp = folder / f".{VENDORED_JS}.link"
    try:
        if dst.exists() and os.path.samefile(src, dst):
            return
        if tmp.exists():
            tmp.unlink()
        os.link(src, tmp)
        os.replace(tmp, dst)
    except OSError:
        pass
