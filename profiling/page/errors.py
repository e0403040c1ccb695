"""The one place where a backend error becomes the gr.Error a user sees.

Errors a user can act on (a bad input, a variant that cannot run here, a failed run, an
unreadable trace) keep the backend's message under a title; anything else is logged with its
traceback and shown as one generic message in the words of what was being done (`doing`),
never as a traceback. On ZeroGPU only a gr.Error crosses out of the GPU worker, so the GPU
functions translate as well as the handlers.

Gradio shows an error's message as HTML, and a message may quote a caller's value (a run id,
a label, a filter): every message is HTML-escaped here, once, for every tab.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import gradio as gr

from profiling.jobs.queue import JobCancelled
from profiling.run.runner import RunError, VariantUnavailable
from profiling.store import StoreError
from profiling.trace.events import TraceError
from profiling.views import shared as views_shared
from profiling.workload.spec import ConfigError

log = logging.getLogger("attention_profiler")
R = TypeVar("R")

TITLES: dict[type[Exception], str] = {
    ConfigError: "Check the inputs",
    VariantUnavailable: "Variant unavailable",
    RunError: "The run failed",
    TraceError: "Unreadable trace",
    StoreError: "Run store",  # issue 34: a store refused (foreign, newer, damaged) says why
}
USER_ERRORS = tuple(TITLES)


def user_message(exc: Exception) -> str:
    """The backend's message as the page shows it: text, never markup."""
    return html.escape(str(exc), quote=False)


def user_error(exc: Exception) -> gr.Error:
    """The backend's message under the title of its kind of error."""
    title = next((t for kind, t in TITLES.items() if isinstance(exc, kind)), "Error")
    return gr.Error(user_message(exc), title=title, print_exception=False)


@contextmanager
def translated(what: str, doing: str = "profiling") -> Iterator[None]:
    """Inside: a backend error leaves as a gr.Error; `what` names the work in the log, `doing`
    in the generic message ("opening the run").

    A gr.Error passes as it is, and so does JobCancelled (nobody waits for its result)."""
    try:
        yield
    except (gr.Error, JobCancelled):
        raise
    except USER_ERRORS as exc:
        raise user_error(exc) from None
    except Exception:
        log.exception("%s failed", what)
        raise gr.Error(views_shared.generic_error(doing), print_exception=False) from None


def said_instead(what: str, doing: str, fn: Callable[..., R], *args: Any) -> tuple[R | None, str]:
    """(fn(*args), "") or (None, the message a gr.Error would carry): for a follow-up that shows
    the message in place (a permalink's run opened on load: no toast there, no badges)."""
    try:
        with translated(what, doing):
            return fn(*args), ""
    except gr.Error as error:
        return None, str(error.message)


LET_GO = "this job's page was closed: nobody waits for its result"


@contextmanager
def released() -> Iterator[None]:
    """Around the wait for a device job: a job whose page was closed (profiling.jobs.queue.abandon)
    ends its event with an error nobody sees, and nothing in the log."""
    try:
        yield
    except JobCancelled:
        raise gr.Error(LET_GO, print_exception=False) from None


def guarded(what: str, fn: Callable[..., R], *args: Any, doing: str = "profiling") -> R:
    """`fn(*args)`, its errors translated."""
    with translated(what, doing):
        return fn(*args)
