"""Device jobs: one at a time, and a job its client cancels stops (profiling.jobs.queue, the app).

Found by an audit: Gradio frees a cancelled event's slot while a plain handler runs on, so four
submitted-and-cancelled Sweeps kept the CPU busy for two minutes and the next Profile waited
43 s; and on a CPU machine an Analyse beside a Profile nearly doubled its CPU µs per forward.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import threading
import time
from pathlib import Path

import pytest
from gradio_client import handle_file

import app
from profiling.jobs import queue as jobs
from profiling.jobs import sweep as sweep_module
from profiling.jobs.compare import compare
from profiling.jobs.sweep import sweep
from profiling.page import listeners, profile_tab
from profiling.page.errors import LET_GO
from profiling.views import profile as views_profile
from tests.conftest import PROFILE_PARAMETERS, RecordingProgress

FIXTURES = Path(__file__).parents[1] / "fixtures"
NAIVE = FIXTURES / "naive_8_16_1024_64_bf16.json.gz"
SHAPE = dict(dtype="float32", batch=1, heads=2, head_dim=32, causal=True)
TINY = dict(variant="naive", seq_len=128, **SHAPE)


def test_a_job_cancelled_before_its_turn_never_runs():
    ran: list[str] = []

    async def main() -> bool:
        gate = threading.Event()
        first = asyncio.create_task(jobs.run_on_device(lambda: (gate.wait(10), ran.append("1"))))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(jobs.run_on_device(ran.append, "2"))
        await asyncio.sleep(0.05)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        gate.set()
        await first
        return await jobs.run_on_device(lambda: ran.append("3") or jobs.stop_requested())

    assert asyncio.run(main()) is False  # a job nobody cancelled is not told to stop
    assert ran == ["1", "3"]


def test_a_running_job_sees_its_cancellation_and_the_callers_context():
    seen: dict[str, object] = {}
    caller = contextvars.ContextVar("caller", default="unset")

    def job() -> None:
        seen["context"] = caller.get()
        started.set()
        deadline = time.monotonic() + 10
        while not jobs.stop_requested() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen["stopped"] = jobs.stop_requested()

    started = threading.Event()

    async def main() -> None:
        caller.set("request 7")
        task = asyncio.create_task(jobs.run_on_device(job))
        await asyncio.to_thread(started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await jobs.run_on_device(lambda: None)  # the worker is free again: the job ended

    asyncio.run(main())
    assert seen == {"context": "request 7", "stopped": True}
    assert jobs.stop_requested() is False  # outside a job


def test_on_device_keeps_the_handlers_name_signature_and_docstring():
    queued = jobs.on_device(profile_tab.profile)
    assert asyncio.iscoroutinefunction(queued)
    assert queued.__name__ == "profile" and queued.__doc__ == profile_tab.profile.__doc__
    assert list(inspect.signature(queued).parameters)[-1] == "progress"


@pytest.mark.parametrize("job", ["compare", "sweep"])
def test_compare_and_sweep_stop_before_their_next_run_and_remove_their_folder(job, monkeypatch):
    made: list[Path] = []
    real = sweep_module._profile_point if job == "sweep" else None
    calls = iter([False, True])  # cancelled once the first run is done

    if job == "compare":
        import profiling.jobs.compare as compare_module

        real_one = compare_module.profile_one

        def one(config, out_dir, progress):
            made.append(out_dir.parent)
            return real_one(config, out_dir, progress)

        monkeypatch.setattr(compare_module, "profile_one", one)
        with pytest.raises(jobs.JobCancelled):
            compare(["naive", "naive-inplace"], stop=lambda: next(calls), seq_len=128, **SHAPE)
    else:

        def point(config, out, *args, **kwargs):
            made.append(out.parent)
            return real(config, out, *args, **kwargs)

        monkeypatch.setattr(sweep_module, "_profile_point", point)
        with pytest.raises(jobs.JobCancelled):
            sweep(["naive"], [128, 256], stop=lambda: next(calls), **SHAPE)
    assert len(made) == 1  # the second run never started
    assert not made[0].exists()  # the first run's traces went with the job's folder


def test_a_cancelled_sweep_stops_and_the_next_profile_does_not_wait_for_it(client, monkeypatch):
    points: list[int] = []
    folders: list[Path] = []
    started, release = threading.Event(), threading.Event()
    real = sweep_module._profile_point

    def point(config, out, *args, **kwargs):
        points.append(config.seq_len)
        folders.append(out.parent)
        started.set()
        release.wait(60)  # hold the first point until the client has cancelled
        return real(config, out, *args, **kwargs)

    monkeypatch.setattr(sweep_module, "_profile_point", point)
    job = client.submit(["naive"], [256, 512, 1024], *SHAPE.values(), api_name="/sweep")
    assert started.wait(60)
    # the client can only cancel once it knows the job's event id (before, its /cancel call is
    # refused and the job runs on: a race of the test client's, not of the app)
    deadline = time.monotonic() + 30
    while job.communicator.event_id is None and time.monotonic() < deadline:
        time.sleep(0.02)
    job.cancel()  # returns once the server has cancelled the event's task
    release.set()
    _, summary, *_ = client.predict(**TINY, api_name="/profile")
    assert summary["config"]["seq_len"] == 128
    assert points == [256]  # before: 256, 512 and 1024 ran on in the background
    assert not folders[0].exists()


def test_analyse_is_answered_while_a_profile_runs(client, monkeypatch):
    """Uploads are read in a worker process of their own lane (issue 32), never queued behind
    the device worker, on a CPU machine too (a read past a second drops to nice 19, so the
    run being timed keeps the cores)."""
    started, release = threading.Event(), threading.Event()
    real_run = profile_tab.profile_on_gpu

    def held(config, progress=None):
        started.set()
        release.wait(60)
        return real_run(config, progress)

    monkeypatch.setattr(profile_tab, "profile_on_gpu", held)
    profiled = client.submit(**TINY, api_name="/profile")
    assert started.wait(60)
    try:
        answer = client.predict(handle_file(str(NAIVE)), None, None, api_name="/analyze")
        assert "spans" in str(answer[0]) and not profiled.done()
    finally:
        release.set()
    profiled.result(timeout=120)


def test_a_run_whose_page_fails_still_counts_toward_the_kept_folders(monkeypatch):
    made: list[Path] = []
    real_run = profile_tab.profile_on_gpu

    def run(config, progress=None):
        result = real_run(config, progress)
        made.append(result.trace_json.parent)
        return result

    def broken_page(result):
        raise ValueError("a view bug")

    monkeypatch.setattr(profile_tab, "profile_on_gpu", run)
    monkeypatch.setattr(views_profile, "page", broken_page)
    with pytest.raises(app.gr.Error):
        profile_tab.profile(**TINY)
    assert made and made[0] in profile_tab.RUN_DIRS._dirs  # removed with the oldest, not in an hour


def test_a_compare_cancelled_during_its_last_run_makes_no_zip(monkeypatch):
    import profiling.jobs.compare as compare_module

    outs: list[Path] = []
    real_zip = compare_module.compare_zip
    monkeypatch.setattr(compare_module, "compare_zip", lambda r: outs.append(r) or real_zip(r))
    calls = iter([False, True])  # the client cancels while the only variant runs
    with pytest.raises(jobs.JobCancelled):
        compare(["naive"], stop=lambda: next(calls), seq_len=128, **SHAPE)
    assert outs == []


class PageRequest:
    """What a gr.Request tells the page about who clicked: the page session."""

    def __init__(self, session_hash: str) -> None:
        self.session_hash = session_hash


def test_a_closed_pages_run_is_let_go_and_the_next_click_says_it_still_finishes():
    """Issue 19, point 6: after a reload the abandoned run held the device's slot, and the next
    click waited 8 s under an ETA of 4.6 s. Now the closed page's job is let go at once (its
    event ends; the run itself goes on), and the next job's bar says what it waits for."""
    started, gate = threading.Event(), threading.Event()

    def held_run(progress=None) -> str:
        started.set()
        gate.wait(30)
        return "the abandoned run's result"

    def double(value: int, progress=None) -> int:
        return 2 * value

    async def main() -> None:
        first = asyncio.create_task(listeners.device_job(held_run)(request=PageRequest("page-1")))
        await asyncio.to_thread(started.wait, 10)
        assert jobs.wait_note() == "waiting for 1 earlier job on this machine to finish"
        assert listeners.let_go(PageRequest("page-1")) is None  # what the page's unload calls
        with pytest.raises(app.gr.Error, match=LET_GO):
            await asyncio.wait_for(first, 10)  # released while the run is still held
        assert not gate.is_set() and jobs.wait_note() == jobs.EARLIER_RUN_FINISHING
        progress = RecordingProgress()
        second = asyncio.create_task(
            listeners.device_job(double)(21, progress, PageRequest("page-2"))
        )
        while not progress.seen and not second.done():
            await asyncio.sleep(0.01)
        assert progress.seen == [(0.0, jobs.EARLIER_RUN_FINISHING)] and not second.done()
        gate.set()
        assert await asyncio.wait_for(second, 10) == 42
        assert jobs.wait_note() is None

    asyncio.run(main())


def test_the_page_lets_go_on_unload_and_the_api_keeps_its_parameters():
    """The unload listener is what lets a closed page's jobs go; the session comes from a
    gr.Request that Gradio injects, so /profile, /compare and /sweep take what they took."""
    unload = [fn for fn in app.demo.fns.values() if fn.fn is listeners.let_go]
    assert len(unload) == 1 and unload[0].targets[0][1] == "unload"
    api = app.demo.get_api_info()["named_endpoints"]
    assert [p["parameter_name"] for p in api["/profile"]["parameters"]] == PROFILE_PARAMETERS
    for name in ("/compare", "/sweep"):
        assert "request" not in [p["parameter_name"] for p in api[name]["parameters"]]
