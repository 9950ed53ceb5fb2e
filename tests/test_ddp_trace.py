"""The real two-GPU DDP trace (examples/ddp_mlp.py under `launchprof profile torchrun
--nproc-per-node 2`, nsys 2025.3, 2 x H200): per-rank figures against plain sqlite3."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import DATA

import launchprof
from launchprof.report.summary import build_summary

GPU = DATA / "gpu"


@pytest.fixture(scope="module")
def ddp(real_trace):
    return real_trace("ddp_mlp_x2", GPU)


def _sql_counts(path) -> dict[int, tuple[int, int, int]]:
    """device -> (kernels, NCCL kernels, pid), straight from the export."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT k.deviceId, count(*), sum(s.value LIKE 'nccl%'), min((k.globalPid >> 24) & 16777215) "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName GROUP BY k.deviceId"
    ).fetchall()
    con.close()
    return {int(d): (int(n), int(c), int(p)) for d, n, c, p in rows}


def _sql_steps(path) -> dict[int, int]:
    """pid -> number of NVTX `step` ranges (domain launchprof)."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT (e.globalTid >> 24) & 16777215, count(*) FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 "
        "AND coalesce(e.text, s.value) = 'step' GROUP BY 1"
    ).fetchall()
    con.close()
    return {int(p): int(n) for p, n in rows}


def test_two_ranks_with_their_kernels_and_nccl_kernels(ddp) -> None:
    expected = _sql_counts(ddp)
    assert len(expected) == 2
    summary = build_summary(launchprof.analyze(ddp))
    assert summary.ranks is not None
    ranks = summary.ranks.ranks
    assert len(ranks) == 2
    for rank in ranks:
        kernels, nccl, pid = expected[rank.device_id]
        assert rank.pid == pid
        assert rank.kernels == kernels
        assert rank.comm_kernels == nccl


def test_each_rank_finds_its_nvtx_steps(ddp) -> None:
    expected = _sql_steps(ddp)
    summary = build_summary(launchprof.analyze(ddp))
    assert summary.ranks is not None
    for rank in summary.ranks.ranks:
        assert rank.step_source == "nvtx"
        assert rank.steps == expected[rank.pid]


def _sql_kernels_per_step(path, pid: int) -> list[int]:
    """Kernels per `step` range of ``pid``: kernels whose launching call (same pid and
    correlation id, any thread of the process) starts inside the range - the backward
    pass is launched from autograd threads, not the thread that holds the ranges."""
    con = sqlite3.connect(path)
    rows = con.execute(
        """
        WITH steps AS (
          SELECT e.start AS s, e.end AS e FROM NVTX_EVENTS e LEFT JOIN StringIds t ON t.id = e.textId
          WHERE e.eventType = 59 AND coalesce(e.text, t.value) = 'step'
            AND ((e.globalTid >> 24) & 16777215) = :pid),
        launches AS (
          SELECT r.start AS cs FROM CUPTI_ACTIVITY_KIND_KERNEL k
          JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
           AND ((r.globalTid >> 24) & 16777215) = ((k.globalPid >> 24) & 16777215)
          WHERE ((k.globalPid >> 24) & 16777215) = :pid)
        SELECT steps.s, (SELECT count(*) FROM launches WHERE cs >= steps.s AND cs < steps.e)
        FROM steps ORDER BY steps.s
        """,
        {"pid": pid},
    ).fetchall()
    con.close()
    return [int(n) for _, n in rows]


def test_backward_kernels_from_autograd_threads_count_in_their_step(ddp) -> None:
    analysis = launchprof.analyze(ddp)
    steps = analysis.found_steps
    expected = _sql_kernels_per_step(ddp, steps.pid)
    assert steps.table["kernels"].tolist() == expected
    # The forward pass alone is 22 kernels; forward + backward + optimizer is far more.
    assert sorted(expected)[len(expected) // 2] > 22
