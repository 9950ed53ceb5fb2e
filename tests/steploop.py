"""Build step loops for tests: each step an NVTX range around per-launch kernels whose
timing is set by the arguments (all ns), so expected figures can be counted by hand."""

from __future__ import annotations

from tracebuilder import TraceBuilder


def launch_loop(
    b: TraceBuilder,
    steps: int,
    kernels: int = 4,
    call_ns: int = 5_000,
    kernel_ns: int = 1_000,
    host_ns: int = 0,
    t0: int = 1_000_000,
    name: str = "step",
    domain: str | None = "launchprof",
    range_tid: int | None = None,
    pid: int = 100,
    first_extra_ns: int = 0,
    kernel_name: str = "k",
    grid_of=None,  # type: ignore[no-untyped-def]
    stream: int = 13,
    kernels_of=None,  # type: ignore[no-untyped-def]
    in_step=None,  # type: ignore[no-untyped-def]
) -> int:
    """A per-launch loop: per step ``host_ns`` of host work, then ``kernels`` launch calls
    of ``call_ns`` back to back, each kernel starting 500 ns after its call ends and
    lasting ``kernel_ns``, queued behind the previous kernel (so with call_ns > kernel_ns the
    GPU waits for the CPU; with kernel_ns > call_ns it runs back to back).
    Step 0 starts ``first_extra_ns`` later (warm-up). ``kernels_of(step)`` varies the
    kernel count, ``grid_of(step, j)`` the grid, ``in_step(builder, step, t) -> t`` adds
    calls at the start of each step. Returns the end time."""
    t = t0
    gpu_free = 0
    for s in range(steps):
        start = t
        t += host_ns + (first_extra_ns if s == 0 else 0)
        if in_step is not None:
            t = in_step(b, s, t)  # extra calls at the start of the step; returns the new time
        for j in range(kernels_of(s) if kernels_of else kernels):
            grid = grid_of(s, j) if grid_of else (1, 1, 1)
            k_start = max(t + call_ns + 500, gpu_free)  # one stream: kernels run in order
            gpu_free = k_start + kernel_ns
            b.launch(
                t,
                t + call_ns,
                k_start,
                gpu_free,
                pid=pid,
                name=f"{kernel_name}{j}",
                grid=grid,
                stream=stream,
            )
            t += call_ns
        t += 500 + kernel_ns + 100
        b.range(name, start, t, pid=pid, tid=range_tid, domain=domain)
        t += 100
    return t
