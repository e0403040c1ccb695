"""Training runs on the CPU (issue 20): every mode for every CPU-capable variant, its phases in
the trace, what the forward saves for backward, and the gradients against float64."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from attention import VARIANTS
from profiling.run import training
from profiling.run.reference.grad import gradient_errors
from profiling.run.runner import VariantUnavailable, run
from profiling.workload.availability import unavailable_reasons
from profiling.workload.memory import estimate_bytes, reference_grad_bytes
from profiling.workload.spec import ConfigError, Workload
from tests.conftest import watch_inputs

CPU_VARIANTS = [v for v, why in unavailable_reasons("cpu", "float32").items() if why is None]
TRAINABLE = [
    v for v in CPU_VARIANTS if VARIANTS[v].backward_unavailable("cpu", torch.float32) is None
]
SHAPE = {"seq_len": 128, "batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32"}


def small(variant: str, mode: str, **changes) -> Workload:
    return Workload.from_user(variant=variant, device="cpu", mode=mode, **{**SHAPE, **changes})


def slow_if_compiled(variants: list[str]) -> list:
    return [
        pytest.param(v, marks=pytest.mark.slow) if VARIANTS[v].slow_first_run else v
        for v in variants
    ]


def span_names(result) -> list[str]:
    doc = json.loads(gzip.decompress(result.trace_gz.read_bytes()))
    return [e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]


@pytest.mark.parametrize("variant", slow_if_compiled(TRAINABLE))
def test_a_train_step_has_both_phases_and_correct_gradients(variant, tmp_path):
    result = run(small(variant, "train"), out_dir=tmp_path)
    summary = result.summary
    assert summary.mode == "train" and summary.forwards == 3
    assert [row["phase"] for row in summary.phases] == ["attn_fwd", "attn_bwd"]
    names = span_names(result)
    assert names.count("attn_step") == names.count("attn_fwd") == names.count("attn_bwd") == 3
    assert summary.rel_err < 1e-5
    assert set(summary.grad_err) == {"dq", "dk", "dv"}
    assert all(error < 1e-5 for error in summary.grad_err.values()), summary.grad_err
    # the step is both phases: its CPU time is at least each phase's
    assert all(summary.cpu_us_per_forward >= row["cpu_us"] for row in summary.phases)
    assert summary.flops_per_forward == pytest.approx(3.5 * small(variant, "forward").flops)
    assert "backward counted as 2.5" in summary.tflops_basis


@pytest.mark.parametrize("variant", slow_if_compiled(TRAINABLE))
def test_a_backward_run_measures_the_backward_alone(variant, tmp_path):
    result = run(small(variant, "backward"), out_dir=tmp_path)
    summary = result.summary
    assert [row["phase"] for row in summary.phases] == ["attn_bwd"]
    names = span_names(result)
    assert names.count("attn_bwd") == 3 and "attn_fwd" not in names and "attn_step" not in names
    assert summary.forwards == 3 and all(e < 1e-5 for e in summary.grad_err.values())
    assert summary.flops_per_forward == pytest.approx(2.5 * small(variant, "forward").flops)


def test_a_forward_run_is_unchanged(tmp_path):
    """The default mode: no graph, no gradients, no saved tensors, one phase."""
    assert Workload().mode == "forward"
    summary = run(small("naive", "forward"), out_dir=tmp_path).summary
    assert summary.grad_err is None and summary.saved is None and summary.saved_extra_bytes is None
    assert [row["phase"] for row in summary.phases] == ["attn_fwd"]
    assert "backward" not in summary.tflops_basis


def test_naive_keeps_the_probabilities_and_flash_keeps_the_log_sum_exp(tmp_path):
    naive = run(small("naive", "train"), out_dir=tmp_path / "naive").summary
    flash = run(small("sdpa-flash", "train"), out_dir=tmp_path / "flash").summary
    matrix = 1 * 2 * 128 * 128 * 4  # B·H·S² in float32
    assert {row["what"] for row in naive.saved} >= {"q", "k", "v", "S² mask"}
    probabilities = [row for row in naive.saved if row["what"].startswith("B·H·S²")]
    assert [row["bytes"] for row in probabilities] == [matrix]
    assert naive.saved_extra_bytes == matrix + 128 * 128  # and the bool mask
    assert flash.saved_extra_bytes == 1 * 2 * 128 * 4  # one float32 log-sum-exp per row
    assert [row["what"] for row in flash.saved if row["what"] not in ("q", "k", "v")] == [
        "output",
        "B·H·S row statistics (log-sum-exp)",
    ]


def test_saved_tensors_count_a_tensor_once_and_name_the_inputs():
    workload = small("naive", "train")
    tensors = {n: torch.randn(1, 2, 128, 32, requires_grad=True) for n in training.INPUTS}

    def forward(q, k, v):  # q used twice: saved twice, counted once
        return (q @ k.transpose(-2, -1)).softmax(-1) @ v + q * q

    rows = training.saved_for_backward(workload, forward, tensors)
    whats = [row.what for row in rows]
    matrix = "B·H·S² attention matrix (scores or probabilities)"
    assert sorted(whats) == sorted([matrix, "q", "k", "v"])


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        # B·H·S·D of the expanded K/V equals S² here (1·2·64·32 = 64²): named by shape, not count
        (
            {"seq_len": 64, "heads": 2, "kv_heads": 1},
            {"B·H·S² attention matrix (scores or probabilities)", "S² mask",
             "B·H·S·D K or V expanded to every query head"},
        ),
        # B·H·Q·S probabilities (1·2·16·64) matched nothing square and were "other"
        (
            {"seq_len": 64, "heads": 2, "q_len": 16},
            {"B·H·Q·S attention matrix (scores or probabilities)", "Q·S mask"},
        ),
        (
            {"seq_len": 64, "heads": 4, "kv_heads": 2, "q_len": 8},
            {"B·H·Q·S attention matrix (scores or probabilities)", "Q·S mask",
             "B·H·S·D K or V expanded to every query head"},
        ),
    ],
)  # fmt: skip
def test_saved_tensors_are_named_by_their_real_shapes(shape, expected):
    workload = small("naive", "train", **shape)
    tensors = {
        name: torch.randn(workload.tensor_shape(name), requires_grad=True)
        for name in training.INPUTS
    }
    forward = VARIANTS["naive"].build(workload.problem("cpu")).forward
    rows = training.saved_for_backward(workload, forward, tensors)
    named = {row.what for row in rows} - {"q", "k", "v", "output"}
    assert named == expected
    assert "other" not in named and "S² matrix" not in named


def test_a_forward_without_a_backward_is_unavailable_with_the_reason():
    workload = small("naive", "train")
    tensors = {n: torch.randn(1, 2, 128, 32, requires_grad=True) for n in training.INPUTS}
    tensors["grad_out"] = torch.randn(1, 2, 128, 32)
    step = training.measured_step(workload, lambda q, k, v: q.detach() + 1)
    with pytest.raises(VariantUnavailable, match="without a gradient"):
        step(tensors)


def test_flex_has_no_backward_on_a_cpu_and_says_so():
    with pytest.raises(VariantUnavailable, match="no backward on CPU"):
        run(small("flex", "backward"))


@pytest.mark.parametrize("causal", [True, False])
def test_gradient_reference_matches_autograd_in_float64(causal, monkeypatch):
    """The chunked hand-written backward equals autograd's, in any chunking."""
    import profiling.run.reference.grad as reference_grad

    workload = small("naive", "train", causal=causal, seq_len=96)
    shape = (1, 2, 96, 32)
    q, k, v, grad_out = (torch.randn(shape, dtype=torch.float64) for _ in range(4))
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    scores = leaves[0] @ leaves[1].transpose(-2, -1) / 32**0.5
    if causal:
        scores = scores.masked_fill(torch.ones(96, 96, dtype=torch.bool).triu(1), float("-inf"))
    (scores.softmax(-1) @ leaves[2]).backward(grad_out)
    exact = {"q": q, "k": k, "v": v, "grad_out": grad_out}
    exact |= {name: leaf.grad for name, leaf in zip(("dq", "dk", "dv"), leaves, strict=True)}
    for budget in (96 * 96 * 2, 40 * 96, 96):  # whole, several rows, one row per chunk
        monkeypatch.setattr(reference_grad, "GRADIENT_CHUNK", budget)
        errors, note = gradient_errors(exact, workload, "bhsd", "cpu")()
        assert note == "all heads" and all(e < 1e-12 for e in errors.values()), (budget, errors)
    wrong = dict(exact, dk=exact["dk"] * 1.01)
    errors, _ = gradient_errors(wrong, workload, "bhsd", "cpu")()
    assert errors["dk"] == pytest.approx(0.01, rel=1e-6) and errors["dq"] < 1e-12


def test_the_mode_is_validated_and_named_in_tags():
    assert small("naive", "train").shape_tag("cpu").endswith("_3steps_train")
    assert small("naive", "forward").shape_tag("cpu").endswith("_3steps")  # today's names
    assert small("naive", "backward").shape_text().endswith(" backward")
    with pytest.raises(ConfigError, match="unknown mode 'inference'; choose one of: forward"):
        small("naive", "inference")


def test_the_estimate_grows_for_training_by_the_backwards_matrices():
    shape = {"seq_len": 4096, "heads": 8}
    forward, train = small("naive", "forward", **shape), small("naive", "train", **shape)
    matrix = 1 * 8 * 4096 * 4096 * 4
    assert estimate_bytes(train) - estimate_bytes(forward) >= matrix  # 4 matrices, not 3
    # and not far above: 4 matrices (the backward's outlive the forward's 3), one more io of
    # gradients, the mask and workspaces (~4.24 matrices here): not 3 + 4, nor 5
    io = train.io_bytes
    assert estimate_bytes(train) - estimate_bytes(forward) <= matrix + 2 * io
    assert estimate_bytes(train) <= 4 * matrix + 2 * io + 4096 * 4096 + 128 * 1024**2
    flash = small("sdpa-flash", "train", **shape)
    assert estimate_bytes(train) >= 4 * matrix and estimate_bytes(flash) < 2 * matrix
    # the gradients' check holds four matrices of its chunk at once
    assert reference_grad_bytes(train) >= 8 * 4 * (32 * 1024**2 // 4)


def _x(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "cat": cat, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def _launch(ts, correlation, tid):
    return _x("cudaLaunchKernel", ts, 2, cat="cuda_runtime", tid=tid, correlation=correlation)


def _kernel(name, ts, dur, correlation):
    return _x(name, ts, dur, cat="kernel", pid=0, tid=7, correlation=correlation)


TRAIN_STEP = [  # the main thread (1) runs the forward; autograd's thread (2) the backward
    _x("ProfilerStep#2", 0, 100, cat="user_annotation"),
    _x("attn_step", 1, 90, cat="user_annotation"),
    _x("attn_fwd", 1, 29, cat="user_annotation"),
    _x("attn_bwd", 31, 60, cat="user_annotation"),
    _launch(5, 0, tid=1),
    _launch(40, 1, tid=2),
    _launch(50, 2, tid=2),
    _kernel("fwd_kernel", 10, 20, 0),
    _kernel("bwd_kernel_a", 45, 30, 1),
    _kernel("bwd_kernel_b", 80, 10, 2),
]


@pytest.mark.parametrize("reader", ["records", "table"])
def test_a_backward_launched_from_autograds_thread_is_the_backwards(reader, tmp_path):
    """attn_bwd and attn_step windows hold every thread's launches; attn_fwd its own."""
    from profiling.run import records as small_trace
    from profiling.run import trace as run_trace
    from profiling.trace import model as trace
    from profiling.vocabulary import BACKWARD, FORWARD, STEP

    path = tmp_path / "train.json"
    path.write_text(json.dumps({"traceEvents": TRAIN_STEP}))
    if reader == "records":
        records = small_trace.read(path)
        assert records is not None
        got = run_trace.of_records(records, STEP, (FORWARD, BACKWARD))
    else:
        got = run_trace.of_table(trace.load(path), STEP, (FORWARD, BACKWARD))
    assert got.reader == reader
    forward, backward = got.phases[FORWARD], got.phases[BACKWARD]
    assert forward.kernels["kernel"].tolist() == ["fwd_kernel"]
    assert sorted(backward.kernels["kernel"]) == ["bwd_kernel_a", "bwd_kernel_b"]
    assert (forward.stats.gpu_us, backward.stats.gpu_us, got.stats.gpu_us) == (20, 40, 60)
    assert (forward.stats.cpu_us, backward.stats.cpu_us, got.stats.cpu_us) == (29, 60, 90)
    assert got.stats.kernels == 3 and got.stats.forwards == 1


@pytest.mark.parametrize("variant", ["naive", "sdpa-flash"])
def test_a_training_run_leaves_nothing_alive(variant, monkeypatch):
    """Every tensor of a train run goes when it returns: measuring the saved tensors must not
    leave a graph holding the inputs (a saved output kept as itself is a cycle in C++ that the
    collector cannot see: the H200 lost 113 MiB per sdpa-flash run to it)."""
    refs = watch_inputs(monkeypatch)
    run(small(variant, "train"))
    assert refs and all(ref() is None for ref in refs)


TRAIN_FIXTURE = "h200_train-{}_8_16_1024_64_bf16.json.gz"


@pytest.mark.parametrize("reader", ["records", "table"])
def test_an_h200_training_step_splits_into_its_phases(reader):
    """A real sdpa-flash train step (H200): the backward's three FlashAttention-2 kernels come
    from autograd's thread and land in attn_bwd; the forward's one kernel in attn_fwd."""
    from profiling.run import trace as run_trace
    from profiling.trace import events as trace_events
    from profiling.trace import model as trace
    from profiling.vocabulary import BACKWARD, FORWARD, STEP
    from tests.conftest import FIXTURES

    path = FIXTURES / TRAIN_FIXTURE.format("sdpa-flash")
    if reader == "records":
        got = run_trace.read(path, STEP, (FORWARD, BACKWARD))
    else:
        got = run_trace.of_table(
            trace.load(trace_events.read_bytes(path)), STEP, (FORWARD, BACKWARD)
        )
    assert got.reader == reader
    forward, backward = got.phases[FORWARD], got.phases[BACKWARD]
    assert forward.stats.forwards == backward.stats.forwards == got.stats.forwards == 3
    assert forward.kernels["category"].tolist() == ["fused attention"]
    flash = {name.split("<")[0].removeprefix("void ") for name in backward.kernels["name"]}
    assert {
        "pytorch_flash::flash_bwd_dot_do_o_kernel",
        "pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel",
        "pytorch_flash::flash_bwd_convert_dq_kernel",
    } <= flash
    assert backward.stats.gpu_us > 2 * forward.stats.gpu_us  # ~2.5× the FLOPs, ~3× the time
    total = forward.stats.gpu_us + backward.stats.gpu_us
    assert got.stats.gpu_us == pytest.approx(total)
    assert got.stats.kernels == forward.stats.kernels + backward.stats.kernels == 6


def test_an_h200_naive_training_step_keeps_its_copy_and_differentiates_the_softmax():
    from profiling.run import trace as run_trace
    from profiling.vocabulary import BACKWARD, FORWARD, STEP
    from tests.conftest import FIXTURES

    got = run_trace.read(FIXTURES / TRAIN_FIXTURE.format("naive"), STEP, (FORWARD, BACKWARD))
    forward, backward = got.phases[FORWARD], got.phases[BACKWARD]
    assert forward.stats.memcpy == 1  # out-of-place masked_fill's copy, as in a forward run
    assert (forward.stats.kernels, backward.stats.kernels) == (5, 9)
    decoded = " | ".join(backward.kernels["decoded"])
    assert "softmax backward" in decoded and "masked_fill" in decoded
    assert (backward.kernels["category"] == "gemm").sum() == 4  # dP, dV, dQ, dK


@pytest.mark.parametrize("check", ["output", "gradients"])
def test_the_reference_checks_build_no_graph_on_inputs_that_require_grad(check):
    """A train run's q, k, v require grad and the checks run with grad mode on: a graph would
    keep every chunk's float64 scores alive until the check is read (on the H200, 8 GiB at
    B4 H16 S4096 for a run whose estimate was 1.3 GiB)."""
    from profiling.run.reference.check import relative_error

    workload = small("naive", "train", seq_len=64)
    tensors = {n: torch.randn(1, 2, 64, 32, requires_grad=True) for n in training.INPUTS}
    for name in ("out", "grad_out", "dq", "dk", "dv"):
        tensors[name] = torch.randn(1, 2, 64, 32)
    packed: list[tuple] = []

    def pack(tensor):
        packed.append(tuple(tensor.shape))
        return tensor

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if check == "output":
            relative_error(tensors, workload, "bhsd", "cpu")()
        else:
            gradient_errors(tensors, workload, "bhsd", "cpu")()
    assert packed == []


def test_a_training_sweep_charts_what_each_variant_saves_for_backward(tmp_path):
    """Naive's saved bytes grow with S² (the probabilities), a fused kernel's with S (one
    log-sum-exp per row); a forward sweep has no such column."""
    from profiling.jobs.sweep import sweep
    from profiling.views.compare_figures import sweep_memory_figure

    shape = {k: v for k, v in SHAPE.items() if k != "seq_len"}
    result = sweep(["naive", "sdpa-flash"], [128, 256], device="cpu", mode="train", **shape)
    saved = result.table.set_index(["variant", "seq_len"])["saved MiB"]
    assert saved["naive", 256] / saved["naive", 128] == pytest.approx(4, rel=0.05)
    assert saved["sdpa-flash", 256] / saved["sdpa-flash", 128] == pytest.approx(2)
    names = [trace.name for trace in sweep_memory_figure(result).data]
    assert "naive saved for backward" in names and "sdpa-flash saved for backward" in names
    forward = sweep(["sdpa-flash"], [128], device="cpu", **shape)
    assert "saved MiB" not in forward.table


def test_the_pickers_say_which_backward_cannot_run_here_and_what_a_backward_teaches():
    from profiling.views import profile as views_profile

    forward = dict(views_profile.variant_choices("cpu", "float32"))
    train = dict(views_profile.variant_choices("cpu", "float32", "train"))
    flex = "flex"
    assert next(label for label, vid in forward.items() if vid == flex) == VARIANTS[flex].label
    assert any(vid == flex and "no backward on CPU" in label for label, vid in train.items())
    lesson = views_profile.lesson_markdown("sdpa-flash", "cpu", "float32", mode="train")
    assert "**Backward:**" in lesson and "dq_dk_dv" in lesson
    assert "Backward" not in views_profile.lesson_markdown("sdpa-flash", "cpu", "float32")
    assert all(variant.backward_lesson for variant in VARIANTS.values())


def test_diff_of_two_training_steps_aligns_their_phases():
    from profiling.views.diff import diff_page
    from tests.conftest import FIXTURES

    naive = FIXTURES / TRAIN_FIXTURE.format("naive")
    flash = FIXTURES / TRAIN_FIXTURE.format("sdpa-flash")
    headline = diff_page(naive, flash, "naive", "flash").headline
    assert "attn_fwd: 1,074.5 → 97.1 GPU µs per step (−977.4 µs), 5 → 1 kernels" in headline
    assert "attn_bwd: 1,422.9 → 307.3 GPU µs per step (−1,115.6 µs), 9 → 5 kernels" in headline
    forward_only = FIXTURES / "sdpa_flash_8_16_1024_64_bf16.json.gz"
    assert "attn_bwd" not in diff_page(forward_only, forward_only, "A", "B").headline
    mixed = diff_page(forward_only, flash, "inference", "training").headline
    assert "attn_bwd: only in training" in mixed


def test_diff_of_two_cpu_training_steps_compares_cpu_time(tmp_path):
    from profiling.views.diff import diff_page

    a = run(small("naive", "train"), out_dir=tmp_path / "a").trace_gz
    b = run(small("sdpa-flash", "train"), out_dir=tmp_path / "b").trace_gz
    headline = diff_page(a, b, "naive", "flash").headline
    assert "attn_bwd:" in headline and "CPU µs per step" in headline and "no GPU work" in headline


def test_diff_of_training_steps_counts_whole_steps_per_step():
    """attn_step windows, every thread's launches: the backward's kernels are in the table."""
    from profiling.analysis.diff import diff
    from tests.conftest import FIXTURES

    naive = FIXTURES / TRAIN_FIXTURE.format("naive")
    flash = FIXTURES / TRAIN_FIXTURE.format("sdpa-flash")
    kernels, _ = diff(naive, flash, "naive", "flash")
    assert kernels.attrs["scopes"] == ("3 attn_step spans", "3 attn_step spans")
    assert kernels.attrs["units"] == ("per step", "per step")
    only_flash = set(kernels.loc[kernels["where"] == "b", "kernel"])
    assert any("flash_bwd_dq_dk_dv" in name for name in only_flash), only_flash
    assert kernels["count_a"].sum() == 18  # naive: 7 GPU operations forward, 11 backward
