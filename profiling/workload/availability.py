"""Which variants can run here, and why not: each variant's own rule, asked once per variant.

The Profile, Compare and Sweep pickers label a variant with its reason, and a Compare or Sweep
request counts only the runnable ones against its budget. A rule that cannot be asked (its
check raised) fails closed, except on ZeroGPU outside the GPU slot (see `checked_reason`).
"""

from __future__ import annotations

import logging

import torch

from attention import VARIANTS, Variant, on_zero_gpu
from profiling.workload.spec import DTYPES

log = logging.getLogger(__name__)


def unavailable_reasons(device: str, dtype: str, mode: str = "forward") -> dict[str, str | None]:
    """Variant id → why it cannot run here (None when it can, or on ZeroGPU outside the slot
    when that cannot be known yet); a mode with a backward asks its backward's rule too. Each
    variant is checked on its own: one failing check says so for its variant only."""
    torch_dtype = DTYPES.get(dtype, torch.float32)
    return {
        vid: checked_reason(variant, device, torch_dtype, backward=mode != "forward")
        for vid, variant in VARIANTS.items()
    }


def checked_reason(
    variant: Variant, device: str, dtype: torch.dtype, backward: bool = False
) -> str | None:
    """The variant's rule, failing closed: a check that raises marks it unavailable with the
    error, except on ZeroGPU. There, outside the GPU slot, `spaces` emulates CUDA (a stand-in
    for torch.cuda whose calls that reach the driver raise), so a device query can fail by
    design; the variant is offered and the runner checks again inside the slot, on the GPU."""
    try:
        reason = variant.unavailable(device, dtype)
        if reason is None and backward:
            reason = variant.backward_unavailable(device, dtype)
        return reason
    except Exception as exc:
        if on_zero_gpu():
            return None
        log.warning("availability of %s could not be checked", variant.id, exc_info=True)
        return f"availability could not be checked: {error_text(exc)}"


def error_text(exc: Exception) -> str:
    """An error's class and the first line of its message."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def variant_spec(variant_id: str) -> Variant | None:
    """The registered variant of that id (its label and lessons, for the views), or None."""
    return VARIANTS.get(variant_id)


def variant_specs() -> dict[str, Variant]:
    """Every registered variant by id, in the registry's order (the pickers' order)."""
    return dict(VARIANTS)


def zero_gpu() -> bool:
    """Whether this runs on a ZeroGPU Space (its GPU slot is short: Compare runs the post's
    variants only)."""
    return on_zero_gpu()
