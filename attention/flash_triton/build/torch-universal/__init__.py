"""FlashAttention-2 forward in Triton, as a local `kernels` package (offline, readable source)."""

from .flash_fwd import (
    autotune_configs,
    flash_attn_func,
    flash_attn_func_with_config,
    last_autotune_choice,
    last_autotune_config,
)

__all__ = [
    "autotune_configs",
    "flash_attn_func",
    "flash_attn_func_with_config",
    "last_autotune_choice",
    "last_autotune_config",
]
