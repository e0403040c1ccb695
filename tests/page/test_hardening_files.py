"""The hardening, continued (tests/page/test_hardening.py has the generated bad inputs): every
returned file in a fresh temp folder and a bounded footprint, names from a trace as text
everywhere, and kernels only from allow-listed repos."""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import tempfile
import time
from pathlib import Path

import pytest

import app
from attention import VARIANTS, Problem, hub
from profiling import files
from profiling.gantt.spec import bar_count
from profiling.page import analyze_tab, compare_tab, diff_tab, profile_tab, sweep_tab
from profiling.views import diff as views_diff
from profiling.views import shared as views_shared
from profiling.workload.spec import DTYPES
from tests.conftest import NAIVE
from tests.page.test_hardening import (
    IMG,
    JOB,
    OFFERED,
    PROFILE_FILES,
    RANGES,
    ROOT,
    SCRIPT,
    SHAPE,
    TINY,
    no_progress,
    refused,
)

# -- files -------------------------------------------------------------------------------------
SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def test_every_returned_file_lives_in_a_fresh_app_temp_folder():
    """Profile's three files, Compare's and Sweep's zips and Compare's traces (the Diff state):
    each in a mkdtemp folder of the app directly in the temp dir, under a name made of the
    validated shape only."""
    json_path, gz_path, txt_path = profile_tab.profile(
        **{**TINY, "variant": "naive-inplace"}, progress=no_progress
    )[PROFILE_FILES]
    *_, cmp_zip, _roles, _roofline, traces = compare_tab.compare(
        ["naive"], OFFERED[0], **SHAPE, progress=no_progress
    )
    *_, sw_zip = sweep_tab.sweep(["naive"], [OFFERED[0]], **SHAPE, progress=no_progress)
    returned = [Path(p) for p in (json_path, gz_path, txt_path, cmp_zip, sw_zip)]
    for path in returned:
        assert path.is_file() and SAFE_NAME.match(path.name), path
        assert files.is_app_dir(path.parent), path
    assert len({p.parent for p in returned}) == 3  # one folder per run, per zip
    for path in map(Path, traces.values()):
        assert path.is_file() and files.is_app_dir(path.parents[1]), path


def _old_dir(prefix: str, hours: float) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / "trace.json.gz").write_bytes(b"x" * 100)
    then = time.time() - hours * 3600
    os.utime(path / "trace.json.gz", (then, then))
    os.utime(path, (then, then))
    return path


def test_app_temp_folders_older_than_the_cache_age_are_deleted(tmp_path):
    age = views_shared.DELETE_CACHE[1]
    old = [_old_dir(p, 2) for p in ("attnprof-", "attnprof-compare-", "attnprof-sweep-",
                                    "attnprof-zip-")]  # fmt: skip
    fresh = _old_dir("attnprof-", 0.1)
    foreign = [_old_dir("attnprof-gradio-", 2), _old_dir("attnprof-mine-kept-", 2),
               _old_dir("someone-else-", 2)]  # fmt: skip
    not_a_dir = Path(tempfile.gettempdir()) / "attnprof-abcdefgh"
    not_a_dir.write_text("a file, not ours to delete")
    elsewhere = tmp_path / "attnprof-abcdefgh"
    elsewhere.mkdir()
    os.utime(elsewhere, (0, 0))
    try:
        sweeper = files.StaleSweeper(age, every_s=3600)
        keeper = views_shared.RunDirs(keep=8, sweeper=sweeper)
        keeper.add(fresh)  # a run's add triggers the age sweep
        assert not any(p.exists() for p in old)
        assert fresh.exists() and all(p.exists() for p in foreign)
        assert not_a_dir.exists() and elsewhere.exists()
        again = _old_dir("attnprof-", 2)
        assert sweeper.maybe_sweep() == [] and again.exists()  # at most once per every_s
        assert again in files.delete_stale(age) and not again.exists()
    finally:
        for p in [fresh, *foreign]:
            files.shutil.rmtree(p, ignore_errors=True)
        not_a_dir.unlink()
    # the app's own sweeper uses the cache age; Gradio's cache is emptied by delete_cache
    assert views_shared.STALE.max_age_s == views_shared.DELETE_CACHE[1]
    assert views_shared.DELETE_CACHE[0] >= views_shared.STALE_SWEEP_S
    assert app.demo.delete_cache == views_shared.DELETE_CACHE
    assert app.build_demo().delete_cache == views_shared.DELETE_CACHE


@pytest.mark.slow
def test_500_runs_leave_a_bounded_footprint():
    """500 real profile runs through the handler (tiniest shape, ~50 ms each on two cores) and
    500 synthetic job folders through a RunDirs: the app keeps at most KEEP_RUN_DIRS of each."""
    made: list[Path] = []
    biggest = 0
    began = time.perf_counter()
    for i in range(500):
        seq_len = RANGES["seq_len"][0] * (1 + i % 2)
        json_path = profile_tab.profile(**{**TINY, "seq_len": seq_len}, progress=no_progress)[
            PROFILE_FILES.start
        ]
        folder = Path(json_path).parent
        made.append(folder)
        if i < 2:
            biggest = max(biggest, sum(f.stat().st_size for f in folder.iterdir()))
    seconds = time.perf_counter() - began
    alive = [d for d in made if d.exists()]
    assert len(set(made)) == 500 and alive == made[-len(alive) :]
    assert len(alive) <= views_shared.KEEP_RUN_DIRS
    size = sum(f.stat().st_size for d in alive for f in d.iterdir())
    assert size <= views_shared.KEEP_RUN_DIRS * biggest * 1.5
    print(f"500 runs in {seconds:.1f} s; {len(alive)} folders, {size / 1024:.0f} KiB kept")

    keeper = views_shared.RunDirs(sweeper=None)
    synthetic = []
    for _ in range(500):
        synthetic.append(Path(tempfile.mkdtemp(prefix="attnprof-zip-")))
        (synthetic[-1] / "job.zip").write_bytes(b"z" * 1000)
        keeper.add(synthetic[-1])
    assert sum(d.exists() for d in synthetic) == len(keeper) == views_shared.KEEP_RUN_DIRS
    for d in synthetic[-views_shared.KEEP_RUN_DIRS :]:
        files.shutil.rmtree(d)


def test_serving_opens_no_allowed_paths():
    assert "allowed_paths" not in app.SERVE_OPTIONS
    tree = ast.parse((ROOT / "app.py").read_text())
    launches = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "launch"
    ]
    assert launches, "app.py serves the demo"
    for call in launches:
        assert all(k.arg != "allowed_paths" for k in call.keywords)
        assert [ast.unparse(k) for k in call.keywords] == ["**SERVE_OPTIONS"]


# -- untrusted text ----------------------------------------------------------------------------
def xss_trace(folder: Path) -> Path:
    """The H200 naive fixture with two kernels and two operators renamed to markup, and the CPU
    thread's lane name too. Shared with the browser test."""
    doc = json.loads(gzip.decompress(NAIVE.read_bytes()))
    kernels = sorted({e["name"] for e in doc["traceEvents"] if e.get("cat") == "kernel"})
    rename = {kernels[0]: IMG, kernels[1]: SCRIPT, "aten::matmul": IMG, "aten::softmax": SCRIPT}
    for event in doc["traceEvents"]:
        if event.get("name") in rename:
            event["name"] = rename[event["name"]]
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            event["args"]["name"] = f"thread {IMG}"
    path = folder / "xss.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_names_from_an_uploaded_trace_are_text_everywhere(tmp_path):
    path = xss_trace(tmp_path)
    summary, launch, operators, kernels, figure, *_ = analyze_tab.analyze(str(path))
    # the tables (Dataframes render "str" cells as text) hold the literal names
    assert {IMG, SCRIPT} <= set(operators["Operator"])
    assert {IMG, SCRIPT} <= set(kernels["Kernel"]) and {IMG, SCRIPT} <= set(kernels["Full name"])
    # HTML outputs escape them
    for html_out in (summary, launch):
        assert "<img" not in html_out and "<script" not in html_out
    assert "&lt;img src=x onerror=alert(1)&gt;" in launch
    # the Gantt's hover text and bar labels are escaped (plotly renders them as HTML)
    fig = figure.figure()
    hover = [h for t in fig.data for h in (t.hovertext or ()) if h]
    text = [x for t in fig.data if t.text is not None for x in t.text if x]
    sent = figure.to_json()  # what gr.Plot sends to the browser
    assert "<img" not in sent and "<script" not in sent and "&lt;script&gt;" in sent
    assert any("&lt;img src=x onerror=alert(1)&gt;" in h for h in hover)
    assert any("&lt;script&gt;" in h for h in hover)
    assert not any("<img" in h or "<script" in h for h in hover + text)
    assert bar_count(figure) > 0
    # the Diff headline is plain text for API callers, like the tables' cells; the page shows
    # it as Markdown, names escaped there
    headline, kernel_delta, operator_delta, *_ = diff_tab.diff(
        str(NAIVE), str(path), "clean", "marked"
    )
    markdown, *_ = diff_tab.show_result(headline, kernel_delta)
    assert "<img" not in markdown and "<script" not in markdown
    assert IMG in set(kernel_delta["kernel"]) or IMG in set(operator_delta["operator"])
    page = views_diff.diff_page(NAIVE, path, "a", "b")
    tables = views_diff.diff(NAIVE, path, "a", "b")
    head, scopes = views_diff.diff_headline(*tables), views_diff.diff_scopes(tables[0])
    assert page.headline.startswith(f"{head}\n\nBy role: ") and page.headline.endswith(scopes)
    # the renamed kernels keep their roles (the operators above them say what they are)
    assert "b spends 167.9 µs per forward on matmul" in page.headline
    expected = page.headline
    assert views_diff.result_view(expected, page.kernels)[0] == views_diff.escape_markdown(expected)


def test_error_messages_echo_hostile_text_only_as_a_short_repr():
    error = refused(
        profile_tab.profile, **{**TINY, "variant": "x" * 10_000 + IMG}, progress=no_progress
    )
    assert len(error.message) < 400
    error = refused(
        compare_tab.compare, ["naive", *["y" * 10_000] * 3], **JOB, progress=no_progress
    )
    assert len(error.message) < 600


# -- kernels: only allow-listed repos, never trust_remote_code -------------------------------
class _FakeKernel:
    @staticmethod
    def flash_attn_func(q, k, v, causal):
        return q


def test_only_allow_listed_kernel_repos_reach_kernels(monkeypatch):
    kernels = pytest.importorskip("kernels")
    calls: list[tuple[str, tuple, dict]] = []

    def record(name):
        def fake(*args, **kwargs):
            calls.append((name, args, kwargs))
            return _FakeKernel()

        return fake

    for name in ("get_kernel", "get_local_kernel", "get_locked_kernel", "load_kernel",
                 "install_kernel"):  # fmt: skip
        if hasattr(kernels, name):
            monkeypatch.setattr(kernels, name, record(name))
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.setattr(hub, "_cache", {})
    problem = Problem(1, 1, 16, 16, True, DTYPES["bfloat16"], "cpu")
    loaded = [v for v in VARIANTS.values() if v.id.startswith("kernels-")]
    assert loaded
    for variant in loaded:  # every kernels variant's build, as the runner calls it
        built = variant.build(problem)
        assert callable(built.forward)
    for repo in ("someone/evil-kernel", "kernels-community/flash-attn2/../evil", IMG, ""):
        with pytest.raises(hub.KernelLoadError, match="allow-list"):
            hub.load(repo)
    # hostile variant strings through every job handler: refused before any loader runs
    hostile = ["kernels-community/evil", "kernels-flash-attn2/../../x", "someone/evil-kernel",
               "kernels-flash-attn2 ", "kernels-flash-attn2\x00", IMG]  # fmt: skip
    seen = len(calls)
    for name in hostile:
        if name.strip() in VARIANTS:
            continue
        refused(profile_tab.profile, **{**TINY, "variant": name}, progress=no_progress)
        refused(compare_tab.compare, ["naive", name], **JOB, progress=no_progress)
        refused(sweep_tab.sweep, [name], [OFFERED[0]], **SHAPE, progress=no_progress)
    assert len(calls) == seen
    repos = [args[0] if args else kwargs.get("repo_id") for n, args, kwargs in calls
             if n == "get_kernel"]  # fmt: skip
    assert repos and set(repos) <= set(hub.ALLOWED)
    assert all(kw.get("version") == hub.ALLOWED[r] for r, (n, _, kw) in
               zip(repos, [c for c in calls if c[0] == "get_kernel"], strict=True))  # fmt: skip
    local = [args[0] if args else next(iter(kwargs.values())) for n, args, kwargs in calls
             if n == "get_local_kernel"]  # fmt: skip
    assert local and all(Path(p) == hub.LOCAL_BUILD for p in local)
    assert not any(n in ("get_locked_kernel", "load_kernel", "install_kernel") for n, *_ in calls)
    assert not any(kwargs.get("trust_remote_code") for _, _, kwargs in calls)


def test_no_source_passes_trust_remote_code_or_a_computed_repo():
    """Static check: every trust_remote_code keyword in the app's code is the constant False, and
    every get_kernel call takes its repo from the allow-list lookup in attention/hub.py."""
    sources = [
        ROOT / "app.py",
        *(ROOT / "attention").rglob("*.py"),
        *(ROOT / "profiling").rglob("*.py"),
    ]
    for path in sources:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "trust_remote_code":
                    assert isinstance(kw.value, ast.Constant) and kw.value.value is False, path
            if getattr(node.func, "attr", None) == "get_kernel":
                assert path.name == "hub.py", f"get_kernel called from {path}"
