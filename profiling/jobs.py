"""One device job at a time, and a cancelled job that really stops.

When a client cancels a queued event, Gradio frees the event's concurrency slot at once, but a
plain function keeps running in its thread. A script that submits and cancels Compares could so
pile up any number of runs behind the runner's lock, and the next user's Profile waited behind
all of them (43 s after four cancelled Sweeps; issue found by an audit on 2026-11-30). The app's
handlers therefore await their work here: one worker thread runs device jobs in the order they
came, a job cancelled before it starts never starts, and a running one can ask `stop_requested`
between runs (Compare and Sweep do, before each variant or point) and end with JobCancelled.

No Gradio here: the app wraps its handlers with `on_device`; the backend only sees a callable.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attnprof-device")
_STOP: contextvars.ContextVar[Callable[[], bool]] = contextvars.ContextVar(
    "attnprof_stop", default=lambda: False
)


class JobCancelled(Exception):
    """The client cancelled the job; nothing waits for its result."""


def stop_requested() -> bool:
    """Whether the job running in this context was cancelled (always False outside a job)."""
    return _STOP.get()()


async def run_on_device(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` on the device worker, after the jobs queued before it.

    The caller's context variables go with it (Gradio's progress bar and request live there).
    If the awaiting task is cancelled, the job is marked: not started, it never starts; running,
    `stop_requested()` turns true inside it."""
    stop = threading.Event()
    context = contextvars.copy_context()

    def job() -> R:
        if stop.is_set():
            raise JobCancelled("cancelled before it started")
        context.run(_STOP.set, stop.is_set)
        return context.run(fn, *args, **kwargs)

    try:
        return await asyncio.get_running_loop().run_in_executor(_WORKER, job)
    except asyncio.CancelledError:
        stop.set()
        raise


def on_device(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` as a coroutine function that runs on the device worker; same name, signature and
    docstring, so Gradio documents and injects its parameters (gr.Progress) as before."""

    @functools.wraps(fn)
    async def queued(*args: Any, **kwargs: Any) -> R:
        return await run_on_device(fn, *args, **kwargs)

    return queued
