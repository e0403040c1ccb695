"""Issue 36 in a real browser. The page's counters box on this machine (a CPU): greyed out, the
reason as its info. And a run's counters as the Profile tab shows them, from the H200's cuDNN
run and its ncu report kept as fixtures (no GPU here): the page's own kernel-table and roofline
components, filled by the views, with the measured columns and each measured point linked to
its modelled one. Skipped without Chromium, as tests/page/test_browser.py is."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from profiling.analysis.roofline_runs import run_roofline
from profiling.page.controls import kernel_table, roofline_table
from profiling.run import counters as collect
from profiling.views import counters as views_counters
from profiling.views.roofline_figure import LINK_NAME, MEASURED_NAME, roofline_spec
from profiling.views.shared import roofline_view
from tests.page import browser as tb  # skips this module as the browser tests skip
from tests.page.conftest import wait_for_http
from tests.views.test_counters_views import cudnn_result, measured_counters

pytestmark = pytest.mark.browser
SCROLL_RIGHT = """(id) => { for (const e of document.querySelectorAll(id + ' *'))
  if (e.scrollWidth > e.clientWidth + 10) e.scrollLeft = e.scrollWidth; }"""


@pytest.fixture(scope="module")
def chromium():
    with tb.sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(tb.CHROMIUM), args=tb.ARGS)
        yield browser
        browser.close()


def served(demo: gr.Blocks) -> str:
    _, local_url, _ = demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )  # the page's style sheet too: its tables are laid out as the app's
    wait_for_http(local_url)
    return local_url


def test_the_counters_box_is_greyed_out_here_with_the_reason(chromium):
    page = tb.open_page(chromium, served(app.demo))
    try:
        box = page.locator("#counters input[type=checkbox]")
        box.wait_for(state="attached")
        assert box.is_disabled()
        assert f"unavailable here: {collect.ON_CPU}" in page.locator("#counters").inner_text()
    finally:
        page.context.close()
        app.demo.close()


def fixture_page() -> gr.Blocks:
    """The Profile tab's counter outputs for the H200's cuDNN run, built by the views."""
    result = cudnn_result(measured_counters())
    counted = views_counters.joined(result)
    rows = views_counters.roofline_rows(run_roofline(result), counted)
    with gr.Blocks() as demo:
        gr.HTML(views_counters.counters_html(counted), elem_id="summary")
        kernel_table("GPU kernels per forward, names decoded", "kernels",
                     value=views_counters.kernel_table(result, counted))  # fmt: skip
        gr.Plot(roofline_spec(rows, "NVIDIA H200", "bfloat16", own_run=True).figure(),
                label="Roofline: each kernel", elem_id="roofline")  # fmt: skip
        roofline_table("Roofline per kernel", "roofline-table",
                       value=views_counters.roofline_table(roofline_view(rows), rows))  # fmt: skip
    return demo


def test_an_h200_runs_counters_show_as_columns_and_linked_points(chromium, tmp_path):
    demo = fixture_page()
    try:
        page = tb.open_page(chromium, served(demo))
        page.locator("#roofline .main-svg").first.wait_for()
        note = page.locator("#counters-note").inner_text()
        assert "DRAM per step: 50.4 MB read, 8.8 MB written" in note
        headers = page.locator("#kernels thead").inner_text()
        for header in ("DRAM read (B, ncu)", "ncu µs (replayed)", "Tensor pipe % (ncu)",
                       "achieved where ncu measured"):  # fmt: skip
            assert header in headers
        cells = page.locator("#kernels [role=gridcell]").all_inner_texts()
        assert "50355712" in [c.replace(",", "").strip() for c in cells]
        legend = " ".join(page.locator("#roofline .legendtext").all_text_contents())
        assert MEASURED_NAME in legend and LINK_NAME in legend
        gap = "measured 59.2 MB (read 50.4 MB, written 8.8 MB)"
        assert gap in page.locator("#roofline-table").inner_text()
        tb.full_page_shot(page, "counters-h200.png", tmp_path)  # a GPU's tables fit (issue 42)
        page.evaluate(SCROLL_RIGHT, "#kernels")  # the measured columns, after the profiler's
        shot = tb.screenshot_path("counters-h200-columns.png", tmp_path)
        page.locator("#kernels").screenshot(path=str(shot))
        page.context.close()
    finally:
        demo.close()
