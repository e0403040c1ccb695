"""Loading FlashAttention through `kernels`: allow-list, and failures that name their cause."""

from __future__ import annotations

import pytest

from attention import VariantUnavailable, hub
from profiling.run.runner import RunError, run
from profiling.workload.spec import Workload

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
    assert "trust_remote_code" not in text  # kernels' advice is not the app user's to follow


def test_offline_mode_says_the_cache_lacks_the_kernel_without_kernels_advice(monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-attnprof-hf-home")
    hub._cache.clear()
    with pytest.raises(hub.KernelLoadError) as info:
        hub.load("kernels-community/flash-attn2", fallback=False)
    text = str(info.value)
    assert "HF_HUB_OFFLINE is set and this version of the kernel is not in the local cache" in text
    assert "revision=" not in text and "ValueError" not in text


def test_broken_local_override_is_reported(monkeypatch, tmp_path):
    (tmp_path / "build" / "torch-universal").mkdir(parents=True)  # no metadata.json, no module
    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={tmp_path}")
    hub._cache.clear()
    with pytest.raises(hub.KernelLoadError, match=r"LOCAL_KERNELS directory .* did not load"):
        hub.load("kernels-community/flash-attn2", fallback=True)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p / "missing", "does not exist"),
        (lambda p: (p / "file").write_text("x") and p / "file", "is not a folder"),
        (lambda p: p, "holds no build/ folder"),
    ],
)
def test_each_way_an_override_folder_is_wrong_is_named(monkeypatch, tmp_path, make, says):
    folder = make(tmp_path)
    monkeypatch.setenv("LOCAL_KERNELS", f"kernels-community/flash-attn2={folder}")
    hub._cache.clear()
    with pytest.raises(hub.KernelLoadError, match=f"directory {folder} {says}"):
        hub.load("kernels-community/flash-attn2")  # an override never falls back


def test_an_override_with_spaces_or_a_trailing_newline_loads(monkeypatch):
    # as a Space secret pasted with a newline, or written `repo = /dir`
    monkeypatch.setenv("LOCAL_KERNELS", f" kernels-community/flash-attn2 = {hub.LOCAL_BUILD}\n")
    hub._cache.clear()
    kernel = hub.load("kernels-community/flash-attn2", fallback=False)
    assert kernel.source.endswith(str(hub.LOCAL_BUILD)) and not kernel.note


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
    root = Path(__file__).resolve().parents[2]
    code = (
        "from profiling.workload.spec import Workload\n"
        "from profiling.run.runner import run\n"
        "r = run(Workload.from_user(variant='kernels-local-triton', seq_len=48, batch=1,"
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


REPO = "kernels-community/flash-attn2"


def _hub_answers(monkeypatch, answer):
    """kernels.get_kernel replaced by `answer` (a callable); counts the calls."""
    import kernels

    calls: list[str] = []

    def get_kernel(repo, version=None):
        calls.append(repo)
        return answer()

    monkeypatch.setattr(kernels, "get_kernel", get_kernel)
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    hub._cache.clear()
    return calls


def test_a_hub_that_never_answers_costs_the_timeout_not_the_run(monkeypatch):
    import threading
    import time

    hang = threading.Event()
    monkeypatch.setattr(hub, "HUB_TIMEOUT_S", 0.2)
    _hub_answers(monkeypatch, lambda: hang.wait(30))
    began = time.monotonic()
    kernel = hub.load(REPO)
    assert time.monotonic() - began < 5  # before: blocked until the connection gave up
    assert kernel.source == hub.LOCAL_BUILD_LABEL and "did not answer within 0 s" in kernel.note
    hub._cache.clear()
    with pytest.raises(hub.KernelLoadError, match="did not answer within"):
        hub.load(REPO, fallback=False)
    hang.set()


def test_a_hub_failure_is_remembered_for_a_while_then_asked_again(monkeypatch):
    import types

    answers = iter([OSError("connection reset"), OSError("connection reset")])

    def answer():
        nxt = next(answers, None)
        if nxt is not None:
            raise nxt
        return types.SimpleNamespace(flash_attn_func=lambda **kw: None)

    calls = _hub_answers(monkeypatch, answer)
    first = hub.load(REPO)
    assert first.source == hub.LOCAL_BUILD_LABEL and hub.load(REPO) is first
    with pytest.raises(hub.KernelLoadError):  # fallback=False: the failure itself is kept
        hub.load(REPO, fallback=False)
    with pytest.raises(hub.KernelLoadError):
        hub.load(REPO, fallback=False)
    assert len(calls) == 2  # one per kind of call, not one per click
    monkeypatch.setattr(hub, "RETRY_S", 0.0)  # the outage is over and the time has passed
    for key, (kernel, _) in list(hub._cache.items()):
        hub._cache[key] = (kernel, 0.0)
    assert hub.load(REPO).source == f"Hub {REPO} v3"  # before: the fallback, for ever
    assert hub.load(REPO) is hub.load(REPO) and len(calls) == 3  # a Hub kernel stays


def test_builds_run_on_later_minor_versions_of_their_architecture(monkeypatch):
    import torch

    import attention

    assert attention.built_for((8, 9), ((8, 0), (9, 0)))  # an L4: the sm_80 build runs
    assert attention.built_for((9, 0), ((8, 0), (9, 0)))
    assert not attention.built_for((7, 5), ((8, 0), (9, 0)))  # a T4
    assert not attention.built_for((10, 0), ((8, 0), (9, 0)))  # never across major versions
    monkeypatch.setattr(attention.rules, "capability", lambda: (8, 9))
    fa2 = attention.VARIANTS["kernels-flash-attn2"]
    assert fa2.unavailable("cuda", torch.bfloat16) is None  # before: "built for 8.0, 9.0, …"


def test_a_head_dim_the_triton_build_lacks_is_refused_before_it_runs():
    import torch

    from attention import VARIANTS, Problem

    problem = Problem(1, 2, 64, 96, True, torch.float16, "cpu")
    with pytest.raises(
        VariantUnavailable, match=r"supports head_dim 16, 32, 64, 128, 256 \(not 96\)"
    ):  # a known rule: the variant cannot run this, it did not fail
        VARIANTS["kernels-local-triton"].build(problem)
    assert VARIANTS["kernels-local-triton"].build(Problem(1, 2, 64, 64, True, torch.float16, "cpu"))


def test_a_remembered_failure_is_raised_afresh_without_the_first_runs_frames(monkeypatch, tmp_path):
    monkeypatch.setenv("LOCAL_KERNELS", f"{REPO}={tmp_path / 'missing'}")
    hub._cache.clear()
    raised = []
    for _ in range(3):
        with pytest.raises(hub.KernelLoadError) as info:
            hub.load(REPO)
        raised.append(info.value)
    assert len({id(e) for e in raised}) == 3  # before: one object, its traceback growing
    assert all(e.__cause__ is None and e.__context__ is None for e in raised[1:])
    assert str(raised[0]) == str(raised[2])


def test_a_retry_waits_on_a_hung_fetch_instead_of_starting_another(monkeypatch):
    import threading

    hang = threading.Event()
    monkeypatch.setattr(hub, "HUB_TIMEOUT_S", 0.1)
    monkeypatch.setattr(hub, "RETRY_S", 0.0)  # every load asks again
    monkeypatch.setattr(hub, "_fetching", {})
    calls = _hub_answers(monkeypatch, lambda: hang.wait(30))
    for _ in range(4):
        assert "did not answer" in hub.load(REPO).note
    alive = [t for t in threading.enumerate() if t.name == f"hub {REPO}" and t.is_alive()]
    assert len(calls) == 1 and len(alive) == 1  # before: four threads hanging on the Hub
    hang.set()


def _local_triton(head_dim: int = 64) -> Workload:
    return Workload.from_user(variant="kernels-local-triton", seq_len=64, batch=1, heads=2,
                               head_dim=head_dim, dtype="float16", device="cpu")  # fmt: skip


def test_through_the_runner_a_head_dim_rule_is_unavailable(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # lets the Triton build's rule pass on a CPU
    with pytest.raises(VariantUnavailable) as info:
        run(_local_triton(head_dim=96))
    assert str(info.value) == (
        f"kernels-local-triton is unavailable here: {hub.LOCAL_BUILD_LABEL} supports head_dim "
        "16, 32, 64, 128, 256 (not 96)"
    )


def test_a_bundled_build_that_does_not_load_is_a_failure(monkeypatch, tmp_path):
    """A Triton build that no longer loads is broken, not unavailable: the page says so."""
    (tmp_path / "build" / "torch-universal").mkdir(parents=True)  # no module in it
    monkeypatch.setattr(hub, "LOCAL_BUILD", tmp_path)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(RunError) as info:
        run(_local_triton())
    assert not isinstance(info.value, VariantUnavailable)
    assert str(info.value).startswith(
        "kernels-local-triton failed on cpu: KernelLoadError: the bundled Triton build did not load"
    )


def test_kernels_missing_is_unavailable_and_a_broken_kernels_is_a_failure(monkeypatch):
    """`kernels` not installed is a rule (pip install kernels); `kernels` failing to import
    (a dependency of its own broken) is a failure. The cached answer keeps the difference."""
    import sys

    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.setitem(sys.modules, "kernels", None)  # import kernels → ModuleNotFoundError
    monkeypatch.setattr(hub, "_cache", {})  # its failures are not left for other tests
    for _ in range(2):  # the first answer, then the remembered one
        with pytest.raises(VariantUnavailable, match="`kernels` package is not installed"):
            hub.load(REPO)

    def broken_import(name, *args, **kwargs):
        if name == "kernels":
            raise ImportError("cannot import name 'snapshot_download' from 'huggingface_hub'")
        return real_import(name, *args, **kwargs)

    import builtins

    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", broken_import)
    monkeypatch.delitem(sys.modules, "kernels")
    hub._cache.clear()
    for _ in range(2):
        with pytest.raises(hub.KernelLoadError) as info:
            hub.load(REPO)
        assert not isinstance(info.value, VariantUnavailable)
        assert "did not import: ImportError: cannot import name 'snapshot_download'" in str(
            info.value
        )
