"""The step marker the examples share: one NVTX push/pop range named ``step`` per iteration.

launchprof finds the iterations of a loop by NVTX ranges named ``step`` in the NVTX domain
``launchprof``. This helper uses the PyPI ``nvtx`` package when it is importable, else
``torch.cuda.nvtx`` (default domain), else marks nothing and says so once on stderr.

    from _step import step
    for i in range(steps):
        with step():
            ...  # launch the work of one iteration
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

DOMAIN = "launchprof"
NAME = "step"


def _pick() -> tuple[str, Callable[[], object], Callable[[], object]]:
    try:
        from importlib.metadata import PackageNotFoundError, version

        import nvtx  # type: ignore[import-not-found]

        try:
            found = version("nvtx")
        except PackageNotFoundError:
            found = "?"
        return (
            f"nvtx {found} (domain {DOMAIN})",
            lambda: nvtx.push_range(NAME, domain=DOMAIN),
            lambda: nvtx.pop_range(domain=DOMAIN),
        )
    except ImportError:
        pass
    try:
        import torch

        return (
            "torch.cuda.nvtx (default domain)",
            lambda: torch.cuda.nvtx.range_push(NAME),
            lambda: torch.cuda.nvtx.range_pop(),
        )
    except ImportError:
        print("step marker: neither nvtx nor torch importable, steps are not marked", file=sys.stderr)
        return ("none", lambda: None, lambda: None)


MARKER, _push, _pop = _pick()


@contextlib.contextmanager
def step() -> Iterator[None]:
    """Mark one iteration as an NVTX range ``step``."""
    _push()
    try:
        yield
    finally:
        _pop()
