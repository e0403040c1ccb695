"""FlashAttention-2 in Triton (forward and backward), as a local `kernels` package (offline,
readable source)."""

from .flash_autograd import (
    BackwardConfig,
    DecodeConfig,
    FlashAttnFunction,
    TileConfig,
    flash_attn_decode,
    flash_attn_func,
    flash_attn_func_with_config,
)
from .flash_bwd import flash_attn_backward
from .flash_bwd_config import default_backward_config
from .flash_fwd import (
    SUPPORTED_HEAD_DIMS,
    autotune_configs,
    last_autotune_choice,
    last_autotune_config,
)

__all__ = [
    "SUPPORTED_HEAD_DIMS",
    "BackwardConfig",
    "DecodeConfig",
    "FlashAttnFunction",
    "TileConfig",
    "autotune_configs",
    "default_backward_config",
    "flash_attn_backward",
    "flash_attn_decode",
    "flash_attn_func",
    "flash_attn_func_with_config",
    "last_autotune_choice",
    "last_autotune_config",
]
