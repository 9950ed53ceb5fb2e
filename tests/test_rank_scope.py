"""Which rank a multi-rank verdict judged, said in the diagnosis and the terminal line."""

from __future__ import annotations

from types import SimpleNamespace

from launchprof.analysis.finish import rank_scope
from launchprof.commands.text import verdict_line

STEPS = {"device_id": 0, "pid": 719, "period_p50_ns": 4_141_700.0, "steady": 56}
RANKS = {
    "count": 2,
    "aligned_steps": 56,
    "launch_bound_ratio": 0.2,
    "ranks": [
        {"rank": 0, "device_id": 0, "pid": 719, "launch_bound": False, "straggler_steps": 0},
        {"rank": 1, "device_id": 1, "pid": 720, "launch_bound": True, "straggler_steps": 56},
    ],
}


def test_the_judged_rank_and_the_waiting_straggler_are_named() -> None:
    text = rank_scope(STEPS, RANKS)
    assert text is not None
    assert text.startswith("This verdict judges rank 0 (GPU 0, pid 719) of 2 ranks.")
    assert "On rank 1 the GPU waits for the CPU 20% or more of each steady step (rank 1 is the straggler in 56" in text
    assert "launch-bound" not in text  # the verdict's word: a graph is expected to pay


def test_nothing_to_say_for_one_rank_or_when_the_judged_rank_waits_too() -> None:
    assert rank_scope(STEPS, {**RANKS, "count": 1}) is None
    assert rank_scope(STEPS, None) is None
    both = {**RANKS, "ranks": [{**r, "launch_bound": True} for r in RANKS["ranks"]]}
    assert rank_scope(STEPS, both) == "This verdict judges rank 0 (GPU 0, pid 719) of 2 ranks."


def test_terminal_line_names_the_rank_and_the_waiting_ones() -> None:
    summary = SimpleNamespace(
        diagnosis=SimpleNamespace(verdict="gpu-bound", figures={}, findings=[]),  # the typed section: attributes
        recommendation=SimpleNamespace(convert=False, predicted_speedup=1.05, predicted_step_ns=3_928_000.0,
                                       break_even_iterations=1, expected_speedup=None, blockers=[]),
        steps=SimpleNamespace(**STEPS),  # the typed steps section: attributes
        headline=SimpleNamespace(graphs=False, rebuilt=False),
        ranks=SimpleNamespace(  # the typed ranks section: attributes
            count=RANKS["count"], ranks=[SimpleNamespace(**r) for r in RANKS["ranks"]], critical_rank=None,
            aligned_steps=56, launch_bound_ratio=0.2,
        ),
    )  # fmt: skip
    line = verdict_line(summary)
    assert line is not None
    assert line.startswith("verdict: gpu-bound on GPU 0 pid 719 of 2 ranks")
    assert "break-even 1 iteration;" in line
    assert line.endswith("; the GPU of rank 1 waits for the CPU 20% or more of each steady step (see the ranks)")
    # The judged rank waits for the CPU too (two processes on one GPU, gpu-bound without
    # the profiler): no rank is named beside the verdict, and none is called launch-bound.
    summary.ranks.ranks[0].launch_bound = True
    line = verdict_line(summary)
    assert line is not None and "see the ranks" not in line and "launch-bound" not in line


def test_the_report_page_gives_every_reason_of_the_summary(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real two-rank DDP trace (H200): the page's diagnosis card says which rank it judged,
    as summary.json does (the page used to leave that sentence out)."""
    import html
    import json
    import re
    import shutil
    from pathlib import Path

    from typer.testing import CliRunner

    from launchprof.cli import app

    trace = tmp_path / "ddp_mlp_x2.sqlite.xz"
    shutil.copy(Path(__file__).parent / "data" / "gpu" / trace.name, trace)
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    reasons = summary["diagnosis"]["reasons"]
    # Rank 1 sleeps in every 10th step (examples/ddp_mlp.py): it paces the job, the headline is its.
    assert summary["ranks"]["critical_rank"] == 1 and summary["headline"]["verdict"] == "launch-bound"
    assert any(
        r.startswith(
            "This verdict judges rank 1 (GPU 1, pid 720) of 2 ranks. It is the critical rank: the slowest in 56 of 56 "
            "steps"
        )
        for r in reasons
    )
    page = (tmp_path / "out" / "report.html").read_text()
    paragraphs = {html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", page, re.S)}
    from launchprof.report.html import micro

    for reason in reasons:
        assert micro(reason) in paragraphs, reason  # the page writes "us" as "µs"


def test_two_processes_on_one_gpu_get_one_answer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real trace of two processes sharing one GPU (tests/data/gpu/two_procs): under nsys
    both GPUs' steps wait for the CPU, without the profiler the judged rank is gpu-bound and
    no conversion is recommended. Nothing calls a rank launch-bound beside that answer, and
    the page does not say the verdict covers the critical rank's steps when it judged the
    other rank."""
    import json
    import lzma
    import re
    from pathlib import Path

    from typer.testing import CliRunner

    from launchprof.cli import app

    trace = tmp_path / "two_procs.sqlite"
    trace.write_bytes(lzma.decompress((Path(__file__).parent / "data" / "gpu" / "two_procs.sqlite.xz").read_bytes()))
    result = CliRunner().invoke(app, ["analyze", str(trace), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    verdict = summary["diagnosis"]["verdict"]
    convert = summary["recommendation"]["convert"]
    ranks = summary["ranks"]
    assert all(r["launch_bound"] for r in ranks["ranks"])  # both wait for the CPU >= 20 % under nsys
    assert verdict != "launch-bound" and not convert  # the case this test is about
    assert "launch-bound" not in result.output
    judged = next(r for r in ranks["ranks"] if r["pid"] == summary["steps"]["pid"])
    page = re.sub(r"<[^>]+>", "", (tmp_path / "out" / "report.html").read_text())
    assert ranks["critical_rank"] != judged["rank"]
    assert "whose steps the verdict above covers" not in page
    assert f"the verdict above judges rank {judged['rank']}, not the critical rank" in page
