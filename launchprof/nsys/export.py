"""Export an ``.nsys-rep`` report to SQLite with ``nsys export``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from launchprof.errors import NsysError
from launchprof.nsys.locate import find_nsys


def export_sqlite(report: Path, nsys: str | None = None, output: Path | None = None) -> Path:
    """Export ``report`` (.nsys-rep) to SQLite and return the .sqlite path.

    The SQLite file is written next to the report (same stem) unless ``output`` is
    given; an existing export newer than the report is reused. The report itself is
    never modified or removed.

    Raises:
        NsysError: nsys is missing, or the export failed (its last error line is quoted).
    """
    target = output or report.with_suffix(".sqlite")
    if target.exists() and target.stat().st_mtime >= report.stat().st_mtime:
        return target
    exe = find_nsys(nsys)
    # Absolute paths: a relative one starting with '-' (an --output named '-x') is read as an option.
    cmd = [
        str(exe), "export", "--type", "sqlite", "--force-overwrite", "true",
        "--output", str(Path(target).absolute()), str(Path(report).absolute()),
    ]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        raise NsysError(f"cannot run {exe}: {exc.strerror}") from None
    if done.returncode != 0 or not target.exists():
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise NsysError(f"nsys export of {report} failed: {last}")
    return target
