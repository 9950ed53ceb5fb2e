"""The critical path of a step over several streams (launchprof.analysis.prediction.stepmix.longest_chain):
kernels of one stream run in order, a stream-wait-event call makes the kernels launched
after it wait for each stream's last kernel launched before it, unless the trace shows the
later kernel starting before the earlier one ended. Ground truth: steps built here as an
eager run would execute them (launch by launch, one kernel at a time per stream), and
the path worked out by hand or by a brute-force longest path over the same dependencies."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from launchprof.analysis.prediction.predict import DEFAULTS, gpu_work, predict_graph_step
from launchprof.analysis.prediction.stepmix import longest_chain


def _eager(kernels: list[tuple[int, int]], launch_every: int = 5000) -> tuple[np.ndarray, ...]:
    """(launch, start, end, stream) of kernels ``(stream, duration)`` launched in this
    order every ``launch_every`` ns, with no wait between the streams (:func:`_program`)."""
    return _program(kernels, [], launch_every)[:4]


def test_a_fork_join_is_the_fork_the_longer_branch_and_the_join() -> None:
    # norm on 1; 2 waits; 3 kernels on 1 (1 us) and 3 on 2 (2 us) interleaved; 1 waits; join on 1.
    order = [(1, 3000)] + [k for _ in range(3) for k in ((1, 1000), (2, 2000))] + [(1, 4000)]
    launch, start, end, stream = _eager(order)
    waits = np.array([launch[1] - 10, launch[7] - 10])  # before the branches, before the join
    assert longest_chain(launch, start, end, stream, waits) == (3000 + 3 * 2000 + 4000, 5.0)


def test_without_waits_the_streams_are_independent() -> None:
    launch, start, end, stream = _eager([(1, 1000), (2, 5000), (1, 1000), (2, 5000), (1, 1000)])
    assert longest_chain(launch, start, end, stream, np.empty(0)) == (10000, 2.0)


def test_a_wait_the_trace_contradicts_holds_nothing() -> None:
    """Stream 2's long kernel was launched before the wait, but stream 1's next kernel
    started before it ended (the wait was for another event): no dependency."""
    launch = np.array([0, 1000, 5000])
    start = np.array([100, 1100, 5100])
    end = np.array([900, 50000, 6000])  # the stream-2 kernel runs past the third's start
    stream = np.array([1, 2, 1])
    # 48,900 alone, not 48,900 + 900 over 2 kernels:
    assert longest_chain(launch, start, end, stream, np.array([2000])) == (48900, 1.0)


def _program(
    kernels: list[tuple[int, int]], waits: list[tuple[int, int, int]], launch_every: int
) -> tuple[np.ndarray, ...]:
    """An eager run of a program whose true dependencies are known: kernels ``(stream,
    duration)`` launched in order every ``launch_every`` ns; a wait ``(w, x, y)`` after the
    w-th launch holds stream x's later kernels behind stream y's last kernel launched by
    then. Each kernel starts at its launch (+100 ns), when its stream is free and when its
    true dependencies have ended. Returns (launch, start, end, stream, wait times, the
    longest path over the true dependencies)."""
    launch = np.arange(len(kernels)) * launch_every
    start, end, best = np.zeros(len(kernels)), np.zeros(len(kernels)), np.zeros(len(kernels))
    for i, (s, d) in enumerate(kernels):
        preds = [j for j in range(i) if kernels[j][0] == s]
        for w, x, y in waits:
            if w < i and x == s:
                on_y = [j for j in range(w + 1) if kernels[j][0] == y]
                preds += on_y[-1:]
        start[i] = max([launch[i] + 100.0, *(end[j] for j in preds)])
        end[i] = start[i] + d
        best[i] = d + max((best[j] for j in preds), default=0.0)
    stream = np.array([s for s, _ in kernels])
    wait_times = np.array(sorted(launch[w] + 10 for w, _, _ in waits), dtype=np.int64)
    return launch, start, end, stream, wait_times, float(best.max())


def _model(kernels: list[tuple[int, int]], waits: list[int], start: np.ndarray, end: np.ndarray) -> float:
    """The rule of critical_paths spelled out: a kernel depends on its stream's earlier
    kernels and, for every wait before it, on each stream's last kernel launched by then,
    unless that one ended after the kernel started in the trace; the longest path."""
    best: list[float] = []
    for i, (s, d) in enumerate(kernels):
        preds = [j for j in range(i) if kernels[j][0] == s]
        for w in waits:
            if w < i:
                for other in {k[0] for k in kernels[: w + 1]}:
                    preds.append(max(j for j in range(w + 1) if kernels[j][0] == other))
        preds = [j for j in preds if kernels[j][0] == s or end[j] <= start[i]]
        best.append(d + max((best[j] for j in preds), default=0.0))
    return max(best)


@settings(max_examples=300, deadline=None)
@given(
    kernels=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 50).map(lambda x: x * 100)), min_size=1, max_size=25),
    waits=st.lists(st.tuples(st.integers(0, 23), st.integers(1, 3), st.integers(1, 3)), max_size=6),
    launch_every=st.sampled_from([200, 1000, 10000]),
    seed=st.integers(0, 2**16),
)
def test_the_path_is_the_rule_s_longest_and_never_shorter_than_the_program_s(
    kernels: list[tuple[int, int]], waits: list[tuple[int, int, int]], launch_every: int, seed: int
) -> None:
    """Kernels launched faster than they run queue up (200 ns apart), so the trace shows
    which taken dependencies did not hold; the arrays come in shuffled (the walk orders by
    launch). The path is the rule's longest path, at least the program's own (its true
    dependencies always hold in the trace, so none of them is dropped), and at most the
    sum of the kernels."""
    waits = [(w, x, y) for w, x, y in waits if w < len(kernels) - 1]
    launch, start, end, stream, wait_times, truth = _program(kernels, waits, launch_every)
    perm = np.random.default_rng(seed).permutation(len(kernels))
    path, nodes = longest_chain(launch[perm], start[perm], end[perm], stream[perm], wait_times)
    assert path == _model(kernels, [w for w, _, _ in waits], start, end)
    assert truth <= path <= sum(d for _, d in kernels)
    assert 1 <= nodes <= len(kernels)


def test_the_graph_s_gpu_side_takes_the_path_and_its_kernels() -> None:
    """A step of 22 kernels whose path holds 12: the GPU side is the path plus 11 node gaps
    (not the busy time plus 21); one stream, or a path no shorter than the busy time,
    keeps the busy time."""
    fig = {"busy_p50_ns": 21000.0, "critical_path_p50_ns": 11500.0, "critical_path_nodes_p50": 12.0}
    work, nodes = gpu_work(fig)
    assert (work, nodes) == (11500.0, 12.0)
    p = predict_graph_step(100000.0, work, 22, DEFAULTS, path_nodes=nodes)
    assert p.gpu_side_ns == 11500.0 + 11 * DEFAULTS["node_gap_ns"] + DEFAULTS["graph_launch_gap_ns"]
    assert gpu_work({"busy_p50_ns": 21000.0}) == (21000.0, None)
    assert gpu_work({**fig, "critical_path_p50_ns": 25000.0}) == (21000.0, None)
