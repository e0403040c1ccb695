"""SDPA's own answer for an input: which backends accept it, torch's reason for each that
refuses, and the one `F.scaled_dot_product_attention` picks when left to choose.

torch decides this in C++ (sdp_utils.cpp); `torch.backends.cuda.can_use_*_attention(params,
debug=True)` run the same checks and warn the reasons, and `torch._fused_sdp_choice` returns
the backend its dispatcher would take. Asking them, rather than restating their rules, keeps
the reasons torch's own. On a CPU the CUDA checks refuse without a reason: said as such, and
the dispatcher's "flash" there is the CPU's own kernel (CPU_FLASH_KERNEL), not the CUDA backend
those checks ask about (issue 31: "picks flash · flash refuses" read as a contradiction).

The checks' bindings install no Python warning handler, so their C++ warnings bypass the
`warnings` module and go to the process's stderr (c10's default handler): they are read from
file descriptor 2 for the few microseconds of each check, and from `warnings` as well.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

CHECKS = {
    "flash": "can_use_flash_attention",
    "efficient": "can_use_efficient_attention",
    "cudnn": "can_use_cudnn_attention",
}
NAMES = {
    SDPBackend.MATH: "math",
    SDPBackend.FLASH_ATTENTION: "flash",
    SDPBackend.EFFICIENT_ATTENTION: "efficient",
    SDPBackend.CUDNN_ATTENTION: "cudnn",
}
CPU_FLASH_KERNEL = "_scaled_dot_product_flash_attention_for_cpu"  # what "flash" is on a CPU
CPU_REFUSAL = (
    f"a CUDA backend: its checks refuse tensors on the CPU, whose flash is {CPU_FLASH_KERNEL}"
)
TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?")
# c10's default handler: "[W1201 19:00:00.000 123 file.cpp:45] Warning: text (function name)"
C10_LINE = re.compile(r"^\[W\S* [^\]]*\] (?:Warning: )?(?P<text>.*)$")
C10_FUNCTION = re.compile(r" \(function [^)]*\)$")


def first_line(message: str) -> str:
    """A torch warning or error's first line, without its "(Triggered internally at …)" C++
    source location."""
    return TRIGGERED.sub("", message.splitlines()[0] if message else "").strip()


def c10_warnings(output: str) -> list[str]:
    """The messages in what c10's default warning handler wrote: one per "[W…] Warning:"
    line, continuation lines joined to their message."""
    messages: list[str] = []
    for line in output.splitlines():
        found = C10_LINE.match(line)
        if found:
            messages.append(found.group("text").strip())
        elif messages and line.strip():
            messages[-1] = f"{messages[-1]} {line.strip()}"
    messages = [C10_FUNCTION.sub("", TRIGGERED.sub("", message)).strip() for message in messages]
    return [message for message in messages if message]


@contextlib.contextmanager
def stderr_text() -> Iterator[list[str]]:
    """Whatever is written to file descriptor 2 inside, as one string appended to the yielded
    list on exit; fd 2 is restored even if the body raises."""
    found: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield found
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            found.append(sink.read().decode(errors="replace"))


@contextlib.contextmanager
def torch_warnings() -> Iterator[list[str]]:
    """torch's warnings inside, through either path (Python's `warnings`, or c10's handler on
    stderr), with warn-once messages repeated so that a second run still hears them."""
    found: list[str] = []
    warn_always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        with warnings.catch_warnings(record=True) as caught, stderr_text() as printed:
            warnings.simplefilter("always")
            yield found
    finally:
        torch.set_warn_always(warn_always)
    found.extend(str(w.message) for w in caught)
    found.extend(c10_warnings(printed[0] if printed else ""))


class SdpaCall(NamedTuple):
    """One call's inputs, as SDPA's checks and its dispatcher read them ((B, nh, T, hs))."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None
    is_causal: bool
    enable_gqa: bool

    def params(self) -> Any:
        """The checks' SDPAParams for the call (no dropout)."""
        return torch.backends.cuda.SDPAParams(
            self.q, self.k, self.v, self.mask, 0.0, self.is_causal, self.enable_gqa
        )

    def unmasked(self) -> SdpaCall:
        """The call with no mask: what causal_lower_right asks flash and efficient first."""
        return self._replace(mask=None, is_causal=False)


@dataclass(frozen=True)
class BackendCheck:
    backend: str
    accepts: bool
    reasons: tuple[str, ...]  # torch's words, when it refuses


def backend_checks(call: SdpaCall) -> list[BackendCheck]:
    """torch's verdict on each fused backend for this call, in the order CHECKS lists them;
    math accepts everything and is not asked. Every backend is enabled while asking, so a
    variant's pin does not hide the others' own reasons."""
    params = call.params()
    found = []
    for backend, check in CHECKS.items():
        with sdpa_kernel(list(NAMES)), torch_warnings() as heard:
            accepts = bool(getattr(torch.backends.cuda, check)(params, True))
        reasons = tuple(dict.fromkeys(r for r in map(first_line, heard) if r))
        if not accepts and not reasons and call.q.device.type != "cuda":
            reasons = (CPU_REFUSAL,)
        found.append(BackendCheck(backend, accepts, reasons))
    return found


def chosen_backend(call: SdpaCall) -> str:
    """The backend SDPA's dispatcher takes for this call under the backends enabled now
    ("none: …" with torch's words when every enabled one refuses)."""
    q, k, v, mask, is_causal, enable_gqa = call
    try:
        choice = torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, enable_gqa=enable_gqa)
    except RuntimeError as exc:  # e.g. a pinned backend that refuses the mask
        return f"none: {first_line(str(exc))}"
    return NAMES.get(SDPBackend(choice), str(SDPBackend(choice)))


def lower_right_backend(call: SdpaCall) -> str:
    """Where `causal_lower_right` (a CausalBias) sends a call with fewer queries than keys
    (`call.mask`: the mask it materializes): it asks flash, then efficient, with no mask
    (torch/nn/attention/bias.py), and only then hands the materialized mask to the dispatcher."""
    params = call.unmasked().params()
    if torch.backends.cuda.can_use_flash_attention(params):
        return "flash"
    if torch.backends.cuda.can_use_efficient_attention(params):
        return "efficient"
    return chosen_backend(call._replace(is_causal=False))
