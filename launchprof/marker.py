"""``launchprof.step()``: mark one iteration of your loop so the analysis finds steps exactly.

It opens an NVTX push/pop range with the text ``step`` (or the name given) in the NVTX
domain ``launchprof``, through the PyPI ``nvtx`` package::

    import launchprof

    for batch in loader:
        with launchprof.step():
            train_step(batch)

    @launchprof.step()          # or @launchprof.step, or @launchprof.step("decode")
    def decode(tokens): ...

The analysis uses ranges named ``step`` in domain ``launchprof`` by default; another name
is picked with ``--step NAME``. Without the ``nvtx`` package, or when no profiler is
attached (nvtx reports itself disabled), a step does nothing but one attribute test.
Ranges are per thread: open and close a step on the same thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, overload

STEP_DOMAIN = "launchprof"
STEP_NAME = "step"

F = TypeVar("F", bound=Callable[..., Any])

try:  # pragma: no cover - depends on the environment
    import nvtx as _nvtx

    _enabled = getattr(_nvtx, "enabled", lambda: True)
    _ACTIVE = bool(_enabled())
    _push = _nvtx.push_range
    _pop = _nvtx.pop_range
except ImportError:  # pragma: no cover - depends on the environment
    _ACTIVE = False


class Step:
    """An NVTX range ``name`` in domain ``launchprof``: a context manager and a decorator."""

    __slots__ = ("name",)

    def __init__(self, name: str = STEP_NAME) -> None:
        self.name = name

    def __enter__(self) -> Step:
        if _ACTIVE:
            _push(self.name, domain=STEP_DOMAIN)
        return self

    def __exit__(self, *exc: object) -> None:
        if _ACTIVE:
            _pop(domain=STEP_DOMAIN)

    def __call__(self, func: F) -> F:
        name = self.name

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not _ACTIVE:
                return func(*args, **kwargs)
            _push(name, domain=STEP_DOMAIN)
            try:
                return func(*args, **kwargs)
            finally:
                _pop(domain=STEP_DOMAIN)

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
    """Whether step markers emit NVTX ranges in this process (nvtx installed and enabled)."""
    return _ACTIVE
