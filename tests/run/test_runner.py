"""One profiled run on the CPU: trace, tables and summary as the page will show them."""

from __future__ import annotations

import gzip
import json

import pytest
import torch

from attention import VARIANTS
from profiling.analysis.summary import forward_spans
from profiling.run.runner import RunError, VariantUnavailable, run
from profiling.trace import model as trace
from profiling.workload.availability import unavailable_reasons
from profiling.workload.spec import ConfigError, Workload
from tests.conftest import watch_inputs

CPU_VARIANTS = [v for v, why in unavailable_reasons("cpu", "float32").items() if why is None]


def small(variant: str, **kw) -> Workload:
    base = {
        "variant": variant,
        "seq_len": 128,
        "batch": 1,
        "heads": 2,
        "head_dim": 32,
        "dtype": "float32",
        "device": "cpu",
    }
    return Workload.from_user(**{**base, **kw})


@pytest.mark.parametrize(
    "vid",
    [
        pytest.param(v, marks=pytest.mark.slow) if VARIANTS[v].slow_first_run else v
        for v in CPU_VARIANTS
    ],
)
def test_profiled_run_on_cpu(vid, tmp_path):
    result = run(small(vid), out_dir=tmp_path)
    s = result.summary
    assert s.forwards == 3 and s.rel_err < 1e-5
    assert s.gpu_us_per_forward is None and s.peak_mib is None and s.cpu_us_per_forward > 0
    # no GPU figure exists on a CPU: None (JSON null, "n/a" on the page), never 0.0
    gpu_figures = (s.kernels_per_forward, s.memcpy_per_forward, s.memset_per_forward, s.cpu_bound)
    assert gpu_figures == (None, None, None, None)
    assert not result.operators.empty and "attn_fwd" in set(result.operators["operator"])
    assert (result.operators.loc[result.operators["operator"] == "attn_fwd", "calls"] == 3).all()
    for path in (result.trace_json, result.trace_gz, result.table_txt):
        assert path.exists() and path.parent == tmp_path
    doc = json.loads(gzip.decompress(result.trace_gz.read_bytes()))
    assert sum(e.get("name") == "attn_fwd" for e in doc["traceEvents"]) == 3
    assert len(forward_spans(trace.load(result.trace_json))) == 3
    assert "attn_fwd" in result.table_txt.read_text()


def test_active_steps_are_configurable(tmp_path):
    result = run(small("naive-inplace", steps=5), out_dir=tmp_path)
    assert result.summary.forwards == 5
    assert result.summary.config["steps"] == 5


def test_sdpa_reports_the_backend_that_ran(tmp_path):
    assert run(small("sdpa-math"), out_dir=tmp_path).summary.ran == "SDPA math"
    assert run(small("sdpa-flash"), out_dir=tmp_path).summary.ran == "SDPA flash (CPU)"


def test_math_backend_launches_more_ops_than_flash(tmp_path):
    math_ops = run(small("sdpa-math"), out_dir=tmp_path).operators
    flash_ops = run(small("sdpa-flash"), out_dir=tmp_path).operators
    assert len(math_ops) > len(flash_ops)


def test_unavailable_variant_says_why():
    with pytest.raises(VariantUnavailable, match="needs a CUDA GPU"):
        run(small("sdpa-cudnn", dtype="bfloat16"))


def test_memory_refusal_before_allocation(monkeypatch):
    monkeypatch.setattr("profiling.workload.memory.available_bytes", lambda device: 256 * 1024**2)
    with pytest.raises(ConfigError, match="needs about"):
        run(small("naive", seq_len=8192, batch=4, heads=8))


def test_oom_is_caught_and_the_next_run_works(monkeypatch, tmp_path):
    from attention import naive

    real = naive.NaiveCausalAttention.forward
    calls = {"n": 0}

    def exploding(self, q, k, v, mask):
        calls["n"] += 1
        if calls["n"] == 2:
            raise torch.OutOfMemoryError("induced")
        return real(self, q, k, v, mask)

    monkeypatch.setattr(naive.NaiveCausalAttention, "forward", exploding)
    with pytest.raises(RunError, match=r"out of memory.*memory was released"):
        run(small("naive"), out_dir=tmp_path)
    monkeypatch.setattr(naive.NaiveCausalAttention, "forward", real)
    assert run(small("naive"), out_dir=tmp_path).summary.forwards == 3


def test_inputs_are_freed_while_the_error_is_still_held(monkeypatch):
    """No traceback may keep the run's tensors alive: memory must return before the user retries."""
    from attention import naive
    from tests.conftest import watch_inputs

    def boom(self, q, k, v, mask):
        raise torch.OutOfMemoryError("induced")

    refs = watch_inputs(monkeypatch)
    monkeypatch.setattr(naive.NaiveCausalAttention, "forward", boom)
    with pytest.raises(RunError) as info:
        run(small("naive"))
    assert info.value.__traceback__ is not None  # the error is alive here...
    assert refs and all(r() is None for r in refs)  # ...and the inputs are already gone


def test_a_failed_run_leaves_no_folder_of_its_own(monkeypatch, tmp_path):
    """The runner's own attnprof-* folder goes with a failure; a caller's folder stays."""
    import tempfile

    from attention import naive

    def broken(self, q, k, v, mask):
        raise RuntimeError("a kernel error")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(naive.NaiveCausalAttention, "forward", broken)
    with pytest.raises(RunError, match="RuntimeError: a kernel error"):  # raised in the warm-up
        run(small("naive"))
    assert not list(tmp_path.glob("attnprof-*"))
    mine = tmp_path / "mine"
    with pytest.raises(RunError):
        run(small("naive"), out_dir=mine)
    assert mine.is_dir()


# -- failed is not unavailable ----------------------------------------------------------------
def install_variant(
    monkeypatch, vid: str, build=None, forward=None, unavailable=None, **fields
) -> str:
    """A throw-away variant in VARIANTS for one test (monkeypatch removes it afterwards): it
    builds with `build`, or runs `forward`, or plain SDPA, anywhere unless `unavailable` says
    otherwise; `fields` as Variant's."""
    from attention import Built, Variant

    def sdpa(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    def default_build(problem):
        return Built(forward or sdpa, "throw-away")

    runs_anywhere = lambda device, dtype: None  # noqa: E731
    variant = Variant(
        id=vid,
        label=f"throw-away {vid}",
        lesson="a test variant",
        layout="bhsd",
        build=build or default_build,
        unavailable=unavailable or runs_anywhere,
        **fields,
    )
    monkeypatch.setitem(VARIANTS, vid, variant)
    return vid


def _raises(error: Exception):
    def call(*args):
        raise error

    return call


@pytest.mark.parametrize(
    "error", [ImportError("no module named triton_kernels"), ValueError("bad block size")]
)
def test_a_build_that_raises_is_a_failure_with_its_class_and_traceback(monkeypatch, caplog, error):
    vid = install_variant(monkeypatch, "broken-build", build=_raises(error))
    with pytest.raises(RunError) as info:
        run(small(vid))
    assert not isinstance(info.value, VariantUnavailable)
    name = type(error).__name__
    assert str(info.value) == f"broken-build failed on cpu: {name}: {error}"
    logged = [r for r in caplog.records if r.name == "profiling.run.runner" and r.exc_info]
    assert logged and logged[-1].exc_info[0] is type(error)  # the traceback is in the log


def test_a_forward_that_raises_in_warm_up_is_a_failure(monkeypatch, caplog):
    vid = install_variant(
        monkeypatch, "broken-forward", forward=_raises(RuntimeError("CUDA error"))
    )
    with pytest.raises(RunError, match=r"^broken-forward failed on cpu: RuntimeError: CUDA error$"):
        run(small(vid))
    assert any(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)


def test_an_availability_check_that_raises_is_a_failure(monkeypatch, caplog):
    """The runner's own check (inside the GPU slot on ZeroGPU) fails closed, as a failure."""
    vid = install_variant(
        monkeypatch, "check-raises", unavailable=_raises(AssertionError("no CUDA driver"))
    )
    with pytest.raises(RunError) as info:
        run(small(vid))
    assert str(info.value) == (
        "check-raises failed on cpu: availability could not be checked: AssertionError: no CUDA "
        "driver"
    )
    assert any(r.exc_info and r.exc_info[0] is AssertionError for r in caplog.records)


def test_a_known_rule_still_reads_unavailable(monkeypatch):
    """A loader's rule (the Triton build's head dims) and torch refusing a pinned SDPA backend
    are the variant not running here, said with the rule's or torch's words."""
    from attention import hub
    from attention.sdpa import declines, pinning

    def head_dims_rule(problem):
        hub.check_head_dim(hub.LoadedKernel(lambda **kw: None, "a build", head_dims=(64,)), 96)

    vid = install_variant(monkeypatch, "head-dim-rule", build=head_dims_rule)
    with pytest.raises(VariantUnavailable) as info:
        run(small(vid))
    assert str(info.value) == (
        "head-dim-rule is unavailable here: a build supports head_dim 64 (not 96)"
    )
    # SDPA pinned to a backend that does not exist on a CPU: torch's own refusal
    vid = install_variant(monkeypatch, "sdpa-refused", context=pinning("efficient"),
                          declines=declines)  # fmt: skip
    with pytest.raises(VariantUnavailable, match="sdpa-refused cannot run B1 H2 S128 D32 float32 "
                       "here: No viable backend for scaled_dot_product_attention"):  # fmt: skip
        run(small(vid))
    # the same refusal from a variant whose library has no such rule is a failure
    vid = install_variant(monkeypatch, "no-rule", context=pinning("efficient"))
    with pytest.raises(RunError, match="no-rule failed on cpu: RuntimeError: No viable backend"):
        run(small(vid))


def test_torchs_refusal_keeps_its_warnings_as_the_reason(monkeypatch):
    import warnings

    from attention.sdpa import declines

    def refused(q, k, v):
        warnings.warn("Flash attention requires head_dim <= 256 (got 512)", stacklevel=1)
        raise RuntimeError("No available kernel.  Aborting execution.")

    vid = install_variant(monkeypatch, "sdpa-cuda-refusal", forward=refused, declines=declines)
    with pytest.raises(VariantUnavailable) as info:
        run(small(vid))
    assert str(info.value).endswith(
        "No available kernel.  Aborting execution. (Flash attention requires head_dim <= 256 "
        "(got 512))"
    )


def test_a_failure_frees_the_inputs_even_while_the_log_keeps_its_traceback(monkeypatch, caplog):
    """caplog keeps each record, and a record keeps its traceback: the frames it holds are
    cleared, so the run's tensors still go before the caller sees the error."""
    refs = watch_inputs(monkeypatch)
    vid = install_variant(monkeypatch, "leaky", forward=_raises(ValueError("bad")))
    with pytest.raises(RunError):
        run(small(vid))
    assert any(r.exc_info for r in caplog.records)  # the record and its traceback are kept
    assert refs and all(r() is None for r in refs)


@pytest.mark.parametrize("causal", [True, False])
def test_chunked_reference_matches_a_direct_one(monkeypatch, causal):
    from profiling.run.reference import check as reference_check
    from tests.conftest import reference_attention, rel_err

    q, k, v = (torch.randn(2, 3, 100, 16) for _ in range(3))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = out + 1e-3 * torch.randn_like(out)  # a known, non-zero error
    t = {"out": out, "q": q, "k": k, "v": v}
    config = small("naive", causal=causal)
    direct = rel_err(out, reference_attention(q, k, v, causal))
    value, note = reference_check.relative_error(t, config, "bhsd", "cpu")()
    assert value == pytest.approx(direct, rel=1e-9) and note == "all heads"
    two_pairs = 4.0 * 100 * 100 * 16 * 2
    monkeypatch.setitem(reference_check.REFERENCE_FLOPS, "cpu", two_pairs)
    value, note = reference_check.relative_error(t, config, "bhsd", "cpu")()
    assert note.startswith("2 of 6") and value == pytest.approx(direct, rel=0.5)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(("chunk", "spare"), [(100 * 100 * 4, 0), (1000, 0), (30, 10**9)])
def test_reference_in_any_chunking_matches_a_direct_one(monkeypatch, causal, chunk, spare):
    """Groups of pairs, query rows split into chunks (the causal mask's offset per chunk), and
    the chunk capped whatever memory is spare: the same value as one direct computation."""
    from profiling.run.reference import check as reference_check
    from tests.conftest import reference_attention, rel_err

    q, k, v = (torch.randn(2, 3, 100, 16, dtype=torch.float64) for _ in range(3))
    out = reference_attention(q, k, v, causal) + 1e-3 * torch.randn(2, 3, 100, 16)
    t = {"out": out, "q": q, "k": k, "v": v}
    direct = rel_err(out, reference_attention(q, k, v, causal))
    monkeypatch.setattr(reference_check, "REFERENCE_CHUNK", (chunk, chunk))
    value, note = reference_check.relative_error(
        t, small("naive", causal=causal), "bhsd", "cpu", spare
    )()
    assert value == pytest.approx(direct, rel=1e-9) and note == "all heads"
    # bshd layout (the kernels variants): the same tensors transposed give the same value
    t = {name: x.transpose(1, 2) for name, x in t.items()}
    value, _ = reference_check.relative_error(
        t, small("naive", causal=causal), "bshd", "cpu", spare
    )()
    assert value == pytest.approx(direct, rel=1e-9)


def test_reference_chunks_grow_with_spare_memory(monkeypatch):
    """One chunk when the memory check left room for it, small ones when it did not."""
    from profiling.run.reference import check as reference_check

    q, k, v = (torch.randn(2, 3, 100, 16) for _ in range(3))
    t = {"out": q.clone(), "q": q, "k": k, "v": v}
    calls = []
    baddbmm = torch.baddbmm
    monkeypatch.setattr(torch, "baddbmm", lambda *a, **kw: calls.append(1) or baddbmm(*a, **kw))
    monkeypatch.setattr(reference_check, "REFERENCE_CHUNK", (1000, 6 * 100 * 100))
    reference_check.relative_error(t, small("naive"), "bhsd", "cpu", spare=0)()
    assert len(calls) == 60  # 10 query rows per chunk, one pair per chunk
    calls.clear()
    reference_check.relative_error(t, small("naive"), "bhsd", "cpu", spare=3 * 8 * 6 * 100 * 100)()
    assert len(calls) == 1


@pytest.mark.parametrize("variant", ["flex", "compiled-naive"])
def test_compiled_variants_on_a_cpu_say_what_inductor_generated_there(variant):
    """On a CPU Inductor writes C++, not Triton; its compiled graph is one opaque call."""
    why = VARIANTS[variant].unavailable("cpu", torch.float32)
    if why:
        pytest.skip(why)
    s = run(small(variant)).summary
    assert s.ran == "torch.compile (Inductor, C++)"
    if s.dominant_kernel.startswith("## Call CompiledFxGraph"):
        assert "the graph torch.compile generated" in s.dominant_decoded


def test_the_flop_convention_is_said_for_causal_runs_only():
    causal, full = (run(small("naive", causal=c)).summary for c in (True, False))
    assert "causal attention counted as half" in causal.tflops_basis
    assert "full attention: 4·B·H·S²·D FLOPs" in full.tflops_basis
    assert "half" not in full.tflops_basis
    assert full.flops_per_forward == 2 * causal.flops_per_forward


def test_a_failed_gz_write_is_a_failed_run_and_leaves_no_folder(monkeypatch, tmp_path):
    """The .json.gz is written on a worker thread; a full disk there fails the run as it
    would inline, and the runner's folder still goes."""
    import tempfile

    from profiling.run import export as run_export

    def full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(run_export, "gzip_file", full)
    with pytest.raises(RunError, match="gz failed: No space left on device"):
        run(small("naive"))
    assert not list(tmp_path.glob("attnprof-*"))


def test_the_gz_writer_works_in_a_forked_child(tmp_path):
    """A fork inherits the pool but not its thread; the child gets a pool of its own."""
    import multiprocessing

    from profiling.run import export as run_export

    run_export.GZIP_POOL.submit(int).result()  # the parent's pool has its thread
    child = multiprocessing.get_context("fork").Process(target=_write_gz_in_child, args=(tmp_path,))
    child.start()
    child.join(30)
    assert child.exitcode == 0 and (tmp_path / "t.json.gz").exists()


def _write_gz_in_child(folder) -> None:
    from profiling.run import export as run_export

    (folder / "t.json").write_text("{}")
    run_export.GZIP_POOL.submit(
        run_export.gzip_file, folder / "t.json", folder / "t.json.gz"
    ).result(timeout=10)
