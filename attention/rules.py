"""Availability rules several variants share: which device, dtype and GPU each one needs.

A rule answers for a device and a dtype (what the pickers know) with the reason a variant
cannot run, or None. A rule one variant alone uses lives in that variant's module.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import torch

from attention.variant import Rule

HALF = (torch.float16, torch.bfloat16)


def on_zero_gpu() -> bool:
    """A ZeroGPU Space, read as the `spaces` package reads SPACES_ZERO_GPU (1, t or true)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def capability() -> tuple[int, int]:
    return torch.cuda.get_device_capability()


def cuda_only(what: str, half_only: bool = False, min_cc: tuple[int, int] = (0, 0)) -> Rule:
    def check(device: str, dtype: torch.dtype) -> str | None:
        if device != "cuda":
            return f"{what} needs a CUDA GPU (this run is on {device})"
        if half_only and dtype not in HALF:
            return f"{what} supports only float16 and bfloat16"
        if capability() < min_cc:
            major, minor = capability()
            wanted = f"{min_cc[0]}.{min_cc[1]}"
            return f"{what} needs compute capability {wanted}+ (this GPU: {major}.{minor})"
        return None

    return check


def compiler(what: str) -> Rule:
    """torch.compile's needs: not on ZeroGPU, and a C++ compiler for Inductor on a CPU."""

    def check(device: str, dtype: torch.dtype) -> str | None:
        if on_zero_gpu():
            return f"{what} needs torch.compile, which ZeroGPU does not support"
        if device == "cpu" and not (shutil.which("g++") or shutil.which("c++")):
            return f"{what} on CPU needs a C++ compiler for Inductor (none on PATH)"
        return None

    return check


def kernels_installed() -> str | None:
    if importlib.util.find_spec("kernels") is None:
        return "the `kernels` package is not installed (pip install kernels)"
    return None


def kernels_hub(repo: str, archs: tuple[tuple[int, int], ...]) -> Rule:
    """A Hub build: the `kernels` package, a CUDA GPU of an architecture it was built for."""

    def check(device: str, dtype: torch.dtype) -> str | None:
        missing = kernels_installed()
        if missing:
            return missing
        if device != "cuda":
            return f"{repo} needs a CUDA GPU (this run is on {device})"
        if dtype not in HALF:
            return f"{repo} supports only float16 and bfloat16"
        if not built_for(capability(), archs):
            major, minor = capability()
            wanted = ", ".join(f"{a}.{b}" for a, b in archs)
            return f"{repo} is built for compute capability {wanted} (this GPU: {major}.{minor})"
        return None

    return check


def built_for(found: tuple[int, int], archs: tuple[tuple[int, int], ...]) -> bool:
    """CUDA's rule, as `kernels` applies it: a build for X.Y runs on X.Z for any Z ≥ Y (an
    sm_80 build runs on an L4's 8.9), never across major versions."""
    return any(found[0] == major and found[1] >= minor for major, minor in archs)
