"""Shared test set-up: GPU tests skip without CUDA; Gradio writes into a temp dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from profiling.trace.model import Trace, load

FIXTURES = Path(__file__).parent / "fixtures"
# The three H200 traces of h200-baseline.md (the post's shape), shared by the test modules.
NAIVE, FLASH, CUDNN = (
    FIXTURES / f"{name}_8_16_1024_64_bf16.json.gz" for name in ("naive", "sdpa_flash", "sdpa_cudnn")
)
H200 = {"naive": NAIVE, "flash": FLASH, "cudnn": CUDNN}
# The page's shape parameters in the handlers' order, as the API documents them (mode: issue
# 20; kv_heads, q_len, window: issue 21; timing, steps: issue 23): last, so earlier calls keep
# their meaning
SHAPE_PARAMETERS = [
    "dtype", "batch", "heads", "head_dim", "causal", "mode", "kv_heads", "q_len", "window",
    "timing", "steps",
]  # fmt: skip
# issue 36's counters: last of Profile's and Compare's (Sweep has none)
PROFILE_PARAMETERS = ["variant", "seq_len", *SHAPE_PARAMETERS, "counters"]


def from_document(doc: dict | list) -> Trace:
    """A trace built from events written in a test, through the same JSON path as a file."""
    return load(json.dumps(doc).encode())


class RecordingProgress:
    """What the handlers get from Gradio: a gr.Progress (falsy outside a request, len 0) that
    records each (fraction, desc) instead of sending it to the page."""

    def __new__(cls):  # a real gr.Progress subclass, made lazily so this module stays gradio-free
        import gradio as gr

        class Recorder(gr.Progress):
            def __init__(self) -> None:
                super().__init__()
                self.seen: list[tuple[float, str]] = []

            def __call__(self, progress, desc=None, *args, **kwargs):  # type: ignore[override]
                self.seen.append((progress, desc or ""))

        return Recorder()


os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("GRADIO_TEMP_DIR", tempfile.mkdtemp(prefix="attnprof-gradio-"))
if os.environ.get("PYTEST_XDIST_WORKER"):  # a cache per worker: an app's delete_cache empties
    # its folder, and one worker's app once removed the upload another worker was reading
    os.environ["GRADIO_TEMP_DIR"] = tempfile.mkdtemp(dir=os.environ["GRADIO_TEMP_DIR"])
# Issue 34: every run the tests make is stored, never in the user's own run store (set, not
# defaulted: a shell's ATTNPROF_STORE must not receive test runs either)
os.environ["ATTNPROF_STORE"] = str(Path(tempfile.mkdtemp(prefix="attnprof-store-")) / "runs.sqlite")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """With pytest-xdist installed (requirements-dev.txt) and no `-n` given, two workers on a
    CPU machine of two cores or more, each test file on one worker (its module fixtures built
    once): a third of the suite waits on worker processes, Ray, a browser and the fuzzer (16
    min against 22 in one process, docs/testing.md). One process where CUDA is present, so a
    GPU test never times kernels on a card another test is using; `-n 0` asks for one."""
    if not config.pluginmanager.has_plugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is None and not config.option.collectonly:
        config.option.numprocesses = workers_here()
        if config.option.numprocesses and config.option.dist == "no":
            config.option.dist = "loadfile"


def workers_here() -> int:
    """The suite's worker count on this machine (0: one process)."""
    return 0 if torch.cuda.is_available() or (os.cpu_count() or 1) < 2 else 2


@pytest.fixture(autouse=True)
def upload_reads_at_full_priority(request: pytest.FixtureRequest) -> Iterator[None]:
    """A long upload read keeps nice 0 in tests, except those marked `niced`: at nice 19 (the
    product's LONG_READ_NICENESS) a 3 s read took more than 300 s while the other worker's tests
    kept both cores busy, and the read's outcome (memory, time, result) is what they check."""
    if request.node.get_closest_marker("niced"):
        yield
        return
    from profiling.views import upload_worker

    niceness = upload_worker.LONG_READ_NICENESS
    upload_worker.LONG_READ_NICENESS = 0
    try:
        yield
    finally:
        upload_worker.LONG_READ_NICENESS = niceness


@pytest.fixture(autouse=True)
def upload_limits_left_as_found() -> Iterator[None]:
    """A test that changes the server's upload limits and leaves them changed fails itself: a
    leaked limit (123456789 bytes) failed five other tests in CI, in whichever worker ran next."""
    from profiling.views import shared as views_shared

    names = ("TRACE_MAX_UPLOAD_BYTES", "TRACE_MAX_EXPANDED_BYTES")
    before = [getattr(views_shared, name) for name in names]
    yield
    after = [getattr(views_shared, name) for name in names]
    for name, value in zip(names, before, strict=True):
        setattr(views_shared, name, value)
    assert after == before, f"this test left the upload limits changed: {after} != {before}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: run `pytest -m gpu` on the H200")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def ascii_id(value: object) -> str | None:
    """A parametrize id in ASCII (others: pytest's own): pytest escapes other characters, and a
    second run in one process (mutmut's forked runner) escaped them twice, so the id mutmut
    passed matched no test ('not found', exit 4, filed by mutmut 3.8.1 as a timeout)."""
    if not isinstance(value, str):
        return None
    return "".join(c if c.isascii() and c.isprintable() else f"U+{ord(c):04X}" for c in value)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool):
    """float64 softmax(q·kᵀ/√d)·v on (B, H, S, D) inputs, with an explicit causal mask."""
    q, k, v = (x.to(torch.float64) for x in (q, k, v))
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if causal:
        s = q.shape[-2]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out = out.to(torch.float64)
    return float((out - ref).norm() / ref.norm())


# Relative-error bounds per dtype: far above rounding noise, far below a wrong result (~1).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 2e-2}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """The app launched on localhost for one test module, and a gradio_client for it."""
    from gradio_client import Client

    import app

    _, url, _ = app.demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )
    try:
        yield Client(url, verbose=False, download_files=str(tmp_path_factory.mktemp("dl")))
    finally:
        app.demo.close()


def watch_inputs(monkeypatch) -> list:
    """Weak references to every tensor the runner's next runs allocate as inputs: all of them
    dead after a run means nothing (a traceback, a graph) kept them alive."""
    import weakref

    from profiling.run import runner

    refs: list[weakref.ref] = []
    make_inputs = runner._inputs

    def spy(*args):
        tensors = make_inputs(*args)
        refs.extend(weakref.ref(t) for t in tensors.values())
        return tensors

    monkeypatch.setattr(runner, "_inputs", spy)
    return refs


def collect_in_child(test_file: str, env: dict[str, str]) -> tuple[int, str]:
    """`pytest --collect-only` of one test module in a child with `env` (no conftest): its exit
    code and output, for the ATTNPROF_REQUIRE_* switches that turn a skip into a failure."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "--noconftest",
         "-p", "no:cacheprovider", test_file],
        cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr
