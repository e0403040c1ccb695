"""Kernel table and kernel-name decoding: read a GPU kernel's name like a fingerprint.

The post's habit: `s16816` means bf16 tensor-core MMA, `sgemm` FP32 on CUDA cores, `fmha_cutlassF`
the xformers kernel, `cudnn_generated_..._fprop` a kernel cuDNN generated for this problem. These
rules put that reading next to every kernel in the table. Rules are tried in order; the first
match gives the category, and every matching hint adds a phrase to the decoding.

A hint says what the name itself says; some add what the name means in this app's own runs (a
`reduce_kernel` there is the math backend's _safe_softmax guard). That layer is shown only when
the caller says the trace is one this app made (`own_run=True`): an uploaded trace's
`reduce_kernel` can be any reduction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from profiling.analysis.columns import KERNEL_COLUMNS
from profiling.kernels.demangled import own_function, plain
from profiling.trace.events import span_args
from profiling.trace.query import first_rows, is_in

CATEGORIES = (
    "fused attention", "gemm", "softmax", "reduction", "elementwise", "triton", "memcpy",
    "memset", "other",
)  # fmt: skip

# (pattern, category) — first match wins. Fused attention before triton: flex is both.
_CATEGORY_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^Memcpy|memcpy", re.I), "memcpy"),
    (re.compile(r"^Memset|memset", re.I), "memset"),
    (
        re.compile(
            r"flash_fwd|flash_bwd|flash_decode|flash_attn|fmha|_sdpa_|fprop|bprop|dot_do_o|convert_dq"
            r"|flex_attention|attn_fwd|attention|flash_?attn",
            re.I,
        ),
        "fused attention",
    ),
    (re.compile(r"softmax", re.I), "softmax"),
    (re.compile(r"^triton_|triton", re.I), "triton"),
    (
        re.compile(
            r"nvjet|gemm|gemv|s16816|h16816|xmma|cutlass|cublas|Kernel2|matmul|^Cijk_|splitKreduce",
            re.I,
        ),
        "gemm",
    ),
    (re.compile(r"reduce_kernel|reduction|_red_", re.I), "reduction"),
    (re.compile(r"elementwise|triu_tril|fill|copy|index|where|cat_|arange", re.I), "elementwise"),
]


class Hint(NamedTuple):
    """What a name says, and what it means in a run this app made (shown only for those)."""

    pattern: re.Pattern[str]
    says: str  # "" when only this app's context has something to say
    ours: str = ""  # this app's context: true of its own runs, a guess for any other trace


# (pattern, what the name says, this app's context): every matching hint contributes a phrase
# (`{0}` takes the first group); the context only where the caller says the run is ours.
_HINT_ROWS: list[tuple[re.Pattern[str], str] | tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"nvjet"), "cuBLAS GEMM (nvjet, a Hopper JIT-built kernel) on tensor cores"),
    # CUTLASS 2's procedural names: cutlass_<sm>_<tensorop|simt>_<acc><mma shape>gemm_<tile>_…
    (re.compile(r"cutlass_(\d\d)_\w*gemm"), "CUTLASS GEMM built for sm_{0}"),
    (re.compile(r"cutlass3x_sm(\d+)_\w*gemm"), "CUTLASS 3 GEMM built for sm_{0}"),
    (re.compile(r"GemmUniversal|GroupedGemm|kernel_gemm_"), "GEMM (CUTLASS/CK template)"),
    (re.compile(r"(?<!wmma_)tensorop"), "on tensor cores"),
    (re.compile(r"_simt_(?!sgemm)"), "on CUDA cores (SIMT): no tensor cores"),
    (re.compile(r"s1688(?:tf32)?gemm"), "MMA 16×8×8 (fp32 data: TF32), fp32 accumulation"),
    (re.compile(r"[zd]884gemm"), "MMA 8×8×4 in fp64"),
    (
        re.compile(r"gemm\w*?_(\d+x\d+)_(\d+)x(\d+)_[nt][nt]_"),
        "tile {0}, K-tile {1}, pipeline stages {2}",
    ),
    (re.compile(r"^Cijk_\w*?MT(\d+x\d+x\d+)"), "Tensile GEMM (rocBLAS/hipBLASLt), tile {0}"),
    (re.compile(r"^Cijk_\w*_MI\d+x"), "on matrix cores (MFMA)"),
    (re.compile(r"gemvx|gemv2|gemvNSP"), "cuBLAS GEMV: a matrix times a vector"),
    (re.compile(r"splitKreduce"), "cuBLAS split-K: the partial GEMM sums added up"),
    (re.compile(r"s16816|h16816"), "tensor-core MMA 16×8×16 in bf16/fp16 (Ampere-style)"),
    (re.compile(r"sgemm|gemm_f32f32|xmma_gemm_f32"), "FP32 GEMM on CUDA cores: no tensor cores"),
    (re.compile(r"fmha_cutlassF"), "memory-efficient fused attention (xformers, CUTLASS forward)"),
    (re.compile(r"fmha_cutlassB"), "memory-efficient attention backward (xformers, CUTLASS)"),
    (re.compile(r"pytorch_flash::flash_bwd"), "FlashAttention-2 backward bundled in PyTorch"),
    (
        re.compile(r"flash_bwd_dq_dk_dv"),
        "dQ, dK and dV in one pass over key blocks (parallel over the keys; dQ added up in FP32)",
    ),
    (re.compile(r"dot_do_o"), "backward pre-processing: delta = rowsum(dO ∘ O) per query row"),
    (re.compile(r"convert_dq"), "dQ, added up in FP32, converted to the input's 16 bits"),
    (re.compile(r"sdpa.*bprop|flash_bprop"), "fused attention backward (flash-style bprop)"),
    (re.compile(r"flex_attention_backward"), "FlexAttention backward"),
    (re.compile(r"softmax_warp_backward"), "softmax backward, one warp per row (rows ≤ 1024)"),
    (re.compile(r"SoftMaxBackward"), "softmax backward, one block per row (long rows)"),
    (re.compile(r"_softmax_backward_data"), "softmax backward, fused by Inductor"),
    (re.compile(r"_rf_"), "rf = accumulator kept in the register file"),
    (re.compile(r"pytorch_flash::flash_fwd"), "FlashAttention-2 forward bundled in PyTorch"),
    (
        re.compile(r"splitkv_kernel|flash_decode_partial"),
        "split-KV (flash-decoding): one chunk of the KV cache per program, partial results",
    ),
    (
        re.compile(r"splitkv_combine|flash_decode_combine|FlashAttnFwdCombine"),
        "split-KV combine: the chunks' partial outputs merged by their log-sum-exp",
    ),
    (re.compile(r"flash_fwd|flash_attn|FlashAttnFwdSm"), "FlashAttention forward"),
    (re.compile(r"FlashAttnBwdSm|FmhaBwdDQDKDV"), "FlashAttention backward: dQ, dK and dV"),
    (re.compile(r"cudnn_generated"), "kernel generated by cuDNN for this exact problem"),
    (re.compile(r"sdpa.*fprop|flash_fprop"), "fused attention forward (flash-style fprop)"),
    (re.compile(r"knob_(\d+)"), "knob_{0} = one of cuDNN's pre-tuned configurations"),
    (re.compile(r"wgmma"), "wgmma = Hopper warpgroup matrix multiply"),
    (re.compile(r"(?<!w)wmma"), "wmma = warp matrix multiply (tensor cores)"),
    (re.compile(r"flex_attention"), "FlexAttention, a Triton template generated by Inductor"),
    (re.compile(r"triton_per_"), "Inductor Triton kernel: persistent reduction"),
    (re.compile(r"triton_red_"), "Inductor Triton kernel: reduction"),
    (re.compile(r"triton_poi_"), "Inductor Triton kernel: pointwise"),
    (re.compile(r"triton_tem_"), "Inductor Triton template kernel"),
    (re.compile(r"_attn_fwd|attn_fwd_kernel"), "hand-written Triton attention kernel"),
    (  # the pointer, TMA (flash_tma) and warp-specialised Gluon (flash_gluon_ws) forwards
        re.compile(r"^_flash_fwd_(?:tma_|ws_)?kernel$"),
        "",
        "our Triton FlashAttention (attention/flash_triton)",
    ),
    (
        re.compile(r"^_flash_decode_"),
        "",
        "our Triton FlashAttention's decode path (attention/flash_triton)",
    ),
    (
        re.compile(r"^_flash_bwd_"),
        "",
        "our Triton FlashAttention's backward (attention/flash_triton)",
    ),
    (re.compile(r"softmax_warp_forward"), "PyTorch softmax, one warp per row (rows ≤ 1024)"),
    (re.compile(r"SoftMaxForward"), "PyTorch softmax, one block per row (long rows)"),
    (
        re.compile(r"triu_tril"),
        "triu/tril: builds a triangular matrix",
        "the causal mask, rebuilt each call",
    ),
    (
        re.compile(r"(?<!splitK)reduce_kernel"),
        "reduction kernel",
        "math backend: the _safe_softmax guard",
    ),
    (
        re.compile(r"masked_fill"),
        "masked_fill: writes one value where a mask is set",
        "-inf above the diagonal: the causal mask",
    ),
    (re.compile(r"MulFunctor"), "elementwise multiply", "the `* scale`"),
    (
        re.compile(r"where_kernel"),
        "where: picks elementwise by a condition",
        "selects from the mask",
    ),
    (re.compile(r"FillFunctor"), "fill"),
    (re.compile(r"direct_copy_kernel|copy_kernel"), "copy / dtype cast"),
    (re.compile(r"Memcpy DtoD"), "device→device copy", "a whole tensor duplicated"),
    (re.compile(r"Memcpy HtoD"), "host→device copy"),
    (re.compile(r"Memcpy DtoH"), "device→host copy (a sync point)"),
    (re.compile(r"^Memset"), "memset (workspace or output zeroing)"),
    (re.compile(r"sm(\d\d)(?:a)?_"), "built for sm_{0}"),
    (re.compile(r"bf16|BFloat16|__nv_bfloat16"), "bf16 data"),
    # cuDNN writes `wgmma_f16` for fp16 and bf16 inputs alike: the MMA's width, not a dtype
    (re.compile(r"mma_f16"), "f16 = 16-bit MMA inputs (fp16 or bf16: the name does not say)"),
    (re.compile(r"(?<![a-z])(?<!mma_)f16|c10::Half|__half"), "fp16 data"),
    (re.compile(r"f32f32|<float,"), "fp32 data"),
    (re.compile(r"tilesize(\d+x\d+x\d+)|_(\d+x\d+)_\d+x\d+_(?![nt][nt]_)"), "tile {0}"),
]
_HINTS = [Hint(*row) for row in _HINT_ROWS]

_SHORT_FUNCTOR = re.compile(
    r"(masked_fill|where|MulFunctor|AddFunctor|FillFunctor|direct_copy|exp|triu_tril|copy)"
)


@lru_cache(maxsize=65536)
def own_name(name: str) -> str:
    """The kernel's own function name: no `void`, return type, namespaces, template arguments
    or parameter list (`fbgemm_gpu::…_kernel<…, fbgemm_gpu::FixedDivisor>` is not a GEMM); the
    kernel inside a wrapper (`cutlass::Kernel<cutlass_80_tensorop_s1688gemm_…>`); a generic
    name with its namespace (`gemvx::kernel`); the whole name where that leaves nothing
    (profiling.kernels.demangled)."""
    return own_function(name) or plain(name)


@lru_cache(maxsize=65536)
def classify(name: str) -> str:
    """The kernel's category, read from its own name (own_name), never its arguments."""
    own = own_name(name)
    for pattern, category in _CATEGORY_RULES:
        if pattern.search(own):
            return category
    return "other"


# PyTorch's own SDPA kernels, by the namespace or generator each backend's kernels carry: the
# backend a CUDA graph's replay ran, where no aten op is left to say it (vocabulary.BACKEND_OPS)
_SDPA_KERNELS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"pytorch_flash::"), "flash"),
    (re.compile(r"PyTorchMemEffAttention"), "efficient"),
    (re.compile(r"cudnn_generated_fort_native_sdpa"), "cudnn"),
]


def sdpa_backend_of_kernels(names: Iterable[Any]) -> str | None:
    """The SDPA backends whose kernels are among `names`, in order of first appearance (None:
    no SDPA kernel; the math backend launches only generic kernels and is never named here)."""
    found: dict[str, None] = {}
    for name in dict.fromkeys(names):
        for pattern, backend in _SDPA_KERNELS:
            if pattern.search(str(name)):
                found[backend] = None
    return " + ".join(found) or None


def with_reading(name: str, reading: str) -> str:
    """ "name — what it says", or the name alone where the decoding says nothing."""
    return f"{name} — {reading}" if reading else name


@lru_cache(maxsize=65536)
def decode(name: str, *, own_run: bool = False) -> str:
    """Plain-words reading of a kernel name (empty when nothing is recognised).

    `own_run`: the caller knows this app made the trace, so this app's context is added
    (`reduce_kernel` → the _safe_softmax guard); otherwise only what the name itself says.
    """
    phrases: list[str] = []
    for hint in _HINTS:
        match = hint.pattern.search(name)
        if match:
            groups = [g for g in match.groups() if g] if match.groups() else []
            text = hint.says.format(*groups) if groups else hint.says
            if own_run and hint.ours:
                text = f"{text} ({hint.ours})" if text else hint.ours
            if text and text not in phrases:
                phrases.append(text)
    if any("FlashAttention-2" in p or "our Triton" in p for p in phrases):
        phrases = [p for p in phrases if p != "FlashAttention forward"]
    return "; ".join(phrases)


@lru_cache(maxsize=65536)
def short_name(name: str) -> str:
    """A readable handle for long C++ template names: the kernel's own name (own_name; the
    kernel inside a wrapper such as cutlass::Kernel), plus the functor if any."""
    text = plain(name)
    base = own_function(name) or text[:60]
    rest = text[text.find(base) + len(base) :] if base in text else ""
    functor = _SHORT_FUNCTOR.search(rest)
    if functor and functor.group(1) not in base:
        base = f"{base} ({functor.group(1).replace('Functor', '').lower()})"
    return base if len(base) <= 80 else base[:77] + "…"


def kernel_table(
    gpu: pd.DataFrame,
    per: int = 1,
    *,
    own_run: bool = False,
    roles: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per GPU kernel / memcpy / memset name, longest total first.

    `gpu` is a slice of the spans table (kind == "gpu", annotations excluded); `per` divides
    counts and totals (e.g. the number of forwards) so the table reads "per forward";
    `own_run` (this app made the trace) adds this app's context to the decoding (see decode);
    `roles`, one per row of `gpu` (profiling.kernels.roles), fill the role column.
    Aggregated with numpy over interned name codes and built as one frame at the end: a pandas
    groupby costs more than the whole table on a run's handful of kernels (docs/performance.md).
    """
    annotation = is_in(gpu["cat"], "gpu_user_annotation")
    work = gpu[~annotation] if annotation.any() else gpu  # a run's slice has none: no copy
    if work.empty:
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    if roles is not None and annotation.any():
        roles = [role for role, kept in zip(roles, ~annotation.to_numpy(), strict=True) if kept]
    codes, names = _name_codes(work["name"])
    dur = work["dur_us"].to_numpy(dtype=float)
    args = work["args"].to_numpy(dtype=object)
    return kernel_frame(codes, names, dur, args, per, own_run=own_run, roles=roles)


def kernel_frame(
    codes: np.ndarray,
    names: Sequence[str],
    dur: np.ndarray,
    args: Sequence[Any],
    per: int,
    *,
    own_run: bool,
    roles: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The kernel table from one code per GPU span (into `names`, in order of first
    appearance), the spans' durations and args: shared by the vectorised path and a run's
    small-trace path (profiling.run.records), so both tables are built by the same code. Each
    caller says whether this app made the trace (`own_run`); `roles`: one per span."""
    if not len(codes):
        return pd.DataFrame(columns=list(KERNEL_COLUMNS))
    distinct = len(names)
    count = np.bincount(codes, minlength=distinct).astype(float)
    total = np.bincount(codes, weights=dur, minlength=distinct)
    low = np.full(distinct, np.inf)
    high = np.full(distinct, -np.inf)
    np.minimum.at(low, codes, dur)
    np.maximum.at(high, codes, dur)
    first = first_rows(codes, distinct)  # first occurrence of each name
    found = [span_args(args[i]) for i in first.tolist()]
    grand = total.sum()

    def first_args(key: str) -> list[Any]:  # `key` of each name's first span's args, or None
        return [entry.get(key) if isinstance(entry, dict) else None for entry in found]

    occupancy = list(zip(*map(_occupancy, found), strict=True))  # (values, notes)
    columns = {
        "kernel": [short_name(n) for n in names],
        "role": _name_roles(codes, distinct, roles),
        "category": [classify(n) for n in names],
        "count": count / per,
        "total_us": total / per,
        "mean_us": total / count,
        "min_us": low,
        "max_us": high,
        "pct_gpu": 100 * total / grand if grand > 0 else np.zeros(distinct),
        "registers_per_thread": first_args("registers per thread"),
        "shared_memory": first_args("shared memory"),
        "grid": [_dims(v) for v in first_args("grid")],
        "block": [_dims(v) for v in first_args("block")],
        "occupancy_pct": list(occupancy[0]),
        "occupancy_note": list(occupancy[1]),
        "decoded": [decode(n, own_run=own_run) for n in names],
        "name": list(names),
    }
    order = np.argsort(-total, kind="stable")  # longest total first, ties in first-seen order
    rows = order.tolist()
    return pd.DataFrame(  # in KERNEL_COLUMNS' order, the columns' one order
        {key: _ordered(columns[key], order, rows) for key in KERNEL_COLUMNS}
    )


def _ordered(column: Any, order: np.ndarray, rows: list[int]) -> Any:
    return column[order] if isinstance(column, np.ndarray) else [column[i] for i in rows]


OCCUPANCY_UNKNOWN = (
    "not measured: CUPTI reports 0% for a grid with work for every SM (a cuLaunchKernelEx or "
    "cluster launch, e.g. cuBLAS's nvjet, cuDNN and Triton kernels)"
)


def _occupancy(args: Any) -> tuple[Any, str]:
    """The profiler's occupancy estimate and a note where it means nothing: 0% reported for a
    grid that gives every SM at least one warp cannot be true; the estimate was not made."""
    if not isinstance(args, dict):
        return None, ""
    value = args.get("est. achieved occupancy %")
    warps = args.get("warps per SM")
    if value == 0 and isinstance(warps, int | float) and warps >= 1:
        return None, OCCUPANCY_UNKNOWN
    return value, ""


def _name_roles(codes: np.ndarray, distinct: int, roles: Sequence[str] | None) -> list[str]:
    """Each name's roles, joined in order of first appearance ("" where none is known)."""
    found: list[dict[str, None]] = [{} for _ in range(distinct)]
    if roles is not None:
        for code, role in zip(codes.tolist(), roles, strict=True):
            if role:
                found[code][role] = None
    return [" + ".join(seen) for seen in found]


def _name_codes(names: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Codes per row into the distinct names, in order of first appearance (as pd.factorize);
    a categorical is factorised on its integer codes, not its strings."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes, used = pd.factorize(names.array.codes)
        values = np.array([str(c) for c in names.cat.categories] + ["nan"], dtype=object)
        return codes, list(values[used])  # code -1 (missing) reads "nan", as str(nan) does
    # str() per name, not astype(str): pandas 3's astype(str) keeps a missing name missing
    codes, uniques = pd.factorize(np.array([str(name) for name in names], dtype=object), sort=False)
    return codes, list(uniques)


def _dims(value: object) -> str | None:
    if isinstance(value, list):
        return "×".join(str(size) for size in value)
    return None
