"""Checks of a report folder before a run writes into it
(:class:`~launchprof.report.folder.FolderWriter`, :func:`~launchprof.report.html.check_folder`):
what it is, which kind of report it holds, and whether it can take the files."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from launchprof.errors import OutputError
from launchprof.report.outputs import REPORT_DOCUMENTS


def unreplaceable(folder: Path, names: Iterable[str]) -> str | None:
    """Why a run could not replace or remove the files ``names`` in the existing folder
    ``folder`` (``os.replace`` and ``unlink`` refuse both cases): the folder is not
    writable, or one of ``names`` there is a folder; None when it can. Checked before the
    first file moves, so such a folder fails the run in one line, not half way through."""
    if not folder.is_dir():
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return "it is not writable"
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            return f"{path} is a folder"
    return None


def refuse_not_folder(folder: Path) -> None:
    """Refuse a ``folder`` path that names a file, or a link to nothing.

    Raises:
        OutputError: naming it.
    """
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder} exists and is not a folder")
    if folder.is_symlink() and not folder.exists():
        raise OutputError(f"{folder} is a link to nothing; remove it or use --output to choose another folder")


def refuse_unreplaceable(folder: Path, names: Iterable[str]) -> None:
    """Refuse ``folder`` when the files ``names`` could not be written into it
    (:func:`unreplaceable`).

    Raises:
        OutputError: "cannot write into FOLDER: why; ...".
    """
    why = unreplaceable(folder, names)
    if why is not None:
        raise OutputError(f"cannot write into {folder}: {why}; fix it or use --output to choose another folder")


def refuse_other_kind(folder: Path, produced: Iterable[str]) -> None:
    """Refuse ``folder`` when it holds another kind of report: one of
    :data:`~launchprof.report.outputs.REPORT_DOCUMENTS` that this run, writing ``produced``, would not replace
    (writing beside it would mix two reports in one folder), ``--force`` or not.

    Raises:
        OutputError: naming the other report's kind and document.
    """
    if not folder.is_dir():
        return
    mine = set(produced)
    for name, kind in REPORT_DOCUMENTS.items():
        if name not in mine and (folder / name).exists():
            raise OutputError(f"{folder} holds {kind} ({name}); remove it or use --output to choose another folder")
