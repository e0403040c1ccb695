"""The attention variants the app can profile: id → Variant (attention/registry.py).

Each variant is a module of its own that describes itself (attention/variant.py): how it
computes causal (or full) attention, which machines it runs on, what its first run costs, how
what ran is learned, its memory. All compute softmax(q·kᵀ/√d)·v; they differ only in how.
Nothing here knows about profiling: a variant is built for attention's own `Problem`.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- what `ran` says: the variant: `Built.ran`, or `Variant.ran_from_trace` for SDPA
- whether a variant compiles or downloads first: `Variant.first_run`
- which keys a query sees (bottom-right causal, a window): `attention/masks.py` (`visible`), used
  by the variants and the float64 references
- whether a variant's backward can run here: `Variant.backward_unavailable` (asked for `backward`
  and `train` only)
"""

from __future__ import annotations

from attention.registry import VARIANTS
from attention.rules import built_for, on_zero_gpu
from attention.variant import Built, Forward, Layout, Problem, Variant, VariantUnavailable

__all__ = [
    "VARIANTS",
    "Built",
    "Forward",
    "Layout",
    "Problem",
    "Variant",
    "VariantUnavailable",
    "built_for",
    "on_zero_gpu",
]
