"""Triton's own fused-attention tutorial, loaded from a local file: issue 44's reference point.

Why it is here: issue 44 asks whether our forward (attention/flash_triton, ~1.31× cuDNN on an
H100 at B4 H16 S4096 D128 bf16 causal) is held back by its structure or by Triton on Hopper.
Triton's public tutorial kernel, timed on the same GPU beside ours and cuDNN, answers that: if
it is closer to cuDNN, its structure is what to adopt; if not, Triton is the limit. It is a
reference point, not a variant of the app (nothing under attention/ or profiling/ imports it).

Source: python/tutorials/06-fused-attention.py of github.com/triton-lang/triton (MIT licence,
© Philippe Tillet and OpenAI; credits: OpenAI kernel team). The stored index holds no copy of
the release/3.6.x branch: its upstream copies (triton-lang/triton@003da478, @dc6ee3ed) are the
Triton ≤ 3.3 tutorial (`_attn_fwd_tma`, experimental descriptors), which does not run on Triton
3.6. The copy used is triton-lang/Triton-to-tile-IR@09deb2ab438b891811c8c8cd7dc463ef9e1c0351
(30,670 characters): the post-3.4 tutorial (one `_attn_fwd` over tensor descriptors, host
`TensorDescriptor` unless Hopper with warp specialisation, `tl.range(warp_specialize=...)`,
Blackwell `maxnreg`). Its forward (kernels, configs, pruning, host launch) reads line for
line as in lightseekorg/triton@36d23e2f, a fork on the 3.9 line, but for the package name and
two `is_cutile()` branches that are inert on CUDA: the forward did not change across 3.6.

The tutorial's source is not committed here: this repository does not carry third-party code.
The benchmark imports the unmodified file from DEFAULT (`.tutorial/`, git-ignored); place it
there (or pass `--tutorial PATH`) and, on the GPU machine, carry `.tutorial`. What the kernel
takes: q, k, v fp16 (its kernel converts P to fp16 and stores fp16, so bf16 is refused by
`tl.dot`), contiguous [B, H, S, D], S a multiple of 128 (no masking at the sequence end).
"""

from __future__ import annotations

import hashlib
import importlib.util
import pathlib
import sys
import types
from typing import Any

import torch

REPO = pathlib.Path(__file__).resolve().parents[1]
FILENAME = "06-fused-attention.py"
DEFAULT = REPO / ".tutorial" / FILENAME
SOURCE = "triton-lang/Triton-to-tile-IR@09deb2ab438b891811c8c8cd7dc463ef9e1c0351"
# What the file must define for the calls below; a different file is refused before import.
MARKERS = (
    "def _attn_fwd(",
    "def _attn_fwd_inner(",
    "class _attention(",
    "def prune_invalid_configs(",
    "def _maybe_make_tensor_desc(",
    "attention = ",
)
MOST_BYTES = 200_000  # the tutorial is ~31 kB


def check_file(path: pathlib.Path) -> str:
    """The file's SHA-256 if it looks like the tutorial (name, size, the functions used);
    ValueError naming the problem otherwise."""
    if path.name != FILENAME:
        raise ValueError(f"expected a file named {FILENAME}, got {path.name!r}")
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"{path} is not a regular file (copy the tutorial there; see --help)")
    data = path.read_bytes()
    if len(data) > MOST_BYTES:
        raise ValueError(f"{path} is {len(data)} bytes; the tutorial is ~31 kB")
    text = data.decode("utf-8", errors="replace")
    missing = [m for m in MARKERS if m not in text]
    if missing:
        raise ValueError(f"{path} does not define {missing}: not the fused-attention tutorial")
    return hashlib.sha256(data).hexdigest()


def load(path: pathlib.Path = DEFAULT, name: str = "_triton_tutorial_fa") -> types.ModuleType:
    """Import the tutorial file as a module (it builds its autotune configs at import)."""
    check_file(path)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def forward(
    mod: types.ModuleType, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
    warp_specialize: bool = False,
) -> torch.Tensor:  # fmt: skip
    """The tutorial's forward on [B, H, S, D] fp16 (scale D**-0.5, as SDPA's default).
    warp_specialize=False on Hopper: host TensorDescriptors; True: device descriptors and the
    warp-specialised loop (the tutorial's own benchmark uses it on Hopper only non-causal)."""
    for name, x in zip("qkv", (q, k, v), strict=True):
        if x.dim() != 4 or x.dtype != torch.float16 or not x.is_contiguous():
            raise ValueError(f"{name}: want contiguous fp16 [B, H, S, D], got {x.dtype} {x.shape}")
    if q.shape != k.shape or q.shape != v.shape or q.shape[2] % 128:
        raise ValueError(f"want equal shapes with S a multiple of 128, got {tuple(q.shape)}")
    with torch.no_grad():
        return mod.attention(q, k, v, causal, q.shape[-1] ** -0.5, warp_specialize)


def autotuner(mod: types.ModuleType) -> Any:
    """The `triton.autotune` object around `_attn_fwd` (its configs, cache and choice)."""
    return mod._attn_fwd


def picked(mod: types.ModuleType) -> str:
    """The config the autotuner chose on the last call, e.g. 'BM128 BN64 w4 s3'."""
    c = getattr(autotuner(mod), "best_config", None)
    if c is None:
        return ""
    return f"BM{c.kwargs['BLOCK_M']} BN{c.kwargs['BLOCK_N']} w{c.num_warps} s{c.num_stages}"


def install_cpu_driver() -> None:
    """For TRITON_INTERPRET=1 without a GPU: the tutorial asks Triton's active driver for a
    device and target at import; with no GPU there is none, so stand in a CPU one."""
    from triton.runtime.driver import driver

    class Target:
        backend, arch, warp_size = "cpu", 0, 32

    class CpuDriver:
        def get_active_torch_device(self) -> torch.device:
            return torch.device("cpu")

        def get_current_target(self) -> Target:
            return Target()

    driver.set_active(CpuDriver())  # type: ignore[arg-type]
