"""The shared part of the browser tests (tests/page/test_browser*.py): Playwright drives Debian's
Chromium against the app served on a free local port; the fixtures, the skip-or-fail rule and the
screenshot folder live here.

Without Chromium or playwright a module that imports this one is skipped, unless
ATTNPROF_REQUIRE_BROWSER=1 (set by .ci/run) makes that a failure.

Screenshots go to a temporary folder, so a test run leaves the tracked files alone. To refresh
the pictures of every tab, run with `ATTNPROF_SCREENSHOTS=docs`: they are written to
docs/screenshot-cpu.png (Profile), docs/screenshot-compare-cpu.png, docs/screenshot-diff-cpu.png,
docs/screenshot-diff-h200.png, docs/screenshot-sweep-cpu.png and docs/screenshot-analyze-xss.png
(another value of the variable names a folder to write them to instead). The checks' own
pictures (downloads-*, fonts-and-labels, earlier-run-finishing, analyse-cpu-trace) land there
too; docs/ keeps only the six.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
DOCS = Path(__file__).resolve().parents[2] / "docs"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
TIMEOUT_MS = 90_000

REQUIRED = os.environ.get("ATTNPROF_REQUIRE_BROWSER", "") not in ("", "0")  # .ci/run sets it


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


def open_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    return page


def screenshot_path(name: str, tmp_path: Path) -> Path:
    """docs/<name> with ATTNPROF_SCREENSHOTS=docs, <folder>/<name> for another value, else tmp."""
    where = os.environ.get("ATTNPROF_SCREENSHOTS", "")
    folder = DOCS if where == "docs" else Path(where) if where else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def full_page_shot(page, name: str, tmp_path: Path) -> Path:
    """The whole page as `name` (screenshot_path), the pointer moved off it and plotly's
    transitions let finish first; then every table on it is checked for a header narrower
    than its longest word (assert_headers_fit: a picture of every tab checks them all)."""
    page.mouse.move(0, 0)
    page.wait_for_timeout(500)
    shot = screenshot_path(name, tmp_path)
    page.screenshot(path=str(shot), full_page=True)
    assert_headers_fit(page)
    return shot


# per header cell of a table: its text lines and its words (a word broken across lines: more lines)
# the table's selector is a required argument: Playwright passes null (not undefined) when the
# argument is left out, so a JS default would never apply and the check would find no header
HEADER_LINES = """(table) =>
  [...document.querySelectorAll(table + ' th[role=columnheader]')]
  .map(th => {
    const span = th.querySelector('span.header');
    const line = parseFloat(getComputedStyle(span).lineHeight);
    const lines = Math.round(span.getBoundingClientRect().height / line);
    return {name: th.title, lines: lines, words: th.title.split(' ').length};
  })"""


# Every visible header cell of every table on the page whose longest word is wider than the
# room the cell gives its text (a word broken across lines: `G/P/U/µ/s`, `St/eps`; a line may
# end after a hyphen, as "naive-" / "inplace"). The words are measured on a canvas in the
# header's own font; the room is the text's box, or the cell's content box where the text sits
# inline.
NARROW_HEADERS = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const narrow = [];
  for (const th of document.querySelectorAll('table th')) {
    if (!th.checkVisibility()) continue;
    const text = th.querySelector('span.header') || th;
    const words = (text.textContent || '').trim().split(/\\s+|(?<=-)/).filter(Boolean);
    if (!words.length) continue;
    const style = getComputedStyle(text);
    ctx.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const longest = Math.max(...words.map(word => ctx.measureText(word).width));
    const cell = getComputedStyle(th);
    const room = text === th || style.display === 'inline'
      ? th.clientWidth - parseFloat(cell.paddingLeft) - parseFloat(cell.paddingRight)
      : text.getBoundingClientRect().width;
    if (longest > room + 1) {
      const table = th.closest('[id]');
      narrow.push({table: table ? table.id : '?', header: words.join(' '),
                   longest: Math.round(longest), room: Math.round(room)});
    }
  }
  return narrow;
}"""


# Every visible note written on a plotly chart (an annotation: the roofline's caption) that
# runs past its chart's edge, where plotly cuts it off.
CLIPPED_NOTES = """() => [...document.querySelectorAll('.js-plotly-plot g.annotation')]
  .filter(note => note.checkVisibility() && note.textContent.trim())
  .map(note => {
    const chart = note.closest('.js-plotly-plot').querySelector('.main-svg');
    const box = note.getBoundingClientRect(), edge = chart.getBoundingClientRect();
    return {text: note.textContent.slice(0, 60), left: box.left - edge.left,
            over: Math.round(box.right - edge.right)};
  })
  .filter(note => note.over > 1 || note.left < -1)"""


def assert_headers_fit(page) -> None:
    """No visible table's header cell is narrower than its longest word, and no chart's note
    runs off its edge (issue 42, point 3)."""
    narrow = page.evaluate(NARROW_HEADERS)
    assert narrow == [], narrow
    clipped = page.evaluate(CLIPPED_NOTES)
    assert clipped == [], clipped


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
