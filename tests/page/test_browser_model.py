"""The Model tab in a real browser (issue 43): the tiny preset on a ragged batch, every
implementation a CPU runs, the others refused with their reason, SDPA's backend and torch's
reasons for the real call, the categories, and the Gantt's span per decoder layer; each
implementation kept in History (its permalink under the verdict) and its trace downloaded; the
Sweep over sequence lengths; and History opening a model run with the Model views
(tests/page/browser.py: the shared part). Its picture is docs/screenshot-model-cpu.png."""

from __future__ import annotations

import gzip

import pytest

import app
from tests.page.browser import TIMEOUT_MS, full_page_shot, open_page, sync_api

TAG = "tiny_2L_B4_S64_ragged_float32_prefill"  # the CPU's defaults

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
        gantt.scroll_into_view_if_needed()  # plotly draws a chart once it is on screen
        sync_api.expect(gantt.locator(".main-svg").first).to_be_visible(timeout=TIMEOUT_MS)
        sync_api.expect(page.locator("#mo-layers-table")).to_contain_text("attention %")
        sdpa_run = _kept_and_downloaded(page, tmp_path)
        _swept(page)
        shot = full_page_shot(page, "screenshot-model-cpu.png", tmp_path)
        assert shot.stat().st_size > 10_000
        _opened_in_history(page, sdpa_run)
    finally:
        page.context.close()


def _kept_and_downloaded(page, tmp_path) -> str:
    """The verdict links each run in History; each implementation that ran offers its trace,
    named by its workload, and the one downloaded is its run's (a span per decoder layer)."""
    expect = sync_api.expect
    links = page.locator("#mo-verdict a[href^='?run=']")
    expect(links).to_have_count(4)  # eager, sdpa, sdpa-math and the refused kernels
    sdpa_run = links.nth(1).inner_text()
    expect(page.locator("#mo-verdict")).to_contain_text(f"{sdpa_run} (sdpa)")
    traces = page.locator("#mo-traces")
    rows = traces.locator("tr")
    expect(rows).to_have_count(3)  # the refused kernels has no trace
    for row, name in enumerate(("eager", "sdpa", "sdpa-math")):  # stem and extension: 2 spans
        expect(rows.nth(row).locator(".filename")).to_contain_text(f"{name}_{TAG}.json")
    with page.expect_download() as info:
        rows.nth(1).locator("a").click()
    download = tmp_path / info.value.suggested_filename
    info.value.save_as(download)
    assert download.name == f"sdpa_{TAG}.json.gz"
    assert b'"model_layer_1"' in gzip.decompress(download.read_bytes())
    return sdpa_run


def _swept(page) -> None:
    """The Sweep under the results: the model's implementations over 16, 32 and 64 (full
    batches), the table of points (kernels refused at each), the chart and the zip."""
    expect = sync_api.expect
    page.click("#mo-sweep button")  # the accordion opens
    expect(page.locator("#mo-zip, #mo-sw-zip").first).to_be_disabled()
    page.click("#mo-sweep-button")
    page.wait_for_selector('#mo-sw-table [data-testid="cell-11-0"]', timeout=TIMEOUT_MS)
    table = page.locator("#mo-sw-table")
    for text in ("16", "32", "64", "sdpa-math", "needs a CUDA GPU", "step ms (trace)"):
        expect(table).to_contain_text(text)
    page.wait_for_selector('#mo-sw-chart [data-testid="plotly"] .main-svg')
    expect(page.locator("#mo-sw-chart .legend")).to_contain_text("sdpa: attention")
    expect(page.locator("#mo-sw-zip")).to_be_enabled()
    expect(page.locator("#mo-sw-note")).to_have_text("")


def _opened_in_history(page, run_id: str) -> None:
    """The sdpa run's permalink: History opens it with the Model views (the variant tables
    hidden), its Gantt redrawn from the kept trace."""
    expect = sync_api.expect
    page.goto(page.url.split("?")[0] + f"?run={run_id}")
    expect(page.locator("#history-origin")).to_contain_text(run_id, timeout=TIMEOUT_MS)
    expect(page.locator("#history-model-table")).to_contain_text("flash (CPU)")
    expect(page.locator("#history-model-why")).to_contain_text("the trace shows SDPA's flash")
    expect(page.locator("#history-model-categories")).to_contain_text("idle gaps")
    expect(page.locator("#history-kernels")).to_be_hidden()
    page.wait_for_selector('#history-gantt [data-testid="plotly"] .main-svg')
    expect(page.locator("#history-download-gz")).to_be_enabled()
