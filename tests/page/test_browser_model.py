"""The Model tab in a real browser (issue 43): the tiny preset on a ragged batch, every
implementation a CPU runs, the others refused with their reason, SDPA's backend and torch's
reasons for the real call, the categories, and the Gantt's span per decoder layer
(tests/page/browser.py: the shared part). Its picture is docs/screenshot-model-cpu.png."""

from __future__ import annotations

import pytest

import app
from tests.page.browser import TIMEOUT_MS, full_page_shot, open_page, sync_api

pytestmark = pytest.mark.browser


def test_model_tab_compares_implementations_and_says_why(browser, url, tmp_path):
    if app.DEVICE != "cpu":
        pytest.skip("the CPU's defaults: the tiny preset, and kernels refused for want of a GPU")
    page = open_page(browser, url)
    try:
        page.get_by_role("tab", name="Model").click()
        page.wait_for_selector("#model-button")
        page.click("#model-button")
        page.wait_for_selector('#mo-table [data-testid="cell-3-0"]', timeout=TIMEOUT_MS)
        rows = page.locator("#mo-table").inner_text()
        for name in ("eager", "sdpa", "sdpa-math", "kernels"):
            assert name in rows
        assert "needs a CUDA GPU" in rows  # kernels refused, with its reason
        verdict = page.locator("#mo-verdict").inner_text()
        assert verdict.startswith("which attn_implementation?")
        why = page.locator("#mo-why").inner_text()
        assert "the trace shows SDPA's flash (CPU) backend ran" in why
        assert "mask (4, 1, 64, 64) bool, is_causal=False" in why
        categories = page.locator("#mo-categories").inner_text()
        assert "idle gaps" in categories and "GEMMs" in categories
        gantt = page.locator("#mo-gantt")
        sync_api.expect(gantt.locator(".main-svg").first).to_be_visible()
        sync_api.expect(page.locator("#mo-layers-table")).to_contain_text("attention %")
        shot = full_page_shot(page, "screenshot-model-cpu.png", tmp_path)
        assert shot.stat().st_size > 10_000
    finally:
        page.context.close()
