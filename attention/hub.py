"""FlashAttention loaded through the `kernels` library (the post's 04_d script).

Resolution order: a `LOCAL_KERNELS` override of the repo → the Hugging Face Hub → the Triton
build bundled in `attention/flash_triton` (loaded by `kernels` from disk). The loaded kernel
carries a `source` line so the page can say which of the three actually ran. Only repos on
`ALLOWED` are ever passed to `kernels`; no user text reaches a repo id or `trust_remote_code`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch

ALLOWED: dict[str, int] = {  # repo → the `version=` the post pins
    "kernels-community/flash-attn2": 3,
    "kernels-community/flash-attn3": 1,
}
LOCAL_BUILD = Path(__file__).resolve().parent / "flash_triton"
LOCAL_BUILD_LABEL = "local Triton build (attention/flash_triton)"


class KernelLoadError(RuntimeError):
    """The kernel could not be loaded; the message names the cause and the way out."""


@dataclass(frozen=True)
class LoadedKernel:
    flash_attn_func: Callable[..., object]
    source: str  # e.g. "Hub kernels-community/flash-attn2 v3"
    note: str = ""  # why the Hub was not used, when it was not


_cache: dict[tuple[str, str, bool], LoadedKernel] = {}


def load(repo: str, *, fallback: bool = True) -> LoadedKernel:
    """Resolve `repo` (override → Hub → bundled build); raise KernelLoadError with the cause."""
    if repo not in ALLOWED:
        raise KernelLoadError(f"{repo!r} is not on this app's kernel allow-list")
    key = (repo, os.environ.get("LOCAL_KERNELS", ""), fallback)
    if key not in _cache:
        _cache[key] = _resolve(repo, fallback)
    return _cache[key]


def load_local_build() -> LoadedKernel:
    kernels = _import_kernels()
    if not (LOCAL_BUILD / "build").is_dir():
        raise KernelLoadError(f"the bundled build is missing: {LOCAL_BUILD}/build")
    try:
        module = kernels.get_local_kernel(LOCAL_BUILD)
    except Exception as exc:  # kernels raises many types; say which
        raise KernelLoadError(f"the bundled Triton build did not load: {_describe(exc)}") from exc
    return LoadedKernel(module.flash_attn_func, LOCAL_BUILD_LABEL)


def call(kernel: LoadedKernel, q, k, v, causal: bool) -> torch.Tensor:
    """(B, T, nh, hs) in and out; keyword-only call, tuple outputs unwrapped (as transformers)."""
    out = kernel.flash_attn_func(q=q, k=k, v=v, causal=causal)
    return out[0] if isinstance(out, tuple) else out


def _resolve(repo: str, fallback: bool) -> LoadedKernel:
    kernels = _import_kernels()
    version = ALLOWED[repo]
    override = _override_path(repo)
    try:
        module = kernels.get_kernel(repo, version=version)
    except Exception as exc:  # classified below; kernels raises ValueError, OSError, httpx, ...
        reason = _explain(exc, override)
        if fallback and not override:
            local = load_local_build()
            return LoadedKernel(
                local.flash_attn_func, local.source, f"Hub {repo} v{version}: {reason}"
            )
        raise KernelLoadError(
            f"{repo} (version {version}) could not be loaded: {reason}. To run it offline, point "
            f"LOCAL_KERNELS='{repo}=/path/to/kernel-dir' at a local build"
        ) from exc
    if override:
        return LoadedKernel(
            module.flash_attn_func, f"LOCAL_KERNELS override of {repo} → {override}"
        )
    return LoadedKernel(module.flash_attn_func, f"Hub {repo} v{version}")


def _import_kernels():
    try:
        import kernels
    except ImportError as exc:
        raise KernelLoadError(
            "the `kernels` package is not installed (pip install kernels)"
        ) from exc
    return kernels


def _override_path(repo: str) -> str | None:
    for item in os.environ.get("LOCAL_KERNELS", "").split(":"):
        name, _, path = item.partition("=")
        if name.strip() == repo and path:
            return path.strip()
    return None


def _explain(exc: Exception, override: str | None) -> str:
    """Name the real cause: kernels reports an unreachable Hub as a trust problem."""
    text = _describe(exc)
    if override:
        return f"the LOCAL_KERNELS directory {override} did not load ({text})"
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return f"HF_HUB_OFFLINE is set and the kernel is not in the local cache ({text})"
    if isinstance(exc, RuntimeError) and "arch" in str(exc).lower():
        return f"no build of this kernel for this GPU architecture ({text})"
    if isinstance(exc, FileNotFoundError):
        return f"no build of this kernel for this torch/CUDA/GPU combination ({text})"
    if isinstance(exc, ImportError):
        return f"the kernel needs a Python package that is missing ({text})"
    if not hub_reachable():
        return f"the Hugging Face Hub is unreachable from this machine ({text})"
    return text


def hub_reachable(timeout: float = 2.0) -> bool:
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    try:
        with socket.create_connection((host or "huggingface.co", 443), timeout=timeout):
            return True
    except OSError:
        return False


def _describe(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__
