"""The Space: the page's tabs put together, and served.

Each tab is built by its own module in profiling/page/ (components, listeners, handlers, and
the GPU function of its job); what a tab shows is computed without gradio in its
profiling.views_<tab> module, and profiling/page/errors.py turns backend errors into gr.Error.
"""

from __future__ import annotations

import logging
from typing import Any

import gradio as gr
import spaces  # noqa: F401 - before torch (imported by profiling) touches CUDA: ZeroGPU patches it

from profiling.jobs.executor import check_app_ray
from profiling.page import (
    analyze_tab,
    compare_tab,
    diff_tab,
    history_tab,
    model_tab,
    profile_tab,
    sweep_tab,
)
from profiling.page.controls import DEVICE, TYPED_AS_IS_HEAD
from profiling.page.listeners import let_go_on_unload
from profiling.page.style import CSS
from profiling.run import runner
from profiling.views import profile as views_profile
from profiling.views import shared as views_shared
from profiling.views import upload_worker

SERVE_OPTIONS: dict[str, Any] = {
    "max_file_size": views_shared.MAX_FILE_SIZE,
    "css": CSS,
    "head": TYPED_AS_IS_HEAD,
}
INTRO = (
    "# Attention Profiler\n"
    "Pick an attention implementation and a shape, click **Profile**, and see what really "
    "ran: torch.profiler's operator table, the kernels (names decoded), a Gantt chart of "
    "the exported trace, and the trace itself for [Perfetto](https://ui.perfetto.dev). "
    "**Compare** variants, **Diff** two traces, **Sweep** sequence lengths, or **Analyse** "
    "a trace of your own in the other tabs."
)


def build_demo(queue_size: int = views_shared.QUEUE_MAX_SIZE) -> gr.Blocks:
    """The page: every tab and its listeners, and the queue. `demo` below is the app's; the
    tests build a second one with a tiny queue to see it fill."""
    with gr.Blocks(title="Attention Profiler", delete_cache=views_shared.DELETE_CACHE) as demo:
        gr.Markdown(INTRO)
        banner = views_profile.banner_markdown(DEVICE)
        gr.Markdown(banner, visible=bool(banner), elem_id="banner", elem_classes=["ap-banner"])
        profile_tab.build()
        compared, compare_runs = compare_tab.build()
        diff_tab.build(compared, compare_runs)
        sweep_tab.build()
        analyze_tab.build()
        history_tab.build()  # issue 34: the run store's runs
        model_tab.build()  # issue 43: attention inside a transformers model
        let_go_on_unload(demo)  # a closed or reloaded page's jobs are let go
    demo.queue(max_size=queue_size)
    return demo


demo = build_demo()
views_shared.STALE.maybe_sweep()  # a previous process's temp folders older than the cache age
runner.quiet_profiler_logs()  # kineto's USDT/STAGE lines off, unless KINETO_LOG_LEVEL is set
runner.prime_profiler()  # on this main thread, so a click's profiler is not the process's first
upload_worker.POOL.warm()  # an idle worker waits for the first upload (its imports take ~0.4 s)
check_app_ray()  # ATTNPROF_RAY_ADDRESS checked once, said in the log; no click waits on it


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    demo.launch(**SERVE_OPTIONS)
