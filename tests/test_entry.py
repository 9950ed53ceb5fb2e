"""launchprof.cli.entry: `launchprof profile` read without Typer, exactly as Typer reads it.

The reference is the Typer app itself: the words go through `launchprof.cli.typer_app.app` with the
command's body replaced by a recorder, and what Typer hands the body must equal what
`parse_profile` returns, whenever `parse_profile` returns anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import launchprof.cli.typer_app as cli
from launchprof.cli.options import parse_profile, profile_defaults


def typer_params(words: list[str]) -> dict[str, Any] | None:
    """What Typer passes to the body of `launchprof profile WORDS`; None when Typer
    refuses the words (usage error, help)."""
    seen: list[tuple[Any, ...]] = []

    def record(**params: Any) -> int:
        seen.append(params)
        return 0

    original = cli.profile_command
    cli.profile_command = record  # type: ignore[assignment]
    try:
        result = CliRunner().invoke(cli.app, ["profile", *words])
    finally:
        cli.profile_command = original  # type: ignore[assignment]
    if not seen:
        assert result.exit_code != 0 or "--help" in words or "-h" in words, result.output
        return None
    assert list(seen[0]) == list(profile_defaults())
    return normal(dict(seen[0]))


def normal(params: dict[str, Any]) -> dict[str, Any]:
    out = dict(params)
    out["target"] = list(out["target"])
    out["nsys_arg"] = list(out["nsys_arg"] or [])
    out["output"] = None if out["output"] is None else str(out["output"])
    out["bubble_threshold"] = repr(out["bubble_threshold"])  # nan == nan
    return out


COMMON = [
    ["train.py"],
    ["train.py", "--steps", "10", "-o", "x", "--help"],  # after TARGET: the workload's
    ["-o", "out dir", "train.py", "a b"],
    ["--output=out", "--step", "decode", "--bubble-threshold", "2.5", "x.py"],
    ["--nsys", "/opt/nsys", "--nsys-arg", "--delay 5", "--nsys-arg=--duration=3", "x.py"],
    ["--nsys-arg", "--trace=cuda", "x.py"],  # a value that looks like an option
    ["--open", "--baseline-runs", "3", "x.py"],
    ["--baseline-runs", "0", "--baseline-runs", "100", "x.py"],  # the last one counts
    ["-m", "pkg.mod", "--flag"],
    ["-o", "o", "-m", "pkg.mod"],
    ["--", "-weird", "-o", "x"],
    ["--", "x.py"],
    ["--bubble-threshold", "1_0", "--baseline-runs", " 5", "x.py"],  # Python's int/float spellings
    ["--bubble-threshold", "nan", "x.py"],  # a float Typer passes on (the body refuses it)
    ["--step", "", "x.py"],  # likewise
    ["-o", "", "--nsys=", "x.py"],  # likewise
    ["-", "a"],
    ["", "a"],
    ["/usr/bin/env", "python3", "x.py"],
]

LEFT_TO_TYPER = [
    [],
    ["--help"],
    ["-h", "x.py"],
    ["--open=yes", "x.py"],
    ["--baseline-runs", "101", "x.py"],
    ["--baseline-runs", "-1", "x.py"],
    ["--baseline-runs", "abc", "x.py"],
    ["--bubble-threshold", "fast", "x.py"],
    ["-o"],
    ["-o", "out"],
    ["--unknown", "x.py"],
    ["-ox", "y.py"],
    ["-m"],
    ["-m", "-o", "d", "mod"],
    ["--"],
]


@pytest.mark.parametrize("words", COMMON, ids=lambda w: " ".join(w) or "empty")
def test_the_usual_command_lines_are_read_as_typer_reads_them(words: list[str]) -> None:
    fast = parse_profile(words)
    assert fast is not None, words
    assert normal(fast) == typer_params(words)


@pytest.mark.parametrize("words", LEFT_TO_TYPER, ids=lambda w: " ".join(w) or "empty")
def test_what_typer_must_judge_is_left_to_it(words: list[str]) -> None:
    assert parse_profile(words) is None


WORDS = st.sampled_from(
    ["-o", "--output", "--output=d", "--nsys", "--nsys-arg", "--nsys-arg=--x", "--step", "--bubble-threshold",
     "--baseline-runs", "--open", "--open=1", "-m", "--", "-", "-h", "--help", "-x", "x.py", "d", "3", "-2", "1e3",
     "inf", "101", "", " 7 ", "--bubble-threshold=0.5", "--baseline-runs=2"]
)  # fmt: skip


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=7))
def test_whatever_it_reads_typer_reads_the_same(words: list[str]) -> None:
    fast = parse_profile(words)
    if fast is not None:
        assert normal(fast) == typer_params(words), words


def test_nsys_starts_before_typer_is_imported(tmp_path: Path) -> None:
    """The installed entry point reads `profile ...` and starts nsys with neither Typer
    nor click (nor pandas) imported: `start_group`, which starts nsys, is replaced by one
    that prints what is imported at that moment."""
    script = tmp_path / "w.py"
    script.write_text("pass\n")
    code = (
        "import sys\n"
        "import launchprof.nsys.profile as p\n"
        "def seen(argv, stdout=None):\n"
        "    print(sorted(m for m in ('typer', 'click', 'rich', 'pandas', 'numpy') if m in sys.modules))\n"
        "    print(argv[1])\n"
        "    raise SystemExit(0)\n"
        "p.start_group = seen\n"
        f"out, script = {str(tmp_path / 'out')!r}, {str(script)!r}\n"
        "sys.argv = ['launchprof', 'profile', '--nsys', sys.executable, '-o', out, script]\n"
        "from launchprof.cli.entry import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert lines == ["[]", "profile"], (done.stdout, done.stderr)


def test_the_installed_command_takes_the_entry_point() -> None:
    script = Path(sys.executable).with_name("launchprof")
    assert "launchprof.cli.entry" in script.read_text(), script.read_text()


LAUNCHPROF = str(Path(sys.executable).with_name("launchprof"))


@pytest.mark.parametrize(
    ("words", "names"),
    [
        (["profile", "--baseline-runs", "abc", "x.py"], ["--baseline-runs", "launchprof profile --help"]),
        (["profile", "--nsys-arg"], ["--nsys-arg", "launchprof profile --help"]),
        (["profile"], ["target", "launchprof profile --help"]),
        (["analyze", "--bubble-threshold", "x", "t.sqlite"], ["--bubble-threshold", "launchprof analyze --help"]),
        (["analyze", "--workers", "-1", "a", "b"], ["--workers", "launchprof analyze --help"]),
        (["compare", "only-one"], ["after", "launchprof compare --help"]),
        (["compare", "--nope", "a", "b"], ["--nope", "launchprof compare --help"]),
        (["bogus"], ["bogus", "launchprof --help"]),
    ],
)
def test_a_usage_error_is_one_line(tmp_path: Path, words: list[str], names: list[str]) -> None:
    done = subprocess.run([LAUNCHPROF, *words], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("launchprof: error: "), done.stderr
    for name in names:
        assert name in lines[0]


def test_no_arguments_still_print_the_help(tmp_path: Path) -> None:
    done = subprocess.run([LAUNCHPROF], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert "Usage: launchprof" in " ".join((done.stdout + done.stderr).split())
    assert "analyze" in done.stdout + done.stderr


def test_the_command_names_the_entry_knows_are_the_apps() -> None:
    import typer

    from launchprof.cli.optiontables import COMMANDS

    assert sorted(COMMANDS) == sorted(typer.main.get_command(cli.app).commands)  # type: ignore[attr-defined]
