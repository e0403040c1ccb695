"""Inference shapes on the CPU (issue 21): grouped-query heads, a decode against a KV cache,
sliding windows. Every CPU-capable variant computes what the float64 reference computes, and
the reference is the bottom-right rule of attention/masks.py."""

from __future__ import annotations

import pytest
import torch

from attention import VARIANTS
from attention.masks import visible, visible_pairs
from profiling.run.reference.check import relative_error
from profiling.run.runner import _inputs, run
from profiling.workload.availability import unavailable_reasons
from profiling.workload.memory import estimate_bytes
from profiling.workload.spec import ConfigError, Workload

CPU_VARIANTS = [v for v, why in unavailable_reasons("cpu", "float32").items() if why is None]
SHAPES = {
    "gqa": dict(seq_len=96, heads=4, kv_heads=2),
    "mqa": dict(seq_len=96, heads=4, kv_heads=1),
    "decode": dict(seq_len=160, q_len=1, heads=4, kv_heads=2),
    "prefill-chunk": dict(seq_len=160, q_len=24, heads=2),
    "window": dict(seq_len=96, window=20, heads=4, kv_heads=2),
}


def small(variant: str, **shape) -> Workload:
    return Workload.from_user(
        variant=variant, batch=1, head_dim=16, dtype="float32", device="cpu", **shape
    )


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(v, marks=pytest.mark.slow) if VARIANTS[v].slow_first_run else v
        for v in CPU_VARIANTS
    ],
)
def test_every_cpu_variant_computes_the_shape_the_reference_computes(variant, shape_id, tmp_path):
    result = run(small(variant, **SHAPES[shape_id]), out_dir=tmp_path)
    assert result.summary.rel_err < 1e-5, (variant, shape_id, result.summary.rel_err)


def from_the_definition(tensors: dict[str, torch.Tensor], window: int | None) -> torch.Tensor:
    """Causal attention in float64 written out from its definition, sharing no code with the
    variants or the reference check: query head h reads K/V head h // (heads / kv_heads), and
    sees the keys brute_force says (bhsd)."""
    q, k, v = (tensors[name].to(torch.float64) for name in ("q", "k", "v"))
    heads, q_len, head_dim = q.shape[1:]
    kv_heads, kv_len = k.shape[1:3]
    seen = brute_force(q_len, kv_len, True, window)
    out = torch.empty_like(q)
    for head in range(heads):
        kv = head // (heads // kv_heads)
        scores = q[:, head] @ k[:, kv].transpose(-1, -2) / head_dim**0.5
        weights = torch.exp(scores.masked_fill(~seen, float("-inf")) - scores.amax(-1, True))
        out[:, head] = weights / weights.sum(-1, keepdim=True) @ v[:, kv]
    return out


@pytest.mark.parametrize("shape_id", list(SHAPES))
@pytest.mark.parametrize("variant", [v for v in CPU_VARIANTS if not VARIANTS[v].slow_first_run])
def test_every_cpu_variant_computes_the_shape_as_the_definition_does(variant, shape_id):
    """The test above checks the variants against the float64 reference, which reads the same
    attention/masks.py rule as they do: a wrong rule would pass it. This one does not."""
    workload = small(variant, **SHAPES[shape_id])
    tensors = _inputs(workload, "cpu", VARIANTS[variant].layout)
    assert VARIANTS[variant].layout == "bhsd"
    with torch.no_grad(), VARIANTS[variant].context():
        out = VARIANTS[variant].build(workload.problem("cpu")).forward(*tensors.values())
    expected = from_the_definition(tensors, SHAPES[shape_id].get("window"))
    error = float((out.to(torch.float64) - expected).norm() / expected.norm())
    assert error < 1e-5, (variant, shape_id, error)


def brute_force(q_len: int, kv_len: int, causal: bool, window: int | None) -> torch.Tensor:
    """The definition, one pair at a time: query i sits at i + kv_len − q_len."""
    seen = torch.zeros(q_len, kv_len, dtype=torch.bool)
    for i in range(q_len):
        position = i + kv_len - q_len
        for j in range(kv_len):
            ok = j <= position if causal else True
            if window is not None:
                ok = ok and j > position - window
            seen[i, j] = ok
    return seen


@pytest.mark.parametrize(
    ("q_len", "kv_len", "causal", "window"),
    [(5, 5, True, None), (1, 9, True, None), (4, 9, True, 3), (9, 9, True, 1), (3, 7, False, None)],
)
def test_which_keys_a_query_sees_is_the_bottom_right_rule(q_len, kv_len, causal, window):
    expected = brute_force(q_len, kv_len, causal, window)
    got = visible(0, q_len, q_len, kv_len, causal, window, "cpu")
    got = torch.ones(q_len, kv_len, dtype=torch.bool) if got is None else got
    assert torch.equal(got, expected)
    if causal and q_len > 1:  # a chunk of rows reads as those rows of the whole
        assert torch.equal(visible(1, q_len, q_len, kv_len, causal, window, "cpu"), expected[1:])
    assert visible_pairs(q_len, kv_len, causal, window) == int(expected.sum())
    assert expected[-1, -1]  # the last query always sees the last key


def test_top_left_causal_is_a_different_attention_and_the_reference_says_so():
    """SDPA's is_causal=True aligns top-left: with 4 queries against 20 keys the first query
    sees one key instead of seventeen. The reference (bottom-right) reports that as an error."""
    workload = small("naive", seq_len=20, q_len=4, heads=1)
    q, k, v = (torch.randn(1, 1, n, 16) for n in (4, 20, 20))
    top_left = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    bias = torch.nn.attention.bias.causal_lower_right(4, 20)
    bottom_right = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    tensors = {"q": q, "k": k, "v": v}
    error, _ = relative_error({**tensors, "out": bottom_right}, workload, "bhsd", "cpu")()
    wrong, _ = relative_error({**tensors, "out": top_left}, workload, "bhsd", "cpu")()
    assert error < 1e-6 and wrong > 0.1


def test_the_new_fields_default_to_todays_run_and_are_checked():
    default = Workload()
    assert (default.kv_heads, default.q_len, default.window) == (None, None, None)
    assert default.shape_tag("cpu") == "8_16_1024_64_bfloat16_causal_cpu_3steps"
    gqa = small("naive", seq_len=8192, q_len=1, heads=32, kv_heads=8, window=1024)
    assert gqa.shape_text() == "B1 H32/KV8 Q1 S8192 D16 float32 window 1024"
    assert gqa.shape_tag("cuda").endswith("_kv8_q1_w1024")
    refusals = [
        (dict(heads=4, kv_heads=3), "kv_heads must divide heads"),
        (dict(heads=4, kv_heads=8), "kv_heads must divide heads"),
        (dict(seq_len=64, q_len=65), r"q_len \(65\) must be at most seq_len \(64\)"),
        (dict(window=8, causal=False), "a sliding window needs the causal mask"),
        (dict(seq_len=64, window=65), r"window \(65\) must be at most seq_len"),
        (dict(q_len=0), "q_len must be between 1 and"),
        (dict(kv_heads=1.5), "kv_heads must be a whole number"),
    ]
    for shape, message in refusals:
        with pytest.raises(ConfigError, match=message):
            small("naive", **{"seq_len": 64, "heads": 4, **shape})


def test_flops_count_the_pairs_each_query_sees_and_bytes_what_must_move():
    decode = small("sdpa-flash", seq_len=8192, q_len=1, heads=32, kv_heads=8)
    assert decode.flops == 4 * 32 * 16 * 8192  # one query sees every key
    window = small("sdpa-flash", seq_len=100, window=10, heads=2)
    assert window.flops == 4 * 2 * 16 * (sum(range(1, 11)) + 90 * 10)
    assert small("sdpa-flash", seq_len=128).flops == 4 * 16 * 16 * 128 * 128 / 2  # as before
    # q and out once (32 heads × 1 query), K and V once (8 heads × 8192 keys), float32
    assert decode.io_bytes == (2 * 32 * 1 + 2 * 8 * 8192) * 16 * 4


def test_the_estimate_counts_naives_copies_of_grouped_heads():
    mha = small("naive", seq_len=2048, heads=8)
    gqa = small("naive", seq_len=2048, heads=8, kv_heads=1)
    copies = 2 * 8 * 2048 * 16 * 4  # K and V, copied out to 8 heads
    io_saved = 2 * 7 * 2048 * 16 * 4  # seven K/V heads fewer in the inputs
    assert estimate_bytes(gqa) - estimate_bytes(mha) == copies - io_saved


@pytest.mark.parametrize("shape_id", ["gqa", "prefill-chunk", "window"])
@pytest.mark.parametrize("variant", ["naive", "sdpa-flash"])
def test_training_at_inference_shapes_has_correct_gradients(variant, shape_id, tmp_path):
    """dK and dV of a K/V head sum over the query heads that read it; the reference's too."""
    result = run(small(variant, mode="train", **SHAPES[shape_id]), out_dir=tmp_path)
    assert max(result.summary.grad_err.values()) < 1e-5, result.summary.grad_err


def test_the_roofline_says_a_decode_reads_as_bandwidth_and_a_prefill_as_compute():
    from profiling.analysis.bounds import run_bound

    h200 = "NVIDIA H200"
    decode = Workload.from_user(
        variant="sdpa-cudnn", batch=16, heads=32, kv_heads=8, q_len=1, seq_len=8192,
        head_dim=128, device="cpu",
    )  # fmt: skip
    # K and V: 16 × 8 heads × 8192 keys × 128 × 2 bytes each; q and out: 16 × 32 × 128 × 2
    assert decode.io_bytes == 2 * 16 * 8 * 8192 * 128 * 2 + 2 * 16 * 32 * 128 * 2
    # 100 µs for 537 MB: 5.37 TB/s is above the 4.8 peak; take 160 µs: 3.36 TB/s, 70%
    found = run_bound(decode.flops, decode.io_bytes, "forward", 160.0, h200, "bfloat16")
    assert found.bound == "memory" and found.tbps == pytest.approx(decode.io_bytes / 160e-6 / 1e12)
    assert found.pct_peak_bandwidth == pytest.approx(100 * found.tbps / 4.8)
    assert found.intensity == pytest.approx(decode.flops / decode.io_bytes)
    assert found.intensity < 4  # about one multiply-add per byte of K and V
    prefill = Workload.from_user(
        variant="sdpa-cudnn", batch=4, heads=32, kv_heads=8, seq_len=4096, head_dim=128,
        device="cpu",
    )  # fmt: skip
    found = run_bound(prefill.flops, prefill.io_bytes, "forward", 600.0, h200, "bfloat16")
    assert found.bound == "compute" and found.intensity > 206  # the H200's ridge: 989.4 / 4.8
    slow = run_bound(prefill.flops, prefill.io_bytes, "forward", 60_000.0, h200, "bfloat16")
    assert slow.bound.startswith("neither")  # under 10% of both peaks
    unknown = run_bound(prefill.flops, prefill.io_bytes, "forward", 600.0, "Some GPU", "bfloat16")
    assert unknown.bound == "n/a (no datasheet peaks for this device)" and unknown.tbps > 0
    on_cpu = run_bound(prefill.flops, prefill.io_bytes, "forward", None, "", "bfloat16")
    assert on_cpu.tbps is None and on_cpu.bound == "n/a (no GPU time)"
    train = run_bound(prefill.flops, prefill.io_bytes, "train", 600.0, h200, "bfloat16")
    assert train.bytes_moved == 3 * prefill.io_bytes


def test_a_cpu_run_says_what_must_move_and_that_it_has_no_roofline(tmp_path):
    from profiling.views.text.summary import summary_rows

    rows = dict(
        summary_rows(run(small("sdpa-flash", **SHAPES["decode"]), out_dir=tmp_path).summary)
    )
    assert rows["memory traffic"].endswith("must move (q, k, v read, the output written once)")
    assert rows["roofline"].startswith("n/a (no GPU time)")


def test_a_decode_run_says_how_causal_is_aligned_and_a_sweep_walks_the_cache(tmp_path):
    """The page's note on a decode; a Sweep over seq_len at q_len 1 is a sweep over the KV
    cache, its time growing with the keys read."""
    from attention.masks import BOTTOM_RIGHT
    from profiling.jobs.sweep import sweep

    summary = run(small("sdpa-flash", **SHAPES["decode"]), out_dir=tmp_path / "one").summary
    assert BOTTOM_RIGHT in summary.notes
    square = run(small("sdpa-flash", seq_len=96), out_dir=tmp_path / "two").summary
    assert BOTTOM_RIGHT not in square.notes
    result = sweep(["naive"], [128, 1024], batch=1, heads=4, kv_heads=2, q_len=1, head_dim=16,
                   dtype="float32", device="cpu")  # fmt: skip
    table = result.table.set_index("seq_len")
    assert list(table["status"]) == ["ok", "ok"]
    assert result.points[0].trace_gz.name.endswith("_kv2_q1.json.gz")
