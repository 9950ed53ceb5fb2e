"""How the GPU work of a step changed between two runs, weighted by GPU time.

Input: :func:`kernel_table` - one row per kernel kind (name and
grid/block configuration) with its mean count and mean summed duration per steady step on
each side (``before_per_step``, ``after_per_step``, ``before_gpu_ns_per_step``,
``after_gpu_ns_per_step``) and ``differs`` (its count differs beyond the tolerance).

Kinds, first match:

- ``same``: no kernel kind differs.
- ``fused``: AFTER runs compiler-generated kernels that BEFORE does not (Triton kernels
  from TorchInductor, names ``triton_...``), its kernel GPU time per step is at most
  ``1 + FUSED_MAX_GROWTH`` times BEFORE's, no large kind (below) other than the
  compiler's own changes its count, and the two sides still share some work kind for
  kind (``changed_kernel_share`` at most :data:`FUSED_MAX_CHANGED`): a compiler replaced
  sets of eager kernels by fused ones (``torch.compile``) and left the library kernels
  (cuBLAS GEMMs, cuDNN convolutions: Inductor calls them as extern kernels) as they were;
  the names differ by design, the GPU work does not grow. Two unrelated programs share
  next to nothing: on the real-framework corpus, the pairs of different programs once
  called fused differed in 92.5-100 % of their kernel time, the compile conversions in
  37 % (GPT-2 decode, HF's compile path) and 78 % (ResNet-50).
- ``known-transform``: the kinds that differ hold at most :data:`KNOWN_SHARE_MAX` of the
  kernels' GPU time (``changed_kernel_share``), or none of them is large (one launch of
  it lasts :data:`LARGE_KIND_SHARE` of its side's kernel time per step), they hold at
  most :data:`SMALL_SHARE_MAX` of it (most work is matched kind for kind) and the kernel
  time per step moves
  by at most :data:`KNOWN_MAX_CHANGE`: small elementwise, copy and attention kernels added
  or replaced, as a capturable optimizer (its step count on the GPU: 8 small kernels
  more per parameter group) or a static KV cache (``index_copy_`` instead of ``cat``;
  attention over the whole cache length) does.
- ``different``: anything else - GPU time per step changes in a way none of those
  explains, or large kernels disappear or appear.

``changed_kernel_share`` = sum over the differing kinds of |AFTER - BEFORE| GPU time per
step / (BEFORE's + AFTER's kernel GPU time per step): the part of both sides' kernel time
that is not matched kind for kind (0: same work; 1: nothing in common). Without
durations (report folders written before ``gpu_ns_per_step`` existed) only ``same`` and
``different`` are told apart, by counts.

Thresholds are judgement, checked on the real-framework corpus
(tests/data/frameworks/MANIFEST.md): the capturable-AdamW conversion changes 5.9 % of the
kernel time and the static-cache ones 14-21 %, all in small kernels, with the kernel time
per step +11 to +18 %; a graph that leaves out one of four large GEMMs changes 14 %
(one kind, 100 % of the kernel time); Inductor's reduce-overhead conversion removes time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from launchprof.analysis.comparison.side import KERNEL_KEY, SideData

# Kernel counts per step that differ by at most this share (at least 0.05 kernels) are the same.
SAME_WORK_TOLERANCE = 0.05


def kernel_table(before: SideData, after: SideData) -> pd.DataFrame:
    """Kernels per steady step on both sides: :data:`KERNEL_KEY`, ``before_per_step``,
    ``after_per_step``, ``before_gpu_ns_per_step``, ``after_gpu_ns_per_step`` (their
    summed duration per step, ns; NaN when a side does not know it), ``differs`` (count
    beyond :data:`SAME_WORK_TOLERANCE`). Empty when a side does not know its kernels."""
    cols = [*KERNEL_KEY, "before_per_step", "after_per_step", "before_gpu_ns_per_step", "after_gpu_ns_per_step"]
    cols.append("differs")
    if before.kernels is None or after.kernels is None:
        return pd.DataFrame(columns=cols)
    key = list(KERNEL_KEY)

    def side(kernels: pd.DataFrame, label: str) -> pd.DataFrame:
        ns = kernels["gpu_ns_per_step"] if "gpu_ns_per_step" in kernels else np.nan
        return kernels.loc[:, key].assign(
            **{f"{label}_per_step": kernels["per_step"], f"{label}_gpu_ns_per_step": ns, f"_{label}": True}
        )

    m = side(before.kernels, "before").merge(side(after.kernels, "after"), on=key, how="outer")
    for label in ("before", "after"):
        absent = m[f"_{label}"].isna().to_numpy()  # the kind is not on this side: 0 of it
        m[f"{label}_per_step"] = m[f"{label}_per_step"].fillna(0.0)
        ns = m[f"{label}_gpu_ns_per_step"].to_numpy(dtype=float)
        known = bool(np.isfinite(ns[~absent]).all())  # the side knows its durations
        m[f"{label}_gpu_ns_per_step"] = np.where(absent, 0.0 if known else np.nan, ns)
    b, a = m["before_per_step"].to_numpy(dtype=float), m["after_per_step"].to_numpy(dtype=float)
    m["differs"] = np.abs(b - a) > np.maximum(SAME_WORK_TOLERANCE * np.maximum(b, a), 0.05)
    return m.sort_values(key, kind="stable").reset_index(drop=True)[cols]


KNOWN_SHARE_MAX = 0.05
KNOWN_MAX_CHANGE = 0.30
SMALL_SHARE_MAX = 0.35
LARGE_KIND_SHARE = 0.10
FUSED_MAX_GROWTH = 0.10
FUSED_MAX_CHANGED = 0.90
COMPILER_KERNEL = re.compile(r"^triton_|^cutlass_triton|_fused_", re.IGNORECASE)
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


def _by_count(diff: pd.DataFrame, added: int) -> WorkChange:
    """``same`` or ``different`` by the counts alone (no durations): the differing rows
    ``diff``, ``added`` kinds of compiler kernels."""
    examples: list[tuple[str, float, float, float | None]] = [
        (str(r["name"]), float(r["before_per_step"]), float(r["after_per_step"]), None)
        for _, r in diff.head(5).iterrows()
    ]
    text = "the same kernels per step" if diff.empty else f"{len(diff)} kernel kinds differ (by count; no durations)"
    return WorkChange("same" if diff.empty else "different", None, None, None, added, examples, text)


def _large_kinds(kernels: pd.DataFrame, b_ns: np.ndarray, a_ns: np.ndarray) -> np.ndarray:
    """Per kind (row), whether it differs and is large: one of its launches lasts
    :data:`LARGE_KIND_SHARE` of its side's kernel time per step (a GEMM of a GEMM loop;
    not a 1 us kernel run 100 times). ``b_ns``, ``a_ns``: GPU ns per step of each kind."""
    before_total, after_total = float(b_ns.sum()), float(a_ns.sum())
    differs = kernels["differs"].to_numpy(dtype=bool)
    b_each = b_ns / np.maximum(kernels["before_per_step"].to_numpy(dtype=float), 1e-9)
    a_each = a_ns / np.maximum(kernels["after_per_step"].to_numpy(dtype=float), 1e-9)
    return differs & (
        (b_each >= LARGE_KIND_SHARE * max(before_total, 1.0)) | (a_each >= LARGE_KIND_SHARE * max(after_total, 1.0))
    )


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
        diff.loc[(diff["before_per_step"] == 0) & names.str.contains(COMPILER_KERNEL).to_numpy()] if len(diff) else diff
    )
    if not has_ns:
        return _by_count(diff, int(len(added)))
    b_ns = kernels["before_gpu_ns_per_step"].to_numpy(dtype=float)
    a_ns = kernels["after_gpu_ns_per_step"].to_numpy(dtype=float)
    before_total, after_total = float(b_ns.sum()), float(a_ns.sum())
    delta = np.abs(a_ns - b_ns) * kernels["differs"].to_numpy(dtype=bool)
    share = float(delta.sum() / (before_total + after_total)) if before_total + after_total > 0 else 0.0
    share = min(max(share, 0.0), 1.0)  # rounding: 1.0000000000000002 was seen
    rows = np.flatnonzero(kernels["differs"].to_numpy(dtype=bool))
    rows = rows[np.argsort(-delta[rows], kind="stable")][:5]  # the differing kinds, largest change first
    examples_ns: list[tuple[str, float, float, float | None]] = [
        (
            str(kernels["name"].iloc[i]),
            float(kernels["before_per_step"].iloc[i]),
            float(kernels["after_per_step"].iloc[i]),
            float(a_ns[i] - b_ns[i]),
        )
        for i in rows
    ]
    grew = after_total > before_total * (1 + FUSED_MAX_GROWTH)
    large = _large_kinds(kernels, b_ns, a_ns)
    moved = abs(after_total - before_total) / max(before_total, 1.0)
    compiler = kernels["name"].astype(str).str.contains(COMPILER_KERNEL).to_numpy()
    if diff.empty:
        kind = "same"
        text = f"the same {len(kernels)} kernel kinds per step"
    elif len(added) and not grew and not (large & ~compiler).any() and share <= FUSED_MAX_CHANGED:
        kind = "fused"
        text = (
            f"a compiler's fused kernels ({len(added)} kinds of Triton kernels) replace eager ones: kernel GPU time "
            f"per step {_fmt_ns(before_total)} -> {_fmt_ns(after_total)}"
        )
    elif share <= KNOWN_SHARE_MAX or (not large.any() and moved <= KNOWN_MAX_CHANGE and share <= SMALL_SHARE_MAX):
        kind = "known-transform"
        text = (
            f"{len(diff)} kernel kinds differ, {share:.1%} of the kernels' GPU time"
            + ("" if large.any() else f" (no launch of them lasts {LARGE_KIND_SHARE:.0%} of a step's kernel time)")
            + f"; kernel GPU time per step {_fmt_ns(before_total)} -> {_fmt_ns(after_total)}"
        )
    else:
        kind = "different"
        text = (
            f"{len(diff)} kernel kinds differ, {share:.0%} of the kernels' GPU time; kernel GPU time per step "
            f"{_fmt_ns(before_total)} -> {_fmt_ns(after_total)}"
        )
    return WorkChange(kind, share, before_total, after_total, int(len(added)), examples_ns, text)
