"""The memory a run will need, estimated before anything is allocated, and the refusal when
it exceeds what the device has free (with the largest sequence length that would fit).

The estimate reads each variant's own memory model (`score_matrices`, `upcasts`, `layout`).
"""

from __future__ import annotations

import os
from dataclasses import replace

import torch

from profiling.workload.spec import LIMITS, ConfigError, Workload

# float64 scores per chunk of the reference check (reference_check.relative_error): 256 MiB to
# 1 GiB. It takes the smallest unless the memory check left spare bytes for a larger one.
REFERENCE_CHUNK = (32 * 1024**2, 128 * 1024**2)
GRADIENT_CHUNK = REFERENCE_CHUNK[0] // 4  # the gradients' check holds four such matrices at once
LIBRARY_WORKSPACE = 64 * 1024**2  # cuBLAS/cuDNN workspaces a run may allocate and keep
# Small tensors (the reference's running sums, scalars, a kernel's lse) each take at least the
# CUDA allocator's smallest block (512 bytes); the H200 measured 1 KiB over an estimate that left
# them out (sdpa-efficient at B4 H16 S4096 D128).
SMALL_TENSORS = 1024**2


def estimate_bytes(workload: Workload) -> int:
    """Peak bytes the whole run should need: the larger of its two phases.

    Profiled steps: inputs and output, the materialised score matrices (B·H·S² each: naive
    holds the scores, their masked copy and the softmax output, plus the S² bool mask; math
    does it in FP32; fused kernels hold none) and workspaces. Then the float64 reference check,
    while inputs and output are still alive: its smallest chunk (reference_bytes), and for a
    [batch, seq, heads, dim] variant a copy of the four tensors in [batch, heads, seq, dim].
    """
    variant = workload.spec
    io = workload.io_bytes  # q, k, v, out
    mask = _mask_bytes(workload)
    copies = io if variant.layout == "bshd" else 0
    reference = reference_bytes(workload)
    if workload.needs_grad:  # dq, dk, dv and grad_out: another io
        reference = max(reference, reference_grad_bytes(workload))
        io, copies = 2 * io, 2 * copies
    checked = io + mask + LIBRARY_WORKSPACE + SMALL_TENSORS + copies + reference
    return max(profiled_bytes(workload), checked)


def _matrix_bytes(workload: Workload) -> int:
    """One B·H·Q·S score matrix, in FP32 where the variant upcasts."""
    score_bytes = 4 if workload.spec.upcasts else workload.torch_dtype.itemsize
    return workload.batch * workload.heads * workload.queries * workload.seq_len * score_bytes


def _mask_bytes(workload: Workload) -> int:
    return workload.queries * workload.seq_len if workload.spec.score_matrices else 0


def _kv_copies(workload: Workload) -> int:
    """Grouped K/V heads copied out per query head, by a variant that materialises scores."""
    if not workload.spec.score_matrices or workload.key_heads == workload.heads:
        return 0
    keys = workload.batch * workload.heads * workload.seq_len * workload.head_dim
    return 2 * keys * workload.torch_dtype.itemsize


def profiled_bytes(workload: Workload) -> int:
    """Peak bytes of the profiled steps on a GPU, inputs included (what
    max_memory_allocated reads before the float64 check): inputs and output, the variant's
    score matrices (backward_matrices in training) and S² mask, the libraries' workspaces."""
    variant, io = workload.spec, workload.io_bytes
    held = variant.score_matrices * _matrix_bytes(workload) + _kv_copies(workload)
    if workload.needs_grad:  # dq, dk, dv and grad_out: another io; the backward's matrices
        held = max(held, variant.backward_matrices * _matrix_bytes(workload))
        io = 2 * io
    workspace = LIBRARY_WORKSPACE + SMALL_TENSORS
    return io + held + _mask_bytes(workload) + workspace + io // 4  # io // 4: lse, slack


# On a CPU a step's score matrices die as the next op's result is made: an out-of-place op
# holds its input and its result, so a forward peaks at two (measured: naive, naive-inplace
# 2.0, sdpa-math 2.5 at B1 H4 and B2 H2, S 256 and 1024) and a backward at three (3.0–3.2).
CPU_FORWARD_MATRICES, CPU_BACKWARD_MATRICES = 2, 3


def cpu_step_bytes(workload: Workload) -> int:
    """What one step allocates on a CPU beyond the inputs alive before it (what
    profiling/run/cpu_memory.py measures): its output (and in training the inputs' gradients),
    the log-sum-exp, and the score matrices alive at once for a variant that makes them. No
    library workspace, no float64 check: those are the whole run's (estimate_bytes)."""
    variant = workload.spec
    queries = workload.batch * workload.heads * workload.queries
    made = queries * workload.head_dim * workload.torch_dtype.itemsize  # the output
    matrices = min(variant.score_matrices, CPU_FORWARD_MATRICES)
    if workload.needs_grad:  # dq, dk, dv beside the output: the inputs' size
        made = workload.io_bytes
        matrices = min(variant.backward_matrices, CPU_BACKWARD_MATRICES)
    return made + queries * 4 + matrices * _matrix_bytes(workload) + _kv_copies(workload)


def step_estimate_bytes(workload: Workload, device: str) -> int:
    """The estimate a Sweep draws beside what each point measured, per variant and device: on
    a GPU the profiled steps' peak (profiled_bytes, against max_memory_allocated), on a CPU
    what one step allocates (cpu_step_bytes, against the profiler's memory records). Issue 42:
    the whole run's estimate, whose float64 check and GPU workspace are the same for every
    variant, drew 73/90/152 MiB for naive and flash alike on a CPU, against 2.2/8.5/33 and
    0.4/0.8/2.1 MiB measured."""
    return profiled_bytes(workload) if device == "cuda" else cpu_step_bytes(workload)


def reference_chunk(
    seq_len: int, pairs: int, budget: int, queries: int | None = None
) -> tuple[int, int]:
    """(query rows, (batch, head) pairs) of one reference chunk: at most `budget` scores of
    `seq_len` keys each, out of `queries` rows (seq_len's when None)."""
    rows = max(1, min(queries or seq_len, budget // seq_len))
    return rows, max(1, min(pairs, budget // (rows * seq_len)))


def reference_bytes(workload: Workload) -> int:
    """Peak float64 bytes of the reference check in its smallest chunk, G pairs × R rows.

    Beside the additive mask (R·S), the largest of its moments: the result's matmul (scores and
    softmax, 2·G·R·S; copies of k and v, 2·G·S·D; of q, out and the result, 3·G·R·D); the
    difference out − result (one score matrix, 4·G·R·D). With more than one chunk, the previous
    result and difference live on into the next (2·G·R·D), whose q and out (4·G·R·D in all)
    or k and v (4·G·S·D) are copied while the last ones live. Counted for every pair: a FLOP
    cap may check fewer, never more.
    """
    seq_len, head_dim, pairs = workload.seq_len, workload.head_dim, workload.batch * workload.heads
    rows, group = reference_chunk(seq_len, pairs, REFERENCE_CHUNK[0], workload.queries)
    scores = group * rows * seq_len
    keys, queries = group * seq_len * head_dim, group * rows * head_dim
    previous = 0 if (rows, group) == (workload.queries, pairs) else 2 * queries
    moments = [
        2 * scores + 2 * keys + 3 * queries + previous,
        scores + 2 * keys + 4 * queries + previous // 2,  # the last difference is replaced
    ]
    if previous:
        moments += [
            scores + 2 * keys + 4 * queries + previous,
            scores + 4 * keys + 2 * queries + previous,
        ]
    # a mask other than the square triangle is built from two bool (R, S) temporaries
    shifted = 0 if workload.queries == seq_len and workload.window is None else 2 * rows * seq_len
    # grouped K/V heads are gathered per query pair (a copy in the input dtype) before the cast
    gathered = 0 if workload.key_heads == workload.heads else 2 * keys * 4
    return 8 * (rows * seq_len + max(moments)) + shifted + gathered


def reference_grad_bytes(workload: Workload) -> int:
    """Peak float64 bytes of the gradients' check (profiling.run.reference.grad) in its chunk of
    G pairs × R rows: four score-sized matrices at once (P, dP, dP − delta, dS), the group's
    q, k, v, grad_out and its dK, dV accumulators (6·G·S·D) with a matmul's result beside
    them, and a few row-sized tensors (6·G·R·D)."""
    seq_len, head_dim, pairs = workload.seq_len, workload.head_dim, workload.batch * workload.heads
    rows, group = reference_chunk(seq_len, pairs, GRADIENT_CHUNK, workload.queries)
    scores = group * rows * seq_len
    keys, queries = group * seq_len * head_dim, group * rows * head_dim
    return 8 * (rows * seq_len + 4 * scores + 7 * keys + 6 * queries)


def available_bytes(device: str) -> int:
    if device == "cuda":
        # Blocks PyTorch's caching allocator holds but no tensor uses are free to this run too:
        # without them an earlier large run would shrink every later estimate (seen on the H200:
        # "95 GiB free" after a naive S=8192 run had cached 33 GiB).
        free, _total = torch.cuda.mem_get_info()
        stats = torch.cuda.memory_stats()  # one snapshot for both figures (each call builds it)
        cached = stats.get("reserved_bytes.all.current", 0) - stats.get(
            "allocated_bytes.all.current", 0
        )
        return int(free + max(cached, 0))
    return _mem_available_cpu()


def _mem_available_cpu() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_memory(workload: Workload, device: str, headroom: float = 0.85) -> int:
    """Refuse before allocating when the estimate exceeds the free memory; returns the usable
    bytes left once the estimate is set aside (the float64 reference check sizes its chunks
    by them)."""
    need = estimate_bytes(workload)
    free = available_bytes(device)
    if need <= headroom * free:
        return int(headroom * free) - need
    fit = largest_fitting_seq_len(workload, int(headroom * free))
    hint = (
        f"reduce seq_len to {fit} or less, or lower batch/heads"
        if fit
        else "lower batch, heads or head_dim"
    )
    where = "GPU memory free" if device == "cuda" else "RAM available"
    raise ConfigError(
        f"{workload.variant} at {workload.shape_text()} needs about {_gib(need)} "
        f"but only {_gib(free)} of {where} ({headroom:.0%} usable): {hint}"
    )


def largest_fitting_seq_len(workload: Workload, budget: int) -> int | None:
    """The largest multiple of 128 a bisection finds whose estimate fits in `budget` (a length
    under 128 when none does), or None when not even the minimum fits."""
    low, high = LIMITS["seq_len"][0], workload.seq_len
    if estimate_bytes(replace(workload, seq_len=low)) > budget:
        return None
    while high - low > 1:
        middle = (low + high) // 2
        if estimate_bytes(replace(workload, seq_len=middle)) <= budget:
            low = middle
        else:
            high = middle
    if low < 128:
        return low
    fit = low - low % 128
    # The reference's chunk makes the estimate rise and fall a little with S: step down to a
    # multiple of 128 that fits, not only one next to a length that fits.
    while fit > 128 and estimate_bytes(replace(workload, seq_len=fit)) > budget:
        fit -= 128
    return fit if estimate_bytes(replace(workload, seq_len=fit)) <= budget else low


def _gib(size: int) -> str:
    return f"{size / 1024**3:.1f} GiB" if size >= 1024**3 else f"{size / 1024**2:.0f} MiB"
