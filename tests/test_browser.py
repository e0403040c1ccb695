"""The page in a real browser: Playwright drives Debian's Chromium through one profile run."""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "screenshot-cpu.png"
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
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    assert SCREENSHOT.stat().st_size > 20_000
