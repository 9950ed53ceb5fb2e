"""``launchprof profile`` in-process (typer's CliRunner) with the real nsys, and the
target/argument handling that needs no nsys."""

from __future__ import annotations

import json
import os
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from conftest import nsys_flaked
from typer.testing import CliRunner

from launchprof.cli import app
from launchprof.commands.folders import default_folder
from launchprof.commands.profile import split_nsys_args
from launchprof.errors import NsysError
from launchprof.nsys.profile import PROFILE_FLAGS, TargetError, Workload, nsys_command, profile_options, workload

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples" / "cpu"
needs_nsys = pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys is not installed")
runner = CliRunner()


def invoke_retrying(args: list[str]):  # type: ignore[no-untyped-def]
    """``runner.invoke(app, args)``, once more if Debian's nsys 2022.4 failed to reach its
    agent and wrote no trace (see conftest.run_nsys_retrying)."""
    result = runner.invoke(app, args)
    if result.exit_code != 0 and nsys_flaked(result.output):
        result = runner.invoke(app, args)
    return result


def test_python_script_runs_with_this_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    assert workload([str(script), "a b", "--lr", "3"]) == Workload(
        [sys.executable, str(script), "a b", "--lr", "3"], "train"
    )


def test_module_and_executable_targets() -> None:
    assert workload(["-m", "pkg.mod", "-x"]) == Workload([sys.executable, "-m", "pkg.mod", "-x"], "pkg.mod")
    assert workload(["true", "1"]) == Workload(["true", "1"], "true")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ([], "nothing to profile"),
        (["-m"], "-m needs a module name"),
        (["missing.py"], "no such Python script: missing.py"),
        (["./not-here"], "not an executable file: ./not-here"),
        (["no-such-program-anywhere"], "not a Python script (.py) and not a program on PATH"),
    ],
)
def test_bad_targets(target: list[str], message: str) -> None:
    with pytest.raises(TargetError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        workload(target)


def test_default_folder_is_unique(tmp_path: Path) -> None:
    now = datetime(2026, 11, 29, 15, 4, 5, tzinfo=timezone.utc)
    first = default_folder("my model", tmp_path, now)
    assert first == tmp_path / "my_model-20261129T150405Z"
    first.mkdir()
    assert default_folder("my model", tmp_path, now) == tmp_path / "my_model-20261129T150405Z-2"


def test_nsys_args_are_split_and_output_is_refused() -> None:
    assert split_nsys_args(["--delay 5", "--stats=false"]) == ["--delay", "5", "--stats=false"]
    for bad in (["-o x"], ["--output=x"], ["--output", "x"]):
        with pytest.raises(TargetError, match="use launchprof's --output"):
            split_nsys_args(bad)
    with pytest.raises(TargetError, match=r"^--nsys-arg '\"unbalanced': no closing quotation$"):
        split_nsys_args(['"unbalanced'])  # was a ValueError traceback (breaker)


@pytest.mark.nsys
@needs_nsys
def test_nsys_command_has_the_flags_this_nsys_knows(tmp_path: Path) -> None:
    nsys = Path(shutil.which("nsys") or "")
    known = profile_options(str(nsys))
    assert {"--trace", "--sample", "--output", "--export"} <= known
    cmd = nsys_command(nsys, tmp_path / "trace", Workload(["prog", "x"], "prog"), ["--sample=cpu"])
    expected = [f for f in PROFILE_FLAGS if f.split("=")[0] in known and not f.startswith("--sample")]
    assert cmd.argv == [str(nsys), "profile", *expected, f"--output={tmp_path / 'trace'}", "--sample=cpu", "prog", "x"]
    assert cmd.dropped == [f for f in PROFILE_FLAGS if f.split("=")[0] not in known]


def test_flags_unknown_to_an_older_nsys_are_dropped(tmp_path: Path) -> None:
    """An nsys whose help lacks --cuda-graph-trace (a shell script standing in for one)."""
    old = tmp_path / "nsys"
    old.write_text(
        "#!/bin/sh\ncat <<'EOF'\nusage: nsys profile [<args>] [application] [<application args>]\n"
        "\t-t, --trace=\n\t-s, --sample=\n\t--cpuctxsw=\n\t--export=<format>[,<format>...]\n\t-o, --output=\nEOF\n"
    )
    old.chmod(0o755)
    cmd = nsys_command(old, tmp_path / "t", Workload(["prog"], "prog"))
    assert cmd.dropped == ["--cuda-graph-trace=node"]
    assert "--cuda-graph-trace=node" not in cmd.argv and "--trace=cuda,nvtx" in cmd.argv


def test_missing_script_is_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["profile", "nothere.py"])
    assert result.exit_code == 2
    assert result.output.strip() == "launchprof: error: no such Python script: nothere.py"
    assert not (tmp_path / "reports").exists()


def test_bad_nsys_path_is_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["profile", "--nsys", str(tmp_path / "nsys"), str(EXAMPLES / "fails.py")])
    assert result.exit_code == NsysError.exit_code
    assert "launchprof: error: nsys not found at" in result.output


@pytest.mark.nsys
@needs_nsys
def test_module_target_in_process_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mymod.py").write_text("import sys\nprint('module ran', sys.argv[1:])\nsys.exit(4)\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["profile", "-o", "out", "-m", "mymod", "--output", "x"])
    assert result.exit_code == 4, result.output
    assert "the workload exited with code 4; its trace is kept in out" in result.output
    assert (tmp_path / "out" / "trace.sqlite").is_file() and (tmp_path / "out" / "summary.json").is_file()
    assert not (tmp_path / "x").exists()


@pytest.mark.nsys
@needs_nsys
def test_double_dash_before_target_and_options_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["-o", "inner", "--step", "s", "--"]
    result = invoke_retrying(
        [
            "profile",
            "--output",
            "out",
            "--nsys-arg=--stats=false",
            "--",
            str(EXAMPLES / "check_args.py"),
            json.dumps(args),
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["nvtx_ranges_lost"] is False
    assert not (tmp_path / "inner").exists()


@pytest.mark.nsys
@needs_nsys
def test_executable_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke_retrying(["profile", "false"])
    assert result.exit_code == 1
    # The folder with the report (reports/index.html sits beside it; a run that nsys failed
    # to start, repeated by invoke_retrying, leaves an empty folder).
    (folder,) = [p for p in (tmp_path / "reports").iterdir() if (p / "report.html").exists()]
    assert folder.name.startswith("false-")
    assert (folder / "report.html").is_file()


def _counting_nsys(path: Path, runs: Path, options: list[str]) -> None:
    """A shell script standing in for nsys: its help lists ``options``; each run appends a line to ``runs``."""
    listed = "".join(f"\t{o}=\n" for o in options)
    path.write_text(f"#!/bin/sh\necho run >> '{runs}'\ncat <<'EOF'\nusage: nsys profile [<args>]\n{listed}EOF\n")
    path.chmod(0o755)


def test_profile_options_are_cached_per_nsys_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    nsys, runs = tmp_path / "nsys", tmp_path / "runs"
    _counting_nsys(nsys, runs, ["--trace", "--export"])
    profile_options.cache_clear()
    assert profile_options(str(nsys)) == {"--trace", "--export"}
    profile_options.cache_clear()  # a new launchprof process: the help is read from the cache, nsys is not run
    assert profile_options(str(nsys)) == {"--trace", "--export"}
    assert runs.read_text().count("run") == 1
    cache = json.loads((tmp_path / "cache" / "launchprof" / "nsys-profile-options.json").read_text())
    assert list(cache.values()) == [["--export", "--trace"]]
    # Another nsys at the same path (a reinstall: other size and time): asked again, the old entry replaced.
    _counting_nsys(nsys, runs, ["--trace", "--export", "--cuda-graph-trace"])
    os.utime(nsys, ns=(1, 1))
    profile_options.cache_clear()
    assert profile_options(str(nsys)) == {"--trace", "--export", "--cuda-graph-trace"}
    assert runs.read_text().count("run") == 2
    assert len(json.loads((tmp_path / "cache" / "launchprof" / "nsys-profile-options.json").read_text())) == 1
    profile_options.cache_clear()


def test_profile_options_work_without_a_writable_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    nsys, runs = tmp_path / "nsys", tmp_path / "runs"
    _counting_nsys(nsys, runs, ["--trace"])
    for _ in range(2):
        profile_options.cache_clear()
        assert profile_options(str(nsys)) == {"--trace"}
    assert runs.read_text().count("run") == 2  # nothing cached, nothing broken
    profile_options.cache_clear()


def test_an_unknown_option_before_the_target_is_named(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text("pass\n")
    with pytest.raises(TargetError, match=r"no such option of launchprof profile: --force"):
        workload(["--force", str(script)])
    with pytest.raises(TargetError, match="is a directory"):
        workload([f"{tmp_path}/"])
    done = CliRunner().invoke(app, ["profile", "--bogus", str(script)])
    assert done.exit_code == 2
    assert "no such option of launchprof profile: --bogus" in done.output


def test_runs_started_together_get_their_own_default_folders(tmp_path: Path) -> None:
    """Two `launchprof profile` runs in the same second picked the same folder (a traceback)."""
    import threading

    from launchprof.commands.folders import claim_default_folder as _claim_default_folder

    got: list[Path] = []
    barrier = threading.Barrier(8)

    def claim() -> None:
        barrier.wait()
        got.append(_claim_default_folder("loop", tmp_path / "reports"))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8 and all(p.is_dir() for p in got)


@pytest.mark.nsys
@needs_nsys
def test_a_flag_nsys_refuses_leaves_no_empty_folder(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text("pass\n")
    out = tmp_path / "made" / "run"
    done = CliRunner().invoke(app, ["profile", "-o", str(out), "--nsys-arg=--no-such-flag=1", str(script)])
    assert done.exit_code != 0 and "nsys wrote no trace" in done.output
    assert not out.exists()  # created by this run and empty: removed
    given = tmp_path / "given"
    given.mkdir()
    done = CliRunner().invoke(app, ["profile", "-o", str(given), "--nsys-arg=--no-such-flag=1", str(script)])
    assert done.exit_code != 0 and given.is_dir()  # the user's own folder stays


@pytest.mark.parametrize("command", [[], ["analyze"], ["profile"], ["compare"], ["doctor"]])
def test_dash_h_is_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "-h"])
    assert result.exit_code == 0, result.output
    assert f"Usage: launchprof {' '.join(command)}".rstrip() in " ".join(result.output.split())


@pytest.mark.nsys
@needs_nsys
def test_dash_h_after_the_target_goes_to_the_workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["-h", "--help"]
    result = invoke_retrying(["profile", "-o", "out", str(EXAMPLES / "check_args.py"), json.dumps(args), *args])
    # check_args.py exits 1 when its arguments differ, and profile exits with its code.
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "summary.json").is_file()


def test_a_recording_another_process_still_writes_is_not_taken(tmp_path: Path) -> None:
    """An interrupted run rescues nsys's stranded .qdstrm from $TMPDIR, but never one that
    another nsys run is still writing (breaker: run A moved run B's live recording)."""
    import subprocess
    import time

    from launchprof.nsys.profile import stranded_qdstrm

    since = time.time() - 1
    live = tmp_path / "nsys-report-b0b0.qdstrm"
    live.write_bytes(b"recording")
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import time\nf = open({str(live)!r}, 'ab')\nprint('open',flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        assert stranded_qdstrm(since, str(tmp_path)) is None
    finally:
        holder.kill()
        holder.wait()
    assert stranded_qdstrm(since, str(tmp_path)) == live  # closed now: left behind, so rescued


def test_interrupted_before_nsys_wrote_anything_says_so(tmp_path: Path) -> None:
    import signal
    import subprocess
    import time

    nsys = tmp_path / "nsys"
    options = "".join(f"\t{f.split('=')[0]}=\n" for f in PROFILE_FLAGS)
    nsys.write_text(
        "#!/bin/bash\n"
        'if [ "$1" = "--version" ]; then echo "NVIDIA Nsight Systems version 2025.3.1.0"; exit 0; fi\n'
        f"if [ \"$2\" = \"--help\" ]; then printf '%s' '{options}'; exit 0; fi\n"
        f"trap 'kill $!; exit 130' INT; sleep 30 & touch {tmp_path}/started; wait\n"
    )
    nsys.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "LAUNCHPROF_NSYS": str(nsys), "TMPDIR": str(tmp_path / "tmp"), "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchprof", "profile", "-o", str(tmp_path / "out"), str(EXAMPLES / "steps_loop.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 30
    while not (tmp_path / "started").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().endswith("interrupted before nsys had written a trace"), err
    assert not (tmp_path / "out").exists()
