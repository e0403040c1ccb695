"""Every variant the app can profile, one line each, in the order the pickers list them.

Adding a variant: a module under attention/ with its `VARIANT`, one line here, its tests.
"""

from __future__ import annotations

from attention import (
    compiled_naive,
    flex,
    kernels_flash_attn2,
    kernels_flash_attn3,
    kernels_local_triton,
    naive,
    naive_inplace,
    sdpa_auto,
    sdpa_cudnn,
    sdpa_efficient,
    sdpa_flash,
    sdpa_math,
)
from attention.variant import Variant

VARIANTS: dict[str, Variant] = {
    variant.id: variant
    for variant in [
        naive.VARIANT,
        naive_inplace.VARIANT,
        sdpa_auto.VARIANT,
        sdpa_math.VARIANT,
        sdpa_efficient.VARIANT,
        sdpa_flash.VARIANT,
        sdpa_cudnn.VARIANT,
        kernels_flash_attn2.VARIANT,
        kernels_flash_attn3.VARIANT,
        kernels_local_triton.VARIANT,
        flex.VARIANT,
        compiled_naive.VARIANT,
    ]
}
