"""``launchprof.step()``: mark one iteration of your loop so the analysis finds steps exactly.

It opens an NVTX push/pop range with the text ``step`` (or the name given) in the NVTX
domain ``launchprof``, through launchprof's own NVTX client (:mod:`launchprof.nvtx_api`: no
NVTX package needed, and any version of the PyPI ``nvtx`` package may stay installed)::

    import launchprof

    for batch in loader:
        with launchprof.step():
            train_step(batch)

    @launchprof.step()          # or @launchprof.step, or @launchprof.step("decode")
    def decode(tokens): ...

The analysis uses ranges named ``step`` in domain ``launchprof`` by default; another name
is picked with ``--step NAME``. When no profiler that records NVTX is attached, a step
does nothing but one attribute test.
Ranges are per thread: open and close a step on the same thread. On a generator function,
``@launchprof.step`` covers creating the generator, not its iteration: mark the loop body.

Step times without a profiler: when the environment variable ``LAUNCHPROF_STEP_TIMES``
names a file, every step also records ``time.perf_counter_ns()`` at its start and end
(appended to a list in memory) and the process appends them to that file once, at exit
(``atexit``), one line per step: ``NAME START_NS END_NS`` (perf_counter clock, so only
differences within one process mean anything). ``launchprof profile --baseline-runs N``
sets it for the runs it makes without nsys. The file format is read by
:func:`launchprof.trace.steptimes.read_step_times`. With ``LAUNCHPROF_STOP_AFTER=N`` too
(:data:`launchprof.defaults.STOP_AFTER_ENV`, set by those runs; ``N:NAME`` counts the steps
of that name only, default ``step``), the process writes the times and leaves
(``os._exit(0)``, output flushed; its own ``atexit`` handlers do not run) as soon as N such
steps are recorded: the run is there to time steps, and its own outputs are not needed.
Not in a distributed run (``WORLD_SIZE`` over 1), where a rank that left early would leave
the others waiting in a collective: it runs to its end.
"""

from __future__ import annotations

import atexit
import functools
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar, overload

from launchprof import nvtx_api
from launchprof.defaults import STEP_DOMAIN, STEP_NAME, STOP_AFTER_ENV

F = TypeVar("F", bound=Callable[..., Any])

_NVTX = nvtx_api.client()
_ACTIVE = _NVTX is not None
_DOMAIN = _NVTX.domain(STEP_DOMAIN) if _NVTX is not None else None


def _push(name: str) -> None:
    _NVTX.push(_DOMAIN, name)  # type: ignore[union-attr]


def _pop() -> None:
    _NVTX.pop(_DOMAIN)  # type: ignore[union-attr]


STEP_TIMES_ENV = "LAUNCHPROF_STEP_TIMES"
_TIMES_PATH = os.environ.get(STEP_TIMES_ENV) or None
_times: list[tuple[str, int, int]] = []
_now = time.perf_counter_ns


def _stop_after() -> tuple[int, str]:
    """``(N, NAME)`` of ``LAUNCHPROF_STOP_AFTER=N[:NAME]`` (NAME default ``step``); ``(0, "")``
    without the step-times file, for a bad value, and in a distributed run (``WORLD_SIZE``
    over 1: a rank that left early would leave the others waiting in a collective)."""
    value = os.environ.get(STOP_AFTER_ENV) or ""
    if not _TIMES_PATH or not value or os.environ.get("WORLD_SIZE", "1").strip() not in ("", "1"):
        return 0, ""
    count, _, name = value.partition(":")
    try:
        return max(int(count), 0), name or STEP_NAME
    except ValueError:
        return 0, ""


_STOP_AFTER, _STOP_NAME = _stop_after()
_stop_seen = 0


def _one_line(name: str) -> str:
    return name.replace("\r", " ").replace("\n", " ")


def _write_times(path: str = _TIMES_PATH or "") -> None:
    """Append the recorded steps to ``path`` in one write (called at exit); a file that
    cannot be written gets one line on stderr, not a traceback."""
    if not path or not _times:
        return
    # a line per step: a name's line breaks would start lines of their own
    text = "".join(f"{_one_line(name)} {start} {end}\n" for name, start, end in _times)
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        import sys

        print(f"launchprof: cannot write the step times to {path} ({exc.strerror or exc})", file=sys.stderr)
    _times.clear()


if _TIMES_PATH:
    atexit.register(_write_times)


def _recorded(name: str, start: int, end: int) -> None:
    """Keep one step's times; leave the process once :data:`_STOP_AFTER` steps named
    :data:`_STOP_NAME` are kept."""
    global _stop_seen
    _times.append((name, start, end))
    if not _STOP_AFTER or name != _STOP_NAME:
        return
    _stop_seen += 1
    if _stop_seen >= _STOP_AFTER:
        import sys

        _write_times()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(0)


class Step:
    """An NVTX range ``name`` in domain ``launchprof``: a context manager and a decorator."""

    __slots__ = ("name", "_starts")

    def __init__(self, name: str = STEP_NAME) -> None:
        self.name = name
        self._starts: list[int] = []

    def __enter__(self) -> Step:
        if _TIMES_PATH:
            self._starts.append(_now())
        if _ACTIVE:
            _push(self.name)
        return self

    def __exit__(self, *exc: object) -> None:
        if _ACTIVE:
            _pop()
        if _TIMES_PATH and self._starts:
            _recorded(self.name, self._starts.pop(), _now())

    def __call__(self, func: F) -> F:
        name = self.name

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not _ACTIVE and not _TIMES_PATH:
                return func(*args, **kwargs)
            start = _now() if _TIMES_PATH else 0
            if _ACTIVE:
                _push(name)
            try:
                return func(*args, **kwargs)
            finally:
                if _ACTIVE:
                    _pop()
                if _TIMES_PATH:
                    _recorded(name, start, _now())

        return wrapper  # type: ignore[return-value]


@overload
def step(name: str = STEP_NAME) -> Step: ...


@overload
def step(name: F) -> F: ...


def step(name: Any = STEP_NAME) -> Any:
    """A step marker: ``with step():``, ``@step()``, ``@step`` or ``step("decode")``.

    Args:
        name: the NVTX range text (default ``"step"``); a function when used as a bare
            decorator.

    Returns:
        a :class:`Step` (context manager and decorator), or the wrapped function.
    """
    if callable(name):
        return Step()(name)
    return Step(str(name))


def nvtx_active() -> bool:
    """Whether step markers emit NVTX ranges in this process (a profiler's NVTX injection is loaded)."""
    return _ACTIVE
