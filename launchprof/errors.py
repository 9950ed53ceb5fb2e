"""Errors that reach the user as one line.

Every failure the user can cause or fix (a missing file, a trace that is not an nsys
export, an output folder that exists) is raised as a :class:`LaunchprofError` subclass.
The CLI prints ``launchprof: error: <message>`` and exits with ``exit_code``; it never
prints a traceback for these.
"""

from __future__ import annotations


class LaunchprofError(Exception):
    """A user-facing failure: one line of text, a non-zero exit code."""

    exit_code: int = 2


class TraceError(LaunchprofError):
    """The trace cannot be read as an Nsight Systems SQLite export."""


class TraceTooLargeError(LaunchprofError):
    """The rows to analyse (a whole trace, one process's, one window's) need more memory
    than this process can have (:func:`launchprof.trace.footprint.check_fits`)."""


class NoCudaActivityError(TraceError):
    """The trace holds no CUDA activity tables, so no GPU figure can be computed."""


class NsysError(LaunchprofError):
    """nsys (or its importer) is missing or failed."""


class OutputError(LaunchprofError):
    """The output folder cannot be written (exists without --force, read-only, disk full)."""


class CalibrateFailed(LaunchprofError):
    """Calibration cannot run here (no GPU, no cuda-python) or a CUDA call failed."""


class OptionError(LaunchprofError):
    """An option's value is outside what it can mean."""
