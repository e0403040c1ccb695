"""Every variant computes the same function as float64 attention, on fresh random inputs."""

from __future__ import annotations

import pytest
import torch

from attention import VARIANTS, Built, Problem, Variant
from profiling.jobs.compare import compare
from profiling.views import profile as views_profile
from profiling.workload import request as job_request
from profiling.workload.availability import unavailable_reasons
from tests.conftest import TOLERANCE, reference_attention, rel_err

CPU_VARIANTS = [vid for vid, why in unavailable_reasons("cpu", "float32").items() if why is None]
FAST = [v for v in CPU_VARIANTS if not VARIANTS[v].slow_first_run]
COMPILED = [v for v in CPU_VARIANTS if VARIANTS[v].slow_first_run]  # torch.compile on a CPU


def run_variant(vid: str, b: int, h: int, s: int, d: int, causal: bool, dtype, device="cpu"):
    variant = VARIANTS[vid]
    q, k, v = (torch.randn(b, h, s, d, dtype=dtype, device=device) for _ in range(3))
    built = variant.build(Problem(b, h, s, d, causal, dtype, device))
    args = (q, k, v) if variant.layout == "bhsd" else tuple(x.transpose(1, 2) for x in (q, k, v))
    with torch.no_grad(), variant.context():
        out = built.forward(*args)
    if variant.layout == "bshd":
        out = out.transpose(1, 2)
    assert out.shape == q.shape and out.dtype == dtype
    return rel_err(out, reference_attention(q, k, v, causal))


def test_cpu_has_the_post_variants():
    assert {"naive", "naive-inplace", "sdpa-math", "sdpa-flash", "sdpa-auto"} <= set(CPU_VARIANTS)


@pytest.mark.parametrize("vid", FAST)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("causal", [True, False])
def test_matches_float64_reference(vid, dtype, causal):
    shapes = [(2, 3, 64, 32), (1, 2, 100, 64)]  # 100: not a power of two
    for shape in shapes:
        assert run_variant(vid, *shape, causal, dtype) < TOLERANCE[dtype], shape


@pytest.mark.slow
@pytest.mark.parametrize("vid", COMPILED)
@pytest.mark.parametrize("causal", [True, False])
def test_compiled_matches_float64_reference(vid, causal):
    assert run_variant(vid, 1, 2, 128, 64, causal, torch.float32) < TOLERANCE[torch.float32]


def test_wrong_result_is_caught():
    """The tolerance must reject a real mistake: non-causal output checked as causal."""
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 64, 32) for _ in range(3))
    wrong = reference_attention(q, k, v, causal=False)
    assert rel_err(wrong, reference_attention(q, k, v, causal=True)) > 0.1


def test_every_variant_has_what_the_page_needs():
    for vid, v in VARIANTS.items():
        assert v.id == vid and v.label and v.lesson and v.layout in ("bhsd", "bshd")


@pytest.mark.parametrize(
    "vid",
    [
        "sdpa-efficient",
        "sdpa-cudnn",
        "kernels-flash-attn2",
        "kernels-flash-attn3",
        "kernels-local-triton",
    ],
)
def test_gpu_only_variants_say_why_on_cpu(vid):
    reason = unavailable_reasons("cpu", "bfloat16")[vid]
    assert reason and ("CUDA" in reason or "not installed" in reason)


# -- adding a variant: one module + one registry line, and every entry point sees it ------------
TOY = "toy-softmax"


@pytest.fixture
def toy(monkeypatch):
    """A throw-away variant registered for one test (monkeypatch removes it): attention written
    out in three lines, on any device and dtype."""

    def build(problem: Problem) -> Built:
        def forward(q, k, v):
            scores = (q @ k.transpose(-2, -1)) * problem.head_dim**-0.5
            if problem.causal:
                above = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
                scores = scores.masked_fill(above, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v

        return Built(forward, "eager (toy)")

    variant = Variant(
        id=TOY,
        label="Toy softmax attention",
        lesson="a test's own variant",
        layout="bhsd",
        build=build,
    )
    monkeypatch.setitem(VARIANTS, TOY, variant)
    return variant


def picker_values(demo, elem_id: str) -> list[str]:
    """The variant ids a dropdown of the built page offers."""
    (picker,) = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id]
    return [value for _label, value in picker.choices]


def test_a_registered_variant_is_on_every_picker_and_accepted_by_every_request(toy, tmp_path):
    """Seen failing when the Sweep picker read a hard-coded list of ids instead of the registry."""
    import app

    demo = app.build_demo()
    for elem_id in ("variant", "cmp-variants", "sw-variants"):  # Profile, Compare, Sweep
        assert TOY in picker_values(demo, elem_id), elem_id
    assert (toy.label, TOY) in views_profile.variant_choices("cpu", "float32")
    page_shape = dict(dtype="float32", batch=1, heads=2, head_dim=32, causal=True)
    assert job_request.compare_request([TOY], "cpu", seq_len=128, **page_shape).variants == [TOY]
    assert job_request.sweep_request([TOY], [256], "cpu", **page_shape).variants == [TOY]
    shape = dict(seq_len=64, dtype="float32", batch=1, heads=2, head_dim=32, device="cpu")
    result = compare([TOY], out_dir=tmp_path / "compare", make_zip=False, **shape)
    assert [(r.variant, r.status) for r in result.runs] == [(TOY, "ok")]


def test_a_registered_variant_runs_from_the_cli(toy, tmp_path, capsys):
    from profiling.__main__ import main

    flags = ["--seq-len", "64", "--dtype", "float32", "--batch", "1", "--heads", "2",
             "--head-dim", "32", "--device", "cpu", "--out", str(tmp_path)]  # fmt: skip
    assert main(["--variant", TOY, *flags]) == 0
    out = capsys.readouterr().out
    assert "eager (toy)" in out and (tmp_path / TOY).is_dir()
    assert main(["compare", "--variants", f"naive,{TOY}", *flags]) == 0
    assert TOY in capsys.readouterr().out


def test_a_registered_variant_is_profiled_through_the_api(toy, tmp_path):
    """/profile through gradio_client, on a page built after the variant was registered."""
    from gradio_client import Client

    import app

    demo = app.build_demo()
    _, url, _ = demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )
    try:
        client = Client(url, verbose=False, download_files=str(tmp_path))
        page = dict(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=32, causal=True)
        _, summary, *_ = client.predict(variant=TOY, **page, api_name="/profile")
    finally:
        demo.close()
    assert summary["variant"] == TOY and summary["label"] == toy.label
    assert summary["ran"] == "eager (toy)" and summary["forwards"] == 3
    assert summary["rel_err"] < TOLERANCE[torch.float32]
