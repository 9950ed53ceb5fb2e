"""Small pieces several commands share: the document on stdout, opening a page."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console


def print_document(text: str) -> None:
    """``--json``: the document alone on stdout."""
    sys.stdout.write(text)
    sys.stdout.flush()


def open_page(page: Path, err: Console) -> None:
    """Open ``page`` in the default browser; say so on ``err`` when there is none (a
    machine without a display): the page is written either way."""
    import webbrowser

    uri = page.resolve().as_uri()
    if not webbrowser.open(uri):
        err.print(f"launchprof: no browser to open here; the page is {uri}", markup=False, soft_wrap=True)
