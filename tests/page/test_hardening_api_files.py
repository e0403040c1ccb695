"""The API over HTTP, continued (tests/page/test_hardening_api.py has the calls, the generated
bad inputs and the concurrency): uploads in bounded time and memory, and files served from
Gradio's cache only."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import time
import urllib.parse
import uuid
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

import app
from benchmarks import gen_trace
from profiling.page import profile_tab
from profiling.views import shared as views_shared
from tests.page.test_hardening import (
    NAIVE,
    TINY,
    clear_message,
    no_progress,
)
from tests.page.test_hardening_api import (
    NUMBER_WORDS,
    raw_call,
    values,
)

MiB = 1024**2


# -- uploads -----------------------------------------------------------------------------------
def _peak_rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM (peak RSS) to the current RSS


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


class PeakRss:
    """The process's peak RSS growth over a block, in bytes (VmHWM after − VmRSS before)."""

    def __enter__(self) -> PeakRss:
        _peak_rss_reset()
        self.before = _status("VmRSS")
        self.began = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self.began
        self.growth = _status("VmHWM") - self.before


def gzip_bomb(path: Path, expanded: int) -> Path:
    """`expanded` bytes of zeros as a gzip file, built streaming: one 64 MiB member compressed
    once and repeated (a valid multi-member gzip), so ~1 MB on disk for 1 GiB expanded."""
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = member.compress(bytes(64 * MiB)) + member.flush()
    with open(path, "wb") as fh:
        for _ in range(expanded // (64 * MiB)):
            fh.write(block)
    return path


def test_an_oversized_upload_is_refused(client, url, tmp_path):
    """200 MiB + 1 byte: gradio_client refuses to send it (it reads max_file_size from the app),
    and the upload route refuses it too (413) for a caller that sends it anyway."""
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(views_shared.TRACE_MAX_UPLOAD_BYTES + 1)  # sparse: nothing to write
    with pytest.raises(
        Exception,
        match=f"exceeds the maximum file size of {views_shared.TRACE_MAX_UPLOAD_BYTES} bytes",
    ):
        client.predict(trace=handle_file(str(big)), api_name="/analyze")
    data = b" " * (views_shared.TRACE_MAX_UPLOAD_BYTES + 1)
    began = time.perf_counter()
    r = httpx.post(f"{url}gradio_api/upload", files={"files": ("big.json", data)}, timeout=60)
    assert (
        r.status_code == 413
        and f"exceeded maximum allowed size of {views_shared.TRACE_MAX_UPLOAD_BYTES}" in r.text
    )
    # refused as it streams in, never stored: 200 MiB through Gradio's multipart parser took
    # 11.5 s on this 2-core host under load (its own speed, not a trace read)
    assert time.perf_counter() - began < 30


def test_a_4_gib_gzip_bomb_is_refused_quickly_in_bounded_memory(client, tmp_path, record):
    """Past the 3 GiB expansion limit: refused once that much has streamed by, in memory
    that does not grow with it (the streaming reader keeps a few pieces)."""
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 4096 * MiB)
    assert bomb.stat().st_size < 8 * MiB
    upload = handle_file(str(bomb))
    with PeakRss() as peak, pytest.raises(AppError) as info:
        client.predict(trace=upload, api_name="/analyze")
    assert f"expands to more than {views_shared.TRACE_MAX_EXPANDED_BYTES // MiB} MiB" in str(
        info.value
    )
    # refused by the expansion limit as it streamed (the message), not by the 50 s watchdog
    # ("took longer"): no wall-clock bound, which a busy host stretches
    assert peak.growth < 512 * MiB  # a few pieces, never the 3 GiB streamed by
    record("gzip_bomb_4GiB", dict(seconds=round(peak.seconds, 2), gz_mib=round(
        bomb.stat().st_size / MiB, 2), rss_growth_mib=round(peak.growth / MiB)))  # fmt: skip
    with pytest.raises(AppError, match="expands to more than"):  # Diff reads the same way
        client.predict(trace_a=handle_file(str(NAIVE)), trace_b=upload, api_name="/diff")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"traceEvents": [1, 2', "not valid JSON"),
        (b"\xff\xfe not json at all", "not valid JSON"),
        (json.dumps({"schemaVersion": 1, "events": []}).encode(), "not a Chrome trace"),
        (json.dumps({"traceEvents": "x"}).encode(), "not a Chrome trace"),
        (json.dumps({"traceEvents": [{"ph": "M", "name": "x"}]}).encode(), "no complete"),
    ],
)
def test_broken_uploads_give_a_clear_error_fast(client, tmp_path, data, message):
    path = tmp_path / "upload.json"
    path.write_bytes(data)
    with pytest.raises(AppError, match=message) as refused:
        client.predict(trace=handle_file(str(path)), api_name="/analyze")
    # refused on its content (the message), not by the 50 s watchdog (whose message differs)
    assert "took longer" not in str(refused.value)


def test_a_cpu_only_trace_is_analysed_and_says_so(client, tmp_path):
    doc = json.loads(gzip.decompress(NAIVE.read_bytes()))
    cpu = {"cpu_op", "user_annotation", "python_function"}
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if e.get("cat") in cpu or (e.get("ph") == "M" and
                                                                 e.get("pid") != 0)
    ]  # fmt: skip
    path = tmp_path / "cpu-only.json"
    path.write_text(json.dumps(doc))
    summary, launch, operators, kernels, _plot, *_why = client.predict(
        trace=handle_file(str(path)), api_name="/analyze"
    )
    assert "no GPU events: a CPU-only trace" in summary and "no GPU work" in launch
    assert kernels["data"] == [] and len(operators["data"]) > 5


@pytest.mark.slow
def test_a_million_event_trace_is_analysed_in_bounded_time_and_memory(client, tmp_path, record):
    path = tmp_path / "trace_1e6.json.gz"
    gen_trace.write(1_000_000, path)
    size = path.stat().st_size
    assert size < views_shared.TRACE_MAX_UPLOAD_BYTES
    assert len(gzip.decompress(path.read_bytes())) < views_shared.TRACE_MAX_EXPANDED_BYTES
    upload = handle_file(str(path))
    with PeakRss() as peak:
        summary, _launch, operators, kernels, plot, *_why = client.predict(
            trace=upload, api_name="/analyze"
        )
    assert "1,0" in summary and len(operators["data"]) >= 10 and kernels["data"]
    figure = json.loads(plot["plot"])
    assert sum(len(t.get("y") or ()) for t in figure["data"]) < 20_000  # level of detail
    # The targets (≤ 5 s, peak RSS ≤ 2 GB at 10⁶ events) are held by benchmarks/bench_scale.py;
    # docs/performance.md has /analyze at 4.2 s and 1.13 GB peak RSS for this trace.
    # answered, so within the watchdog's 50 s; the 5 s target is benchmarks/bench_scale.py's
    # (a wall-clock bound here only measured the host's load)
    assert peak.growth < 2 * 1024**3  # the peak RSS target (growth over idle is part of the peak)
    record("analyze_1e6_events", dict(seconds=round(peak.seconds, 1),
                                      rss_growth_mib=round(peak.growth / MiB),
                                      gz_mib=round(size / MiB, 1)))  # fmt: skip


# -- files -------------------------------------------------------------------------------------
def test_files_are_served_from_gradio_cache_only(url):
    """The server paths of the files /profile returns are Gradio's cache copies (the runner's
    folder is never served), named from the validated shape only."""
    kind, outputs = raw_call(url, "/profile", values(TINY, "/profile"))
    assert kind == "complete"
    served = [o for o in outputs if isinstance(o, dict) and o.get("path")]
    assert len(served) == 3
    cache = Path(os.environ["GRADIO_TEMP_DIR"]).resolve()
    for item in served:
        path = Path(item["path"]).resolve()
        assert cache in path.parents and path.is_file(), path
        r = httpx.get(item["url"])
        assert r.status_code == 200 and len(r.content) == path.stat().st_size
    assert app.demo.allowed_paths == []


def _get(url: str, path: str) -> int:
    return httpx.get(f"{url}gradio_api/file={path}").status_code


def test_path_traversal_through_the_file_route_is_refused(url, tmp_path):
    # a runner folder this session was never given: profiled in-process, not through the server
    *_, json_path, _gz, _txt, _roles, _roofline_figure, _roofline = profile_tab.profile(
        **TINY, progress=no_progress
    )
    secret = str(Path(json_path).resolve())
    here = str(Path(app.__file__).resolve())
    q = urllib.parse.quote
    attempts = [
        "/etc/passwd", "../../../../etc/passwd", "..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        q("/etc/passwd", safe=""), q(q("../../../../etc/passwd", safe=""), safe=""),
        "....//....//etc/passwd", "/proc/self/environ", here, "app.py", "./app.py",
        q(here, safe=""), secret, q(secret, safe=""),
        f"{os.environ['GRADIO_TEMP_DIR']}/../../../etc/passwd",
        f"{os.environ['GRADIO_TEMP_DIR']}/%2E%2E/%2E%2E/etc/passwd",
    ]  # fmt: skip
    for path in attempts:
        assert _get(url, path) in (403, 404), path


def _file_data(path: str) -> dict:
    return {"path": path, "meta": {"_type": "gradio.FileData"}}


def test_server_paths_sent_as_uploads_are_never_read(url):
    """FileData naming a file on the server (the H200 fixtures, a runner's trace, /etc/passwd)
    is refused by Gradio before the handler: nothing is analysed, diffed or echoed."""
    *_, json_path, gz_path, _txt, _roles, _roofline_figure, _roofline = profile_tab.profile(
        **TINY, progress=no_progress
    )
    for path in (str(NAIVE), "tests/fixtures/naive_8_16_1024_64_bf16.json.gz", gz_path,
                 json_path, "/etc/passwd", "../../../../etc/passwd.json"):  # fmt: skip
        kind, payload = raw_call(url, "/analyze", [_file_data(path)])
        assert kind == "error" and "Summary" not in json.dumps(payload), path
        kind, payload = raw_call(url, "/diff", [_file_data(path), _file_data(path), "", ""])
        assert kind == "error", path


@pytest.mark.parametrize("name", ["../../evil-{}.json", "..%2F..%2Fevil-{}.json",
                                  "..\\..\\evil-{}.json", "/tmp/evil-{}.json"])  # fmt: skip
def test_upload_names_with_traversal_stay_in_the_upload_folder(url, client, tmp_path, name):
    name = name.format(uuid.uuid4().hex[:8])
    data = NAIVE.read_bytes()
    r = httpx.post(f"{url}gradio_api/upload", files={"files": (name, data, "application/gzip")})
    assert r.status_code == 200
    (stored,) = r.json()
    cache = Path(os.environ["GRADIO_TEMP_DIR"]).resolve()
    assert cache in Path(stored).resolve().parents
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    for where in (Path(tempfile.gettempdir()), cache.parent, cache, Path.cwd()):
        assert not (where / base).exists() or (where / base).resolve() == Path(stored).resolve()
    # and the uploaded trace is analysed normally (its name shown as text) or refused clearly
    try:
        summary, *_ = client.predict(
            trace=handle_file(str(_named(tmp_path, name, data))), api_name="/analyze"
        )
    except AppError as error:
        clear_message(str(error), name)
    else:
        assert "Summary" in summary and "<script" not in summary


def _named(folder: Path, name: str, data: bytes) -> Path:
    """A local file whose name carries the attempt (a '/' cannot be in a name: it becomes one
    level of folder, still a literal '..' in the name sent)."""
    safe = name.replace("/", "%2F")
    path = folder / safe
    path.write_bytes(data)
    return path


def test_limits_are_the_documented_ones(url):
    """The README's Limits section quotes these; the running app uses them."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert app.SERVE_OPTIONS["max_file_size"] == views_shared.MAX_FILE_SIZE == "200mb"
    assert app.demo._queue.max_size == views_shared.QUEUE_MAX_SIZE
    assert f"{views_shared.QUEUE_MAX_SIZE} requests wait" in readme
    assert f"{views_shared.TRACE_MAX_EXPANDED_BYTES // MiB} MiB" in readme
    traces = [f for f in app.demo.fns.values() if f.api_name in ("diff", "analyze")]
    assert len(traces) == 2
    assert {(f.concurrency_id, f.concurrency_limit) for f in traces} == {
        (views_shared.TRACE_GROUP, views_shared.TRACE_CONCURRENCY)
    }
    word = NUMBER_WORDS[views_shared.TRACE_CONCURRENCY]
    parses = f'(`concurrency_id="{views_shared.TRACE_GROUP}"`, {word} at a time)'
    assert parses in readme, f"README.md should say {parses}"
