"""How the tabs' listeners run: which queue a job waits in, what a failure leaves behind, how
progress reaches the bar, and which job folders are kept.

Profile, Compare and Sweep run on profiling.jobs.queue' one device worker, so a job a client cancels
stops instead of running on beside the next one, and a job whose page was closed or reloaded is
let go (`let_go_on_unload`): its event ends, and the next click's bar says that an earlier run
is still finishing instead of showing Gradio's estimate, which cannot know that wait. Diff and
Analyse read traces on the CPU in their own concurrency group, never behind the device worker
(a 2-second analysis waited behind a hostile upload's minute): uploads in worker processes
bounded in memory and time, a long read at the lowest CPU priority (profiling.views.upload_worker).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr

from profiling.jobs import queue as jobs
from profiling.jobs.executor import JobOptions, app_executor
from profiling.page.controls import DEVICE
from profiling.page.errors import guarded, released
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.workload import request as job_request

QUIET: dict[str, Any] = {"api_visibility": "private", "queue": False}  # page-only follow-ups
# One device job at a time, each click once. preprocess=False: Gradio answers a string in a
# slider with a generic error, so raw values reach the backend, which says what is wrong.
DEVICE_JOB: dict[str, Any] = dict(
    concurrency_limit=1,
    concurrency_id=views_shared.GPU_GROUP,
    trigger_mode="once",
    preprocess=False,
)
TRACE_JOB: dict[str, Any] = dict(
    concurrency_limit=views_shared.TRACE_CONCURRENCY,
    concurrency_id=views_shared.TRACE_GROUP,
    trigger_mode="once",
)
JOB_DIRS = views_shared.RunDirs()  # Compare/Sweep trace folders and zips: the newest few are kept


def device_job(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` on the device worker, owned by the page session that clicked (see
    `let_go_on_unload`). While it waits behind an earlier job, its progress bar says why: the
    first progress message also replaces Gradio's ETA, which counts this job's own time only.

    The wrapper takes fn's parameters plus a gr.Request (injected by Gradio, not an API input)."""
    signature = inspect.signature(fn)
    request = inspect.Parameter(
        "request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request
    )

    @functools.wraps(fn)
    async def handler(*args: Any, **kwargs: Any) -> Any:
        bound = handler.__signature__.bind(*args, **kwargs)
        session = getattr(bound.arguments.pop("request", None), "session_hash", None)
        note = jobs.wait_note()
        progress = bound.arguments.get("progress")
        if note and progress is not None:
            progress(0.0, desc=note)
        with released():
            return await jobs.run_owned(session, fn, *bound.args, **bound.kwargs)

    handler.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[*signature.parameters.values(), request]
    )
    handler.__annotations__ = {**fn.__annotations__, "request": gr.Request}
    return handler


def device_click(
    button: gr.Button,
    fn: Callable[..., Any],
    api_name: str,
    inputs: list[Any],
    outputs: list[Any],
    *,
    cleared: list[Any],
    said: dict[Any, Any],
    downloads: list[gr.DownloadButton],
    note: Any = None,
) -> Any:
    """A device job's button: `fn` on the device worker as /`api_name` (device_job, in
    DEVICE_JOB's lane); after a failure `cleared` emptied (clear_on_failure), after a success
    its `downloads` enabled (enable_downloads). Returns the event, for the tab's follow-ups."""
    event = button.click(
        device_job(fn), inputs=inputs, outputs=outputs, api_name=api_name, **DEVICE_JOB
    )
    clear_on_failure(event, cleared, said=said)
    enable_downloads(event, downloads, note)
    return event


def let_go(request: gr.Request) -> None:
    """A page was closed or reloaded: its jobs are let go (profiling.jobs.queue.abandon)."""
    if request is not None and request.session_hash:
        jobs.abandon(request.session_hash)


def let_go_on_unload(demo: gr.Blocks) -> None:
    """Without this, a reloaded page's run held the device's concurrency slot to its end and
    the next click waited in Gradio's queue behind it, with an estimate that did not count it."""
    demo.unload(let_go)


def trace_job(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Diff and Analyse run at once in Gradio's threads, in their own lane (TRACE_JOB): on a
    CPU-only machine too, where a long read's lowest priority keeps a run's timing."""
    return fn


def cleared(outputs: list[Any], said: dict[Any, Any] | None = None) -> Callable[[], tuple]:
    """What a failed event leaves in its outputs: nothing of the previous result (the files
    could otherwise be downloaded as if they were the failed run's), download buttons
    disabled, and the text of `said` where it names an output."""
    said = said or {}

    def emptied() -> tuple[Any, ...]:
        return tuple(
            said.get(output, no_file() if isinstance(output, gr.DownloadButton) else None)
            for output in outputs
        )

    return emptied


def clear_on_failure(event: Any, outputs: list[Any], said: dict[Any, Any] | None = None) -> None:
    """After `event` fails, `outputs` are emptied (`said` maps an output to what it shows)."""
    event.failure(cleared(outputs, said), None, outputs, **QUIET)


def no_file() -> gr.DownloadButton:
    """A download button with nothing behind it: disabled, not a click that downloads nothing."""
    return gr.DownloadButton(value=None, interactive=False)


def download_button(label: str, elem_id: str) -> gr.DownloadButton:
    """A run's download, disabled until a run has put a file behind it."""
    return gr.DownloadButton(label, value=None, interactive=False, elem_id=elem_id, size="md")


def enabled_downloads(*files: str | None) -> Any:
    """Each button active exactly when it holds a file."""
    buttons = tuple(gr.DownloadButton(interactive=file is not None) for file in files)
    return buttons[0] if len(buttons) == 1 else buttons


def enable_downloads(event: Any, buttons: list[gr.DownloadButton], note: Any = None) -> None:
    """After `event` succeeds, its download buttons become active where they hold a file, and
    `note` (a page-only line that said why they were not) is emptied."""
    event.success(enabled_downloads, buttons, buttons, **QUIET)
    if note is not None:
        event.success(lambda: "", None, note, **QUIET)


def progress_callback(progress: Any) -> Callable[[float, str], None] | None:
    """The backend's progress(fraction, text) as Gradio's progress(fraction, desc=...).

    Tested against None, not for truth: gr.Progress has a __len__ that is 0 in a request."""
    if progress is None:
        return None
    return lambda fraction, text: progress(fraction, desc=text)


def job_options(progress: Any) -> JobOptions:
    """How the page's Compares and Sweeps run (in their GPU function, where Gradio's progress
    is): progress on the bar, stopped when the client cancels, and on a Ray cluster's GPUs
    with ATTNPROF_RAY_ADDRESS."""
    return JobOptions(
        progress=progress_callback(progress), stop=jobs.stop_requested, executor=app_executor()
    )


def show_waiting(progress: Any) -> None:
    """The bar's first words, while the job waits for its turn on the device."""
    progress(0.0, desc="waiting for the GPU" if DEVICE == "cuda" else "starting")


def job_seconds(request: job_request.JobRequest, progress: Any = None) -> int:
    """@spaces.GPU duration of a Compare or Sweep, worked out when it was validated."""
    return request.gpu_seconds


def run_device_job(
    what: str,
    validate: Callable[[], job_request.JobRequest],
    on_gpu: Callable[[job_request.JobRequest, Any], Any],
    view: Callable[[Any, str], Any],
    progress: Any,
) -> Any:
    """A Compare or Sweep: validated, run by its GPU function, its folders kept, then shown."""
    request = guarded(f"{what}_request", validate)
    show_waiting(progress)
    result = on_gpu(request, progress)
    keep_job_files(result)
    return guarded(f"{what} views", view, result, DEVICE)


def keep_job_files(result: Any) -> None:
    """A Compare's or Sweep's trace folder and zip join the newest few kept."""
    for path in (result.out_dir, result.zip_path.parent if result.zip_path else None):
        if path is not None:
            JOB_DIRS.add(path)


def relabel_multiselect(chosen: list[str] | None, dtype: str) -> Any:
    """Availability depends on the dtype: refresh a variant multiselect's labels."""
    choices = views_profile.variant_choices(DEVICE, dtype)
    return gr.Dropdown(choices=choices, value=chosen or [], multiselect=True)


def relabel_on_dtype(picker: gr.Dropdown, dtype: gr.Radio) -> None:
    """A tab's variant multiselect follows its dtype."""
    dtype.change(relabel_multiselect, [picker, dtype], picker, **QUIET)
