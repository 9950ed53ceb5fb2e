"""Ctrl-C, SIGTERM and SIGHUP held back while a block runs (the renames that move a
report folder's files in, :mod:`launchprof.report.folder`), then handled as they would
have been."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done; then each one that came is
    handled, in the order they came, as it would have been (its handler called, or its
    default action); the first exception a handler raises is raised after them all.

    In the main thread the Python handlers are swapped for one that only notes the signal:
    blocking the signals (``pthread_sigmask``) would hold them back from this thread only,
    and the kernel gives a process's signal to any thread that does not block it (a
    progress spinner's, a reader's), after which Python runs the handler in the main thread
    at its next bytecode, in the middle of the block. A signal that is ignored, or whose
    handler was installed from C (:func:`signal.getsignal` gives None), is left alone. In
    another thread nothing is swapped: Python runs its signal handlers in the main thread
    only, so none interrupts this thread's block.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    holding = [True]
    previous: dict[int, Any] = {}

    def note(signum: int, _frame: object) -> None:
        if holding[0]:
            came.append(signum)
        else:  # came while the handlers were being put back
            _deliver(signum, previous[signum])

    for sig in _HELD_SIGNALS:
        current = signal.getsignal(sig)
        if current is not None and current != signal.SIG_IGN:
            previous[sig] = signal.signal(sig, note)
    try:
        yield
    finally:
        holding[0] = False
        for held, handler in previous.items():
            signal.signal(held, handler)
        error: BaseException | None = None
        for signum in dict.fromkeys(came):  # each signal once, in the order they came
            try:
                _deliver(signum, previous[signum])
            except BaseException as exc:  # noqa: BLE001 - raised below, after the others are handled
                error = error or exc
        if error is not None:
            raise error


def _deliver(signum: int, handler: Any) -> None:
    """Handle ``signum`` as ``handler`` (what :func:`signal.signal` returned) would have:
    call it, or take the default action (:data:`signal.SIG_DFL`: SIGTERM and SIGHUP end the
    process, as does SIGINT; Python's own SIGINT handler, which raises KeyboardInterrupt, is
    a callable)."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)
