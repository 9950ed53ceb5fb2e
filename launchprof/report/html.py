"""Assemble report pages (jinja2, autoescaped) and write report folders atomically.

Safety: jinja2 autoescapes every trace string in the page; figure JSON is embedded in
``<script type="application/json">`` with ``<``, ``>`` and ``&`` written as JSON
``\\u`` escapes, so no trace string can close the script element. plotly.js is written
next to the page (``plotly.min.js``), so the report opens offline.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from launchprof.errors import OutputError
from launchprof.report.checks import refuse_not_folder, refuse_other_kind, refuse_unreplaceable
from launchprof.report.plainfig import Figure
from launchprof.text import count_text, escape_controls, fmt_ms, fmt_num, fmt_pct, page_us, scope_text

# Part of the compiled templates' cache file names: Jinja checks a cached template by its
# source alone, but the Environment's options (``finalize``, ``autoescape``) are compiled
# into it. Change this with them (a cache of the pages without ``finalize`` wrote control
# characters through).
_CODEGEN = "f1"


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja's own cache of compiled templates (a private per-user folder in the temp
    folder, checked by source checksum, file names tagged :data:`_CODEGEN`): parsing and
    compiling the report templates costs ~50 ms a run otherwise. A failed write only means
    compiling again next time."""

    def __init__(self) -> None:
        super().__init__(pattern=f"__launchprof_{_CODEGEN}_%s.cache")

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _QuietBytecodeCache()
    except (OSError, RuntimeError):  # no usable temp folder, or an unsafe one: no cache
        return None


def _shown(value: Any) -> Any:
    """Each ``{{ }}`` value of a page: text with its control characters written as escapes
    (:func:`launchprof.text.escape_controls`: a name's ESC or NUL reached the page as is);
    markup made safe by launchprof (figure JSON, already escaped) and other values as they are."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return escape_controls(value)
    return value


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("launchprof.report", "templates"),
    autoescape=True,
    finalize=_shown,
    keep_trailing_newline=True,
    bytecode_cache=_bytecode_cache(),
)


_MICRO = re.compile(r"(\d) us\b")


def micro(text: Any) -> str:
    """A sentence of the analysis with ``12.3 us`` written ``12.3 µs`` (pages only)."""
    return _MICRO.sub("\\1 µs", str(text))


def printable(text: str) -> str:
    """A name from the file system as text that can be written as UTF-8: Linux file names
    are bytes, and Python gives a byte that is not UTF-8 as a lone surrogate
    (``os.fsdecode``), which no UTF-8 file, JSON or page can hold; each becomes U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def fs_url(name: str) -> str:
    """A file or folder name as a relative URL: its bytes percent-encoded (a name that is
    not UTF-8 is linked as it is on disk)."""
    from urllib.parse import quote

    return quote(os.fsencode(name))


_ENV.globals.update(us=page_us, ms=fmt_ms, pct=fmt_pct, num=fmt_num, count=count_text, scope=scope_text)
_ENV.filters.update(printable=printable, fs_url=fs_url, micro=micro)


@dataclass(frozen=True)
class EmbeddedFigure:
    """A figure ready for the page: caption text and escaped JSON."""

    caption: str
    json: str


def _strict_json(obj: Any) -> str:
    """Compact JSON with sorted keys; NaN and infinities written as null (as plotly does)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    if "NaN" in text or "Infinity" in text:
        text = json.dumps(json.loads(text, parse_constant=lambda _: None), sort_keys=True, separators=(",", ":"))
    return text


def embed(fig: Any, caption: str) -> EmbeddedFigure:
    """Serialise ``fig`` (a :class:`~launchprof.report.plainfig.Figure` or a plotly
    ``go.Figure``) for a ``<script type="application/json">`` block, escaped."""
    text = _strict_json(fig.to_dict() if isinstance(fig, Figure) else json.loads(fig.to_json()))
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return EmbeddedFigure(caption, text)


def render(template: str, **context: object) -> str:
    """Render a packaged template with autoescaping."""
    return _ENV.get_template(template).render(**context)


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``: a failed
    write never leaves a partial file in place of a good one.

    Raises:
        OutputError: the folder is not writable or the disk is full.
    """
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_name, 0o666 & ~umask)
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def prepare_folder(folder: Path, force: bool, produced: Iterable[str]) -> None:
    """Create ``folder``; refuse an existing one holding any of ``produced`` unless ``force``.

    Raises:
        OutputError: the folder exists with earlier results and ``force`` is False,
            is a file, or cannot be created.
    """
    check_folder(folder, force, produced)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create {folder}: {exc.strerror or exc}") from None
    refuse_unreplaceable(folder, ())


def check_folder(folder: Path, force: bool, produced: Iterable[str], writes: Iterable[str] = ()) -> None:
    """Refuse ``folder`` as :func:`prepare_folder` does, without making it; and one that
    could not take the files ``writes`` (:func:`~launchprof.report.checks.refuse_unreplaceable`).

    Raises:
        OutputError: the folder exists with earlier results and ``force`` is False, is a
            file, or cannot take the files.
    """
    refuse_not_folder(folder)
    produced = tuple(produced)
    if folder.exists() and not force and any((folder / name).exists() for name in produced):
        raise OutputError(
            f"{folder} already holds a report; use --force to overwrite or --output to choose another folder"
        )
    refuse_other_kind(folder, produced)
    refuse_unreplaceable(folder, writes)
