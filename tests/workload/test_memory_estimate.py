"""The memory estimate, buffer by buffer, and the refusal built on it.

The figures below are the documented model (estimate_bytes' and reference_bytes' docstrings)
worked out by hand for shapes chosen so that each buffer, and each moment of the float64
reference check, decides the result once; how well the model fits measured peaks is checked
on the H200 (tests/gpu/test_gpu.py). The free-memory readers are tested on stand-ins for
torch.cuda and /proc/meminfo.
"""

from __future__ import annotations

import io

import pytest

from profiling.workload import memory as memory_estimate
from profiling.workload.memory import (
    available_bytes,
    check_memory,
    estimate_bytes,
    largest_fitting_seq_len,
    reference_bytes,
    reference_chunk,
    step_estimate_bytes,
)
from profiling.workload.spec import ConfigError, Workload

MIB, GIB = 1024**2, 1024**3
WORKSPACE = 64 + 1  # MiB: library workspaces and the small tensors' blocks


def workload(variant: str, batch: int, heads: int, seq_len: int, head_dim: int, **more):
    return Workload.from_user(
        variant=variant, batch=batch, heads=heads, seq_len=seq_len, head_dim=head_dim, **more
    )


@pytest.mark.parametrize(
    ("variant", "shape", "mib"),
    [
        # profiled steps: q,k,v,out 64 + three bf16 score matrices 768 + bool mask 1 + io/4 16
        ("naive", (8, 16, 1024, 64), 64 + 768 + 1 + WORKSPACE + 16),
        # the math backend's scores are FP32: 4 bytes each, whatever the dtype
        ("sdpa-math", (8, 16, 1024, 64), 64 + 1536 + 1 + WORKSPACE + 16),
        # reference check: q,k,v,out 2 + mask 16 + the float64 chunk 394
        ("naive", (1, 1, 4096, 64), 2 + 16 + WORKSPACE + 394),
        # a fused kernel holds no S² mask
        ("sdpa-flash", (1, 1, 4096, 64), 2 + WORKSPACE + 394),
        # [batch, seq, heads, dim] inputs: one more copy of the four tensors for the check
        ("kernels-local-triton", (1, 1, 4096, 64), 2 + WORKSPACE + 2 + 394),
    ],
)
def test_estimate_counts_each_buffer(variant, shape, mib):
    estimate = estimate_bytes(workload(variant, *shape))
    assert estimate == mib * MIB and isinstance(estimate, int)  # whole bytes


@pytest.mark.parametrize(
    ("shape", "size"),
    [
        # one chunk holds everything (R = S = 4096, G = 1): mask R·S 16 Mi + scores and
        # softmax 2·16 Mi + k,v 2·256 Ki + q,out,result 3·256 Ki
        ((1, 1, 4096, 64), 8 * (16 * MIB + 32 * MIB + 512 * 1024 + 768 * 1024)),
        # 128 pairs in chunks of G = 32: the first moment, with the previous result (4 Mi)
        ((8, 16, 1024, 64), 8 * (1 * MIB + 64 * MIB + 4 * MIB + 6 * MIB + 4 * MIB)),
        # R = 256 rows of S = 131072, D = 256: copying k and v (4·32 Mi) is the peak
        ((1, 1, 131072, 256), 8 * (32 * MIB + 32 * MIB + 128 * MIB + 128 * 1024 + 128 * 1024)),
        # G = 2048 of 4096 pairs, D = 256 > S = 128: k and v again, 4·64 Mi
        ((64, 64, 128, 256), 8 * (16 * 1024 + 32 * MIB + 256 * MIB + 128 * MIB + 128 * MIB)),
        # one chunk, D = 256 > S = 16: the difference out − result (4·G·R·D) is the peak
        ((1, 1, 16, 256), 8 * (16 * 16 + 256 + 2 * 16 * 256 + 4 * 16 * 256)),
    ],
)
def test_reference_check_peak_in_its_smallest_chunk(shape, size):
    assert reference_bytes(workload("sdpa-flash", *shape)) == size


def test_reference_chunk_is_whole_rows_and_pairs_within_the_budget():
    assert reference_chunk(1000, 4, 2500) == (2, 1)  # 2 rows of 1000, one pair
    assert reference_chunk(1000, 4, 500) == (1, 1)  # at least one row and one pair
    assert reference_chunk(100, 8, 10_000 * 3) == (100, 3)
    rows, pairs = reference_chunk(1000, 4, 2500)
    assert isinstance(rows, int) and isinstance(pairs, int)


NAIVE_64K = workload("naive", 8, 16, 65536, 64)


@pytest.mark.parametrize("seq_len", [128, 4096, 16384, 39936])
def test_largest_fitting_length_when_the_budget_is_that_lengths_estimate(seq_len):
    budget = estimate_bytes(NAIVE_64K.with_(seq_len=seq_len))  # fits exactly
    assert largest_fitting_seq_len(NAIVE_64K, budget) == seq_len
    below = largest_fitting_seq_len(NAIVE_64K, budget - 1)
    assert below < seq_len
    if seq_len > 128:
        assert below == seq_len - 128  # the next multiple of 128 down


def test_largest_fitting_length_between_multiples_of_128():
    budget = estimate_bytes(NAIVE_64K.with_(seq_len=5000))
    assert largest_fitting_seq_len(NAIVE_64K, budget) == 4992  # the multiple of 128 below
    assert largest_fitting_seq_len(NAIVE_64K, estimate_bytes(NAIVE_64K.with_(seq_len=100))) == 100
    minimum = estimate_bytes(NAIVE_64K.with_(seq_len=16))
    assert largest_fitting_seq_len(NAIVE_64K, minimum) == 16
    assert largest_fitting_seq_len(NAIVE_64K, minimum - 1) is None


def test_largest_fitting_length_steps_down_past_a_dip():
    """The reference check's chunk makes the estimate dip and rise with S (here D = 256): the
    multiple of 128 below the length the bisection found may not fit; the next one down does."""
    naive = workload("naive", 1, 1, 16384, 256)
    budget = estimate_bytes(naive.with_(seq_len=7045))
    assert estimate_bytes(naive.with_(seq_len=7040)) > budget  # the dip
    assert largest_fitting_seq_len(naive, budget) == 6912
    exact = estimate_bytes(naive.with_(seq_len=6144))  # the bisection ends at 6149 here
    assert largest_fitting_seq_len(naive, exact) == 6144  # a multiple of 128 that fits exactly


def test_the_suggested_length_fits_even_where_128_does_not():
    """B64 H128 D256: S = 129 needs less than S = 128 (the reference check's chunks change), so
    a budget can fit 129 and not 128. Whatever is suggested must fit."""
    big = workload("sdpa-flash", 64, 128, 255, 256)
    budget = estimate_bytes(big.with_(seq_len=129))
    assert estimate_bytes(big.with_(seq_len=128)) > budget
    fit = largest_fitting_seq_len(big, budget)
    assert fit is not None and estimate_bytes(big.with_(seq_len=fit)) <= budget


def test_check_memory_takes_exactly_the_headroom(monkeypatch):
    small = workload("naive", 1, 1, 1024, 64)
    need = estimate_bytes(small)
    asked: list[str] = []
    monkeypatch.setattr(memory_estimate, "available_bytes", lambda d: asked.append(d) or 2 * need)
    assert check_memory(small, "cuda", headroom=0.5) == 0  # need == half of free: it fits
    assert check_memory(small, "cpu", headroom=0.75) == int(0.75 * 2 * need) - need
    assert asked == ["cuda", "cpu"]
    with pytest.raises(ConfigError):
        check_memory(small, "cuda", headroom=0.49)


@pytest.mark.parametrize(
    ("device", "where"), [("cuda", "GPU memory free"), ("cpu", "RAM available")]
)
def test_refusal_messages(monkeypatch, device, where):
    monkeypatch.setattr(memory_estimate, "available_bytes", lambda d: 8 * GIB)
    big = workload("naive", 8, 16, 65536, 64)
    fit = largest_fitting_seq_len(big, int(0.85 * 8 * GIB))
    with pytest.raises(ConfigError) as refused:
        check_memory(big, device)
    assert str(refused.value) == (
        f"naive at B8 H16 S65536 D64 bfloat16 needs about "
        f"{estimate_bytes(big) / GIB:.1f} GiB but only 8.0 GiB of {where} (85% usable): "
        f"reduce seq_len to {fit} or less, or lower batch/heads"
    )
    monkeypatch.setattr(memory_estimate, "available_bytes", lambda d: 64 * MIB)
    with pytest.raises(ConfigError, match=r"64 MiB of .*: lower batch, heads or head_dim$"):
        check_memory(big, device)  # not even S = 16 fits: no length to suggest


@pytest.mark.parametrize(
    ("size", "text"),
    [(GIB, "1.0 GiB"), (3 * GIB // 2, "1.5 GiB"), (GIB - MIB, "1023 MiB"), (512 * MIB, "512 MiB")],
)
def test_sizes_read_in_gib_from_one_gib(size, text):
    assert memory_estimate._gib(size) == text


class _Cuda:
    """Stand-in for torch.cuda's two memory readings."""

    def __init__(self, free: int, stats: dict[str, int]) -> None:
        self.free, self.stats = free, stats

    def mem_get_info(self):
        return self.free, 80 * GIB

    def memory_stats(self):
        return self.stats


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        ({"reserved_bytes.all.current": 5 * GIB, "allocated_bytes.all.current": 2 * GIB}, 13),
        ({"reserved_bytes.all.current": 5 * GIB}, 15),  # nothing allocated
        ({}, 10),  # no allocator statistics: the driver's free memory alone
    ],
)
def test_free_gpu_memory_counts_the_allocators_unused_cache(monkeypatch, stats, expected):
    monkeypatch.setattr(memory_estimate.torch, "cuda", _Cuda(10 * GIB, stats))
    assert available_bytes("cuda") == expected * GIB


def test_free_cpu_memory_is_memavailable(monkeypatch):
    opened: list[str] = []

    def meminfo(path):
        opened.append(path)
        return io.StringIO("MemTotal:       1000 kB\nMemAvailable:   2048 kB\n")

    monkeypatch.setattr(memory_estimate, "open", meminfo, raising=False)
    assert available_bytes("cpu") == 2048 * 1024 and opened == ["/proc/meminfo"]


@pytest.mark.parametrize("meminfo", ["MemTotal: 1000 kB\n", None])
def test_free_cpu_memory_without_memavailable_asks_the_os(monkeypatch, meminfo):
    def fake_open(path):
        if meminfo is None:
            raise OSError("no /proc here")
        return io.StringIO(meminfo)

    pages = {"SC_PAGE_SIZE": 4096, "SC_AVPHYS_PAGES": 1000}
    monkeypatch.setattr(memory_estimate, "open", fake_open, raising=False)
    monkeypatch.setattr(memory_estimate.os, "sysconf", pages.__getitem__)
    assert available_bytes("cpu") == 4096 * 1000


@pytest.mark.parametrize(
    ("variant", "mode", "cpu_mib", "gpu_mib"),
    [
        # float32 B1 H4 S1024 D64: a 16 MiB score matrix, a 1 MiB output, 16 KiB of lse
        # CPU forward: the output and two matrices at once (measured 33.0 MiB)
        ("naive", "forward", 1 + 32 + 1 / 64, 4 + 48 + 1 + WORKSPACE + 1),
        # a fused kernel: the output and its lse (measured 2.1 MiB: its tiles besides)
        ("sdpa-flash", "forward", 1 + 1 / 64, 4 + WORKSPACE + 1),
        # CPU training: the output and q, k, v's gradients, three matrices (measured 50.0 MiB)
        ("naive", "train", 4 + 48 + 1 / 64, 8 + 64 + 1 + WORKSPACE + 2),
    ],
)
def test_the_step_estimate_is_each_variants_own_on_each_device(variant, mode, cpu_mib, gpu_mib):
    """Issue 42: what a Sweep draws beside each point's measured memory. On a CPU one step's
    own allocations (no GPU workspace, no float64 check: naive and flash alike drew 73 MiB);
    on a GPU the profiled steps' peak with their inputs, as max_memory_allocated reads it."""
    run = workload(variant, 1, 4, 1024, 64, dtype="float32", mode=mode)
    assert step_estimate_bytes(run, "cpu") / MIB == pytest.approx(cpu_mib)
    assert step_estimate_bytes(run, "cuda") / MIB == pytest.approx(gpu_mib)
    assert estimate_bytes(run) >= step_estimate_bytes(run, "cuda")  # the whole run's: larger
