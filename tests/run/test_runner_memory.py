"""The runner, continued (tests/run/test_runner.py: runs, failures, references): the memory
estimate counts the reference check, a result pickles, and torch's own log lines."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pandas as pd
import pytest
import torch

from profiling.run import records as small_trace
from profiling.run.runner import run
from profiling.views import profile as views_profile
from profiling.workload.spec import Workload
from tests.run.test_runner import small

# -- the memory estimate counts the reference check ---------------------------------------------
MIB = 1024**2
POST = dict(batch=8, heads=16, seq_len=1024, head_dim=64, dtype="bfloat16")
LONG = dict(batch=4, heads=16, seq_len=4096, head_dim=128, dtype="bfloat16")


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # 128 pairs, 32 Mi scores a chunk: 1024 rows × 32 pairs, 4 chunks. Elements: mask
        # 1024² + the matmul moment 2·32·1024² + 2·32·1024·64 + 3·32·1024·64 + 2·32·1024·64
        # (the previous chunk's result and difference) = 82,837,504, × 8 bytes = 632 MiB
        (POST, 662_700_032),
        # 64 pairs: 4096 rows × 2 pairs, 32 chunks: 4096² + 2·2·4096² + 7·2·4096·128
        # = 91,226,112, × 8 = 696 MiB
        (LONG, 729_808_896),
        # one chunk (2 pairs × 64 rows), so no previous one: 64² + 2·2·64² + 2·2·64·32
        # + 3·2·64·32 = 40,960, × 8
        (dict(batch=1, heads=2, seq_len=64, head_dim=32, dtype="float32"), 327_680),
    ],
)
def test_reference_bytes_on_hand_computed_cases(shape, expected):
    from profiling.workload.memory import reference_bytes

    assert reference_bytes(Workload.from_user(variant="naive", **shape)) == expected


@pytest.mark.parametrize(
    ("variant", "shape", "expected"),
    [
        # the reference phase: io 64 + workspace 64 + small tensors 1 + reference 632 MiB (above)
        ("sdpa-flash", POST, 761 * MIB),
        # the same and a [B, H, S, D] copy of the four [B, S, H, D] tensors (io, 64 MiB)
        ("kernels-local-triton", POST, 825 * MIB),
        # the profiled phase: io 64 + three bf16 score matrices 3·256 + mask 1 + workspace 64
        # + small tensors 1 + io/4 16 = 914 MiB, above the reference phase's 64 + 1 + 65 + 632
        ("naive", POST, 914 * MIB),
        ("sdpa-flash", LONG, (256 + 64 + 1 + 696) * MIB),
        ("naive", LONG, (256 + 3 * 2048 + 16 + 64 + 65) * MIB),
        # one small chunk: the 64 MiB workspace, 1 MiB of small tensors and the reference
        # (327,680 bytes) beside io 65,536 and the mask 4,096, over the profiled steps' three
        # fp32 score matrices
        ("naive", dict(batch=1, heads=2, seq_len=64, head_dim=32, dtype="float32"),
         65_536 + 4_096 + 65 * MIB + 327_680),
    ],
)  # fmt: skip
def test_the_estimate_is_the_larger_of_the_profiled_steps_and_the_reference(
    variant, shape, expected
):
    from profiling.workload.memory import estimate_bytes

    assert estimate_bytes(Workload.from_user(variant=variant, **shape)) == expected


@pytest.mark.parametrize(
    ("layout", "shape", "chunk"),
    [
        ("bhsd", (2, 3, 300, 16), 5_000),  # 16 rows a chunk, one pair: k, v copied anew
        ("bhsd", (2, 3, 300, 16), 100_000),  # all 300 rows, one pair of six
        ("bshd", (2, 3, 300, 128), 30_000),  # 100 rows; the [B, S, H, D] inputs copied
        ("bhsd", (1, 2, 64, 256), 10**6),  # one chunk for everything
        ("bhsd", (3, 5, 777, 64), 777 * 200),  # rows that do not divide S
    ],
)
def test_reference_bytes_are_what_the_reference_allocates(
    monkeypatch, tmp_path, layout, shape, chunk
):
    """The reference's real peak, from the profiler's record of every CPU allocation, is the
    estimate's term exactly (but for the two 2-element sums)."""

    from torch.profiler import ProfilerActivity, profile

    from profiling.run.reference import check as reference_check
    from profiling.workload import memory as memory_estimate

    monkeypatch.setattr(reference_check, "REFERENCE_CHUNK", (chunk, chunk))
    monkeypatch.setattr(memory_estimate, "REFERENCE_CHUNK", (chunk, chunk))
    b, h, s, d = shape
    dims = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
    t = {name: torch.randn(dims, dtype=torch.bfloat16) for name in ("out", "q", "k", "v")}
    variant = "naive" if layout == "bhsd" else "kernels-local-triton"
    config = small(variant, batch=b, heads=h, seq_len=s, head_dim=d, dtype="bfloat16")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        reference_check.relative_error(t, config, layout, "cpu")()
    path = tmp_path / "memory.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    live = peak = 0
    for event in sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"]):
        live += event["args"]["Bytes"]
        peak = max(peak, live)
    copies = 4 * b * h * s * d * 2 if layout == "bshd" else 0
    assert 0 <= peak - (memory_estimate.reference_bytes(config) + copies) <= 32


@pytest.mark.parametrize(
    ("shape", "budget"),
    [
        (dict(batch=4, heads=16, head_dim=128), 1024**3),
        (dict(batch=2, heads=4, head_dim=32), 1024**3),
    ],
)
def test_a_suggested_length_fits_though_the_reference_makes_the_estimate_uneven(shape, budget):
    """The reference's chunk (pairs per chunk fall as S grows) makes the estimate dip and rise:
    rounding a fitting length down to a multiple of 128 could land on one that does not fit."""
    from profiling.workload.memory import estimate_bytes, largest_fitting_seq_len

    config = Workload.from_user(variant="kernels-local-triton", seq_len=65536, **shape)
    fit = largest_fitting_seq_len(config, budget)
    assert fit and fit % 128 == 0
    assert estimate_bytes(config.with_(seq_len=fit)) <= budget


@pytest.mark.parametrize("reader", ["records", "table"])
def test_a_result_pickles_with_its_trace_and_shows_the_same_page(reader, tmp_path, monkeypatch):
    """ZeroGPU returns the run from a worker process: the trace read there crosses the pickle
    whichever reader read it, and the page made from the copy is the original's page."""
    if reader == "table":  # a trace the records reader declines
        monkeypatch.setattr(small_trace, "parse", lambda data: None)
    result = run(small("naive"), out_dir=tmp_path)
    assert result.trace.reader == reader
    copy = pickle.loads(pickle.dumps(result))
    page, again = views_profile.page(result), views_profile.page(copy)
    assert again.summary == page.summary and again.strip == page.strip
    assert again.figure.to_json() == page.figure.to_json()
    pd.testing.assert_frame_equal(again.kernels, page.kernels)


THREADED_PROFILE = """
import sys, threading
import torch
from profiling.run import runner
if sys.argv[1] == "prime":
    runner.prime_profiler()
def work():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        torch.ones(2).mul_(2)
worker = threading.Thread(target=work)
worker.start()
worker.join()
"""


@pytest.mark.parametrize("prime", [True, False])
def test_priming_on_the_main_thread_keeps_kinetos_init_message_away(prime):
    """The app's clicks profile on worker threads: primed first (as app.py does), kineto does
    not print its init-callback complaint; unprimed, it does (so this test can fail). Seen
    failing when prime_profiler did nothing."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        [sys.executable, "-c", THREADED_PROFILE, "prime" if prime else "none"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "KINETO_LOG_LEVEL": "6"},
    )
    assert child.returncode == 0, child.stderr
    complained = "External init callback" in child.stderr
    assert complained is not prime, child.stderr


def test_quiet_profiler_logs_respects_the_users_level(monkeypatch):
    from profiling.run.runner import KINETO_LOG_LEVEL, quiet_profiler_logs

    monkeypatch.delenv(KINETO_LOG_LEVEL, raising=False)
    quiet_profiler_logs(verbose=True)
    assert KINETO_LOG_LEVEL not in os.environ
    quiet_profiler_logs()
    assert os.environ[KINETO_LOG_LEVEL] == "6"
    monkeypatch.setenv(KINETO_LOG_LEVEL, "1")
    quiet_profiler_logs()
    assert os.environ[KINETO_LOG_LEVEL] == "1"


def test_torchs_reasons_drop_source_locations_and_backends_pinned_off():
    """SDPA warns of every backend: the pinned-off ones say only that, and each line ends in
    a C++ source location. What is left is the reason (H200, GQA on the efficient backend)."""
    from profiling.run.runner import torch_reasons

    messages = [
        "Memory efficient kernel not used because: (Triggered internally at /a/sdp_utils.cpp:986.)",
        "For dense input, both fused kernels require query, key and value to have the same "
        "num_heads. (Triggered internally at /a/sdp_utils_cpp.h:418.)",
        "Flash attention has been runtime disabled. (Triggered internally at /a/b.h:540.)",
        "For dense input, both fused kernels require query, key and value to have the same "
        "num_heads. (Triggered internally at /a/sdp_utils_cpp.h:418.)\nsecond line",
    ]
    assert torch_reasons(messages) == [
        "For dense input, both fused kernels require query, key and value to have the same "
        "num_heads."
    ]
