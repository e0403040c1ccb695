"""SDPA's own checks for a workload before it runs: what the variant picker says of an SDPA
variant at the shape on screen (the run then says it again, for the inputs it made).

It builds the variant and asks its explainer (attention/sdpa_reasons.py) with empty tensors of
the workload's shapes, under the variant's pin: torch's checks read shapes, strides and dtypes,
not values. A variant whose build refuses the shape says so; nothing here is profiled.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from attention import VariantUnavailable
from profiling.run import training
from profiling.workload.memory import check_memory
from profiling.workload.spec import ConfigError, Workload, page_workload, resolve_device

log = logging.getLogger(__name__)


def page_account(device: str, variant: str, shape: dict[str, Any]) -> dict[str, Any] | None:
    """The picker's question for the page's values: None for a shape the Profile button would
    refuse (it says why) or a variant that is not SDPA; {"failed": …} if asking torch failed
    (advisory: the page must not break on it)."""
    try:
        workload = page_workload(device, variant=variant, **shape)
    except ConfigError:
        return None
    try:
        return picker_account(workload)
    except Exception as exc:
        log.warning("SDPA's checks for %s failed", workload, exc_info=True)
        return {"failed": type(exc).__name__}


def picker_account(workload: Workload) -> dict[str, Any] | None:
    """torch's verdict per fused backend and its pick for this workload's inputs, or None for
    a variant that is not SDPA; {"refused": why} where the variant's own rule refuses it."""
    workload = workload.validated()
    device = resolve_device(workload.device)
    spec = workload.spec
    if spec.ran_from_trace is None:  # a variant that does not pick its kernel at call time
        return None
    why = spec.unavailable(device, workload.torch_dtype)
    if why:
        return {"refused": f"{spec.id} is unavailable here: {why}"}
    try:
        built = spec.build(workload.problem(device))
    except VariantUnavailable as exc:
        return {"refused": str(exc)}
    if built.explain is None:
        return None
    check_memory(workload, device)
    with spec.context():
        return built.explain(*empty_inputs(workload, device))


def empty_inputs(workload: Workload, device: str) -> list[torch.Tensor]:
    """q, k, v of the workload's shapes in SDPA's (B, heads, T, D) layout, uninitialised (the
    checks read no values), requiring gradients when the run would."""
    return [
        torch.empty(
            workload.tensor_shape(name),
            device=device,
            dtype=workload.torch_dtype,
            requires_grad=workload.needs_grad,
        )
        for name in training.INPUTS
    ]
