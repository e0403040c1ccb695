"""How the tabs' listeners run: which queue a job waits in, what a failure leaves behind, how
progress reaches the bar, and which job folders are kept.

Profile, Compare and Sweep run on profiling.jobs' one device worker, so a job a client cancels
stops instead of running on beside the next one. Diff and Analyse read uploads on the CPU in
their own concurrency group; on a CPU-only machine they take the device worker too, or a parse
beside a run would inflate the run's CPU times.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from profiling import job_request, jobs, views_compare, views_shared
from profiling.page.controls import DEVICE
from profiling.page.errors import guarded

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


def trace_job(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Diff and Analyse: on a CPU-only machine they queue for the device worker (their parse
    would share the cores a run is timing); beside a GPU they run at once in Gradio's threads."""
    return jobs.on_device(fn) if DEVICE == "cpu" else fn


def cleared(count: int, first: Any = None) -> Callable[[], tuple[Any, ...]]:
    """What a failed event leaves in its outputs: nothing of the previous result (the files
    could otherwise be downloaded as if they were the failed run's)."""
    return lambda: (first, *[None] * (count - 1))


def clear_on_failure(event: Any, outputs: list[Any], first: Any = None) -> None:
    """After `event` fails, `outputs` are emptied (`first` shown in the first one)."""
    event.failure(cleared(len(outputs), first), None, outputs, **QUIET)


def progress_callback(progress: Any) -> Callable[[float, str], None] | None:
    """The backend's progress(fraction, text) as Gradio's progress(fraction, desc=...).

    Tested against None, not for truth: gr.Progress has a __len__ that is 0 in a request."""
    if progress is None:
        return None
    return lambda fraction, text: progress(fraction, desc=text)


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
    return gr.Dropdown(choices=views_compare.variant_choices(DEVICE, dtype), value=chosen or [])


def relabel_on_dtype(picker: gr.Dropdown, dtype: gr.Radio) -> None:
    """A tab's variant multiselect follows its dtype."""
    dtype.change(relabel_multiselect, [picker, dtype], picker, **QUIET)
