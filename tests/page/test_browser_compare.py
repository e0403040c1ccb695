"""The Compare tab in a real browser: a Compare and a training Compare (tests/page/browser.py:
the shared part).
"""

from __future__ import annotations

import pytest

import app
from attention import VARIANTS
from profiling.page import controls
from profiling.views import compare as views_compare
from tests.page.browser import (  # the browser, the served app and the helpers, shared
    HEADER_LINES,
    TIMEOUT_MS,
    full_page_shot,
    open_page,
    sync_api,
)

pytestmark = pytest.mark.browser


def test_compare_from_the_page(page, tmp_path):
    """Pick variants in the Compare tab, run it, read the table, the bars and the download."""
    expect = sync_api.expect
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_selector("#compare-button")
    variants = page.locator("#cmp-variants")
    # preselected: those of the post's six that run here, by label; drop one and add two (one
    # that cannot run on a CPU, listed with its reason), as a user would
    defaults = views_compare.compare_defaults(app.DEVICE, controls.START["dtype"])
    assert variants.locator(".token").all_inner_texts() == [VARIANTS[v].label for v in defaults]
    inplace = VARIANTS["naive-inplace"].label
    variants.locator(".token", has_text=inplace).locator(".token-remove").click()
    expect(variants).not_to_contain_text(inplace)
    added = [v for v in ("sdpa-auto", "sdpa-cudnn") if v not in defaults]
    variants.locator("input").click()  # the list stays open while options are picked
    for variant in added:
        page.get_by_role("option").filter(has_text=VARIANTS[variant].label).click()
    page.keyboard.press("Escape")
    for variant in added:
        expect(variants).to_contain_text(VARIANTS[variant].label)
    picked = [v for v in defaults if v != "naive-inplace"] + added

    page.click("#compare-button")
    page.wait_for_selector(f'#glance [data-testid="cell-{len(picked) - 1}-0"]', timeout=TIMEOUT_MS)
    glance = page.locator("#glance")
    for vid in picked:
        expect(glance).to_contain_text(vid)
    if app.DEVICE == "cpu":
        expect(glance).to_contain_text("unavailable")
        expect(glance).to_contain_text("needs a CUDA GPU")
        expect(page.locator("#cmp-note")).to_contain_text("no datasheet peak for this device")
    page.wait_for_selector('#cmp-bars [data-testid="plotly"] .main-svg')
    ran = [v for v in picked if app.DEVICE == "cuda" or v != "sdpa-cudnn"]
    expect(page.locator("#cmp-bars .barlayer .point")).to_have_count(
        len(ran) * (2 if app.DEVICE == "cuda" else 1)
    )
    page.wait_for_selector('#cmp-gantts [data-testid="plotly"] .main-svg')
    expect(page.locator("#cmp-gantts")).to_contain_text("sdpa-math")

    with page.expect_download() as info:
        page.click("#cmp-zip")
    download = tmp_path / info.value.suggested_filename
    info.value.save_as(download)
    assert download.name.startswith("compare_") and download.suffix == ".zip"

    # the Diff tab now offers the runs of this Compare
    page.get_by_role("tab", name="Diff").click()
    page.click("#diff-runs-button")
    expect(page.locator("#diff-headline")).to_contain_text("per forward")

    page.get_by_role("tab", name="Compare").click()
    shot = full_page_shot(page, "screenshot-compare-cpu.png", tmp_path)
    assert shot.stat().st_size > 20_000


def test_a_train_compare_reads_per_step_with_both_phases_and_whole_headers(browser, url, tmp_path):
    """Issue 31: in train mode Compare said "CPU µs/fwd", its mini-Gantts' legend had attn_fwd
    only, its timing table was headed "max_memory_allocated MiB" with headers squeezed letter
    by letter, and on a CPU the role table showed a lone "variant" column."""
    expect = sync_api.expect
    page = open_page(browser, url)
    try:
        page.get_by_role("tab", name="Compare").click()
        page.wait_for_selector("#compare-button")
        variants = page.locator("#cmp-variants")
        defaults = views_compare.compare_defaults(app.DEVICE, controls.START["dtype"])
        for variant in set(defaults) - {"naive", "sdpa-math"}:  # two variants: a short run
            label = VARIANTS[variant].label
            variants.locator(".token", has_text=label).locator(".token-remove").click()
            expect(variants).not_to_contain_text(label)
        expect(variants.locator(".token")).to_have_count(2)
        page.locator("#cmp-mode").get_by_label("train step (forward + backward)").check()
        page.click("#compare-button")
        page.wait_for_selector('#glance [data-testid="cell-1-0"]', timeout=TIMEOUT_MS)
        expect(page.locator("#glance")).to_contain_text("CPU µs/step")
        expect(page.locator("#glance")).not_to_contain_text("/fwd")
        expect(page.locator("#glance")).to_contain_text("dV err")  # the training columns
        page.wait_for_timeout(500)  # the widths follow the columns shown
        for header in page.evaluate(HEADER_LINES, "#glance"):
            assert header["lines"] <= header["words"], header  # no word broken
        page.wait_for_selector('#cmp-gantts [data-testid="plotly"] .main-svg')
        expect(page.locator("#cmp-gantts .legend")).to_contain_text("attn_bwd")
        page.wait_for_selector('#cmp-timing [data-testid="cell-1-0"]')
        expect(page.locator("#cmp-timing")).not_to_contain_text("max_memory_allocated")
        for header in page.evaluate(HEADER_LINES, "#cmp-timing"):
            assert header["lines"] <= header["words"], header  # no word broken
        if app.DEVICE == "cpu":  # no kernels, so no roles: said once, not an empty table
            expect(page.locator("#cmp-roles")).to_be_hidden()
            expect(page.locator("#cmp-roles-note")).to_contain_text("no GPU kernels")
        full_page_shot(page, "screenshot-compare-train-cpu.png", tmp_path)
    finally:
        page.context.close()


# -- Sweep: misses off the data axes, a Points table that reads in full ----------------------
