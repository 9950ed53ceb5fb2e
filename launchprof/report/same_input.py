"""Whether a report folder holds a report of this run's inputs: the same trace (or
traces) analysed again replaces its report without ``--force``
(:class:`~launchprof.report.folder.FolderWriter`'s ``same_input``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def resolved_path(path: object) -> str | None:
    """``path`` (a str or Path) resolved from the working folder: how a report names the
    same file as a run's input (:func:`report_of`); None when it is not a usable path."""
    try:
        return str(Path(path).resolve()) if isinstance(path, (str, Path)) else None
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL
        return None


def report_of(name: str, inputs: Mapping[tuple[str, ...], Path]) -> Callable[[Path], str | None]:
    """A ``same_input`` check for :class:`~launchprof.report.folder.FolderWriter`: the folder's report is of this
    run's input when its JSON file ``name`` holds, at each key path of ``inputs`` (e.g.
    ``("trace", "path")`` in summary.json), a path naming the same file as the input
    (both resolved from the working folder). Else it says what the report is of: the
    other paths, or "another run" when the file cannot be read."""

    def check(folder: Path) -> str | None:
        try:
            doc = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "another run"
        others = []
        for keys, wanted in inputs.items():
            value: Any = doc
            for key in keys:
                value = value.get(key) if isinstance(value, dict) else None
            mine = resolved_path(value)
            if mine is None or mine != resolved_path(wanted):
                others.append(str(value) if isinstance(value, str) else "another run")
        return " and ".join(others) if others else None

    return check
