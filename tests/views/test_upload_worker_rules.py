"""Issue 41: profiling/views/upload_worker.py's rules one by one, in this process where a
coverage-guided mutation tool sees them: the worker's side (serve, its answers for each kind
of failure, the sent limits, the memory test, the address-space cap in a forked child), the
watchdog's check over real processes (time, memory for all together, the CPU yielded), and
how an answer becomes the user's result or error. tests/page/test_upload_isolation.py and
test_upload_budget.py run the same rules end to end through real worker processes."""

from __future__ import annotations

import io
import logging
import os
import pickle
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profiling.trace.events import TraceError, TraceTooBig
from profiling.trace.scan import SAID
from profiling.user_values import ConfigError
from profiling.views import shared as views_shared
from profiling.views import upload_worker as worker
from profiling.views.upload_worker import MiB, _Pool, _Worker

SMALL = Path(__file__).parents[1] / "fixtures" / "naive_8_16_1024_64_bf16.json.gz"
LIMITS = {"TRACE_MAX_UPLOAD_BYTES": 123_456_789, "TRACE_MAX_EXPANDED_BYTES": 987_654_321}


def _served(task: str, *args, limits=LIMITS) -> list:
    """What serve() answers for one task: every message it wrote, in order."""
    source = io.BytesIO(pickle.dumps((task, (*args, limits))))
    sink = io.BytesIO()
    worker.serve(source, sink)
    sink.seek(0)
    messages = []
    while sink.tell() < len(sink.getvalue()):
        messages.append(pickle.load(sink))
    return messages


@pytest.fixture(autouse=True)
def _limits_restored(monkeypatch):
    """serve() sets the limits it was sent on this process's module: put them back after."""
    for name in LIMITS:
        monkeypatch.setattr(views_shared, name, getattr(views_shared, name))


@pytest.fixture
def failing(monkeypatch):
    """The analyze task replaced by one that raises what the test hands it."""

    def use(error: BaseException) -> None:
        def fail(*args, **kwargs):
            raise error

        module = sys.modules["profiling.views.analyze"]
        monkeypatch.setattr(module, "analyze_page", fail)

    import profiling.views.analyze  # noqa: F401

    return use


def test_serve_answers_with_progress_then_the_page_under_the_limits_it_was_sent():
    messages = _served("analyze", str(SMALL))
    assert all(m[0] == "progress" for m in messages[:-1]) and len(messages) > 2
    assert 0 <= messages[0][1] <= messages[-2][1] <= 1 and isinstance(messages[0][2], str)
    kind, page = messages[-1]
    assert kind == "ok" and page is not None
    assert [getattr(views_shared, name) for name in LIMITS] == list(LIMITS.values())


def test_serve_says_nothing_when_the_server_went_away():
    sink = io.BytesIO()
    worker.serve(io.BytesIO(b""), sink)
    assert sink.getvalue() == b""


@pytest.mark.parametrize(
    ("error", "answer"),
    [
        (TraceError("not a trace"), ("user", "TraceError", "not a trace")),
        (TraceTooBig("too big"), ("user", "TraceError", "too big")),  # a subclass, as its base
        (ConfigError("bad value"), ("user", "ConfigError", "bad value")),
        (MemoryError(), ("memory", "", "")),
        (RuntimeError("can't start new thread"), ("memory", "", "")),
        (KeyError("x" * 600), ("error", "KeyError", repr("x" * 600)[:500])),
        (ValueError("boom"), ("error", "ValueError", "boom")),
    ],
)
def test_serve_answers_each_kind_of_failure(failing, error, answer):
    failing(error)
    assert _served("analyze", str(SMALL)) == [answer]


@pytest.mark.parametrize(
    ("error", "memory"),
    [
        (MemoryError(), True),
        (ValueError("helper said: MemoryError at 0x1"), True),
        (RuntimeError("can't start new thread"), True),
        (OSError("can't start new thread"), False),  # only a RuntimeError says a thread
        (RuntimeError("other"), False),
        (ValueError("plain"), False),
    ],
)
def test_what_counts_as_out_of_memory(error, memory):
    assert worker._out_of_memory(error) is memory


def test_out_of_memory_is_found_along_the_chain():
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise ValueError("reading failed") from inner
    except ValueError as caused:
        assert worker._out_of_memory(caused)
    try:
        try:
            raise MemoryError
        except MemoryError:
            raise ValueError("while handling")  # noqa: B904 (the context, not a cause)
    except ValueError as context:
        assert worker._out_of_memory(context)


def _in_child(check) -> int:
    """`check()`'s integer in a forked child (its rlimits are its own): the exit code."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = check()
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _peak() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:"))


def test_near_the_cap_means_within_256_mib_of_it():
    assert resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY
    assert worker._near_cap() is False  # no cap at all

    def within(slack: int):
        def check() -> int:
            cap = _peak() + slack
            resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))
            return int(worker._near_cap())

        return check

    assert _in_child(within(255 * MiB + MiB // 2)) == 1  # half a MiB either side of 256
    assert _in_child(within(256 * MiB + MiB // 2)) == 0


def test_the_worker_caps_its_own_address_space_at_the_budget_and_the_slack(monkeypatch):
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 300 * MiB)

    def check() -> int:
        worker._limit_self()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        return int(soft == hard == 300 * MiB + worker.ADDRESS_SLACK_BYTES)

    assert _in_child(check) == 1


# -- the server's side ---------------------------------------------------------------------------


@pytest.fixture
def sleepers():
    """Real processes as the watchdog sees workers: each a session leader, doing nothing."""
    made: list[_Worker] = []

    def make(count: int, started: float) -> list[_Worker]:
        for _ in range(count):
            process = subprocess.Popen(["sleep", "60"], start_new_session=True)
            made.append(_Worker(process, started=started))
        return made[-count:]

    yield make
    for each in made:
        each.process.kill()
        each.process.wait()


def test_the_check_kills_a_worker_past_its_time_and_only_it(sleepers, monkeypatch):
    monkeypatch.setattr(worker, "UPLOAD_SECONDS", 10.0)
    now = 1000.0
    late, on_time = sleepers(1, now - 10.5) + sleepers(1, now - 9.5)
    _Pool.check([late, on_time], now)
    assert late.killed == "time" and late.process.wait(timeout=10) == -9
    assert on_time.killed == "" and on_time.process.poll() is None
    assert on_time.yielded and not late.yielded  # read for longer than LONG_READ_SECONDS


def test_a_new_read_keeps_its_priority_and_a_long_one_yields(sleepers):
    now = 1000.0
    fresh, long = sleepers(1, now - 0.5) + sleepers(1, now - 1.5)
    _Pool.check([fresh, long], now)
    assert not fresh.yielded and long.yielded
    assert os.getpriority(os.PRIO_PROCESS, long.process.pid) == worker.LONG_READ_NICENESS
    assert os.getpriority(os.PRIO_PROCESS, fresh.process.pid) == os.getpriority(os.PRIO_PROCESS, 0)


def test_the_budget_is_for_all_together_and_the_largest_goes_first(sleepers, monkeypatch):
    now = 1000.0
    small, large = sleepers(2, now)
    sizes = {w: worker._resident(w.process.pid) for w in (small, large)}
    assert all(size > 0 for size in sizes.values())
    weights = {small.process.pid: 10 * MiB, large.process.pid: 20 * MiB}  # set, to be exact
    monkeypatch.setattr(worker, "_resident", weights.__getitem__)
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 30 * MiB)
    _Pool.check([small, large], now)  # exactly the budget: nobody killed
    assert not small.killed and not large.killed
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 30 * MiB - 1)
    _Pool.check([small, large], now)
    assert (small.killed, large.killed, large.shared) == ("", "memory", True)
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 5 * MiB)
    _Pool.check([small], now)  # alone, and still over: killed, and not told of others
    assert (small.killed, small.shared) == ("memory", False)


def test_a_killed_worker_is_not_weighed_again_and_its_reason_stays(sleepers, monkeypatch):
    now = 1000.0
    (dead,) = sleepers(1, now)
    worker._kill(dead, "memory")
    worker._kill(dead, "time")  # a second kill keeps the first reason
    assert dead.killed == "memory"
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 1)
    monkeypatch.setattr(worker, "_resident", lambda pid: pytest.fail("weighed a killed worker"))
    _Pool.check([dead], now)


def test_resident_counts_a_process_and_its_children():
    own = worker._resident(os.getpid())
    assert own > 10 * MiB
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        alone = worker._resident(child.pid)
        assert alone > MiB and worker._resident(os.getpid()) >= own + alone // 2
    finally:
        child.kill()
        child.wait()
    assert worker._resident(child.pid) == 0  # gone: nothing, not an error


def _done_worker(code: int = 0, killed: str = "", shared: bool = False) -> _Worker:
    process = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    process.wait()
    return _Worker(process, killed=killed, shared=shared)


def test_each_answer_becomes_the_users_result_or_error(monkeypatch):
    monkeypatch.setattr(worker, "UPLOAD_SECONDS", 7.0)
    assert worker._result(_done_worker(), ("ok", {"page": 1})) == {"page": 1}
    assert worker._result(_done_worker(killed="time"), ("ok", 5)) == 5  # done before the kill
    with pytest.raises(TraceError, match=r"^reading this trace took longer than 7 s, the Space"):
        worker._result(_done_worker(killed="time"), None)
    with pytest.raises(TraceError, match=r"needed more than the .* of memory .*uploads; it "):
        worker._result(_done_worker(killed="memory"), None)
    with pytest.raises(TraceError, match=r"other uploads were being read at the same time"):
        worker._result(_done_worker(killed="memory", shared=True), None)
    with pytest.raises(TraceError, match=r"needed more than the"):
        worker._result(_done_worker(), ("memory", "", ""))
    with pytest.raises(RuntimeError, match=r"^the upload worker ended without an answer \(exit "
                       r"code 3\)$"):  # fmt: skip
        worker._result(_done_worker(3), None)
    with pytest.raises(TraceError, match=r"^not a trace$"):
        worker._result(_done_worker(), ("user", "TraceError", "not a trace"))
    with pytest.raises(ConfigError, match=r"^bad value$"):
        worker._result(_done_worker(), ("user", "ConfigError", "bad value"))
    with pytest.raises(RuntimeError, match=r"^the upload worker failed: KeyError: 'x'$"):
        worker._result(_done_worker(), ("error", "KeyError", "'x'"))


def test_the_limits_words(monkeypatch):
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 2048 * MiB)
    assert worker.memory_text(3 * 1024**3 // 2) == "1.5 GiB"
    assert worker.over_memory(False) == (
        "this trace needed more than the 2.0 GiB of memory the Space has for reading uploads; "
        "it reads traces of up to about 10⁷ events (profile fewer steps, or analyse it on your "
        "own machine with `python -m profiling analyze`)"
    )
    monkeypatch.setattr(worker, "UPLOAD_SECONDS", 50.0)
    assert worker.over_time() == (
        "reading this trace took longer than 50 s, the Space's limit for one upload (profile "
        "fewer steps, or analyse it on your own machine with `python -m profiling analyze`)"
    )


def test_receive_passes_progress_on_and_returns_the_answer():
    said: list[tuple] = []
    stream = io.BytesIO()
    for message in [("progress", 0.25, "reading"), ("progress", 0.5, "tables"), ("ok", 7)]:
        pickle.dump(message, stream)
    stream.seek(0)
    assert worker._receive(stream, lambda f, text: said.append((f, text))) == ("ok", 7)
    assert said == [(0.25, "reading"), (0.5, "tables")]
    stream.seek(0)
    assert worker._receive(stream, None) == ("ok", 7)  # no one listening: still answered
    assert worker._receive(io.BytesIO(b""), None) is None  # died before answering
    assert worker._receive(io.BytesIO(b"\x80\x05garbage"), None) is None


def test_a_str_subclass_travels_as_a_plain_str():
    class Named(str):
        pass

    sent = worker._plain(Named("/tmp/a.json.gz"))
    assert type(sent) is str and sent == "/tmp/a.json.gz"
    assert worker._plain(3) == 3 and worker._plain(None) is None


def test_serve_hands_a_task_all_its_arguments_but_the_limits():
    """Diff's four arguments: the limits are the last item, not the second."""
    (answer,) = _served("diff", str(SMALL), str(SMALL), "before", "after")
    assert answer[0] == "ok" and answer[1] is not None


def test_an_unexpected_failure_is_logged_with_its_traceback(failing, caplog):
    failing(ValueError("boom"))
    with caplog.at_level(logging.ERROR, logger=worker.log.name):
        _served("analyze", str(SMALL))
    (said,) = [r for r in caplog.records if r.name == worker.log.name]
    assert said.getMessage() == "reading an uploaded trace failed" and said.exc_info


@pytest.mark.parametrize(
    ("raw", "value", "warned"),
    [(None, 5.0, False), ("", 5.0, False), ("2.5", 2.5, False), ("0.5", 0.5, False),
     ("abc", 5.0, True), ("0", 5.0, True), ("-3", 5.0, True), ("nan", 5.0, True)],
)  # fmt: skip
def test_a_limit_from_the_environment_is_a_positive_number_or_the_default(
    monkeypatch, caplog, raw, value, warned
):
    if raw is None:
        monkeypatch.delenv("ATTNPROF_TEST_LIMIT", raising=False)
    else:
        monkeypatch.setenv("ATTNPROF_TEST_LIMIT", raw)
    with caplog.at_level(logging.WARNING, logger=worker.log.name):
        assert worker._env_number("ATTNPROF_TEST_LIMIT", 5) == value
    said = [r.getMessage() for r in caplog.records if r.name == worker.log.name]
    expected = [f"ATTNPROF_TEST_LIMIT={raw!r} is not a positive number; using 5"]
    assert said == (expected if warned else [])


def test_the_cap_the_worker_asks_for(monkeypatch):
    """The call itself (its effect, in a child: the test above); here, in this process."""
    asked: list[tuple] = []
    monkeypatch.setattr(resource, "setrlimit", lambda *limit: asked.append(limit))
    monkeypatch.setattr(worker, "UPLOAD_MEMORY_BYTES", 300 * MiB)
    worker._limit_self()
    cap = 300 * MiB + worker.ADDRESS_SLACK_BYTES
    assert asked == [(resource.RLIMIT_AS, (cap, cap))]


def test_the_workers_main_answers_on_its_own_stdout_and_moves_prints_to_stderr(
    monkeypatch, tmp_path
):
    """main() as the worker process runs it, in this process: the task on stdin, the cap
    asked for (its effect is tested above), the answer on what was stdout."""
    capped: list[bool] = []
    monkeypatch.setattr(worker, "_limit_self", lambda: capped.append(True))
    task = pickle.dumps(("analyze", (str(SMALL), LIMITS)))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(task)))
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        monkeypatch.setattr(sys, "stdout", stdout)
        monkeypatch.setattr(sys, "stderr", stderr)
        worker.main()
        print("a stray print", file=stdout, flush=True)  # where the answers were
    with open(out, "rb") as answers:
        messages = []
        while answers.peek(1):
            messages.append(pickle.load(answers))
    assert capped == [True] and messages[-1][0] == "ok"
    assert err.read_text() == "a stray print\n"


@pytest.fixture
def own_pool(monkeypatch):
    """A pool of the test's own, as the server has when it starts; its workers ended after."""
    pool = _Pool()
    monkeypatch.setattr(worker, "POOL", pool)
    yield pool
    with pool.lock:
        left = [*pool.running, *([pool.idle] if pool.idle else [])]
    for each in left:
        each.process.kill()
        each.process.wait()


def test_a_taken_worker_is_followed_by_a_started_idle_one(own_pool):
    """The next upload finds a worker already started, its imports done, not one to start."""
    taken = own_pool.take()
    deadline = time.monotonic() + 60  # a thread starts it at once; generous on a busy host
    while own_pool.idle is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert own_pool.idle is not None and own_pool.idle is not taken
    assert own_pool.idle.process.poll() is None and own_pool.running == [taken]
    own_pool.release(taken)
    assert own_pool.running == [] and taken.process.poll() is not None


@pytest.mark.skipif(
    "MUTANT_UNDER_TEST" in os.environ,
    reason="under mutmut the worker's mutated code is found from the working folder",
)
def test_a_worker_reads_an_upload_whatever_folder_the_server_runs_in(
    own_pool, tmp_path, monkeypatch
):
    """`python /path/to/app.py` from another folder: the worker still imports this checkout
    (it was given profiling/ itself as its path, and ended at once: "No module named
    'profiling'", so every upload failed)."""
    monkeypatch.chdir(tmp_path)
    progress: list[float] = []
    page = worker.run_upload("analyze", str(SMALL), progress=lambda f, text: progress.append(f))
    assert page is not None and progress and progress == sorted(progress)


def test_a_worker_starts_as_its_own_process_group_with_few_malloc_arenas(monkeypatch):
    """What the watchdog and the memory cap rely on: a session of its own (a kill of its
    group takes its helper processes too), two malloc arenas (fewer 64 MiB reservations
    under the address-space cap), the checkout before the caller's PYTHONPATH, the scanner's
    state said once, and its stdin and stdout piped to the server."""
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    asked: list[dict] = []
    popen = subprocess.Popen

    def recorded(*args, **kwargs):  # the real Popen, what it was asked noted
        asked.append(kwargs)
        return popen(*args, **kwargs)

    monkeypatch.setattr(worker.subprocess, "Popen", recorded)
    started = worker._start()
    try:
        pid = started.process.pid
        assert os.getpgid(pid) == pid and os.getsid(pid) == pid
        (env,) = (kwargs["env"] for kwargs in asked)
        checkout = str(Path(worker.__file__).resolve().parents[2])
        assert env["MALLOC_ARENA_MAX"] == "2"
        assert env["PYTHONPATH"] == f"{checkout}{os.pathsep}/somewhere/else"
        assert env[SAID] in ("on", "off")
        assert started.process.stdin is not None and started.process.stdout is not None
        assert started.started == 0.0 and started.killed == "" and not started.yielded
    finally:
        worker._kill(started, "")
        try:
            started.process.wait(timeout=20)
        except subprocess.TimeoutExpired:  # the group kill missed it: no hang, a failure
            started.process.kill()
            started.process.wait()
    assert started.process.returncode == -9


def test_a_kill_of_a_worker_already_gone_says_why_and_raises_nothing():
    """The watchdog may kill a worker whose group has just ended and been reaped (its read
    finished meanwhile): no error from the watchdog's thread, and the reason kept."""
    gone = worker._start()
    os.killpg(gone.process.pid, 9)
    gone.process.wait(timeout=20)  # reaped: its group no longer exists
    with pytest.raises(ProcessLookupError):
        os.killpg(gone.process.pid, 0)
    worker._kill(gone, "time")
    assert gone.killed == "time"
    worker._kill(gone, "memory")  # the first reason stays
    assert gone.killed == "time"
