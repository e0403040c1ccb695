"""The whole page in a real browser: one font family and no missing glyph, downloads disabled
until a run, and a reload while an earlier run finishes (tests/page/browser.py: the shared
part).
"""

from __future__ import annotations

import re
import threading

import pytest

import app
from attention import VARIANTS
from tests.page.browser import (  # the browser, the served app and the helpers, shared
    TIMEOUT_MS,
    open_page,
    screenshot_path,
    sync_api,
)

pytestmark = pytest.mark.browser


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


@pytest.mark.parametrize(("name", "typed"), [("batch", "-3"), ("seq_len", "100000")])
def test_a_typed_value_out_of_range_is_said_once_and_nothing_runs(
    browser, url, monkeypatch, capfd, tmp_path, name, typed
):
    """Issue 42, point 6: batch -3 or S 100000 typed into the slider's box, then Profile: the
    box was clamped as it lost focus, the run went on with B=1 or S=4096, and each keystroke's
    SDPA check logged a Gradio traceback. Now the box keeps what was typed, the backend refuses
    it by name in one message, no run starts, and nothing is logged."""
    from profiling.page import profile_tab
    from profiling.workload.spec import page_ranges

    ran = []
    monkeypatch.setattr(profile_tab, "profile_on_gpu", lambda *a, **k: ran.append(a))
    low, high, _ = page_ranges(app.DEVICE)[name]
    page = open_page(browser, url)
    try:
        box = page.locator(f"#{name} input[type=number]")
        box.fill(typed)
        page.click("#profile-button")
        toast = page.locator(".toast-body")
        said = f"{name} must be between {low} and {high} on this machine, got {typed}"
        sync_api.expect(toast).to_contain_text(said)
        sync_api.expect(page.locator("#summary")).to_contain_text("The last run failed")
        page.wait_for_timeout(1000)  # a second toast, had there been one, would be up by now
        sync_api.expect(toast).to_have_count(1)
        sync_api.expect(box).to_have_value(typed)  # not clamped into range
        page.screenshot(path=str(screenshot_path(f"typed-{name}-out-of-range.png", tmp_path)))
    finally:
        page.context.close()
    assert ran == []
    logged = capfd.readouterr()
    assert "Traceback" not in logged.err + logged.out
