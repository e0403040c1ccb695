"""The page in a real browser: Playwright drives Debian's Chromium through a profile run, a
Compare, an uploaded trace whose names are markup (shown as text, nothing runs) and the Gantt of
a 10⁵-event trace (time to first render, and the page still answering), with screenshots.

Without Chromium or playwright the module is skipped, unless ATTNPROF_REQUIRE_BROWSER=1 (set by
.ci/run) makes that a failure.

Screenshots go to a temporary folder, so a test run leaves the tracked files alone. To refresh
the pictures of every tab, run with `ATTNPROF_SCREENSHOTS=docs`: they are written to
docs/screenshot-cpu.png (Profile), docs/screenshot-compare-cpu.png, docs/screenshot-diff-cpu.png,
docs/screenshot-diff-h200.png, docs/screenshot-sweep-cpu.png and docs/screenshot-analyze-xss.png
(another value of the variable names a folder to write them to instead). The checks' own
pictures (downloads-*, fonts-and-labels, earlier-run-finishing, analyse-cpu-trace) land there
too; docs/ keeps only the six.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
DOCS = Path(__file__).resolve().parents[2] / "docs"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
TIMEOUT_MS = 90_000

REQUIRED = os.environ.get("ATTNPROF_REQUIRE_BROWSER", "") not in ("", "0")  # .ci/run sets it

pytestmark = pytest.mark.browser


def unavailable(reason: str) -> None:
    """Skip on a developer's machine without the browser; fail where CI requires these tests."""
    if REQUIRED:
        pytest.fail(f"{reason}, and ATTNPROF_REQUIRE_BROWSER=1 requires the browser tests",
                    pytrace=False)  # fmt: skip
    pytest.skip(reason, allow_module_level=True)


try:
    from playwright import sync_api
except ImportError:
    unavailable("playwright is not installed: pip install -r requirements-dev.txt")
if not CHROMIUM.exists():
    unavailable(f"{CHROMIUM} is missing: apt-get install chromium")

import app  # noqa: E402 - only once the skips above have passed
from attention import VARIANTS  # noqa: E402
from benchmarks import gen_trace  # noqa: E402
from profiling.analysis.summary import forward_spans  # noqa: E402
from profiling.page import controls  # noqa: E402
from profiling.trace import model as trace  # noqa: E402
from profiling.views import compare as views_compare  # noqa: E402
from tests.page.test_hardening import IMG, SCRIPT, xss_trace  # noqa: E402


def wait_for_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@pytest.fixture(scope="module")
def url():
    _, local_url, _ = app.demo.launch(
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.SERVE_OPTIONS
    )
    try:
        wait_for_http(local_url)
        yield local_url
    finally:
        app.demo.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


def open_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    return page


@pytest.fixture(scope="module")
def page(browser, url):
    page = open_page(browser, url)
    yield page
    page.context.close()


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """docs/<name> with ATTNPROF_SCREENSHOTS=docs, <folder>/<name> for another value, else tmp."""
    where = os.environ.get("ATTNPROF_SCREENSHOTS", "")
    folder = DOCS if where == "docs" else Path(where) if where else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def test_profile_from_the_page(page, tmp_path):
    expect = sync_api.expect
    page.wait_for_selector("#profile-button")
    if app.DEVICE == "cpu":
        expect(page.locator("#banner")).to_contain_text("CPU run")

    # pick a variant: its lesson appears
    page.click("#variant input")
    page.get_by_role("option", name="Naive, in-place masked_fill_", exact=True).click()
    expect(page.locator("#lesson")).to_contain_text("one character")
    expect(page.locator("#variant input")).to_have_value("Naive, in-place masked_fill_")

    # move the sequence-length slider four steps right with the keyboard
    _, high, step = controls.RANGES["seq_len"]
    start = controls.START["seq_len"]
    page.locator("#seq_len input[type=range]").focus()
    for _ in range(4):
        page.keyboard.press("ArrowRight")
    seq_len = min(start + 4 * step, high)
    expect(page.locator("#seq_len input[type=number]")).to_have_value(str(seq_len))

    page.click("#profile-button")
    expect(page.locator("#summary")).to_contain_text(f"S{seq_len}", timeout=TIMEOUT_MS)
    if app.DEVICE == "cpu":  # a CPU run's GPU figures do not exist: said so, not "0.00"
        no_gpu = "n/a (CPU run: no GPU work)"
        expect(page.locator("#summary")).to_contain_text(f"bound {no_gpu}")
        expect(page.locator("#summary")).to_contain_text(f"memcpy / memset per forward {no_gpu}")
    page.wait_for_selector('#operators [data-testid="cell-0-0"]')
    expect(page.locator("#operators")).to_contain_text("attn_fwd")
    page.wait_for_selector('#gantt [data-testid="plotly"] .main-svg')
    expect(page.locator("#gantt .legend")).to_contain_text("cpu op")
    bars = page.locator("#gantt .barlayer .point").count()

    with page.expect_download() as info:
        page.click("#download-gz")
    download = tmp_path / info.value.suggested_filename
    info.value.save_as(download)
    assert download.name.endswith(".json.gz") and f"_{seq_len}_" in download.name
    t = trace.load(download)
    assert len(forward_spans(t)) == len(t.steps()) == 3
    assert bars == len(t.spans)  # the browser drew one bar per span of the downloaded trace

    page.mouse.move(0, 0)
    page.wait_for_timeout(500)  # let plotly finish its transitions before the picture
    shot = screenshot_path("screenshot-cpu.png", tmp_path)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000

    # a failed run clears the previous one: no old figures or files beside its error
    page.fill("#head_dim input[type=number]", "60")
    page.keyboard.press("Enter")
    page.click("#profile-button")
    expect(page.locator("#summary")).to_contain_text("The last run failed", timeout=TIMEOUT_MS)
    expect(page.locator("#summary")).not_to_contain_text(f"S{seq_len}")
    page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
    assert page.locator("#gantt .barlayer .point").count() == 0
    with pytest.raises(sync_api.TimeoutError), page.expect_download(timeout=2_000):
        page.click("#download-gz")  # the button holds no file any more


def test_a_training_step_from_the_page(browser, url, tmp_path):
    """Measure → train step: the lesson says what the backward teaches, the strip gives each
    phase, the gradients' errors and the saved bytes, and the Gantt shades both phases."""
    expect = sync_api.expect
    page = open_page(browser, url)
    page.wait_for_selector("#profile-button")
    page.click("#variant input")
    page.get_by_role("option", name="SDPA · FlashAttention backend", exact=True).click()
    page.get_by_label("train step (forward + backward)").check()
    expect(page.locator("#lesson")).to_contain_text("Backward:")
    expect(page.locator("#lesson")).to_contain_text("dq_dk_dv")
    page.click("#profile-button")
    summary = page.locator("#summary")
    expect(summary).to_contain_text("phase attn_bwd", timeout=TIMEOUT_MS)
    for text in (
        "CPU µs / step",
        "phase attn_fwd",
        "dQ / dK / dV rel. error",
        "saved for backward",
    ):
        expect(summary).to_contain_text(text)
    page.wait_for_selector('#gantt [data-testid="plotly"] .main-svg')
    expect(page.locator("#gantt")).to_contain_text("attn_bwd")
    page.mouse.move(0, 0)
    page.wait_for_timeout(500)
    shot = screenshot_path("screenshot-train-cpu.png", tmp_path)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    page.context.close()


def test_a_decode_preset_from_the_page(browser, url, tmp_path):
    """The inference-shape presets fill the controls; a decode run says what must move."""
    expect = sync_api.expect
    page = open_page(browser, url)
    page.wait_for_selector("#profile-button")
    page.click("#variant input")
    page.get_by_role("option", name="SDPA · FlashAttention backend", exact=True).click()
    page.get_by_text("Inference shape: grouped heads, decode, sliding window").click()
    decode = next(name for name in controls.PRESETS if "decode" in name)
    page.click("#preset input")
    page.get_by_role("option", name=decode, exact=True).click()
    preset = controls.PRESETS[decode]
    expect(page.locator("#q_len input")).to_have_value(str(preset["q_len"]))
    expect(page.locator("#kv_heads input")).to_have_value(str(preset["kv_heads"]))
    page.click("#profile-button")
    summary = page.locator("#summary")
    heads = f"H{preset['heads']}/KV{preset['kv_heads']} Q{preset['q_len']} S{preset['seq_len']}"
    expect(summary).to_contain_text(heads, timeout=TIMEOUT_MS)
    expect(summary).to_contain_text("must move")
    expect(summary).to_contain_text("roofline")
    page.mouse.move(0, 0)
    page.wait_for_timeout(500)
    shot = screenshot_path("screenshot-decode-cpu.png", tmp_path)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000

    page.get_by_role("tab", name="Compare").click()  # the same preset on Compare: GQA prefill
    page.wait_for_selector("#compare-button")
    gqa = next(name for name in controls.PRESETS if "grouped" in name or "GQA" in name)
    page.get_by_text("Inference shape: grouped heads, decode, sliding window").nth(1).click()
    page.click("#cmp-preset input")
    page.get_by_role("option", name=gqa, exact=True).click()
    expect(page.locator("#cmp-kv_heads input")).to_have_value(
        str(controls.PRESETS[gqa]["kv_heads"])
    )
    page.click("#compare-button")
    page.wait_for_selector('#glance [data-testid="cell-1-0"]', timeout=TIMEOUT_MS)
    expect(page.locator("#glance")).to_contain_text("naive")
    page.wait_for_selector('#cmp-bars [data-testid="plotly"] .main-svg')
    page.mouse.move(0, 0)
    page.wait_for_timeout(500)
    shot = screenshot_path("screenshot-compare-gqa-cpu.png", tmp_path)
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    page.context.close()


INFERENCE_SHAPE = "Inference shape: grouped heads, decode, sliding window"
INFERENCE_FIELDS = ("kv_heads", "q_len", "window")


def test_the_inference_shape_opened_without_a_preset_stays_empty(browser, url, tmp_path, capfd):
    """Issue 31, point 1: in a fresh page, opening the accordion showed K/V heads, query length
    and window as 0 with red borders; Profile then failed ("kv_heads must be between 1 and 128,
    got 0"), each keystroke there ended in a 500 and the SDPA checks stopped following."""
    expect = sync_api.expect
    page = open_page(browser, url)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 500 else None)
    try:
        page.wait_for_selector("#profile-button")
        page.click("#variant input")
        page.get_by_role("option", name=VARIANTS["sdpa-auto"].label, exact=True).click()
        checks = page.locator("#sdpa-checks")
        expect(checks).to_contain_text("Picks: flash")
        page.get_by_text(INFERENCE_SHAPE).first.click()
        for name in INFERENCE_FIELDS:
            expect(page.locator(f"#{name} input")).to_have_value("")
        page.screenshot(path=str(screenshot_path("inference-shape-open.png", tmp_path)))
        assert controls.START["heads"] % 3, "3 K/V heads must not divide the page's heads"
        page.fill("#kv_heads input", "3")  # refused: the checks say nothing...
        expect(checks).not_to_contain_text("Picks")
        page.fill("#kv_heads input", "")  # ...emptied again: they come back
        expect(checks).to_contain_text("Picks: flash")
        page.click("#profile-button")
        summary = page.locator("#summary")
        expect(summary).to_contain_text(f"S{controls.START['seq_len']}", timeout=TIMEOUT_MS)
        expect(summary).not_to_contain_text("failed")
        for tab, prefix in (("Compare", "cmp-"), ("Sweep", "sw-")):
            page.get_by_role("tab", name=tab).click()
            page.get_by_text(INFERENCE_SHAPE).locator("visible=true").first.click()
            for name in INFERENCE_FIELDS:
                expect(page.locator(f"#{prefix}{name} input")).to_have_value("")
        page.wait_for_timeout(500)
    finally:
        page.context.close()
    server_log = capfd.readouterr().err
    assert not failed, failed
    assert "Traceback" not in server_log and "minimum value" not in server_log, server_log


def test_a_phone_wide_page_scrolls_charts_and_tables_instead_of_squeezing(browser, url):
    """At 420 px the Gantt kept a ~95 px plot area and table cells broke numbers mid-digit."""
    context = browser.new_context(viewport={"width": 420, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(url)
        page.click("#profile-button")
        page.wait_for_selector('#operators [data-testid="cell-0-0"]')
        page.wait_for_selector('#gantt [data-testid="plotly"] .main-svg')
        width = "el => el.getBoundingClientRect().width"
        assert page.locator("#gantt .main-svg").first.evaluate(width) >= 700
        assert page.locator("#operators .table-container").evaluate(width) >= 640
        scroll = "el => getComputedStyle(el).overflowX"
        assert page.locator("#gantt").evaluate(scroll) == "auto"
        assert page.locator("#operators").evaluate(scroll) == "auto"
    finally:
        context.close()


def test_unticking_the_causal_mask_updates_the_naive_lesson(browser, url):
    page = open_page(browser, url)
    expect = sync_api.expect
    try:
        page.click("#variant input")
        page.get_by_role("option", name="Naive (out-of-place masked_fill)", exact=True).click()
        expect(page.locator("#lesson")).to_contain_text("hides a full Memcpy")
        expect(page.locator("#lesson")).not_to_contain_text("causal mask off")
        page.locator("#causal input").uncheck()
        expect(page.locator("#lesson")).to_contain_text("no masked_fill")
        page.locator("#causal input").check()
        expect(page.locator("#lesson")).not_to_contain_text("no masked_fill")
    finally:
        page.context.close()


def test_picking_sdpa_shows_torchs_own_checks_at_the_shape_on_screen(browser, url, tmp_path):
    """Issue 22: under an SDPA variant the picker says what torch's checks answer at the shape
    on screen (on a CPU: that the CUDA backends need a GPU, and SDPA's pick); under the naive
    variant nothing; a change of shape asks again."""
    page = open_page(browser, url)
    expect = sync_api.expect
    try:
        page.click("#variant input")
        page.get_by_role("option", name=VARIANTS["sdpa-auto"].label, exact=True).click()
        checks = page.locator("#sdpa-checks")
        expect(checks).to_contain_text("torch's own checks at this shape")
        if app.DEVICE == "cpu":  # issue 31: the CPU's own flash, not the CUDA one refused
            expect(checks).to_contain_text("the CUDA backends (flash, efficient, cudnn) refuse")
            expect(checks).to_contain_text("Picks: flash: the CPU's own flash kernel")
            expect(checks).not_to_contain_text("flash refuses")
        else:
            expect(checks).to_contain_text("math accepts everything")
        expect(checks).to_contain_text("Picks: flash")
        expect(checks).not_to_contain_text("causal_lower_right")
        page.screenshot(path=str(screenshot_path("screenshot-sdpa-checks-cpu.png", tmp_path)))
        page.locator("#causal input").uncheck()  # still SDPA's question, asked again
        expect(checks).to_contain_text("Picks: flash")
        page.click("#variant input")
        page.get_by_role("option", name=VARIANTS["naive"].label, exact=True).click()
        expect(checks).not_to_contain_text("torch's own checks")
    finally:
        page.context.close()


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
    page.mouse.move(0, 0)
    page.wait_for_timeout(500)
    shot = screenshot_path("screenshot-compare-cpu.png", tmp_path)
    page.screenshot(path=str(shot), full_page=True)
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
        page.mouse.move(0, 0)
        page.wait_for_timeout(500)
        shot = screenshot_path("screenshot-compare-train-cpu.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)
    finally:
        page.context.close()


# -- Sweep: misses off the data axes, a Points table that reads in full ----------------------
HEADER_LINES = """(table = '#sw-table') =>
  [...document.querySelectorAll(table + ' th[role=columnheader]')]
  .map(th => {
    const span = th.querySelector('span.header');
    const line = parseFloat(getComputedStyle(span).lineHeight);
    const lines = Math.round(span.getBoundingClientRect().height / line);
    return {name: th.title, lines: lines, words: th.title.split(' ').length};
  })"""
REASON_CELLS = """(needle) => {
  const box = document.querySelector('#sw-table .table-container').getBoundingClientRect();
  return [...document.querySelectorAll('#sw-table [role=gridcell]')]
    .filter(cell => cell.innerText.includes(needle))
    .map(cell => {
      const span = cell.querySelector('span');
      return {text: cell.innerText.trim(), whiteSpace: getComputedStyle(span).whiteSpace,
              overflows: span.scrollWidth > span.clientWidth || cell.scrollWidth > cell.clientWidth,
              right: cell.getBoundingClientRect().right, visibleRight: box.right};
    });
}"""
PLOT_AREAS = """(chart) => [...document.querySelectorAll(chart + ' .bglayer rect.bg')].map(rect => {
  const box = rect.getBoundingClientRect();
  return {top: box.top, bottom: box.bottom};
})"""


def sweep_refusing_4096(page) -> None:
    """Sweep naive and sdpa-flash at B4 H8 over 256, 512 and 4096: 4096 needs 69 GFLOP per
    forward, over the CPU's 20, so both of its points are refused."""
    page.get_by_role("tab", name="Sweep").click()
    page.wait_for_selector("#sweep-button")
    for name, value in (("batch", "4"), ("heads", "8")):
        page.fill(f"#sw-{name} input[type=number]", value)
        page.keyboard.press("Enter")
    page.locator("#sw-lengths label", has_text="1024").click()  # untick: a shorter run
    page.locator("#sw-lengths label", has_text="4096").click()
    page.click("#sweep-button")
    page.wait_for_selector('#sw-table [data-testid="cell-5-0"]', timeout=TIMEOUT_MS)
    for chart in ("#sw-time", "#sw-memory"):
        page.wait_for_selector(f'{chart} [data-testid="plotly"] .main-svg')


def test_sweep_draws_refusals_apart_and_its_table_reads_in_full(browser, url, tmp_path):
    """Issue 19, point 4: refused points sat on the time axis at made-up values, their labels
    overlapping; the Points table cut the reason off and broke "seq_len" into "seq_l / en";
    the memory chart could have one y tick."""
    if app.DEVICE != "cpu":
        pytest.skip("a GPU runs S=4096; the refusals this test reads are the CPU budget's")
    page = open_page(browser, url)
    try:
        sweep_refusing_4096(page)
        for chart in ("#sw-time", "#sw-memory"):
            areas = page.evaluate(PLOT_AREAS, chart)
            assert len(areas) == 2, f"{chart}: the data's plot area and a strip below, {areas}"
            data_area, strip = areas
            refused = page.locator(f"{chart} .x2y2 .scatterlayer .point")
            sync_api.expect(refused).to_have_count(2)  # naive and sdpa-flash at 4096
            for box in (refused.nth(i).bounding_box() for i in range(2)):  # below the data
                top, bottom = box["y"], box["y"] + box["height"]
                assert data_area["bottom"] < top and bottom <= strip["bottom"], (chart, box)
            assert page.locator(f"{chart} .textpoint").count() == 0  # no label to overlap
            for axis in ("ytick", "x2tick"):  # the data's log y axis and the shared log x axis
                labels = page.locator(f"{chart} g.{axis}").evaluate_all(
                    "ticks => ticks.map(tick => tick.textContent.trim()).filter(Boolean)"
                )
                assert len(labels) >= 3, (chart, axis, labels)
        # the reason is in the refused marker's hover
        marker = page.locator("#sw-time .x2y2 .scatterlayer .point").first
        marker.hover(force=True)
        sync_api.expect(page.locator("#sw-time .hoverlayer .hovertext").first).to_contain_text(
            "69 GFLOP per forward"
        )
        for width in (1400, 1024):  # a desktop and a laptop
            page.set_viewport_size({"width": width, "height": 1000})
            page.wait_for_timeout(500)
            for header in page.evaluate(HEADER_LINES):
                assert header["lines"] <= header["words"], (width, header)  # no word broken
            assert {h["name"]: h["lines"] for h in page.evaluate(HEADER_LINES)}["seq_len"] == 1
            cells = page.evaluate(REASON_CELLS, "GFLOP per forward")
            assert len(cells) == 2
            for cell in cells:
                assert cell["text"].endswith("lower seq_len, batch or heads"), cell  # in full
                assert cell["whiteSpace"] not in ("nowrap", "pre") and not cell["overflows"]
                assert cell["right"] <= cell["visibleRight"] + 1, (width, cell)  # not cut off
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.mouse.move(0, 0)
        page.wait_for_timeout(500)
        shot = screenshot_path("screenshot-sweep-cpu.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000
    finally:
        page.context.close()


# -- Analyse: untrusted names, and a 10⁵-event Gantt -----------------------------------------
def analyse_upload(page, path: Path) -> float:
    """Upload `path` in the Analyse tab and click Analyse; the time of the click."""
    page.get_by_role("tab", name="Analyse").click()
    page.wait_for_selector("#analyze-button")
    page.set_input_files("#an-file input[type=file]", str(path))
    # Gradio shows the name as stem and extension, at times with a space between them
    stem, dot, ext = path.name.rpartition(".")
    shown = re.compile(rf"{re.escape(stem)}\s*{re.escape(dot + ext)}")
    sync_api.expect(page.locator("#an-file")).to_contain_text(shown)
    began = time.perf_counter()
    page.click("#analyze-button")
    return began


BAR_OF = """(needle) => {
  const gd = document.querySelector('#an-gantt .js-plotly-plot');
  const bars = gd._fullData.filter(t => t.type === 'bar' && t.visible === true);
  for (let b = 0; b < bars.length; b++) {
    const hover = bars[b].hovertext || [];
    for (let i = 0; i < hover.length; i++) {
      if (String(hover[i]).includes(needle)) {
        const trace = document.querySelectorAll('#an-gantt .barlayer .trace')[b];
        const point = trace && trace.querySelectorAll('.point')[i];
        if (!point) continue;
        const box = point.getBoundingClientRect();
        if (box.width > 0 && box.height > 0)
          return {x: box.x + box.width / 2, y: box.y + box.height / 2};
      }
    }
  }
  return null;
}"""


def test_names_from_an_uploaded_trace_show_as_text(browser, url, tmp_path):
    """Kernel and operator names `<img src=x onerror=alert(1)>` and `<script>…</script>`: the
    tables show them literally, the Gantt's hover too, and nothing runs (no dialog, no global)."""
    page = open_page(browser, url)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        analyse_upload(page, xss_trace(tmp_path))
        page.wait_for_selector('#an-operators [data-testid="cell-0-0"]')
        page.wait_for_selector('#an-kernels [data-testid="cell-0-0"]')
        page.wait_for_selector('#an-gantt [data-testid="plotly"] .barlayer .point')
        for table in ("#an-operators", "#an-kernels"):
            for name in (IMG, SCRIPT):  # a cell holds the name as its text
                cell = page.locator(f'{table} [data-testid^="cell-"]').filter(has_text=name).first
                cell.scroll_into_view_if_needed()
                sync_api.expect(cell).to_be_visible()
                assert cell.inner_text().strip() == name
        sync_api.expect(page.locator("#an-summary")).to_contain_text("xss.json.gz")
        # hover the bar of the <img> operator: the hover box shows the name as text
        page.locator("#an-gantt").scroll_into_view_if_needed()
        spot = page.evaluate(BAR_OF, "&lt;img src=x onerror=alert(1)&gt;")
        assert spot is not None, "no visible bar for the <img> span"
        page.mouse.move(spot["x"], spot["y"])
        hover = page.locator("#an-gantt .hoverlayer .hovertext")
        sync_api.expect(hover.first).to_contain_text(IMG)
        page.wait_for_timeout(300)
        assert page.evaluate("() => typeof window.__xss") == "undefined"
        assert page.locator("#an-operators img, #an-kernels img, #an-summary img").count() == 0
        assert page.locator("#an-gantt img, #an-launch img").count() == 0
        assert dialogs == []
        page.get_by_role("tab", name="Analyse").scroll_into_view_if_needed()
        page.mouse.move(0, 0)
        page.wait_for_timeout(300)
        page.locator("#an-operators").scroll_into_view_if_needed()
        shot = screenshot_path("screenshot-analyze-xss.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000
        assert dialogs == [] and page.evaluate("() => typeof window.__xss") == "undefined"
    finally:
        page.context.close()


FRAMES = """() => new Promise(resolve => {
  const t0 = performance.now();
  requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now() - t0)));
})"""


def test_the_gantt_of_a_1e5_event_trace_renders_and_stays_responsive(browser, url, tmp_path):
    """Issue #7: the Gantt of a 10⁵-event trace through Analyse, timed from the click to the
    first bars drawn; then the page must still answer (two animation frames, a hover)."""
    path = tmp_path / "trace_1e5.json.gz"
    gen_trace.write(100_000, path)
    page = open_page(browser, url)
    try:
        began = analyse_upload(page, path)
        page.wait_for_selector('#an-gantt [data-testid="plotly"] .barlayer .point')
        first_render = time.perf_counter() - began
        sync_api.expect(page.locator("#an-summary")).to_contain_text("100,169 events")
        page.wait_for_selector('#an-operators [data-testid="cell-0-0"]')
        everything = time.perf_counter() - began
        bars = page.locator("#an-gantt .barlayer .point").count()

        t0 = time.perf_counter()
        assert page.evaluate("() => 1 + 1") == 2
        evaluate_ms = (time.perf_counter() - t0) * 1000
        frames_ms = max(page.evaluate(FRAMES) for _ in range(3))
        bar = page.locator("#an-gantt .barlayer .point").nth(bars // 2)
        bar.scroll_into_view_if_needed()
        box = bar.bounding_box()
        t0 = time.perf_counter()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_selector("#an-gantt .hoverlayer .hovertext", timeout=10_000)
        hover_ms = (time.perf_counter() - t0) * 1000
    finally:
        page.context.close()
    numbers = dict(
        events=100_000, gz_mib=round(path.stat().st_size / 1024**2, 2),
        click_to_first_render_s=round(first_render, 2), click_to_tables_s=round(everything, 2),
        bars_drawn=bars, evaluate_ms=round(evaluate_ms, 1),
        two_frames_ms=round(frames_ms, 1), hover_ms=round(hover_ms, 1),
    )  # fmt: skip
    out = tmp_path / "browser-1e5-gantt.json"
    out.write_text(json.dumps(numbers, indent=1))
    print(f"\n10^5-event Gantt in the browser: {json.dumps(numbers)} ({out})")
    assert first_render < 30 and everything < 40
    assert evaluate_ms < 1000 and frames_ms < 1000 and hover_ms < 5000
    assert 0 < bars < 20_000  # level of detail: the browser never gets 10⁵ bars


# -- Diff: the kernel table only where there are kernels, names as text ----------------------
def diff_uploads(page, trace_a: Path, trace_b: Path, label_a: str, label_b: str) -> None:
    """Upload two traces in the Diff tab, label them and click Diff uploads."""
    page.get_by_role("tab", name="Diff").click()
    for which, path in (("a", trace_a), ("b", trace_b)):
        box = f"#diff-file-{which}"
        if page.locator(f"{box} button[aria-label=Clear]").count():  # a file from before
            page.click(f"{box} button[aria-label=Clear]")
        page.set_input_files(f"{box} input[type=file]", str(path))
        page.wait_for_selector(f'{box} td.filename[aria-label="{path.name}"]')
    page.fill("#label-a textarea, #label-a input", label_a)
    page.fill("#label-b textarea, #label-b input", label_b)
    page.click("#diff-button")


def test_diff_hides_the_kernel_table_of_cpu_traces_and_reads_names_as_text(browser, url, tmp_path):
    """Two CPU runs have no kernels: no empty table with cut-off headers, a line says why; two
    H200 traces bring the table back. The headline is the API's plain text shown as Markdown:
    `aten::copy_` reads as written (no backslash, no italics), and noise is said."""
    from profiling.run.runner import run
    from profiling.workload.spec import Workload
    from tests.conftest import FIXTURES, NAIVE

    expect = sync_api.expect
    shape = {"seq_len": 128, "batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32"}
    cpu = [
        run(Workload.from_user(variant=v, device="cpu", **shape), out_dir=tmp_path / v).trace_gz
        for v in ("naive", "naive-inplace")
    ]
    page = open_page(browser, url)
    try:
        diff_uploads(page, *cpu, "naive", "in_place")
        headline = page.locator("#diff-headline")
        expect(headline).to_contain_text("no GPU work in either trace")
        expect(page.locator("#diff-no-kernels")).to_contain_text("No kernel table")
        expect(page.locator("#kernel-delta")).to_be_hidden()
        expect(page.locator("#operator-delta")).to_contain_text("aten::masked_fill")
        expect(page.locator("#operator-delta")).to_contain_text("count")  # the change column
        text = headline.inner_text()
        assert "\\" not in text and "in_place" in text  # escapes render, none show
        assert headline.locator("em, strong, a").count() == 0
        page.mouse.move(0, 0)
        shot = screenshot_path("screenshot-diff-cpu.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)

        inplace = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"
        diff_uploads(page, NAIVE, inplace, "naive", "naive_inplace")
        expect(headline).to_contain_text("naive_inplace has 1 fewer Memcpy DtoD per forward")
        expect(page.locator("#kernel-delta")).to_be_visible()
        expect(page.locator("#diff-no-kernels")).to_be_hidden()
        expect(page.locator("#kernel-delta")).to_contain_text("noise")
        page.mouse.move(0, 0)
        shot = screenshot_path("screenshot-diff-h200.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 20_000

        # a refused Diff leaves nothing of the last one: no headline, no rows
        diff_uploads(page, *cpu, "same", "same")
        expect(page.locator(".toast-body").first).to_contain_text("labels must differ")
        expect(headline).to_have_text("")
        expect(page.locator('#operator-delta [data-testid="cell-0-0"]')).to_have_count(0)
        expect(page.locator("#kernel-delta")).to_be_visible()
    finally:
        page.context.close()


# -- What the page shows before, after and between runs (issue 19, points 5, 6 and 9) -------
# Each visible character outside ASCII drawn on a canvas in its element's font, against U+0378
# (unassigned, so drawn as the missing-glyph box): the ones that draw the same box are missing.
MISSING_GLYPHS = r"""() => {
  const canvas = document.createElement('canvas');
  canvas.width = 96; canvas.height = 64;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const ink = (font, text) => {
    ctx.clearRect(0, 0, 96, 64); ctx.font = font; ctx.fillText(text, 8, 48);
    return ctx.getImageData(0, 0, 96, 64).data.join(',');
  };
  const missing = [], seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const element = walker.currentNode.parentElement;
    if (!element || !element.checkVisibility()) continue;
    const style = getComputedStyle(element);
    const font = `${style.fontStyle} ${style.fontWeight} 40px ${style.fontFamily}`;
    for (const ch of walker.currentNode.textContent) {
      if (ch.codePointAt(0) < 0x80 || /\s/.test(ch) || seen.has(font + ch)) continue;
      seen.add(font + ch);
      if (ink(font, ch) === ink(font, '\u0378')) missing.push(ch);
    }
  }
  return missing;
}"""
INPUT_AND_ARROW = """(picker) => {
  const input = picker.querySelector('input'), arrow = picker.querySelector('.icon-wrap');
  const style = getComputedStyle(input), box = input.getBoundingClientRect();
  const padding = parseFloat(style.paddingRight) + parseFloat(style.borderRightWidth);
  return {textRight: box.right - padding, arrowLeft: arrow.getBoundingClientRect().left,
          overflowing: input.scrollWidth > input.clientWidth, textOverflow: style.textOverflow};
}"""


def platform_fonts(page, selector: str) -> set[str]:
    """The font families Chromium drew `selector`'s text with (DevTools' own answer)."""
    session = page.context.new_cdp_session(page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    root = session.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
    node = session.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    fonts = session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    session.detach()
    return {font["familyName"] for font in fonts}


def text_nodes_with(page, characters: str) -> list[str]:
    return page.evaluate(
        """(chars) => { const out = [];
          const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
          while (walker.nextNode()) { const text = walker.currentNode.textContent;
            if ([...chars].some(c => text.includes(c))) out.push(text); }
          return out; }""",
        characters,
    )


def test_one_font_family_no_missing_glyph_and_long_labels_clear_of_the_arrow(
    browser, url, tmp_path
):
    """Issue 19, point 9: the bold "A" of the title (and of "SDPA", "AMD") came from another
    font, as Gradio's semibold Source Sans Pro holds a few glyphs only; "⛔" drew an empty box;
    an unavailable variant's name ran under the dropdown's arrow."""
    from profiling.page.style import FONT_STACK
    from profiling.views.profile import variant_choices

    expect = sync_api.expect
    page = open_page(browser, url)
    try:
        page.wait_for_selector("#profile-button")
        stack = page.evaluate("() => getComputedStyle(document.querySelector('h1')).fontFamily")
        assert [f.strip().strip('"') for f in stack.split(",")] == [
            f.strip().strip('"') for f in FONT_STACK.split(",")
        ]
        bold = ["h1", "#lesson strong"] + (["#banner strong"] if app.DEVICE == "cpu" else [])
        for selector in bold:  # one family for every glyph (its bold face included)
            families = platform_fonts(page, selector)
            assert len(families) == 1, (selector, families)
        # the longest label the Profile dropdown can show: an unavailable variant's, if any
        label = max((label for label, _ in variant_choices(app.DEVICE, "float32")), key=len)
        page.click("#variant input")
        assert page.evaluate(MISSING_GLYPHS) == []  # the open list of every label
        page.get_by_role("option", name=label, exact=True).click()
        expect(page.locator("#variant input")).to_have_value(label)
        shown = page.locator("#variant").evaluate(INPUT_AND_ARROW)
        assert shown["textRight"] <= shown["arrowLeft"], shown  # the arrow covers no text
        assert not shown["overflowing"] or shown["textOverflow"] == "ellipsis", shown
        if "unavailable" in label:
            expect(page.locator("#lesson")).to_contain_text("Unavailable here:")
        for tab in ("Profile", "Compare", "Diff", "Sweep", "Analyse"):
            page.get_by_role("tab", name=tab).click()
            page.wait_for_timeout(300)
            assert page.evaluate(MISSING_GLYPHS) == [], tab
        assert text_nodes_with(page, "⛔\ufe0f") == []  # an emoji needs an emoji font
        page.get_by_role("tab", name="Profile").click()
        page.mouse.move(0, 0)
        page.screenshot(path=str(screenshot_path("fonts-and-labels.png", tmp_path)))
    finally:
        page.context.close()


def is_disabled(page, elem_id: str) -> bool:
    return page.locator(f"#{elem_id}").evaluate("button => button.disabled")


def keep_only(page, picker: str, keep: str) -> None:
    """Remove every chosen variant of a multiselect but the one labelled `keep`."""
    tokens = page.locator(f"{picker} .token")
    for text in tokens.all_inner_texts():
        if text.strip() != keep:
            tokens.filter(has_text=text.strip()).locator(".token-remove").click()
    sync_api.expect(tokens).to_have_count(1)


def test_downloads_are_disabled_until_a_run_puts_a_file_behind_them(browser, url, tmp_path):
    """Issue 19, point 5: every download button was active before any run and after a failed
    one, and a click downloaded nothing. Now each is disabled, and a line says why."""
    expect = sync_api.expect
    profile_files = ("download-json", "download-gz", "download-txt")
    page = open_page(browser, url)
    try:
        page.wait_for_selector("#profile-button")
        assert [is_disabled(page, button) for button in profile_files] == [True] * 3
        expect(page.locator("#summary")).to_contain_text("the trace files to download below")
        for tab, button, note in (
            ("Compare", "cmp-zip", "cmp-note"),
            ("Sweep", "sw-zip", "sw-note"),
        ):
            page.get_by_role("tab", name=tab).click()
            expect(page.locator(f"#{note}")).to_contain_text("Nothing run yet")
            assert is_disabled(page, button), button
        page.mouse.move(0, 0)
        page.screenshot(path=str(screenshot_path("downloads-before-a-run.png", tmp_path)))

        # a Sweep of one point: its zip becomes active and the line goes
        keep_only(page, "#sw-variants", VARIANTS["naive"].label)
        checked = page.locator("#sw-lengths label:has(input:checked)").all_inner_texts()
        for length in checked[1:]:
            page.locator("#sw-lengths label", has_text=length.strip()).click()
        page.click("#sweep-button")
        page.wait_for_selector('#sw-table [data-testid="cell-0-0"]', timeout=TIMEOUT_MS)
        expect(page.locator("#sw-zip")).to_be_enabled()
        expect(page.locator("#sw-note")).not_to_contain_text("Nothing run yet")

        page.get_by_role("tab", name="Profile").click()
        page.click("#profile-button")
        page.wait_for_selector('#operators [data-testid="cell-0-0"]', timeout=TIMEOUT_MS)
        for button in profile_files:
            expect(page.locator(f"#{button}")).to_be_enabled()
        with page.expect_download() as info:
            page.click("#download-txt")
        assert info.value.suggested_filename.endswith(".txt")

        page.fill("#head_dim input[type=number]", "60")  # not a multiple of 8: the run fails
        page.keyboard.press("Enter")
        page.click("#profile-button")
        expect(page.locator("#summary")).to_contain_text("files were cleared", timeout=TIMEOUT_MS)
        for button in profile_files:
            expect(page.locator(f"#{button}")).to_be_disabled()
        page.mouse.move(0, 0)
        page.screenshot(path=str(screenshot_path("downloads-after-a-failure.png", tmp_path)))
    finally:
        page.context.close()


def test_analyse_hides_the_kernel_table_of_a_cpu_trace_and_says_why(browser, url, tmp_path):
    """Issue 19, point 5: a CPU trace showed an empty GPU kernel table with its headers cut off
    (Profile hides it); a trace with kernels still shows it, its roofline table's headers on
    whole words."""
    from profiling.run.runner import run
    from profiling.views.analyze import NO_KERNELS
    from profiling.workload.spec import Workload
    from tests.conftest import NAIVE

    expect = sync_api.expect
    shape = {"seq_len": 128, "batch": 1, "heads": 2, "head_dim": 32, "dtype": "float32"}
    cpu = run(Workload.from_user(variant="naive", device="cpu", **shape), out_dir=tmp_path).trace_gz
    page = open_page(browser, url)
    try:
        analyse_upload(page, cpu)
        page.wait_for_selector('#an-operators [data-testid="cell-0-0"]', timeout=TIMEOUT_MS)
        expect(page.locator("#an-kernel-note")).to_contain_text(NO_KERNELS)
        expect(page.locator("#an-kernels")).to_be_hidden()
        page.mouse.move(0, 0)
        page.screenshot(
            path=str(screenshot_path("analyse-cpu-trace.png", tmp_path)), full_page=True
        )

        page.click("#an-file button[aria-label=Clear]")
        analyse_upload(page, NAIVE)
        page.wait_for_selector('#an-kernels [data-testid="cell-0-0"]', timeout=TIMEOUT_MS)
        expect(page.locator("#an-kernels")).to_be_visible()
        expect(page.locator("#an-kernel-note")).not_to_contain_text("No GPU kernels")
        # issue 31: 15 columns squeezed into the page broke the headers letter by letter
        page.wait_for_selector('#an-roofline-table [data-testid="cell-0-0"]')
        header = page.locator("#an-roofline-table thead").evaluate(
            "el => el.getBoundingClientRect().height"
        )
        assert header < 80, header
        for column in page.evaluate(HEADER_LINES, "#an-roofline-table"):
            assert column["lines"] <= column["words"], column
        page.mouse.move(0, 0)
        shot = screenshot_path("analyse-gpu-trace.png", tmp_path)
        page.screenshot(path=str(shot), full_page=True)
    finally:
        page.context.close()


def test_after_a_reload_the_next_click_says_an_earlier_run_is_still_finishing(
    browser, url, monkeypatch, tmp_path
):
    """Issue 19, point 6: a page reloaded during a run left the run holding the device's slot;
    the next click waited behind it in Gradio's queue under an ETA that did not count it. The
    first run is held here until the second click's bar has been read: no timing involved."""
    from profiling.jobs import queue as jobs
    from profiling.page import profile_tab

    expect = sync_api.expect
    started, release = threading.Event(), threading.Event()
    real_run = profile_tab.profile_on_gpu

    def held(workload, progress=None):
        if not started.is_set():
            started.set()
            release.wait(TIMEOUT_MS / 1000)
        return real_run(workload, progress)

    monkeypatch.setattr(profile_tab, "profile_on_gpu", held)
    page = open_page(browser, url)
    try:
        page.click("#profile-button")
        assert started.wait(TIMEOUT_MS / 1000)
        page.reload()
        page.click("#profile-button")
        status = page.locator('#summary [data-testid="status-tracker"]')
        expect(status).to_contain_text(jobs.EARLIER_RUN_FINISHING, timeout=TIMEOUT_MS)
        timer = page.locator("#summary .progress-text").inner_text()
        assert not re.search(r"\d/\d", timer), timer  # elapsed time only: no ETA
        page.screenshot(path=str(screenshot_path("earlier-run-finishing.png", tmp_path)))
        release.set()
        expect(page.locator("#summary")).to_contain_text("CPU µs / forward", timeout=TIMEOUT_MS)
    finally:
        release.set()
        page.context.close()
