"""Each GPU kernel's role in attention, read from the operator that launched it.

A kernel's name says what it computes (`softmax_warp_forward`, `flash_bwd_dq_dk_dv…`); the
CPU operator chain above its launch (correlation id → the runtime launch → its parent ops)
says why: the `elementwise_kernel` under `aten::masked_fill` is the mask, the one under
`aten::copy_ < aten::_to_copy` an upcast, the `Memset` under `aten::bmm` cuBLAS's workspace.
The name decides for kernels whose name is their role (fused attention, its backward and
split-KV pieces, copies and memsets); the chain decides for the rest, most specific rule
first (a `where` under `_safe_softmax` is softmax's guard, not the mask).

Which batched matmul is QKᵀ and which is PV: by the recorded shapes where the trace has them
(QKᵀ contracts over the head dim, smaller than the keys it produces), else by order: the
first of exactly two matmul calls under one parent is QKᵀ. In the backward every matmul is
gradient work (dP, dV, dQ, dK): role dQ/dK/dV. A kernel no rule knows has no role ("") and
keeps its name in every view.

Attention roles only where the evidence says attention: this app's own run (its attn_fwd,
attn_bwd and attn_step spans: every kernel in it is attention's), a kernel whose name says
attention, or an attention op above its launch (an SDPA op, a module or record_function whose
name says attention or attn). Any other kernel of an uploaded trace (a recommendation model's
GEMMs, elementwise kernels, collectives) is named plainly from its own name: GEMM,
elementwise, collective, copy, memset, …, or left without a role. A CUDA graph's replayed
kernels have no operator above them (only the span around the replay): inside attention they
are read by their names alone (a masked_fill is the mask, a softmax the softmax). Pure data;
no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from profiling.analysis.columns import ROLE_COLUMNS
from profiling.kernels.names import classify, own_name, short_name
from profiling.trace.query import factorize_texts, is_in
from profiling.vocabulary import BACKWARD, FORWARD, L2_FLUSH, STEP

QK, PV, MATMUL = "QKᵀ", "PV", "matmul"
SCALE, MASK, SOFTMAX, COPY, CAST = "scale", "mask", "softmax", "copy", "cast/upcast"
FUSED_FORWARD, PREPROCESS, GRADIENTS = (
    "fused attention forward", "backward pre-processing", "dQ/dK/dV",
)  # fmt: skip
COMBINE, WORKSPACE = "split-KV combine", "workspace"
FLUSH = "L2 flush (cold-l2 timing, not attention)"
ROLES = (QK, SCALE, MASK, SOFTMAX, PV, MATMUL, COPY, CAST, FUSED_FORWARD, PREPROCESS,
         GRADIENTS, COMBINE, WORKSPACE, FLUSH)  # fmt: skip
# roles outside attention, from the kernel's own name (plain_role)
GEMM, ELEMENTWISE, REDUCTION, COLLECTIVE, MEMSET = (
    "GEMM", "elementwise", "reduction", "collective", "memset",
)  # fmt: skip
PLAIN_ROLES = (GEMM, ELEMENTWISE, REDUCTION, SOFTMAX, COLLECTIVE, COPY, MEMSET)
UNKNOWN = " (no known role)"  # a role table's key for a kernel without a role: "<name> (…)"

# (kernel-name pattern, role): the name is the role, whoever launched it. First match wins.
_NAME_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^Memcpy|memcpy", re.I), COPY),
    (re.compile(r"^Memset|memset", re.I), WORKSPACE),
    (re.compile(r"splitkv_combine|decode_combine|FlashAttnFwdCombine"), COMBINE),
    (re.compile(
        r"dot_do_o|bwd_preprocess|triton_per_fused_flex_attention_backward|FlashAttnBwdPreprocess"
        r"|FmhaBwdOGradDot"
    ), PREPROCESS),
    (re.compile(
        r"flash_bwd|convert_dq|fmha_cutlassB|bprop|flex_attention_backward|FlashAttnBwd|FmhaBwd"
    ), GRADIENTS),
]  # fmt: skip
# Inductor's fused kernels name the ops they fuse (`triton_per_fused__softmax_masked_fill_mul`)
_INDUCTOR = re.compile(r"^triton_[a-z]+_fused_(?P<ops>\w+?)(?:_\d+)?$")
_INDUCTOR_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"softmax"), SOFTMAX),
    (re.compile(r"masked_fill|where|tril|triu"), MASK),
    (re.compile(r"(?:^|_)(?:mul|div)(?:_|$)"), SCALE),
    (re.compile(r"to_copy|convert"), CAST),
    (re.compile(r"clone|copy|cat"), COPY),
]
# (operator pattern, role), tried in this order over the whole chain: a kernel under a
# softmax op is softmax's even when its own op is a `where` or a `mul`
_OP_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"softmax", re.I), SOFTMAX),
    (re.compile(r"^aten::(?:_to_copy|to|type_as|_autocast_to_\w+)$"), CAST),
    (re.compile(
        r"^aten::(?:masked_fill_?|tril_?|triu_?|where|ones|scalar_tensor|logical_not|bitwise_not)$"
    ), MASK),
    (re.compile(r"^aten::(?:mul|mul_|div|div_)$"), SCALE),
    (re.compile(r"^aten::(?:bmm|matmul|baddbmm|einsum)$"), MATMUL),
    (re.compile(r"^aten::(?:zeros|zero_|zeros_like|new_zeros|empty|fill_)$"), WORKSPACE),
    (re.compile(
        r"^aten::(?:copy_|clone|contiguous|repeat_interleave|cat|index_select|index|stack)$"
        r"|AccumulateGrad"
    ), COPY),
]  # fmt: skip
_MATH = "aten::_scaled_dot_product_attention_math"  # its `add_` adds the mask to the scores
# a graph replay's backward has no autograd op above it, only the attn_bwd span
_BACKWARD = re.compile(
    rf"Backward\d*$|^autograd::engine::evaluate_function|^{re.escape(BACKWARD)}$"
)
_NOT_ATTENTION = re.compile(r"^aten::(?:linear|addmm)$")  # projections, not attention's matmuls
# the evidence of attention above a launch: SDPA's ops, this app's spans, a user's module or
# record_function named so, and the math backend's _safe_softmax
_ATTENTION_ABOVE = re.compile(r"attention|attn|_safe_softmax", re.I)
RUN_SPANS = (FORWARD, BACKWARD, STEP)  # only this app's runs write these
# roles a kernel's name alone makes attention's, wherever it runs
_ATTENTION_NAMED = (FUSED_FORWARD, PREPROCESS, GRADIENTS, COMBINE)
# an operator's name is namespaced (aten::, fbgemm::, autograd::…); the spans around a CUDA
# graph's replay (attn_fwd, ProfilerStep#N, a user's record_function) are not
_OPERATOR = re.compile(r"::")
# a kernel replayed with no operator above it, inside attention: its name alone (its functor)
_REPLAYED_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"softmax", re.I), SOFTMAX),
    (re.compile(r"masked_fill|where_kernel|triu_tril|bitwise_not|logical_not"), MASK),
    (re.compile(r"MulFunctor|DivFunctor|div_true_kernel"), SCALE),
    (re.compile(r"direct_copy_kernel|CatArrayBatchedCopy"), COPY),
]
_COLLECTIVE = re.compile(r"^nccl|^rccl|AllReduce|AllGather|ReduceScatter|Broadcast|SendRecv")
_PLAIN_BY_CATEGORY = {"gemm": GEMM, "elementwise": ELEMENTWISE, "reduction": REDUCTION,
                      "softmax": SOFTMAX, "memcpy": COPY, "memset": MEMSET}  # fmt: skip


@dataclass(frozen=True)
class Chain:
    """The operators above one kernel's launch, the launching one first, then its parents."""

    names: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()  # their span indices: one op's kernels share its id
    dims: tuple[Any, ...] = ()  # each op's recorded "Input Dims" (None without record_shapes)


@lru_cache(maxsize=65536)
def name_role(name: str) -> str | None:
    """The role a kernel's name alone decides, or None when its launcher must say (cached: many
    signatures share a name, and CK's names run to kilobytes: issue 42, docs/performance.md)."""
    for pattern, role in _NAME_RULES:
        if pattern.search(name):
            return role
    fused = _INDUCTOR.match(name)
    template = name.startswith("triton_tem_")  # Inductor's attention template, not its helpers
    if classify(name) == "fused attention" and (template or not fused):
        return FUSED_FORWARD
    if fused:
        for pattern, role in _INDUCTOR_RULES:
            if pattern.search(fused.group("ops")):
                return role
    return None


def chain_role(chain: Chain) -> str:
    """The role the launching operators decide ("" when none is known)."""
    names = chain.names
    if L2_FLUSH in names:  # the cold-l2 mode's buffer write between steps
        return FLUSH
    if any(_NOT_ATTENTION.match(name) for name in names):
        return ""
    for pattern, role in _OP_RULES:
        if any(pattern.search(name) for name in names):
            return GRADIENTS if role == MATMUL and is_backward(chain) else role
    if _MATH in names and any(name in ("aten::add", "aten::add_") for name in names):
        return MASK
    return ""


def is_backward(chain: Chain) -> bool:
    """Launched by autograd's backward (its engine's `evaluate_function: …Backward0`)."""
    return any(_BACKWARD.search(name) for name in chain.names)


def attention_run(names: Iterable[Any]) -> bool:
    """Whether a trace is one of this app's runs (its attn_fwd/attn_bwd/attn_step spans): then
    every kernel in it is attention's, even one no attention op launched (autograd's thread)."""
    return any(name in RUN_SPANS for name in names)


def kernel_role(name: str, chain: Chain, in_run: bool = False) -> str:
    """One kernel's role before QKᵀ/PV are told apart (`in_run`: the trace is an attention
    run, see attention_run): attention's where the evidence says attention, else plain."""
    named = name_role(name)
    if named is not None and named in _ATTENTION_NAMED:
        return named
    if not (in_run or any(_ATTENTION_ABOVE.search(op) for op in chain.names)):
        return plain_role(name)
    role = named or chain_role(chain)
    if role or not chain.names or any(_OPERATOR.search(op) for op in chain.names):
        return role  # a kernel whose launch the trace did not record is left as it is
    return replayed_role(name, chain)


def replayed_role(name: str, chain: Chain) -> str:
    """The role of an attention kernel no operator launched (a CUDA graph's replay), by its
    name: a GEMM is a matmul (gradient work in the backward), a masked_fill the mask, …"""
    if classify(name) == "gemm":
        return GRADIENTS if is_backward(chain) else MATMUL
    for pattern, role in _REPLAYED_RULES:
        if pattern.search(name):
            return role
    return ""


def plain_role(name: str) -> str:
    """A kernel outside attention, named for what its own name says it is ("" if nothing)."""
    if _COLLECTIVE.search(own_name(name)):
        return COLLECTIVE
    return _PLAIN_BY_CATEGORY.get(classify(name), "")


def roles(names: Sequence[str], chains: Sequence[Chain], *, in_run: bool = False) -> list[str]:
    """One role per kernel (names and chains in launch order; `in_run`: an attention run's,
    see attention_run); matmuls told apart as QKᵀ / PV by their shapes, else by their order
    under one parent."""
    found = [kernel_role(name, chain, in_run) for name, chain in zip(names, chains, strict=True)]
    groups: dict[int, list[int]] = {}  # parent op id → its matmul calls' ids, in order
    for index, role in enumerate(found):
        if role != MATMUL:
            continue
        by_shape = _by_shape(chains[index])
        if by_shape:
            found[index] = by_shape
            continue
        call, parent = _matmul_call(chains[index], index)
        calls = groups.setdefault(parent, [])
        if call not in calls:
            calls.append(call)
    for index, role in enumerate(found):
        if role == MATMUL and not _by_shape(chains[index]):
            call, parent = _matmul_call(chains[index], index)
            calls = groups[parent]
            if len(calls) == 2:
                found[index] = (QK, PV)[calls.index(call)]
    return found


def _matmul_call(chain: Chain, kernel: int) -> tuple[int, int]:
    """(the outermost matmul op's id, the id of the op above it; -1 at the top); a replayed
    GEMM with no matmul op is its own call (-2 - its index) under the span it was replayed in."""
    rule = _OP_RULES[4][0]
    ops = [i for i, name in enumerate(chain.names) if rule.search(name)]
    if not ops:
        return -2 - kernel, chain.ids[0] if chain.ids else -1
    outer = max(ops)
    parent = chain.ids[outer + 1] if outer + 1 < len(chain.ids) else -1
    return chain.ids[outer], parent


def _by_shape(chain: Chain) -> str | None:
    """QKᵀ or PV from a matmul's recorded input dims: QKᵀ contracts over the head dim,
    smaller than the key count it produces ([…, Tq, D] @ [..., D, Tk]); PV the reverse."""
    rule = _OP_RULES[4][0]
    for name, dims in zip(chain.names, chain.dims, strict=False):
        if rule.search(name) and isinstance(dims, list) and len(dims) >= 2:
            left, right = dims[0], dims[1]
            if isinstance(left, list) and isinstance(right, list) and len(right) >= 2:
                contracted, produced = right[-2], right[-1]
                if contracted != produced:
                    return QK if contracted < produced else PV
    return None


def record_chains(spans: Sequence[Any], work: Sequence[Any]) -> list[Chain]:
    """Each kernel's chain in a run's records (profiling.run.records spans: `link` to the
    launch, `parent` up the launching thread)."""
    known: dict[int, Chain] = {}

    def chain_above(index: int) -> Chain:
        if index < 0:
            return Chain()
        if index not in known:
            above = chain_above(spans[index].parent)
            known[index] = Chain(
                (spans[index].name, *above.names), (index, *above.ids), (None, *above.dims)
            )
        return known[index]

    return [chain_above(spans[span.link].parent if span.link >= 0 else -1) for span in work]


def table_chains(spans: Any, rows: Sequence[int]) -> list[Chain]:
    """Each kernel's chain in the trace model's spans table (`rows`: the kernels' positions;
    `link` and `parent` hold positions), with the recorded input dims where the trace has
    them."""
    parent = spans["parent"].to_numpy()
    link = spans["link"].to_numpy()
    names = spans["name"].to_numpy()
    args = spans["args"].to_numpy() if "args" in spans else None
    known: dict[int, Chain] = {}

    def chain_above(index: int) -> Chain:
        chain = Chain()
        path = []
        while index >= 0 and index not in known:
            path.append(index)
            index = int(parent[index])
        if index >= 0:
            chain = known[index]
        for step in reversed(path):
            chain = Chain(
                (str(names[step]), *chain.names),
                (step, *chain.ids),
                (_dims(args, step), *chain.dims),
            )
            known[step] = chain
        return chain

    return [chain_above(int(parent[link[row]]) if link[row] >= 0 else -1) for row in rows]


def _dims(args: Any, index: int) -> Any:
    if args is None:
        return None
    found = args[index]
    if isinstance(found, dict):
        return found.get("Input Dims")
    return getattr(found, "input_dims", None)


@dataclass(frozen=True)
class KernelSpans:
    """A phase's kernels one by one, in launch order: what the role table and the per-kernel
    roofline are made from."""

    names: tuple[str, ...] = ()
    durations: tuple[float, ...] = ()  # µs
    roles: tuple[str, ...] = ()
    args: Sequence[Any] = ()  # each kernel's args (memcpy/memset bytes)
    chains: Sequence[Chain] = ()
    keys: Sequence[int] = ()  # optional: kernels with one key have the same name, role, own
    # bytes, launching ops and shapes (profiling.kernels.chains), so the same roofline Work


def role_table(spans: KernelSpans, per: int = 1) -> pd.DataFrame:
    """µs and kernel count per role, per step (`per` steps), longest first; a kernel with no
    known role is its own row, under its name."""
    if not len(spans.names):
        return pd.DataFrame(columns=list(ROLE_COLUMNS))
    # one key per distinct (name, role) pair, in order of first appearance (hashing ints)
    name_codes, names = factorize_texts(spans.names)
    role_codes, roles = factorize_texts(spans.roles)
    pair_codes, pairs = pd.factorize(role_codes.astype(np.int64) * len(names) + name_codes)
    keys: dict[str, list[str]] = {}  # key → its kernels' short names, in order
    position: dict[str, int] = {}  # key → its row, in the same order
    key_of_pair = []
    for pair in pairs.tolist():
        short = short_name(names[pair % len(names)])
        role = roles[pair // len(names)]
        key = role if role != "" else f"{short}{UNKNOWN}"
        shorts = keys.setdefault(key, [])
        if short not in shorts:
            shorts.append(short)
        key_of_pair.append(position.setdefault(key, len(position)))
    key_codes = np.array(key_of_pair, dtype=np.int64)[pair_codes]
    durations = np.asarray(spans.durations, dtype=float)
    us = np.bincount(key_codes, weights=durations, minlength=len(keys))
    calls = np.bincount(key_codes, minlength=len(keys))
    total = float(durations.sum()) or 1.0
    table = pd.DataFrame(
        {
            "role": np.array(list(keys), dtype=object),
            "us": us / per,
            "pct_gpu": 100 * us / total,
            "calls": calls / per,
            "kernels": np.array([", ".join(shorts) for shorts in keys.values()], dtype=object),
        }
    )
    order = np.argsort(-table["us"].to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)[list(ROLE_COLUMNS)]


ROLE_LIMIT = 200_000  # kernels: beyond this a Gantt keeps its category colours (roles cost)


def table_roles(spans: pd.DataFrame) -> np.ndarray | None:
    """A role per row of a whole spans table ("" for any other span), or None where the table
    is not one whole trace (a slice: its parent and link positions point outside it) or has
    more kernels than ROLE_LIMIT."""
    if not {"parent", "link", "category"} <= set(spans.columns):
        return None
    if not spans.index.equals(pd.RangeIndex(len(spans))):
        return None
    rows = np.flatnonzero(is_in(spans["category"], "kernel"))
    if len(rows) > ROLE_LIMIT:
        return None
    from profiling.kernels.chains import TableKernels  # it builds on this module's rules

    found = np.full(len(spans), "", dtype=object)
    found[rows] = TableKernels(spans, rows).roles
    return found


def record_roles(spans: Sequence[Any]) -> list[str]:
    """table_roles for a run's records (profiling.run.records spans: an attention run's)."""
    kernels = [span for span in spans if span.category == "kernel"]
    found = [""] * len(spans)
    named = roles([s.name for s in kernels], record_chains(spans, kernels), in_run=True)
    for span, role in zip(kernels, named, strict=True):
        found[span.index] = role
    return found
