"""A comparison side's steady-state figures (:class:`SideFigures`) and where a measured
gain came from (:class:`SpeedupParts`): what :mod:`launchprof.analysis.comparison.verify` checks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchprof.analysis.comparison.side import SideData


@dataclass(frozen=True)
class SideFigures:
    """Steady-state figures of one side (ns; ratios 0..1; None when unknown)."""

    steps: int
    steady: int
    warmup: int
    kernels_per_step: float | None
    period_p50_ns: float | None
    period_mean_ns: float | None
    period_std_ns: float | None
    busy_p50_ns: float | None
    bubble_p50_ns: float | None
    host_wait_p50_ns: float | None
    api_p50_ns: float | None
    cpu_p50_ns: float | None
    utilization: float | None
    bubble_ratio: float | None
    cpu_bound_ratio: float | None
    graph_launches_per_step: float | None
    graph_execs_per_step: float | None
    graph_kernel_share: float | None
    instantiations_per_launch: float | None
    captures_per_launch: float | None
    updates_per_launch: float | None


@dataclass(frozen=True)
class SpeedupParts:
    """The measured step-time gain split into GPU work and host/launch overhead.

    With BEFORE's and AFTER's median steady period ``Pb``, ``Pa`` and median GPU busy
    time per step ``Bb``, ``Ba`` (ns): ``gpu_work_saved_ns = Bb - Ba`` (fusion, other
    kernels), ``host_saved_ns = (Pb - Pa) - (Bb - Ba)`` (launch and host overhead a graph
    removed, the rest of the gain). As factors whose product is the speedup ``Pb / Pa``:
    ``from_gpu_work = Pb / (Pb - (Bb - Ba))`` (BEFORE's step with AFTER's GPU work) and
    ``from_host = (Pb - (Bb - Ba)) / Pa``. ``gpu_work_share`` = gpu_work_saved_ns /
    (Pb - Pa) (None when the period did not change). The periods are those of the traces
    (under nsys), also when ``speedup_unprofiled`` decides the verdict.
    """

    before_period_ns: float
    after_period_ns: float
    before_busy_ns: float
    after_busy_ns: float
    gpu_work_saved_ns: float
    host_saved_ns: float
    from_gpu_work: float | None
    from_host: float | None
    gpu_work_share: float | None


def speedup_parts(fb: SideFigures, fa: SideFigures) -> SpeedupParts | None:
    """:class:`SpeedupParts` from the two sides' medians (None when one is unknown or a
    period is not positive)."""
    pb, pa, bb, ba = fb.period_p50_ns, fa.period_p50_ns, fb.busy_p50_ns, fa.busy_p50_ns
    if pb is None or pa is None or bb is None or ba is None or pb <= 0 or pa <= 0:
        return None
    gpu = bb - ba
    mid = pb - gpu
    return SpeedupParts(
        before_period_ns=pb,
        after_period_ns=pa,
        before_busy_ns=bb,
        after_busy_ns=ba,
        gpu_work_saved_ns=gpu,
        host_saved_ns=(pb - pa) - gpu,
        from_gpu_work=pb / mid if mid > 0 else None,
        from_host=mid / pa if mid > 0 else None,
        gpu_work_share=gpu / (pb - pa) if pb != pa else None,
    )


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def _clip01(value: float | None) -> float | None:
    return None if value is None else float(min(max(value, 0.0), 1.0))


def _figures_from_stats(side: SideData) -> SideFigures:
    """:func:`side_figures` of a side without a step table: from its summary step
    statistics (ratios are ratios of medians; no graph figures but launches per step)."""
    st = side.stats
    period = st.get("period_p50_ns")

    def of_period(key: str) -> float | None:
        v = st.get(key)
        return _clip01(v / period) if v is not None and period else None

    glp = st.get("graph_launches_p50")
    return SideFigures(
        steps=int(st.get("count") or 0),
        steady=int(st.get("steady") or 0),
        warmup=int(st.get("warmup") or 0),
        kernels_per_step=side.kernels_per_step,
        period_p50_ns=period,
        period_mean_ns=st.get("period_mean_ns"),
        period_std_ns=st.get("period_std_ns"),
        busy_p50_ns=st.get("busy_p50_ns"),
        bubble_p50_ns=st.get("bubble_ns_p50"),
        host_wait_p50_ns=st.get("host_wait_p50_ns"),
        api_p50_ns=st.get("api_ns_p50"),
        cpu_p50_ns=st.get("cpu_ns_p50"),
        utilization=of_period("busy_p50_ns"),
        bubble_ratio=of_period("bubble_ns_p50"),
        cpu_bound_ratio=of_period("host_wait_p50_ns"),
        graph_launches_per_step=None if glp is None else float(glp),
        graph_execs_per_step=None,
        graph_kernel_share=None,
        instantiations_per_launch=None,
        captures_per_launch=None,
        updates_per_launch=None,
    )


def side_figures(side: SideData) -> SideFigures:
    """Steady-state figures of ``side`` from its step table (or, without one, its
    summary step statistics; ratios are then ratios of medians)."""
    s = side.steady
    if s is None or s.empty:
        return _figures_from_stats(side)
    period = s["period_ns"].to_numpy(dtype=float)
    total = float(period.sum())
    launches = float(s["graph_launches"].sum())
    kernels = float(s["kernels"].sum())

    def p50(col: str) -> float:
        return float(np.median(s[col].to_numpy(dtype=float)))

    def per_launch(col: str, scale: float = 1.0) -> float | None:
        return float(s[col].sum()) * scale / launches if launches > 0 else None

    if kernels > 0:
        share: float | None = float(s["graph_kernels"].sum()) / kernels
    else:
        share = 1.0 if launches > 0 else 0.0
    return SideFigures(
        steps=int(len(side.table)) if side.table is not None else 0,
        steady=int(len(s)),
        warmup=int(side.table["warmup"].astype(bool).sum()) if side.table is not None else 0,
        kernels_per_step=p50("kernels"),
        period_p50_ns=float(np.median(period)),
        period_mean_ns=float(period.mean()),
        period_std_ns=float(period.std(ddof=1)) if period.size > 1 else None,
        busy_p50_ns=p50("busy_ns"),
        bubble_p50_ns=p50("bubble_ns"),
        host_wait_p50_ns=p50("host_wait_ns"),
        api_p50_ns=p50("api_ns"),
        cpu_p50_ns=p50("cpu_ns"),
        utilization=_clip01(_ratio(float(s["busy_ns"].sum()), total)),
        bubble_ratio=_clip01(_ratio(float(s["bubble_ns"].sum()), total)),
        cpu_bound_ratio=_clip01(_ratio(float(s["host_wait_ns"].sum()), total)),
        graph_launches_per_step=p50("graph_launches"),
        graph_execs_per_step=p50("graph_execs"),
        graph_kernel_share=share,
        instantiations_per_launch=per_launch("instantiations"),
        captures_per_launch=per_launch("captures", 0.5),
        updates_per_launch=per_launch("exec_updates"),
    )
