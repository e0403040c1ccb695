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
