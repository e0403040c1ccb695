"""FLOPs and bytes of an operator from the shapes an uploaded trace recorded.

A trace profiled with `record_shapes=True` gives each CPU op "Input Dims", "Input type" and
"Concrete Inputs" (scalars as text). A kernel's work is read off the op that launched it (the
innermost one: `aten::bmm` under `aten::matmul`, `aten::copy_` under `aten::clone`).
`with_flops=True` is meant to add a "flops" arg, but torch 2.11's Chrome export writes none
(checked on tests/fixtures/h200_user-*.json.gz, recorded with both flags): where a trace has
one (another torch version), it is preferred for the FLOPs ("profiler: flops").

Hand-written rather than torch.utils.flop_counter: that needs torch (analyses must not import
it) and counts only matmul-like ops, not the bytes. Rules:

- mm, bmm, matmul, baddbmm, addmm, linear: 2·batch·m·k·n FLOPs; bytes: the tensor inputs
  read + the [batch, m, n] output written.
- elementwise (mul, masked_fill, softmax, …): ELEMENTWISE_FLOPS per element of the largest
  input; bytes: the tensor inputs + one output that size (in place, `mul_`: the first input,
  written back; `_to_copy`: at the dtype it casts to).
- copy_ (dst, src): 0 FLOPs; src read + dst written. fill_, zero_: the tensor written.
- SDPA and its backend ops: 4·D per visible pair per head (a backward 2.5×); bytes: q, k, v
  (and a mask) read and the output written (a backward: 2×).

`is_causal` is SDPA's (top-left: query i sees keys ≤ i); `custom_mask_type` 2 of the
efficient kernels is bottom-right. They differ only when Tq ≠ Tk. The pairs are counted here,
not with attention.masks (which imports torch).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from profiling.analysis.summary import BACKWARD_FLOPS
from profiling.kernels.work import Work

SHAPES_SOURCE = "recorded shapes"
PROFILER_FLOPS = "profiler: flops"
DTYPE_BYTES = {
    "c10::BFloat16": 2, "c10::Half": 2, "float": 4, "double": 8, "bool": 1, "unsigned char": 1,
    "signed char": 1, "short int": 2, "int": 4, "long int": 8, "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
}  # fmt: skip
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2}  # c10 codes
GEMM_OPERANDS = {"mm": 0, "bmm": 0, "matmul": 0, "baddbmm": 1, "addmm": 1, "linear": 0}
ELEMENTWISE_FLOPS = {
    "mul": 1, "div": 1, "add": 1, "sub": 1, "exp": 1, "neg": 1, "isneginf": 1, "eq": 1, "ne": 1,
    "gt": 1, "lt": 1, "ge": 1, "le": 1, "masked_fill": 0, "where": 0, "clone": 0, "contiguous": 0,
    "to": 0, "_to_copy": 0, "bitwise_not": 0, "logical_not": 0, "tril": 0, "triu": 0,
    "softmax": 5, "_softmax": 5, "_safe_softmax": 5, "log_softmax": 5, "_log_softmax": 5,
    "_softmax_backward_data": 4,
}  # fmt: skip


class Attention(NamedTuple):
    """Where an SDPA op keeps its arguments: q's index (backward ops start with dO), is_causal's
    or custom_mask_type's index, the mask's index, and whether tensors are [B, T, H, D]."""

    query: int
    causal: int
    mask: int | None
    seq_first: bool = False
    backward: bool = False
    mask_type: bool = False  # `causal` holds custom_mask_type (0 none, 1 top-left, 2 bottom-right)


# Argument positions from torch's schemas (torch.ops.aten.<op>.default._schema)
ATTENTION_OPS = {
    "scaled_dot_product_attention": Attention(0, 5, 3),
    "_scaled_dot_product_flash_attention": Attention(0, 4, None),
    "_scaled_dot_product_efficient_attention": Attention(0, 6, 3),
    "_scaled_dot_product_cudnn_attention": Attention(0, 6, 3),
    "_scaled_dot_product_fused_attention_overrideable": Attention(0, 5, 3),
    "_cudnn_attention_forward": Attention(0, 10, 3),
    "_flash_attention_forward": Attention(0, 8, None, seq_first=True),
    "_efficient_attention_forward": Attention(0, 9, 3, seq_first=True, mask_type=True),
    "_scaled_dot_product_flash_attention_for_cpu": Attention(0, 4, 5),
    "_scaled_dot_product_flash_attention_backward": Attention(1, 11, None, backward=True),
    "_scaled_dot_product_efficient_attention_backward": Attention(1, 11, 4, backward=True),
    "_scaled_dot_product_cudnn_attention_backward": Attention(1, 14, 8, backward=True),
    "_cudnn_attention_backward": Attention(1, 14, 8, backward=True),
    "_flash_attention_backward": Attention(1, 11, None, seq_first=True, backward=True),
    "_efficient_attention_backward": Attention(
        1, 14, 4, seq_first=True, backward=True, mask_type=True
    ),
    "_scaled_dot_product_flash_attention_for_cpu_backward": Attention(1, 7, 8, backward=True),
}


def args_work(op_name: str, args: Mapping[str, Any] | None) -> Work | None:
    """shape_work from a CPU op's trace args; None without recorded shapes."""
    args = args or {}
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    flops = args.get("flops")
    recorded = (
        float(flops) if isinstance(flops, int | float) and not isinstance(flops, bool) else None
    )
    return shape_work(op_name, dims, types, args.get("Concrete Inputs"), recorded_flops=recorded)


def shape_work(
    op_name: str,
    input_dims: Sequence[Any],
    input_types: Sequence[Any],
    concrete_inputs: Sequence[Any] | None = None,
    *,
    recorded_flops: float | None = None,
) -> Work | None:
    """The op's FLOPs and bytes from its recorded shapes (module docstring); None for an op
    with no rule here or shapes that do not fit one."""
    name = op_name.removeprefix("aten::")
    tensors = _tensors(input_dims, input_types)
    concrete = list(concrete_inputs or [])
    if name in GEMM_OPERANDS:
        work = _gemm(tensors, GEMM_OPERANDS[name], transposed=name == "linear")
    elif name in ATTENTION_OPS:
        work = _attention(ATTENTION_OPS[name], tensors, concrete)
    else:
        work = _elementwise(name, tensors, concrete)
    if work is None or recorded_flops is None:
        return work
    return Work(recorded_flops, work.bytes, f"{PROFILER_FLOPS}; bytes: {SHAPES_SOURCE}")


class Tensor(NamedTuple):
    index: int
    dims: tuple[int, ...]
    element_bytes: int

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> int:
        return self.elements * self.element_bytes


def _tensors(input_dims: Sequence[Any], input_types: Sequence[Any]) -> list[Tensor]:
    """The inputs that are tensors of a known dtype (scalars and lists are "Scalar"…)."""
    found = []
    for index, (dims, kind) in enumerate(zip(input_dims, input_types, strict=False)):
        size = DTYPE_BYTES.get(kind) if isinstance(kind, str) else None
        if size and isinstance(dims, list) and all(isinstance(d, int) for d in dims):
            found.append(Tensor(index, tuple(dims), size))
    return found


def _gemm(tensors: list[Tensor], first: int, *, transposed: bool) -> Work | None:
    operands = [t for t in tensors if t.index in (first, first + 1)]
    if len(operands) != 2 or not operands[0].dims or not operands[1].dims:
        return None
    left, right = operands
    left_dims = left.dims if len(left.dims) > 1 else (1, *left.dims)
    right_dims = tuple(reversed(right.dims[-2:])) if transposed else right.dims
    right_dims = right_dims if len(right_dims) > 1 else (*right_dims, 1)
    (rows, inner), (inner_right, columns) = left_dims[-2:], right_dims[-2:]
    if inner != inner_right:
        return None
    lead_left, lead_right = left_dims[:-2], right.dims[:-2] if not transposed else ()
    width = max(len(lead_left), len(lead_right))
    lead_left = (1,) * (width - len(lead_left)) + tuple(lead_left)
    lead_right = (1,) * (width - len(lead_right)) + tuple(lead_right)
    batch = math.prod(max(a, b) for a, b in zip(lead_left, lead_right, strict=True))
    flops = 2.0 * batch * rows * inner * columns
    written = batch * rows * columns * left.element_bytes
    return Work(flops, float(sum(t.bytes for t in tensors) + written), SHAPES_SOURCE)


def _elementwise(name: str, tensors: list[Tensor], concrete: list[Any]) -> Work | None:
    if not tensors:
        return None
    first = tensors[0]
    if name == "copy_":  # (dst, src): dst is written, not read
        return Work(0.0, float(sum(t.bytes for t in tensors[:2])), SHAPES_SOURCE)
    if name in ("fill_", "zero_"):
        return Work(0.0, float(first.bytes), SHAPES_SOURCE)
    base = name.removesuffix("_") if name.endswith("_") and not name.startswith("_") else name
    if base not in ELEMENTWISE_FLOPS:
        return None
    # one output the size of the largest input: in place (`mul_`) that is the first input
    largest = max(tensors, key=lambda t: t.elements)
    read = sum(t.bytes for t in tensors)
    written = largest.elements * (_cast_bytes(name, concrete) or first.element_bytes)
    return Work(ELEMENTWISE_FLOPS[base] * float(largest.elements), float(read + written),
                SHAPES_SOURCE)  # fmt: skip


def _cast_bytes(name: str, concrete: list[Any]) -> int | None:
    """The element size `_to_copy(self, dtype, …)` writes, from its dtype code."""
    if name != "_to_copy" or len(concrete) < 2:
        return None
    try:
        return SCALAR_TYPE_BYTES.get(int(str(concrete[1])))
    except ValueError:
        return None


def _attention(op: Attention, tensors: list[Tensor], concrete: list[Any]) -> Work | None:
    by_index = {t.index: t for t in tensors}
    q, k, v = (by_index.get(op.query + i) for i in range(3))
    if q is None or k is None or v is None or len(q.dims) != 4 or len(k.dims) != 4:
        return None
    if op.seq_first:  # [B, T, H, D]
        (batch, queries, heads, head_dim), keys = q.dims, k.dims[1]
    else:  # [B, H, T, D]
        (batch, heads, queries, head_dim), keys = q.dims, k.dims[2]
    flag = str(concrete[op.causal]).strip() if op.causal < len(concrete) else ""
    mask = by_index.get(op.mask) if op.mask is not None else None
    if mask is not None or flag in ("", "False", "0"):
        pairs = queries * keys  # an explicit mask is applied to every pair, not skipped
    elif op.mask_type and flag == "2":
        pairs = causal_pairs(queries, keys, bottom_right=True)
    else:
        pairs = causal_pairs(queries, keys, bottom_right=False)
    flops = 4.0 * head_dim * pairs * batch * heads
    moved = q.bytes * 2 + k.bytes + v.bytes + (mask.bytes if mask else 0)
    if op.backward:
        return Work(BACKWARD_FLOPS * flops, 2.0 * moved, SHAPES_SOURCE)
    return Work(flops, float(moved), SHAPES_SOURCE)


def causal_pairs(queries: int, keys: int, *, bottom_right: bool) -> int:
    """(query, key) pairs a causal mask lets through per batch × head: top-left, query i sees
    keys ≤ i; bottom-right, keys ≤ i + keys − queries (attention.masks.visible_pairs' rule)."""
    if bottom_right:
        offset = keys - queries
        if offset >= 0:
            return queries * offset + queries * (queries + 1) // 2
        return keys * (keys + 1) // 2
    if queries <= keys:
        return queries * (queries + 1) // 2
    return keys * (keys + 1) // 2 + (queries - keys) * keys
