"""glibc malloc settings for the two phases of an analysis, when a program asks for them.

Loading a trace and analysing it want opposite settings (:meth:`MallocTuning.loading`,
:meth:`MallocTuning.analysing`). They change the whole process, so the library never sets
them on its own: the command line decides (it owns its process) and passes a
:class:`MallocTuning` to :func:`launchprof.api.analyze` (``memory=``); a notebook's
process is left alone. No-op off glibc.
"""

from __future__ import annotations

from typing import Any

# glibc mallopt parameters: M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_LIBC: list[Any] = []  # the C library once opened; empty when there is none (not glibc)


def _mallopt(settings: tuple[tuple[int, int], ...]) -> None:
    """Set glibc malloc parameters; no-op off glibc."""
    if not _LIBC:
        try:
            import ctypes

            _LIBC.append(ctypes.CDLL("libc.so.6").mallopt)
        except (OSError, AttributeError):
            _LIBC.append(None)
    if _LIBC[0] is not None:
        for param, value in settings:
            _LIBC[0](param, value)


class MallocTuning:
    """The settings of each phase (a picklable object without state: Dask workers get it
    as an argument)."""

    def loading(self) -> None:
        """While loading: ask glibc to serve blocks >= 1 MiB by mmap, always, and to give
        freed memory back above 128 KiB (its default trim threshold).

        By default glibc raises the mmap threshold after large frees and then keeps freed
        batch buffers in its heap: loading 10M kernels peaked ~40 % higher."""
        _mallopt(((_M_MMAP_THRESHOLD, 1 << 20), (_M_TRIM_THRESHOLD, 128 << 10)))

    def analysing(self) -> None:
        """After loading: blocks up to 64 MiB come from the heap, and up to 64 MiB of freed
        heap is kept for reuse. The analysis makes and drops many arrays of a few MiB
        (columns of 100k-1M rows); served by mmap, each is a fresh mapping whose pages
        fault in one by one: with the heap, the timeline, steps, diagnosis and report of a
        360k-kernel trace took ~30 % less CPU (benchmarks/analyze_stages.py), for ~6 %
        more peak memory. Columns of more than 8M rows still get their own mappings."""
        _mallopt(((_M_MMAP_THRESHOLD, 64 << 20), (_M_TRIM_THRESHOLD, 64 << 20)))
