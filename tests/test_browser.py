"""The page in a real browser: Playwright drives Debian's Chromium through a profile run and a
Compare, and takes a screenshot of each.

Screenshots go to a temporary folder, so a test run leaves the tracked files alone. To refresh
the README's pictures, run with `ATTNPROF_SCREENSHOTS=docs`: they are written to
docs/screenshot-cpu.png and docs/screenshot-compare-cpu.png (another value of the variable names
a folder to write them to instead).
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
DOCS = Path(__file__).resolve().parents[1] / "docs"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
TIMEOUT_MS = 90_000

pytestmark = pytest.mark.browser
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium", allow_module_level=True)

import app  # noqa: E402 - only once the skips above have passed
from profiling import trace  # noqa: E402
from profiling.summary import forward_spans  # noqa: E402


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
        prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, **app.LAUNCH
    )
    try:
        wait_for_http(local_url)
        yield local_url
    finally:
        app.demo.close()


@pytest.fixture(scope="module")
def page(url):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        yield page
        browser.close()


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
    _, high, step = app.RANGES["seq_len"]
    start = app.START["seq_len"]
    page.locator("#seq_len input[type=range]").focus()
    for _ in range(4):
        page.keyboard.press("ArrowRight")
    seq_len = min(start + 4 * step, high)
    expect(page.locator("#seq_len input[type=number]")).to_have_value(str(seq_len))

    page.click("#profile-button")
    expect(page.locator("#summary")).to_contain_text(f"S{seq_len}", timeout=TIMEOUT_MS)
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


def test_compare_from_the_page(page, tmp_path):
    """Pick variants in the Compare tab, run it, read the table, the bars and the download."""
    expect = sync_api.expect
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_selector("#compare-button")
    variants = page.locator("#cmp-variants")
    # the defaults are the post's six; drop one and add another, as a user would
    expect(variants).to_contain_text("sdpa-efficient")
    variants.locator(".token", has_text="sdpa-efficient").locator(".token-remove").click()
    expect(variants).not_to_contain_text("sdpa-efficient")
    variants.locator("input").click()
    page.get_by_role("option", name="sdpa-auto", exact=True).click()
    page.keyboard.press("Escape")
    expect(variants).to_contain_text("sdpa-auto")
    picked = ["naive", "naive-inplace", "sdpa-math", "sdpa-flash", "sdpa-cudnn", "sdpa-auto"]

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
