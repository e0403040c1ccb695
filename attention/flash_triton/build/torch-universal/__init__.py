"""FlashAttention-2 forward in Triton, as a local `kernels` package (offline, readable source)."""

from .flash_fwd import (
    SUPPORTED_HEAD_DIMS,
    autotune_configs,
    flash_attn_func,
    flash_attn_func_with_config,
    last_autotune_choice,
    last_autotune_config,
)

__all__ = [
    "SUPPORTED_HEAD_DIMS",
    "autotune_configs",
    "flash_attn_func",
    "flash_attn_func_with_config",
    "last_autotune_choice",
    "last_autotune_config",
]
