"""Loading FlashAttention through `kernels`: allow-list, and failures that name their cause."""

from __future__ import annotations

import pytest

from attention import hub

pytest.importorskip("kernels")


def test_only_allow_listed_repos_load():
    with pytest.raises(hub.KernelLoadError, match="allow-list"):
        hub.load("someone/evil-kernel", fallback=False)


def test_unreachable_hub_is_named_as_such(monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub._cache.clear()
    if hub.hub_reachable():
        pytest.skip("the Hub is reachable from this machine")
    with pytest.raises(hub.KernelLoadError) as info:
        hub.load("kernels-community/flash-attn2", fallback=False)
    text = str(info.value)
    assert "kernels-community/flash-attn2 (version 3) could not be loaded" in text
    assert "Hugging Face Hub is unreachable" in text
    assert "LOCAL_KERNELS=" in text


def test_broken_local_override_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={tmp_path}")
    hub._cache.clear()
    with pytest.raises(hub.KernelLoadError, match=r"LOCAL_KERNELS directory .* did not load"):
        hub.load("kernels-community/flash-attn2", fallback=True)


def test_hub_failure_falls_back_to_the_bundled_triton_build(monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    hub._cache.clear()
    if hub.hub_reachable():
        pytest.skip("the Hub is reachable from this machine")
    kernel = hub.load("kernels-community/flash-attn2")
    assert kernel.source == hub.LOCAL_BUILD_LABEL
    assert kernel.note.startswith("Hub kernels-community/flash-attn2 v3:")
    assert "unreachable" in kernel.note
    assert callable(kernel.flash_attn_func)


def test_local_kernels_override_is_named_as_the_source(monkeypatch):
    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={hub.LOCAL_BUILD}")
    hub._cache.clear()
    kernel = hub.load("kernels-community/flash-attn2", fallback=False)
    assert kernel.source.startswith("LOCAL_KERNELS override of kernels-community/flash-attn2")
    assert not kernel.note


def test_local_triton_variant_runs_on_cpu_through_the_interpreter(tmp_path):
    """The whole path — registry → kernels.get_local_kernel → Triton → trace — without a GPU."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton")
    root = Path(__file__).resolve().parents[1]
    code = (
        "from profiling.config import RunConfig\n"
        "from profiling.runner import run\n"
        "r = run(RunConfig.from_user(variant='kernels-local-triton', seq_len=48, batch=1,"
        " heads=2, head_dim=64, dtype='float16', device='cpu'))\n"
        "print('RAN', r.summary.ran, r.summary.forwards, r.summary.rel_err)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "TRITON_INTERPRET": "1",
           "HOME": str(tmp_path)}  # fmt: skip
    p = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RAN"))
    _, *ran, forwards, err = line.split()
    assert " ".join(ran) == hub.LOCAL_BUILD_LABEL and forwards == "3" and float(err) < 5e-3
