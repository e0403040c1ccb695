"""Issue #6 against the running app: the generated inputs reuse one launched demo and one
gradio_client Client (the concurrency tests add their own clients, and a second demo built by
app.build_demo with a tiny queue).

The generated bad inputs of test_hardening.py go through HTTP (gradio_client; raw HTTP for
NaN and ±inf, which the client will not encode) and each comes back as an AppError with a clear
message. Then: 16 clients profiling at once each get their own result, a full queue says so,
uploads (too big, a 1 GiB gzip bomb, not JSON, not a trace, CPU-only, 10⁶ events) answer within
seconds in bounded memory, files are served only from Gradio's cache, and path traversal through
every file route fails.

The app runs in this process, so the server's memory is this process's: its peak RSS (VmHWM,
reset through /proc/self/clear_refs) is what the upload tests bound.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import json
import math
import os
import tempfile
import threading
import time
import urllib.parse
import uuid
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from hypothesis import given, settings
from hypothesis import strategies as st

import app
from benchmarks import gen_trace
from profiling.page import profile_tab
from profiling.views import shared as views_shared
from tests.page.test_hardening import (
    BAD_CONTENT,
    BAD_LABEL,
    FLOOR,
    JOB,
    NAIVE,
    RANGES,
    SETTINGS,
    TINY,
    TRACE_DOC,
    bad_compare,
    bad_profile,
    bad_sweep,
    check_total_sent,
    clear_message,
    no_progress,
    sends_at_least,
)

MiB = 1024**2
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}  # as README writes
GENERIC = "upstream Gradio app has raised an exception"  # Gradio's text when it hides the cause
EXAMPLES = {"/profile": 80, "/compare": 40, "/sweep": 40, "/diff": 30, "/analyze": 30}
SENT: Counter[str] = Counter()  # per property test: the inputs its body really sent
PARAMS = {
    "/profile": ["variant", "seq_len", "dtype", "batch", "heads", "head_dim", "causal"],
    "/compare": ["variants", "seq_len", "dtype", "batch", "heads", "head_dim", "causal"],
    "/sweep": ["variants", "seq_lens", "dtype", "batch", "heads", "head_dim", "causal"],
}
# The parameters added since (issues 20, 21), with their defaults: gradio_client fills them in
# when a call leaves them out, a raw HTTP call must send every value (Gradio counts them).
LATER = {"mode": "forward", "kv_heads": None, "q_len": None, "window": None, "timing": "eager",
         "steps": 3}  # fmt: skip
COUNTERS = {"/profile": {"counters": False}, "/compare": {"counters": False}}  # issue 36


def values(kwargs: dict, api: str) -> list:
    """A raw call's data: the parameters in order, the later ones at their defaults."""
    later = {**LATER, **COUNTERS.get(api, {})}
    return [kwargs[p] for p in PARAMS[api]] + [kwargs.get(p, d) for p, d in later.items()]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _, url, _ = app.demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )
    try:
        client = Client(url, verbose=False, download_files=str(tmp_path_factory.mktemp("dl")))
        yield url, client
    finally:
        app.demo.close()


@pytest.fixture(scope="module")
def url(server):
    return server[0]


@pytest.fixture(scope="module")
def client(server):
    return server[1]


# -- calling the app -----------------------------------------------------------------------------
def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def raw_call(url: str, api: str, data: list[Any], timeout: float = 60) -> tuple[str, Any]:
    """POST /gradio_api/call/<api> with `data` as JSON (NaN allowed) and read the event stream:
    ("complete", outputs) or ("error", the error payload)."""
    name = api.strip("/")
    body = json.dumps({"data": data})  # Python writes NaN / Infinity, which the server reads
    r = httpx.post(f"{url}gradio_api/call/{name}", content=body,
                   headers={"content-type": "application/json"}, timeout=timeout)  # fmt: skip
    r.raise_for_status()
    event_id = r.json()["event_id"]
    text = httpx.get(f"{url}gradio_api/call/{name}/{event_id}", timeout=timeout).text
    kind = None
    for line in text.splitlines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: ") and kind in ("complete", "error"):
            return kind, json.loads(line[len("data: ") :])
    raise AssertionError(f"no result in the event stream: {text[:300]!r}")


def refused_over_http(client: Client, url: str, api: str, kwargs: dict) -> str:
    """Send `kwargs` to `api` (the client, or raw HTTP for NaN/inf); the clear message back."""
    if _encodable(kwargs):
        try:
            client.predict(**kwargs, api_name=api)
        except AppError as error:
            message = str(error)
        else:
            raise AssertionError(f"{api} accepted {kwargs!r}")
    else:
        kind, payload = raw_call(url, api, values(kwargs, api))
        assert kind == "error", f"{api} accepted {kwargs!r}"
        message = payload.get("error")
    assert message and GENERIC not in message, f"{api}: generic error for {kwargs!r}"
    return clear_message(message, kwargs)


# -- generated bad inputs through HTTP ---------------------------------------------------------
@sends_at_least("/profile", EXAMPLES["/profile"], SENT)
@settings(max_examples=EXAMPLES["/profile"], **SETTINGS)
@given(args=bad_profile())
def test_profile_over_http_refuses_generated_bad_inputs_clearly(client, url, args):
    SENT["/profile"] += 1
    refused_over_http(client, url, "/profile", args)


@sends_at_least("/compare", EXAMPLES["/compare"], SENT)
@settings(max_examples=EXAMPLES["/compare"], **SETTINGS)
@given(args=bad_compare())
def test_compare_over_http_refuses_generated_bad_inputs_clearly(client, url, args):
    SENT["/compare"] += 1
    refused_over_http(client, url, "/compare", args)


@sends_at_least("/sweep", EXAMPLES["/sweep"], SENT)
@settings(max_examples=EXAMPLES["/sweep"], **SETTINGS)
@given(args=bad_sweep())
def test_sweep_over_http_refuses_generated_bad_inputs_clearly(client, url, args):
    SENT["/sweep"] += 1
    refused_over_http(client, url, "/sweep", args)


def _upload(folder: Path, data: bytes, suffix: str) -> Any:
    path = folder / f"{uuid.uuid4().hex}{suffix}"
    path.write_bytes(data)
    return handle_file(str(path))


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bad-uploads")


UPLOAD = st.tuples(BAD_CONTENT, st.sampled_from([".json", ".json.gz", ".gz", ".txt"])) | st.tuples(
    TRACE_DOC.map(lambda doc: json.dumps(doc).encode()), st.just(".json")
)
HTTP_LABEL = BAD_LABEL.filter(lambda v: isinstance(v, str))  # a Textbox sends text


@sends_at_least("/diff", EXAMPLES["/diff"], SENT)
@settings(max_examples=EXAMPLES["/diff"], **SETTINGS)
@given(data=st.data())
def test_diff_over_http_refuses_generated_bad_uploads_clearly(client, folder, data):
    kwargs: dict[str, Any] = dict(trace_a=handle_file(str(NAIVE)), trace_b=handle_file(str(NAIVE)),
                                  label_a="a", label_b="b")  # fmt: skip
    which = data.draw(st.sampled_from(["trace_a", "trace_b", "label_a", "none"]))
    if which == "label_a":
        kwargs["label_a"] = data.draw(HTTP_LABEL)
    elif which == "none":
        kwargs["trace_b"] = None
    else:
        kwargs[which] = _upload(folder, *data.draw(UPLOAD))
    SENT["/diff"] += 1
    try:
        headline, *_ = client.predict(**kwargs, api_name="/diff")
    except AppError as error:
        assert GENERIC not in str(error)
        clear_message(str(error), kwargs)
    else:
        # as in the Analyse test: a generated document can be a (tiny) valid trace, e.g. one
        # complete event without a name; it is diffed, never refused with a made-up reason
        assert which in ("trace_a", "trace_b") and "Counted over:" in headline


@sends_at_least("/analyze", EXAMPLES["/analyze"], SENT)
@settings(max_examples=EXAMPLES["/analyze"], **SETTINGS)
@given(upload=UPLOAD)
def test_analyze_over_http_answers_generated_bad_uploads_clearly(client, folder, upload):
    SENT["/analyze"] += 1
    try:
        summary, *_ = client.predict(trace=_upload(folder, *upload), api_name="/analyze")
    except AppError as error:
        assert GENERIC not in str(error)
        clear_message(str(error), upload)
    else:
        assert "Summary" in summary  # `[]` or a JSON list of events is a (tiny) trace


def test_at_least_200_generated_bad_inputs_go_through_the_running_app():
    check_total_sent(SENT, EXAMPLES, FLOOR, list(globals().values()))


@pytest.mark.parametrize(
    ("api", "data"),
    [
        ("/analyze", [5]),  # a number where a file goes
        ("/analyze", ["/etc/passwd"]),  # a server path as text: no FileData
        ("/diff", [{"path": str(NAIVE)}, None, "", ""]),  # FileData without its meta
        ("/profile", ["naive"]),  # fewer values than parameters
    ],
)
def test_payloads_gradio_refuses_before_the_handler(url, api, data):
    """What no handler sees: a value that is not a file object where a file goes, or too few
    values. Gradio refuses them before our code runs, with its generic message (nothing is read
    or run, no traceback reaches the caller); gradio_client never sends them (handle_file, and
    defaults or a TypeError for missing arguments)."""
    kind, payload = raw_call(url, api, data)
    assert kind == "error" and not payload.get("error")  # Gradio hides the cause


def test_nan_and_infinity_reach_the_backend_and_are_refused(url):
    for value in (math.nan, math.inf, -math.inf):
        data = values({**TINY, "seq_len": value}, "/profile")
        kind, payload = raw_call(url, "/profile", data)
        assert kind == "error" and "seq_len must be a whole number" in payload["error"]
        assert payload["title"] == "Check the inputs"


def test_a_valid_request_still_succeeds_after_the_bad_ones(client):
    _strip, summary, *_ = client.predict(**TINY, api_name="/profile")
    assert {k: summary["config"][k] for k in TINY} == TINY
    _, _, _, _, zip_path, *_ = client.predict(variants=["naive"], **JOB, api_name="/compare")
    assert Path(zip_path).suffix == ".zip"


# -- concurrency -----------------------------------------------------------------------------------
def _configs(n: int) -> list[dict]:
    low = RANGES["seq_len"][0]
    variants = ["naive", "naive-inplace", "sdpa-math", "sdpa-auto"]
    dtypes = ["float32", "bfloat16", "float16"]
    return [
        dict(variant=variants[i % 4], seq_len=low * (1 + i // 2), dtype=dtypes[i % 3],
             batch=1 + i % 2, heads=1 + i % 4, head_dim=16 * (1 + i % 2), causal=i % 2 == 0)
        for i in range(n)
    ]  # fmt: skip


def _gather(jobs: list, timeout: float = 120) -> list[tuple[str, Any]]:
    out = []
    for job in jobs:
        try:
            out.append(("ok", job.result(timeout=timeout)))
        except Exception as error:  # AppError, QueueError: recorded, judged by the test
            out.append(("error", error))
    return out


def test_sixteen_clients_profiling_at_once_each_get_their_own_result(url, record):
    """16 clients, 16 different configs, submitted together: the GPU group runs them one at a
    time (the queue holds 16), each summary echoes exactly the config its caller sent."""
    configs = _configs(16)
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == 16
    clients = [Client(url, verbose=False) for _ in configs]
    barrier = threading.Barrier(len(configs))

    def one(client: Client, config: dict) -> Any:
        barrier.wait()
        return client.predict(**config, api_name="/profile")

    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(len(configs)) as pool:
        jobs = [pool.submit(one, c, cfg) for c, cfg in zip(clients, configs, strict=True)]
        results = _gather(jobs)
    seconds = time.perf_counter() - began
    errors = [r for kind, r in results if kind == "error"]
    assert not errors, [str(e) for e in errors]
    assert not any("already running" in str(e).lower() for e in errors)
    for config, (_, outputs) in zip(configs, results, strict=True):
        summary = outputs[1]
        assert {k: summary["config"][k] for k in config} == config
        assert summary["variant"] == config["variant"]
    record("concurrency_16_profile_s", round(seconds, 2))


def test_a_full_queue_is_answered_with_a_clear_message(monkeypatch):
    """A second demo built like the app's with a queue of 2 and a run slowed to 1.5 s: of 8
    callers at once one runs, two wait, the others are told the queue is full."""
    real_run = profile_tab.run

    def slow_run(*args, **kwargs):
        time.sleep(1.5)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(profile_tab, "run", slow_run)
    demo = app.build_demo(queue_size=2)
    _, local, _ = demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )
    try:
        clients = [Client(local, verbose=False) for _ in range(8)]
        configs = _configs(8)
        barrier = threading.Barrier(8)

        def one(client: Client, config: dict) -> Any:
            barrier.wait()
            return client.predict(**config, api_name="/profile")

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            jobs = [pool.submit(one, c, cfg) for c, cfg in zip(clients, configs, strict=True)]
            results = _gather(jobs)
    finally:
        demo.close()
    ok = [(cfg, r) for cfg, (kind, r) in zip(configs, results, strict=True) if kind == "ok"]
    full = [r for kind, r in results if kind == "error"]
    assert 1 <= len(ok) <= 3 and len(ok) + len(full) == 8
    for error in full:
        assert "queue is full" in str(error).lower(), repr(error)
    for config, outputs in ok:
        assert {k: outputs[1]["config"][k] for k in config} == config


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


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    """Numbers for docs/performance.md: printed by the tests and kept in one JSON file under
    pytest's temp dir (its path is printed too)."""
    path = tmp_path_factory.getbasetemp() / "hardening-numbers.json"
    numbers: dict[str, Any] = {}

    def keep(key: str, value: Any) -> None:
        numbers[key] = value
        path.write_text(json.dumps(numbers, indent=1))
        print(f"{key}: {json.dumps(value)} → {path}")

    return keep


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
    assert peak.seconds < 10
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
    began = time.perf_counter()
    with pytest.raises(AppError, match=message):
        client.predict(trace=handle_file(str(path)), api_name="/analyze")
    assert time.perf_counter() - began < 5


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
    assert peak.seconds < 15  # 3× the target: the upload, Gradio's queue and a busy 2-core host
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
