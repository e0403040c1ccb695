"""Issue 31 in the browser: an uploaded CUDA-graph trace's Analyse tab heads its kernel table
as whole-trace totals and its launch block counts each graph launch once and says what no
launch points to."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright import sync_api

from benchmarks.gen_public_shapes import SHAPES_DIR
from tests.page.browser import (  # the helpers, shared
    TIMEOUT_MS,
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


def test_a_trace_that_is_not_attention_has_no_attention_title_and_its_tables_fit(
    browser, url, tmp_path
):
    """Issue 42, point 3: a recommendation model's trace (V100) titled its role table "Kernels
    by role in attention"; at 1280 px its tables broke headers inside words. The title follows
    the kernels' roles (an attention trace's first, then the other); full_page_shot checks
    every header and the roofline's note."""
    from tests.conftest import NAIVE

    recsys = Path(__file__).parents[1] / "fixtures" / "generated" / "recsys_v100_3steps.json.gz"
    page = open_page(browser, url)
    try:
        roles = page.locator("#an-roles")
        analyse_upload(page, NAIVE)
        sync_api.expect(roles).to_contain_text("Kernels by role in attention", timeout=30_000)
        page.click("#an-file button[aria-label=Clear]")
        analyse_upload(page, recsys)
        sync_api.expect(roles).to_contain_text("split_embedding", timeout=TIMEOUT_MS)
        sync_api.expect(roles).not_to_contain_text("in attention", timeout=30_000)
        sync_api.expect(roles).to_contain_text("Kernels by role")
        full_page_shot(page, "analyse-recsys-trace.png", tmp_path)
    finally:
        page.context.close()
