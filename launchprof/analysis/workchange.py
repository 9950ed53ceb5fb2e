"""How the GPU work of a step changed between two runs, weighted by GPU time.

Input: :func:`launchprof.analysis.verify.kernel_table` - one row per kernel kind (name and
grid/block configuration) with its mean count and mean summed duration per steady step on
each side (``before_per_step``, ``after_per_step``, ``before_gpu_ns_per_step``,
``after_gpu_ns_per_step``) and ``differs`` (its count differs beyond the tolerance).

Kinds, first match:

- ``same``: no kernel kind differs.
- ``known-transform``: the kinds that differ hold at most :data:`KNOWN_SHARE_MAX` of the
  kernels' GPU time (``changed_kernel_share``): small elementwise or copy kernels added or
  replaced, as a capturable optimizer (its step count on the GPU) or a static KV cache
  (``index_copy_`` instead of ``cat``) does.
- ``fused``: AFTER runs compiler-generated kernels that BEFORE does not (Triton kernels
  from TorchInductor, names ``triton_...``) and its kernel GPU time per step is at most
  ``1 + FUSED_MAX_GROWTH`` times BEFORE's: a compiler replaced sets of eager kernels by
  fused ones (``torch.compile``); the names differ by design, the GPU work does not grow.
- ``different``: anything else - GPU time per step changes in a way none of those
  explains, or large kernels disappear or appear.

``changed_kernel_share`` = sum over the differing kinds of |AFTER - BEFORE| GPU time per
step / (BEFORE's + AFTER's kernel GPU time per step): the part of both sides' kernel time
that is not matched kind for kind (0: same work; 1: nothing in common). Without
durations (report folders written before ``gpu_ns_per_step`` existed) only ``same`` and
``different`` are told apart, by counts.

Thresholds are judgement, checked on the real-framework corpus
(tests/data/frameworks/MANIFEST.md): the capturable-AdamW and static-cache conversions
change under 5 % of the kernel time; Inductor's reduce-overhead conversions remove time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

KNOWN_SHARE_MAX = 0.05
FUSED_MAX_GROWTH = 0.10
COMPILER_KERNEL = re.compile(r"^triton_|^triton__|^cutlass_triton|_fused_", re.IGNORECASE)
KINDS = ("same", "known-transform", "fused", "different")


@dataclass(frozen=True)
class WorkChange:
    """The classified change (module docstring).

    Attributes:
        kind: one of :data:`KINDS`.
        changed_kernel_share: 0..1, None without durations.
        before_kernel_ns, after_kernel_ns: kernel GPU time per steady step (ns; None
            without durations).
        compiler_kernels_added: AFTER's kinds of compiler-generated kernels absent BEFORE.
        examples: up to 5 differing kinds, largest GPU-time change first:
            ``(name, before_per_step, after_per_step, delta_gpu_ns_per_step)``.
        summary: one sentence for the check's detail.
    """

    kind: str
    changed_kernel_share: float | None
    before_kernel_ns: float | None
    after_kernel_ns: float | None
    compiler_kernels_added: int
    examples: list[tuple[str, float, float, float | None]] = field(default_factory=list)
    summary: str = ""


def _fmt_ns(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if abs(ns) < 1e6 else f"{ns / 1e6:,.2f} ms"


def classify(kernels: pd.DataFrame) -> WorkChange:
    """Classify ``kernels`` (columns in the module docstring; the two ``gpu_ns`` columns
    may be missing or NaN: counts only)."""
    diff = kernels.loc[kernels["differs"]] if len(kernels) else kernels
    has_ns = (
        len(kernels) > 0
        and {"before_gpu_ns_per_step", "after_gpu_ns_per_step"} <= set(kernels.columns)
        and bool(kernels[["before_gpu_ns_per_step", "after_gpu_ns_per_step"]].notna().all().all())
    )
    names = diff["name"].astype(str) if len(diff) else pd.Series(dtype=str)
    added = (
        diff.loc[(diff["before_per_step"] == 0) & names.str.match(COMPILER_KERNEL).to_numpy()] if len(diff) else diff
    )
    if not has_ns:
        kind = "same" if diff.empty else "different"
        examples: list[tuple[str, float, float, float | None]] = [
            (str(r["name"]), float(r["before_per_step"]), float(r["after_per_step"]), None)
            for _, r in diff.head(5).iterrows()
        ]
        text = (
            "the same kernels per step" if diff.empty else f"{len(diff)} kernel kinds differ (by count; no durations)"
        )
        return WorkChange(kind, None, None, None, int(len(added)), examples, text)
    b_ns = kernels["before_gpu_ns_per_step"].to_numpy(dtype=float)
    a_ns = kernels["after_gpu_ns_per_step"].to_numpy(dtype=float)
    before_total, after_total = float(b_ns.sum()), float(a_ns.sum())
    delta = np.abs(a_ns - b_ns) * kernels["differs"].to_numpy(dtype=bool)
    share = float(delta.sum() / (before_total + after_total)) if before_total + after_total > 0 else 0.0
    order = np.argsort(-delta, kind="stable")
    examples_ns: list[tuple[str, float, float, float | None]] = [
        (
            str(kernels["name"].iloc[i]),
            float(kernels["before_per_step"].iloc[i]),
            float(kernels["after_per_step"].iloc[i]),
            float(a_ns[i] - b_ns[i]),
        )
        for i in order[: min(5, int((delta > 0).sum()) or len(diff))]
        if kernels["differs"].iloc[i]
    ]
    grew = after_total > before_total * (1 + FUSED_MAX_GROWTH)
    if diff.empty:
        kind = "same"
        text = f"the same {len(kernels)} kernel kinds per step"
    elif share <= KNOWN_SHARE_MAX:
        kind = "known-transform"
        text = (
            f"{len(diff)} kernel kinds differ, holding {share:.1%} of the kernels' GPU time "
            "(small kernels added or replaced)"
        )
    elif len(added) and not grew:
        kind = "fused"
        text = (
            f"a compiler's fused kernels ({len(added)} kinds of Triton kernels) replace eager ones: kernel GPU time "
            f"per step {_fmt_ns(before_total)} -> {_fmt_ns(after_total)}"
        )
    else:
        kind = "different"
        text = (
            f"{len(diff)} kernel kinds differ, {share:.0%} of the kernels' GPU time; kernel GPU time per step "
            f"{_fmt_ns(before_total)} -> {_fmt_ns(after_total)}"
        )
    return WorkChange(kind, share, before_total, after_total, int(len(added)), examples_ns, text)
