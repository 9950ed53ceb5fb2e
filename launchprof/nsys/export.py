"""Export an ``.nsys-rep`` report to SQLite with ``nsys export``."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from launchprof.errors import NsysError
from launchprof.nsys.importer import last_message
from launchprof.nsys.locate import find_nsys


def export_sqlite(report: Path, nsys: str | None = None, output: Path | None = None) -> Path:
    """Export ``report`` (.nsys-rep) to SQLite and return the .sqlite path.

    The SQLite file is written next to the report (same stem) unless ``output`` is
    given, whole or not at all (exported under a name of its own, then renamed); an
    existing export newer than the report is reused. The report itself is never modified
    or removed.

    Raises:
        NsysError: nsys is missing, or the export failed (its last error line is quoted).
    """
    target = output or report.with_suffix(".sqlite")
    if target.exists() and target.stat().st_mtime >= report.stat().st_mtime:
        return target
    exe = find_nsys(nsys)
    # nsys writes into a name of this run's own beside the target, renamed over it once
    # complete: an interrupted export left a truncated .sqlite that every later run reused
    # ("not an SQLite file"), and a second run at once read the first one's half-written file.
    try:  # a name of its own (process, thread), short whatever the stem; nsys overwrites the file
        fd, name = tempfile.mkstemp(prefix=".launchprof-export-", suffix=".sqlite", dir=target.parent)
    except OSError as exc:
        raise NsysError(f"cannot write into {target.parent}: {exc.strerror}") from None
    os.close(fd)
    partial = Path(name)
    # Absolute paths: a relative one starting with '-' (an --output named '-x') is read as an option.
    cmd = [
        str(exe), "export", "--type", "sqlite", "--force-overwrite", "true",
        "--output", str(partial.absolute()), str(Path(report).absolute()),
    ]  # fmt: skip
    try:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
        except OSError as exc:
            raise NsysError(f"cannot run {exe}: {exc.strerror}") from None
        if done.returncode != 0 or not partial.exists():
            said = last_message(done.stderr + done.stdout, done.returncode)
            raise NsysError(f"nsys export of {report} failed: {said}")
        try:
            os.replace(partial, target)
        except OSError as exc:
            raise NsysError(f"cannot write {target}: {exc.strerror}") from None
    finally:
        partial.unlink(missing_ok=True)  # an interruption or a failure leaves nothing behind
    return target
