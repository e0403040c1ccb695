"""FlashAttention loaded through the `kernels` library (the post's 04_d script).

Resolution order: a `LOCAL_KERNELS` override of the repo → the Hugging Face Hub → the Triton
build bundled in `attention/flash_triton` (loaded by `kernels` from disk). The loaded kernel
carries a `source` line so the page can say which of the three actually ran. Only repos on
`ALLOWED` are ever passed to `kernels`; no user text reaches a repo id or `trust_remote_code`.

The Hub is asked at most once per `RETRY_S` for a repo it failed to give: a failure or a
fallback is remembered that long (a transient outage does not pin the fallback for the life of
the process, and clicks do not each wait on the network), and a Hub that accepts connections
but never answers costs `HUB_TIMEOUT_S`, not a run held forever under the runner's lock.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlparse

import torch

from attention.variant import Built, Problem, VariantUnavailable

ALLOWED: dict[str, int] = {  # repo → the `version=` the post pins
    "kernels-community/flash-attn2": 3,
    "kernels-community/flash-attn3": 1,
}
LOCAL_BUILD = Path(__file__).resolve().parent / "flash_triton"
LOCAL_BUILD_LABEL = "local Triton build (attention/flash_triton)"
log = logging.getLogger(__name__)
HUB_TIMEOUT_S = 30.0  # kernels' Hub calls have no timeout of their own
RETRY_S = 300.0  # how long a Hub failure (or the fallback it led to) is remembered


class KernelLoadError(RuntimeError):
    """The kernel could not be loaded; the message names the cause and the way out."""


class KernelUnavailable(KernelLoadError, VariantUnavailable):
    """A known rule refuses the kernel here (the `kernels` package missing, a head dim it does
    not support): the variant cannot run, which is not a failure of its build."""


@dataclass(frozen=True)
class LoadedKernel:
    flash_attn_func: Callable[..., object]
    source: str  # e.g. "Hub kernels-community/flash-attn2 v3"
    note: str = ""  # why the Hub was not used, when it was not
    head_dims: tuple[int, ...] | None = None  # the head dims it supports, when it says


# key → (the kernel or the error's class and message, monotonic time after which the Hub is
# asked again). Not the exception: raised again, one exception object would grow its traceback
# click after click and keep each failed run's frames (its input tensors) alive.
Failure = tuple[type[KernelLoadError], str]
_cache: dict[tuple[str, ...], tuple[LoadedKernel | Failure, float]] = {}
_fetching: dict[tuple[str, int], threading.Thread] = {}  # a Hub fetch that outlived its timeout


def load(repo: str, *, fallback: bool = True) -> LoadedKernel:
    """Resolve `repo` (override → Hub → bundled build); raise KernelLoadError with the cause."""
    if repo not in ALLOWED:
        raise KernelLoadError(f"{repo!r} is not on this app's kernel allow-list")
    env = ("LOCAL_KERNELS", "HF_HUB_OFFLINE", "HF_ENDPOINT")
    key = (repo, str(fallback), *(os.environ.get(name, "") for name in env))
    cached = _cache.get(key)
    if cached is None or time.monotonic() >= cached[1]:
        try:
            kernel: LoadedKernel | Failure = _resolve(repo, fallback)
        except KernelLoadError as exc:
            kernel = (type(exc), str(exc))
        settled = isinstance(kernel, LoadedKernel) and not kernel.note
        cached = _cache[key] = (kernel, float("inf") if settled else time.monotonic() + RETRY_S)
    if isinstance(cached[0], tuple):
        error, message = cached[0]
        raise error(message)
    return cached[0]


def load_local_build() -> LoadedKernel:
    kernels = _import_kernels()
    if not (LOCAL_BUILD / "build").is_dir():
        raise KernelLoadError(f"the bundled build is missing: {LOCAL_BUILD}/build")
    try:
        return _local_kernel(kernels, LOCAL_BUILD, LOCAL_BUILD_LABEL)
    except Exception as exc:  # kernels raises many types; say which
        raise KernelLoadError(f"the bundled Triton build did not load: {_describe(exc)}") from exc


def _local_kernel(kernels, folder: Path, source: str) -> LoadedKernel:
    """A kernel folder (the one holding build/) loaded by kernels from disk."""
    module = kernels.get_local_kernel(folder)
    head_dims = getattr(module, "SUPPORTED_HEAD_DIMS", None)  # None: let the kernel decide
    return LoadedKernel(module.flash_attn_func, source, head_dims=head_dims)


def check_head_dim(kernel: LoadedKernel, head_dim: int) -> None:
    """Refuse a head dim the kernel does not support before anything runs (the Triton build's
    own ValueError would otherwise surface mid-warm-up as an unexplained failure)."""
    if kernel.head_dims is not None and head_dim not in kernel.head_dims:
        dims = ", ".join(map(str, kernel.head_dims))
        raise KernelUnavailable(f"{kernel.source} supports head_dim {dims} (not {head_dim})")


def call(kernel: LoadedKernel, q, k, v, causal: bool, window: int | None = None) -> torch.Tensor:
    """(B, T, nh, hs) in and out (k, v may have fewer heads: FlashAttention takes grouped
    heads as they are); keyword-only call, tuple outputs unwrapped (as transformers). A window
    is FlashAttention's `window_size=(left, right)`: the last `window` keys."""
    extra = {"window_size": (window - 1, 0)} if window is not None else {}
    out = kernel.flash_attn_func(q=q, k=k, v=v, causal=causal, **extra)
    return out[0] if isinstance(out, tuple) else out


def builder(load_kernel: Callable[[], LoadedKernel]) -> Callable[[Problem], Built]:
    """A kernels variant's build: the kernel loaded (`load(repo)` or the local build), its head
    dims checked, and its flash_attn_func called in the [batch, seq, heads, dim] layout."""

    def build(problem: Problem) -> Built:
        kernel = load_kernel()
        check_head_dim(kernel, problem.head_dim)
        forward = lambda q, k, v: call(kernel, q, k, v, problem.causal, problem.window)  # noqa: E731
        return Built(forward, kernel.source, kernel.note)

    return build


def _resolve(repo: str, fallback: bool) -> LoadedKernel:
    kernels = _import_kernels()
    version = ALLOWED[repo]
    override = _override_path(repo)
    if override:
        return _load_override(kernels, repo, override)
    try:
        module = _get_kernel(kernels, repo, version)
    except Exception as exc:  # classified below; kernels raises ValueError, OSError, httpx, ...
        reason = _explain(exc)
        if fallback:
            return replace(load_local_build(), note=f"Hub {repo} v{version}: {reason}")
        raise KernelLoadError(
            f"{repo} (version {version}) could not be loaded: {reason}. To run it offline, point "
            f"LOCAL_KERNELS='{repo}=/path/to/kernel-dir' at a local build"
        ) from exc
    return LoadedKernel(module.flash_attn_func, f"Hub {repo} v{version}")


def _load_override(kernels, repo: str, path: str) -> LoadedKernel:
    """The LOCAL_KERNELS folder as we parsed it, loaded directly: kernels' own reading of the
    variable trims nothing (`repo = /dir`, or a Space secret's trailing newline, failed with a
    trust-check message), and each way the folder can be wrong is said as such."""
    folder = Path(path)
    if not folder.exists():
        problem = "does not exist"
    elif not folder.is_dir():
        problem = "is not a folder"
    elif not (folder / "build").is_dir():
        problem = "holds no build/ folder (point LOCAL_KERNELS at the folder that holds build/)"
    else:
        try:
            return _local_kernel(kernels, folder, f"LOCAL_KERNELS override of {repo} → {path}")
        except Exception as exc:  # kernels raises many types; say which
            problem = f"did not load ({_describe(exc)})"
    raise KernelLoadError(f"{repo}: the LOCAL_KERNELS directory {path} {problem}")


def _get_kernel(kernels, repo: str, version: int):
    """kernels.get_kernel, given up on after HUB_TIMEOUT_S. The thread is left to finish; a
    retry while it still hangs waits on it again rather than starting a second fetch."""
    hung = _fetching.get((repo, version))
    if hung is not None and hung.is_alive():
        hung.join(HUB_TIMEOUT_S)
        if hung.is_alive():
            raise TimeoutError(f"the Hub did not answer within {HUB_TIMEOUT_S:.0f} s")
    done: dict[str, object] = {}

    def fetch() -> None:
        try:
            done["module"] = kernels.get_kernel(repo, version=version)
        except Exception as exc:  # handed to the caller below
            done["error"] = exc

    worker = threading.Thread(target=fetch, name=f"hub {repo}", daemon=True)
    worker.start()
    worker.join(HUB_TIMEOUT_S)
    if worker.is_alive():
        _fetching[(repo, version)] = worker
        raise TimeoutError(f"the Hub did not answer within {HUB_TIMEOUT_S:.0f} s")
    if "error" in done:
        raise done["error"]  # type: ignore[misc]
    return done["module"]


def _import_kernels():
    try:
        import kernels
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == "kernels":
            raise KernelUnavailable(
                "the `kernels` package is not installed (pip install kernels)"
            ) from exc
        raise KernelLoadError(f"the `kernels` package did not import: {_describe(exc)}") from exc
    return kernels


def _override_path(repo: str) -> str | None:
    for item in os.environ.get("LOCAL_KERNELS", "").split(":"):
        name, _, path = item.partition("=")
        if name.strip() == repo and path:
            return path.strip()
    return None


def _explain(exc: Exception) -> str:
    """Name the real cause: kernels reports an unreachable Hub as a trust problem, and its
    advice (set trust_remote_code, pass a revision) is not something a user of the app can or
    should do, so a known cause is said in our words and kernels' text goes to the log."""
    text = _describe(exc)
    log.info("kernels could not load the kernel: %s", text)
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0"):
        return "HF_HUB_OFFLINE is set and this version of the kernel is not in the local cache"
    if isinstance(exc, RuntimeError) and "arch" in str(exc).lower():
        return f"no build of this kernel for this GPU architecture ({text})"
    if isinstance(exc, FileNotFoundError):
        return f"no build of this kernel for this torch/CUDA/GPU combination ({text})"
    if isinstance(exc, ImportError):
        return f"the kernel needs a Python package that is missing ({text})"
    if isinstance(exc, TimeoutError):
        return str(exc)
    if not hub_reachable():
        return "the Hugging Face Hub is unreachable from this machine"
    return text


def hub_reachable(timeout: float = 2.0) -> bool:
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def _describe(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__
