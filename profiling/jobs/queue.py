"""One device job at a time, and a cancelled job that really stops.

When a client cancels a queued event, Gradio frees the event's concurrency slot at once, but a
plain function keeps running in its thread. A script that submits and cancels Compares could so
pile up any number of runs behind the runner's lock, and the next user's Profile waited behind
all of them (43 s after four cancelled Sweeps; issue found by an audit on 2026-11-30). The app's
handlers therefore await their work here: one worker thread runs device jobs in the order they
came, a job cancelled before it starts never starts, and a running one can ask `stop_requested`
between runs (Compare and Sweep do, before each variant or point) and end with JobCancelled.

A page that is closed or reloaded leaves its job behind: `abandon(owner)` stops waiting for it
(the Gradio event ends, so the next click is not held in Gradio's queue) and asks it to stop;
a Profile cannot stop mid-run, so the next job may still wait for it, and `wait_note` says so.

No Gradio here: the app wraps its handlers with `on_device`; the backend only sees a callable.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnprof-device")
_STOP: contextvars.ContextVar[Callable[[], bool]] = contextvars.ContextVar(
    "attnprof_stop", default=lambda: False
)


class JobCancelled(Exception):
    """The client cancelled the job; nobody waits for its result."""


EARLIER_RUN_FINISHING = (
    "an earlier run is still finishing (the page that started it was closed); "
    "this one starts when it ends"
)


@dataclass(eq=False)
class _Job:
    """A submitted job until its function returns: who waits for it, and its stop flag."""

    owner: str | None  # the page session that waits for it (None: nobody can abandon it)
    stop: threading.Event = field(default_factory=threading.Event)
    running: bool = False
    # wakes the awaiting caller when the page goes (set on the caller's event loop)
    release: Callable[[], None] = lambda: None


_JOBS: list[_Job] = []  # submitted and not finished, in the worker's order
_JOBS_LOCK = threading.Lock()


def stop_requested() -> bool:
    """Whether the job running in this context was cancelled (always False outside a job)."""
    return _STOP.get()()


def wait_note() -> str | None:
    """What a job submitted now would wait for, in words; None when the worker is free.

    A job cancelled before its turn is skipped at once, so it is not counted."""
    with _JOBS_LOCK:
        ahead = [job for job in _JOBS if job.running or not job.stop.is_set()]
    if not ahead:
        return None
    if any(job.running and job.stop.is_set() for job in ahead):
        return EARLIER_RUN_FINISHING
    jobs = "job" if len(ahead) == 1 else "jobs"
    return f"waiting for {len(ahead)} earlier {jobs} on this machine to finish"


def abandon(owner: str) -> int:
    """`owner`'s page is gone: its jobs are asked to stop and nobody waits for them any more
    (a running one finishes its current run on the worker). Returns how many there were."""
    with _JOBS_LOCK:
        left = [job for job in _JOBS if job.owner == owner]
    for job in left:
        job.stop.set()
        job.release()
    return len(left)


async def run_on_device(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` on the device worker, after the jobs queued before it.

    The caller's context variables go with it (Gradio's progress bar and request live there).
    If the awaiting task is cancelled, the job is marked: not started, it never starts; running,
    `stop_requested()` turns true inside it."""
    return await run_owned(None, fn, *args, **kwargs)


async def run_owned(owner: str | None, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """run_on_device for a job that `owner` waits for: `abandon(owner)` ends the wait with
    JobCancelled at once, and the job stops as a cancelled one does."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    job = _Job(owner)
    gone: asyncio.Future[None] = loop.create_future()
    job.release = lambda: loop.call_soon_threadsafe(_settle, gone)

    def work() -> R:
        try:
            if job.stop.is_set():
                raise JobCancelled("cancelled before it started")
            job.running = True
            context.run(_STOP.set, job.stop.is_set)
            return context.run(fn, *args, **kwargs)
        finally:
            with _JOBS_LOCK:
                _JOBS.remove(job)

    with _JOBS_LOCK:
        _JOBS.append(job)
    running = loop.run_in_executor(_WORKER, work)
    running.add_done_callback(_forget)  # read or not, its error is never logged as unread
    try:
        await asyncio.wait([running, gone], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        job.stop.set()
        raise
    if running.done():
        return running.result()
    raise JobCancelled("the page that asked for this job was closed")


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _forget(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def on_device(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` as a coroutine function that runs on the device worker; same name, signature and
    docstring, so Gradio documents and injects its parameters (gr.Progress) as before."""

    @functools.wraps(fn)
    async def queued(*args: Any, **kwargs: Any) -> R:
        return await run_on_device(fn, *args, **kwargs)

    return queued
