"""Issue 31 in the browser: an uploaded CUDA-graph trace's Analyse tab heads its kernel table
as whole-trace totals and its launch block counts each graph launch once and says what no
launch points to."""

from __future__ import annotations

import pytest
from playwright import sync_api

from benchmarks.gen_public_shapes import SHAPES_DIR
from tests.page.browser import (  # the helpers, shared
    analyse_upload,
    full_page_shot,
    open_page,
)

pytestmark = pytest.mark.browser


def test_analyse_of_a_cuda_graph_trace_says_totals_and_counts_a_graph_launch_once(
    browser,
    url,
    tmp_path,
):
    page = open_page(browser, url)
    try:
        analyse_upload(page, SHAPES_DIR / "shape_cuda-graph.json.gz")
        page.wait_for_selector('#an-kernels [data-testid="cell-0-0"]')
        kernels = page.locator("#an-kernels")
        sync_api.expect(kernels).to_contain_text("Calls (whole trace)")
        sync_api.expect(kernels).not_to_contain_text("/ fwd")
        launch = page.locator("#an-launch")
        sync_api.expect(launch).to_contain_text("3 cudaGraphLaunch starting 15 GPU items")
        sync_api.expect(launch).to_contain_text("56.0 µs per step")
        sync_api.expect(launch).to_contain_text("4 GPU work items, 160.0 µs (21.8%")
        launch.scroll_into_view_if_needed()
        full_page_shot(page, "screenshot-analyze-cuda-graph.png", tmp_path)
    finally:
        page.context.close()
