"""A demangled C++ kernel name taken apart: its return type, qualified function name, template
arguments and parameters, so the kernel's own name can be read off it.

Libraries launch many kernels through one generic entry point whose template argument is the
real kernel: `void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align4>(…)`,
`void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<…>>(…)`,
`void ck_tile::kentry<256, 2, ck_tile::FmhaFwdKernel<…>>(…)`. cuBLAS's GEMV has a return type
in front, `std::enable_if<!T7, void>::type internal::gemvx::kernel<…>(T13)`, and a generic name
(`kernel`) whose namespace says what it is. Reading the first word before a bracket names all of
these "Kernel", "device_kernel" or "enable_if" (issue 42: 13% of an A100 trace's GPU time in
"Kernel (no known role)"). Pure text, no torch.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

# Entry points whose first type argument is the kernel itself (CUTLASS 2 and 3, FlashAttention
# 3's architecture guard, CK-tile's kentry)
WRAPPERS = frozenset({
    "cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel",
    "flash::enable_sm90_or_later", "flash::enable_sm80_to_sm89", "ck_tile::kentry",
})  # fmt: skip
# Function names that say nothing alone: the namespace above them does (internal::gemvx::kernel)
GENERIC = frozenset({"kernel", "Kernel", "globalKernel", "device_kernel", "run", "entry"})
_QUIET_NAMESPACES = frozenset({"internal", "impl", "detail"})  # dropped from a generic name
# namespaces that carry no meaning and hold brackets of their own
_ANONYMOUS = re.compile(r"\(anonymous namespace\)::|<unnamed>::|\{anonymous\}::")
_BRACKET = re.compile(r"->|[<>()\[\]]")
_NUMBER = re.compile(r"^(?:\([\w: ]+\))?-?\d[\w.]*$|^(?:true|false)$")  # 128, (int)4, (ck::X)2, 32u


class Parts(NamedTuple):
    """A name's qualified function (`cutlass::Kernel`), its top-level template arguments and
    whatever followed them (the parameter list)."""

    function: str
    arguments: tuple[str, ...]


def plain(name: str) -> str:
    """The name without `void ` and anonymous namespaces, trimmed."""
    return _ANONYMOUS.sub("", name.strip().removeprefix("void ")).strip()


@lru_cache(maxsize=65536)
def parts(name: str) -> Parts:
    """Split a demangled name at depth 0: a return type ending in `::type` (std::enable_if) is
    dropped; the function runs to the first `<` or `(`; its template arguments are the pieces
    of that `<…>` between commas at depth 1. A name the profiler cut short (no closing `>`)
    keeps what is there."""
    text = _without_return_type(plain(name))
    opening = _first_at_depth_zero(text, "<(")
    if opening < 0:
        return Parts(text, ())
    function = text[:opening].strip()
    if text[opening] == "(":
        return Parts(function, ())
    closing = _closing(text, opening)
    return Parts(function, tuple(_split_arguments(text[opening + 1 : closing])))


def _without_return_type(text: str) -> str:
    """`std::enable_if<!T7, void>::type internal::gemvx::kernel<…>` → `internal::gemvx::…`."""
    space = _first_at_depth_zero(text, " (")
    if space > 0 and text[space] == " " and text[:space].endswith("::type"):
        return text[space + 1 :].lstrip()
    return text


def _first_at_depth_zero(text: str, marks: str) -> int:
    """Where the first of `marks` outside any bracket is (−1 for none)."""
    depth = 0
    for match in re.finditer(r"->|[<>()\[\] ]", text):
        mark = match.group()
        if mark == "->":
            continue
        if depth == 0 and mark in marks:
            return match.start()
        if mark in "<([":
            depth += 1
        elif mark in ">)]":
            depth = max(depth - 1, 0)
    return -1


def _closing(text: str, opening: int) -> int:
    """The bracket closing the one at `opening` (the end of the text when it was cut short)."""
    depth = 0
    for match in _BRACKET.finditer(text, opening):
        mark = match.group()
        if mark == "->":
            continue
        depth += 1 if mark in "<([" else -1
        if depth == 0:
            return match.start()
    return len(text)


def _split_arguments(text: str) -> list[str]:
    """Top-level comma-separated pieces of a template's argument list."""
    pieces, depth, last = [], 0, 0
    for match in re.finditer(r"->|[<>()\[\],]", text):
        mark = match.group()
        if mark == "->":
            continue
        if mark in "<([":
            depth += 1
        elif mark in ">)]":
            depth = max(depth - 1, 0)
        elif depth == 0:
            pieces.append(text[last : match.start()].strip())
            last = match.end()
    pieces.append(text[last:].strip())
    return [piece for piece in pieces if piece]


@lru_cache(maxsize=65536)
def kernel_function(name: str) -> str:
    """The qualified name of the kernel itself: through any wrapper (WRAPPERS) to its first
    argument that is a type, not a number ("" where the name has none)."""
    found = parts(name)
    for _ in range(4):  # wrappers nest (device_kernel<enable_sm90_or_later<…>>)
        if found.function not in WRAPPERS:
            break
        inner = next((arg for arg in found.arguments if not _NUMBER.match(arg)), None)
        if inner is None:
            break
        found = parts(inner)
    return found.function


@lru_cache(maxsize=65536)
def own_function(name: str) -> str:
    """The kernel's own name: the last part of kernel_function, or, where that part is generic
    (`kernel`), the namespaces that say which one (`gemvx::kernel`)."""
    qualified = kernel_function(name)
    pieces = [piece for piece in qualified.split("::") if piece]
    if not pieces:
        return ""
    if pieces[-1] in GENERIC and len(pieces) > 1:
        kept = [piece for piece in pieces[:-1] if piece not in _QUIET_NAMESPACES]
        return "::".join([*kept[-2:], pieces[-1]])
    return pieces[-1]
