"""The checks of option values shared by the commands, and the reader of ``launchprof
profile``'s fast path (:func:`parse_profile`), made from the same table as the Typer
command (:data:`launchprof.cli.optiontables.PROFILE`; every command's table and the command
line's defaults are in :mod:`launchprof.cli.optiontables`).

No Typer here: ``launchprof profile`` reads its command line and checks its options
before Typer is imported (:mod:`launchprof.cli.entry`).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launchprof.cli.optiontables import PROFILE, Option
from launchprof.defaults import COMPARE_VERDICTS, DIAGNOSIS_VERDICTS
from launchprof.errors import OptionError

MAX_LABEL = 100  # characters of a default folder's name taken from the input's (file names end at 255 bytes)
MAX_BUBBLE_THRESHOLD_US = 1e9  # 1000 s: longer than any gap a threshold could sort


def default_output(stem: str) -> Path:
    """``reports/<stem>`` under the current folder. A stem longer than :data:`MAX_LABEL`
    characters is cut and ends in ``-`` and 8 hex digits of its SHA-1, so two long names
    that differ only after the cut get two folders (one was refused, or overwritten with
    ``--force``)."""
    if len(stem) <= MAX_LABEL:
        return Path("reports") / stem
    digest = hashlib.sha1(stem.encode("utf-8", "surrogateescape"), usedforsecurity=False).hexdigest()[:8]
    return Path("reports") / f"{stem[: MAX_LABEL - 9]}-{digest}"


def bubble_threshold_ns(us: float) -> int:
    """``--bubble-threshold`` (us) in ns.

    Raises:
        OptionError: a value that is not a finite number of us in
            [0, :data:`MAX_BUBBLE_THRESHOLD_US`].
    """
    if not (math.isfinite(us) and 0 <= us <= MAX_BUBBLE_THRESHOLD_US):
        raise OptionError(
            f"--bubble-threshold must be a number of us from 0 to {MAX_BUBBLE_THRESHOLD_US:g}, not {us!r}"
        )
    return int(round(us * 1000))


def min_effect(percent: float) -> float:
    """``--min-effect`` (percent) as a fraction.

    Raises:
        OptionError: a value that is not a finite number >= 0 (NaN passed Typer's bound).
    """
    if not (math.isfinite(percent) and percent >= 0):
        raise OptionError(f"--min-effect must be a finite number of percent >= 0, not {percent!r}")
    return percent / 100


def non_empty(option: str, value: str, what: str) -> str:
    """``value`` of ``option`` when it is not empty (an empty path is not the current folder).

    Raises:
        OptionError: an empty value.
    """
    if not value:
        raise OptionError(f"{option} needs {what}, not an empty word")
    return value


def step_text(step: str | None) -> str | None:
    """``--step`` as given; None when not given.

    Raises:
        OptionError: an empty or blank name.
    """
    if step is not None and not step.strip():
        raise OptionError("--step needs the text of an NVTX range (for example --step step)")
    return step


def output_folder(option: str, value: str) -> str:
    """``--output`` as given, refused when it is ``-`` (launchprof writes a folder, never a
    stream: ``--json`` puts the document on stdout), empty (not the current folder), or the
    file system's root.

    Raises:
        OptionError: ``-``, an empty word, ``/``.
    """
    if value == "-":
        raise OptionError(
            f"{option} - would make a folder named '-': launchprof writes a report folder; "
            "use --json for the document on stdout"
        )
    non_empty(option, value, "a folder")
    if os.path.realpath(value) == os.path.realpath("/"):  # realpath: a symlink loop is no error here
        raise OptionError(f"{option} {value} is the file system's root: name a folder for the report")
    return value


def output_path(option: str, value: str | None) -> Path | None:
    """``--output`` (:func:`output_folder`) as a path; None when not given.

    Raises:
        OptionError: as :func:`output_folder`.
    """
    return None if value is None else Path(output_folder(option, value))


def fail_on(text: str | None, verdicts: Sequence[str]) -> frozenset[str]:
    """The verdicts a ``--fail-on`` value names, out of ``verdicts`` (comma separated;
    ``none`` or None: no verdict). The one parser of ``analyze``, ``profile``, ``compare``
    and ``check``, which call it before any work starts (a mistyped verdict after two
    profiled workloads would lose them).

    Raises:
        OptionError: an unknown verdict or an empty list (the message lists the known ones).
    """
    if text is None:
        return frozenset()
    words = {w.strip() for w in text.split(",") if w.strip()}
    if words == {"none"}:
        return frozenset()
    unknown = sorted(words - set(verdicts))
    if unknown or not words:
        raise OptionError(
            f"--fail-on: unknown verdict {', '.join(map(repr, unknown)) or repr(text)} "
            f"(choose from {', '.join(verdicts)}, or none)"
        )
    return frozenset(words)


def analyze_fail_on(text: str | None) -> frozenset[str]:
    """:func:`fail_on` of ``analyze`` and ``profile``: the verdicts of a diagnosis."""
    return fail_on(text, DIAGNOSIS_VERDICTS)


def compare_fail_on(text: str | None) -> frozenset[str]:
    """:func:`fail_on` of ``compare`` and ``check``: the verdicts of a comparison."""
    return fail_on(text, COMPARE_VERDICTS)


def min_gain(pct: float | None) -> float | None:
    """``--min-gain`` (percent) as a speedup factor (25 -> 1.25); None when not given.

    Raises:
        OptionError: not a finite number >= 0.
    """
    if pct is None:
        return None
    if not (math.isfinite(pct) and pct >= 0):
        raise OptionError(f"--min-gain must be a percentage >= 0 (25 for 1.25x), not {pct!r}")
    return 1 + pct / 100


def time_range(text: str | None) -> tuple[float, float] | None:
    """``--time-range START:END`` (seconds of the trace's clock) as ``(start, end)``; None
    when not given. The range's rule is :func:`launchprof.trace.columns.window_ns`'s.

    Raises:
        OptionError: not two numbers around one colon, or not ``0 <= START < END``.
    """
    if text is None:
        return None
    from launchprof.trace.columns import window_ns  # numpy: not on profile's fast path

    start, colon, end = text.partition(":")
    try:
        if not colon:
            raise ValueError
        window = (float(start), float(end))
        window_ns(window)
    except ValueError:
        raise OptionError(
            f"--time-range takes START:END in seconds of the trace's clock, 0 <= START < END (e.g. 5:6.5), not {text!r}"
        ) from None
    return window


def options_after_target(words: list[str], options: set[str] | frozenset[str]) -> list[str]:
    """The words after a ``profile`` TARGET that are launchprof options (``--open``,
    ``--output=DIR``, ``-o``, ...): they go to the workload, which is rarely what was meant."""
    found = []
    for word in words:
        name = word.partition("=")[0] if word.startswith("--") else word
        if name in options and name not in found:
            found.append(name)
    return found


def meant_command(target: Sequence[str], options: set[str] | frozenset[str]) -> list[str]:
    """The ``launchprof profile`` command line probably meant when launchprof's ``options``
    were written after TARGET: those options (with their values, per
    :data:`~launchprof.cli.optiontables.PROFILE`) moved before TARGET, the rest left in order."""
    moved: list[str] = []
    rest: list[str] = [target[0]] if target else []
    words = list(target[1:])
    i = 0
    while i < len(words):
        word = words[i]
        name = word.partition("=")[0] if word.startswith("--") else word
        opt = _PROFILE_BY_NAME.get(name)
        if name in options and opt is not None:
            takes = opt.kind != "flag" and "=" not in word
            moved += words[i : i + 1 + int(takes)]
            i += 1 + int(takes)
            continue
        rest.append(word)
        i += 1
    return ["launchprof", "profile", *moved, *rest]


_PROFILE_BY_NAME = {name: opt for opt in PROFILE.options for name in opt.names}
# launchprof options that, written after TARGET, go to the workload: worth a warning, with the
# command line that was probably meant (a workload's own `-o` gets the line too: one line).
AFTER_TARGET_WARNED = frozenset([name for opt in PROFILE.options for name in opt.names])


def profile_defaults() -> dict[str, Any]:
    """The parameters of ``launchprof profile`` when no option is given."""
    return {"target": [], **{opt.param: opt.default for opt in PROFILE.options}}


def _convert(opt: Option, value: str) -> Any:
    """The value as Typer gives it; raises ValueError where Typer would refuse or convert
    otherwise."""
    if opt.kind in ("float", "int"):
        number = float(value) if opt.kind == "float" else int(value)
        if (opt.min is not None and number < opt.min) or (opt.max is not None and number > opt.max):
            raise ValueError(value)
        return number
    return Path(value) if opt.kind == "path" else value


def parse_profile(args: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of ``launchprof profile ARGS`` (:func:`profile_defaults`' keys), as
    the Typer command made from :data:`~launchprof.cli.optiontables.PROFILE` would parse them, or None when ARGS
    hold anything this reader leaves to Typer: ``-h``/``--help``, an option it does not know
    (``-m`` before a module name excepted: TARGET), ``--opt=`` on a flag, a value Typer
    would check or convert (a number out of range or malformed), an option
    without its value, or no TARGET. Options come before TARGET; from TARGET (or after
    ``--``) every word goes to the workload unchanged, as Typer does with this command's
    settings (no interspersed options, unknown options kept)."""
    params = profile_defaults()
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            params["target"] = list(args[i + 1 :])
            break
        if word == "-m":  # `-m module`: Typer keeps the unknown option, then the module ends the options
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            params["target"] = list(args[i:])
            break
        if len(word) < 2 or not word.startswith("-"):
            params["target"] = list(args[i:])
            break
        name, eq, value = word.partition("=") if word.startswith("--") else (word, "", "")
        opt = _PROFILE_BY_NAME.get(name)
        if opt is None:
            return None
        if opt.kind == "flag":
            if eq:
                return None
            params[opt.param] = True
            i += 1
            continue
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        try:
            converted = _convert(opt, value)
        except ValueError:
            return None
        if opt.kind == "texts":
            params[opt.param] = [*(params[opt.param] or []), converted]
        else:
            params[opt.param] = converted
        i += 1
    if not params["target"]:
        return None
    return params
