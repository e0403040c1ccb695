"""The FLOPs one GPU kernel must do and the bytes it must move, from its role in attention.

A kernel's role (profiling.kernels.roles: QKᵀ, softmax, fused attention forward, …) says what
it computes; the workload says how big it is. The bytes are a floor: every operand read once
and every result written once, at the element size the kernel works in (4 bytes where its
name says fp32: `f32f32`, `sgemm`, or float as its first template type; else the workload's).
B batch, Hq query heads, Hkv key/value heads, Tq queries, Tk keys, D head dim, e element
bytes; Q = B·Hq·Tq·D and K = B·Hkv·Tk·D elements; N = B·Hq·Tq·Tk score elements; P the
visible (query, key) pairs per batch × head (counted by the caller: attention.masks).

| role | FLOPs | bytes |
|---|---|---|
| QKᵀ, PV, matmul; dQ/dK/dV when a GEMM | 2·B·Hq·Tq·Tk·D | B·Hq·(Tq·D + Tk·D + Tq·Tk)·e |
| scale | 1 per score | 2·N·e (read + write) |
| mask | 0 | 2·N·e (its [Tq, Tk] bool mask, shared by all B·Hq, left out) |
| mask builders (`triu_tril`, `bitwise_not`, `logical_not`) | 0 | 2·Tq·Tk (bool) |
| a mask bias SDPA materializes (`where` under SDPA, not math) | 0 | Tq·Tk·(1 + e) |
| softmax forward | 5 per score (max, subtract, exp, sum, divide) | 2·N·e |
| softmax backward | 4 per score (y·dy, row sum, subtract, multiply) | 3·N·e (y, dy, dx) |
| softmax's guard (`isneginf`, `all`, `where`) | 0 | 2·N·e |
| cast/upcast | 0 | N·(4 + e): one side fp32 |
| fused attention forward (split-KV partials too) | 4·D·P·B·Hq | (2·Q + 2·K)·e |
| dQ/dK/dV, fused | 2.5 × forward (BACKWARD_FLOPS) | 4·(Q + K)·e: q k v o dO in, dq dk dv out |
| dQ conversion (`convert_dq`) | 0 | Q·(4 + e) |
| backward pre-processing: delta = rowsum(dO∘O) | 2·Q | 2·Q·e + B·Hq·Tq·4 |
| copy, workspace with the profiler's "bytes" | 0 | DtoD copy 2× (read + write), else 1× |

A device-to-device Memcpy reads and writes its "bytes"; HtoD/DtoH touch device memory once
(the other side is host memory); a Memset writes once.

Not placed (FLOPs and bytes None, `source` says why): split-KV combine (the trace does not
say how many splits), a fill (one scalar or a whole mask: the name does not say which), a
copy without "bytes", a kernel with no known role, and the math backend's scale, cast and
`where` kernels: it scales q and k, casts q, k, v, the output and the attention weights as well
as the scores, and without recorded shapes the trace does not say which tensor a kernel touched.
GEMMs of unfused variants use Hq for K and V: they multiply the repeated (GQA) tensors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profiling.analysis.summary import BACKWARD_FLOPS
from profiling.kernels.names import classify

ATTENTION_SOURCE = "attention formula (workload)"
GEMM_SOURCE = "GEMM formula (workload)"
SCORES_SOURCE = "score-matrix elementwise (workload)"
MASK_MATRIX_SOURCE = "mask-matrix elementwise (workload)"
PROFILER_BYTES = "profiler: bytes"
NOT_PLACED = "not placed: "
BACKWARD_PHASE = "attn_bwd"

FP32_NAME = re.compile(r"f32f32|sgemm|xmma_gemm_f32")
# The first data type a kernel's template names is its data's: `AUnaryFunctor<c10::BFloat16, …,
# MulFunctor<float>>` works on bf16 (float is the math type), `softmax_warp_forward<float, …>`
# on fp32.
_FIRST_TYPE = re.compile(
    r"<\s*(c10::BFloat16|c10::Half|__half|__nv_bfloat16|cutlass::\w+|float|double)\b"
)
_MASK_BUILDER = re.compile(r"triu_tril|bitwise_not|logical_not")
_FUSED_BACKWARD = re.compile(r"flash_bwd|fmha_cutlassB|bprop|flex_attention_backward|_bwd_")
_MATH_BACKEND = "aten::_scaled_dot_product_attention_math"
_SDPA = "aten::scaled_dot_product_attention"
_SCORE_FLOPS = {"scale": 1.0, "mask": 0.0, "softmax": 5.0, "cast/upcast": 0.0}
SOFTMAX_BACKWARD_FLOPS = 4.0


@dataclass(frozen=True)
class AttentionShape:
    """One attention call's sizes, as plain numbers (no torch): what role_work scales by."""

    batch: int
    heads: int
    key_heads: int
    queries: int  # Tq
    keys: int  # Tk
    head_dim: int
    element_bytes: int
    visible_pairs: int  # (query, key) pairs a fused kernel computes per batch × head

    @classmethod
    def from_numbers(
        cls,
        batch: int,
        heads: int,
        seq_len: int,
        head_dim: int,
        element_bytes: int,
        *,
        key_heads: int | None = None,
        queries: int | None = None,
        visible_pairs: int | None = None,
    ) -> AttentionShape:
        """From a workload's numbers: `seq_len` keys, `queries` (default seq_len) queries;
        `visible_pairs` defaults to every pair (no mask)."""
        queries = queries or seq_len
        pairs = queries * seq_len if visible_pairs is None else visible_pairs
        shape = cls(batch, heads, key_heads or heads, queries, seq_len, head_dim, element_bytes,
                    pairs)  # fmt: skip
        for name, value in vars(shape).items():
            if not isinstance(value, int) or value < (0 if name == "visible_pairs" else 1):
                raise ValueError(f"AttentionShape.{name} must be a positive integer, not {value!r}")
        return shape

    @property
    def query_elements(self) -> int:  # Q: q, the output, dO, dq
        return self.batch * self.heads * self.queries * self.head_dim

    @property
    def key_elements(self) -> int:  # K: k, v, dk, dv (per key/value head)
        return self.batch * self.key_heads * self.keys * self.head_dim

    @property
    def score_elements(self) -> int:  # N
        return self.batch * self.heads * self.queries * self.keys

    @property
    def forward_flops(self) -> float:
        return 4.0 * self.head_dim * self.visible_pairs * self.batch * self.heads


@dataclass(frozen=True)
class Work:
    """What one kernel call must do: FLOPs, bytes (None where it cannot be said), and where
    the figures came from."""

    flops: float | None
    bytes: float | None
    source: str

    @property
    def placed(self) -> bool:
        return self.flops is not None and self.bytes is not None


def not_placed(why: str) -> Work:
    return Work(None, None, NOT_PLACED + why)


def kernel_bytes(kernel_name: str, shape: AttentionShape) -> int:
    """The element size a kernel works in: 4 where its name says fp32, else the workload's."""
    return 4 if says_fp32(kernel_name) else shape.element_bytes


def says_fp32(kernel_name: str) -> bool:
    """The name says the kernel works on fp32: an FP32 GEMM, or float its first data type."""
    first = _FIRST_TYPE.search(kernel_name)
    return bool(FP32_NAME.search(kernel_name)) or (first is not None and first.group(1) == "float")


def profiler_bytes(kernel_name: str, args: Mapping[str, Any] | None) -> Work | None:
    """A memcpy's or memset's traffic from the profiler's "bytes" arg; None without it."""
    size = (args or {}).get("bytes")
    if not isinstance(size, int | float) or isinstance(size, bool) or size < 0:
        return None
    category = classify(kernel_name)
    if category not in ("memcpy", "memset"):
        return None
    both_sides = category == "memcpy" and "DtoD" in kernel_name
    return Work(0.0, float(size) * (2 if both_sides else 1), PROFILER_BYTES)


def gemm_work(kernel_name: str, shape: AttentionShape) -> Work:
    """QKᵀ ([Tq, D]·[D, Tk]), PV ([Tq, Tk]·[Tk, D]) and the backward's dP, dV, dQ, dK: each
    reads two of the three matrices and writes the third, so all have the same count."""
    batch_heads = shape.batch * shape.heads
    flops = 2.0 * batch_heads * shape.queries * shape.keys * shape.head_dim
    matrices = shape.queries * shape.head_dim + shape.keys * shape.head_dim
    matrices += shape.queries * shape.keys
    return Work(
        flops, float(batch_heads * matrices * kernel_bytes(kernel_name, shape)), GEMM_SOURCE
    )


def score_work(role: str, kernel_name: str, phase: str, shape: AttentionShape) -> Work:
    """An elementwise pass over the B·Hq·Tq·Tk scores (table in the module docstring)."""
    count = float(shape.score_elements)
    size = kernel_bytes(kernel_name, shape)
    if role == "cast/upcast":
        return Work(0.0, count * (4 + shape.element_bytes), SCORES_SOURCE)
    if role == "softmax" and classify(kernel_name) != "softmax":  # _safe_softmax's guard
        return Work(0.0, 2 * count * size, SCORES_SOURCE)
    if role == "softmax" and phase == BACKWARD_PHASE:
        return Work(SOFTMAX_BACKWARD_FLOPS * count, 3 * count * size, SCORES_SOURCE)
    return Work(_SCORE_FLOPS[role] * count, 2 * count * size, SCORES_SOURCE)


def fused_work(role: str, kernel_name: str, shape: AttentionShape) -> Work:
    """The fused kernels: forward, its backward, and the backward's small passes."""
    size = shape.element_bytes
    queries, keys = shape.query_elements, shape.key_elements
    if role == "fused attention forward":
        return Work(shape.forward_flops, float((2 * queries + 2 * keys) * size), ATTENTION_SOURCE)
    if role == "backward pre-processing":
        rows = shape.batch * shape.heads * shape.queries
        return Work(2.0 * queries, float(2 * queries * size + 4 * rows), ATTENTION_SOURCE)
    if "convert_dq" in kernel_name:
        return Work(0.0, float(queries * (4 + size)), ATTENTION_SOURCE)
    flops = BACKWARD_FLOPS * shape.forward_flops
    return Work(flops, float(4 * (queries + keys) * size), ATTENTION_SOURCE)


def role_work(
    role: str,
    kernel_name: str,
    phase: str,
    shape: AttentionShape,
    args: Mapping[str, Any] | None = None,
    ops: Sequence[str] = (),
) -> Work:
    """One kernel call's Work from its role and the workload (the module docstring's table).

    `args`: the kernel's trace args (a memcpy's or memset's "bytes"); `ops`: the operator
    chain that launched it, launching op first (the math backend's kernels need it)."""
    measured = profiler_bytes(kernel_name, args)
    if measured is not None:
        return measured
    category = classify(kernel_name)
    if role in ("copy", "workspace"):
        return not_placed(f"a {role} kernel without the profiler's bytes")
    if role == "split-KV combine":
        return not_placed("split-KV combine: the trace does not say how many splits it merges")
    if role in ("QKᵀ", "PV", "matmul") or (role == "dQ/dK/dV" and category == "gemm"):
        return gemm_work(kernel_name, shape)
    if role in _SCORE_FLOPS:
        return _elementwise(role, kernel_name, phase, shape, ops)
    if role in ("fused attention forward", "backward pre-processing"):
        return fused_work(role, kernel_name, shape)
    if role == "dQ/dK/dV":
        if category == "fused attention" or _FUSED_BACKWARD.search(kernel_name):
            return fused_work(role, kernel_name, shape)
        return not_placed("a gradient kernel that is neither a GEMM nor a fused backward")
    return not_placed(f"no formula for role {role!r}" if role else "no known role")


def _elementwise(
    role: str, kernel_name: str, phase: str, shape: AttentionShape, ops: Sequence[str]
) -> Work:
    if _MASK_BUILDER.search(kernel_name):
        return Work(0.0, 2.0 * shape.queries * shape.keys, MASK_MATRIX_SOURCE)
    if "FillFunctor" in kernel_name:
        return not_placed("a fill: one scalar or a whole mask, the name does not say which")
    math_backend = _MATH_BACKEND in ops
    if role == "mask" and "where" in kernel_name and _SDPA in ops and not math_backend:
        # a CausalBias materialized for SDPA: where(bool mask, 0, -inf) → a [Tq, Tk] bias
        return Work(0.0, (1.0 + shape.element_bytes) * shape.queries * shape.keys,
                    MASK_MATRIX_SOURCE)  # fmt: skip
    if math_backend and (
        role in ("scale", "cast/upcast") or (role == "mask" and "where" in kernel_name)
    ):
        return not_placed(
            "the math backend also scales q and k and casts q, k, v and its outputs: which "
            "tensor this kernel touched needs recorded shapes"
        )
    return score_work(role, kernel_name, phase, shape)
