"""The History tab in a real browser (issue 34): a run's permalink opens it rebuilt from the
store, a click on a row picks a run, two runs diff, several compare, and a trend draws with a
regression flagged. The runs are made first through the Profile handler (real CPU runs); seven
far faster copies of the first one's figures stand for earlier runs, so the next is a regression.

Screenshot: docs/screenshot-history-cpu.png with ATTNPROF_SCREENSHOTS=docs (see test_browser).
"""

from __future__ import annotations

import copy

import pytest

from tests.page.browser import (  # the browser, the served app and the helpers, shared
    TIMEOUT_MS,
    full_page_shot,
    open_page,
    sync_api,
)

pytestmark = pytest.mark.browser
# a shape no other test profiles: the store is shared by the session, and other tests' runs of
# the same workload would join the trend (in CI two of them were flagged before this one)
SMALL = dict(seq_len=128, dtype="float32", batch=1, heads=3, head_dim=16, causal=True)


def _faster_copy(summary: dict) -> dict:
    """A run's figures at 1 ns per step: an earlier run of the same workload that any real run
    is slower than (CPU times on this shared machine move 100× between a process's first run
    and its next: the rule itself is tests/test_store.py's)."""
    faster = copy.deepcopy(summary)
    for key in ("median", "q1", "q3"):
        faster["step_spread"]["cpu_us"][key] = 0.001
    return faster


@pytest.fixture(scope="module")
def runs():
    """(first naive run, seven faster stand-ins, second naive run, a naive-inplace run) ids.
    Seven, so the earlier runs' spread is the stand-ins' (none): with three, the first run (a
    process's first CPU run, up to 100× slower on a loaded machine) set a spread the second
    run stayed inside, and no regression was flagged."""
    from profiling.page import profile_tab
    from profiling.store import hooks
    from profiling.store.rows import RunData

    def profile(variant: str) -> dict:
        return profile_tab.profile(variant, **SMALL, progress=lambda *a, **k: None)[1]

    first = profile("naive")
    earlier = RunData("profile", "test", first["config"], "ok", summary=_faster_copy(first))
    hooks.keep([earlier] * 7)
    second, other = profile("naive"), profile("naive-inplace")
    return first["run_id"], second["run_id"], other["run_id"]


def test_history_reopens_diffs_compares_and_trends(browser, url, runs, tmp_path):
    expect = sync_api.expect
    first, second, other = runs
    page = open_page(browser, f"{url}?run={second}")  # the permalink: History, the run open
    expect(page.locator("#history-origin")).to_contain_text(second, timeout=TIMEOUT_MS)
    expect(page.locator("#history-summary")).to_contain_text("S128")
    page.wait_for_selector('#history-gantt [data-testid="plotly"] .main-svg')
    expect(page.locator("#history-operators")).to_contain_text("attn_fwd")
    expect(page.locator("#history-runs")).to_contain_text(other)

    page.fill("#history-picked textarea", "")  # a click on a row picks its run
    page.click('#history-runs [data-testid="cell-0-0"]')  # the newest run: `other`
    expect(page.locator("#history-picked textarea")).to_have_value(other)
    page.fill("#history-picked textarea", f"{first} {other}")
    page.click("#history-diff-button")
    expect(page.locator("#history-diff-headline")).to_contain_text("naive-inplace")
    page.click("#history-compare-button")
    expect(page.locator("#history-compare")).to_contain_text(first[:8])
    expect(page.locator("#history-compare")).to_contain_text("× first")

    page.fill("#history-picked textarea", second)
    page.click("#history-trend-button")
    expect(page.locator("#history-trend-note")).to_contain_text(f"Regressions: {second}")
    page.wait_for_selector('#history-trend [data-testid="plotly"] .main-svg')
    expect(page.locator("#history-trend .legend")).to_contain_text("regression")
    shot = full_page_shot(page, "screenshot-history-cpu.png", tmp_path)
    assert shot.stat().st_size > 20_000
    page.context.close()


# the History panels' red "Error" badges that are on screen (Gradio's status tracker puts one on
# each output of an event that failed)
BADGES = """() => [...document.querySelectorAll('[id^="history-"] .error')]
  .filter((e) => e.offsetParent !== null && e.textContent.trim() === 'Error')
  .map((e) => e.closest('[id^="history-"]').id)"""


def _no_badges(page) -> None:
    page.wait_for_timeout(800)  # the failure's follow-up, then the trackers settle
    assert page.evaluate(BADGES) == []


def test_history_says_what_is_wrong_once_without_badges(browser, url, runs, tmp_path):
    """Issue 42, item 2, and issue 40: a bad permalink says why in the Run panel; Open with two
    picks and Trend with two picks say "pick one run" in the toast, and no panel keeps a red
    badge (the rule's text stays readable); a hostile id is shown as text, not markup."""
    expect = sync_api.expect
    first, second, _ = runs
    page = open_page(browser, f"{url}?run=no-such-run")
    origin = page.locator("#history-origin")
    expect(origin).to_contain_text("Run not opened", timeout=TIMEOUT_MS)
    expect(origin).to_contain_text("is not in this run store (runs.sqlite)")
    expect(page.locator("#history-runs")).to_contain_text(first[:8])
    _no_badges(page)

    page.fill("#history-picked textarea", f"{first} {second}")
    page.click("#history-open-button")
    toast = page.get_by_test_id("toast-text")
    expect(toast.last).to_contain_text("pick one run to open (got 2)")
    _no_badges(page)
    page.click("#history-trend-button")
    expect(toast.last).to_contain_text("pick one run to draw its workload's trend (got 2)")
    expect(page.locator("#history-trend-note")).to_contain_text("Regression rule")
    _no_badges(page)
    shot = full_page_shot(page, "history-two-picks.png", tmp_path)

    page.fill("#history-picked textarea", "<b>bold</b><img/src=x>")
    page.click("#history-open-button")
    expect(toast.last).to_contain_text("<b>bold</b><img/src=x>")  # the characters, as text
    assert page.locator("[data-testid='toast-text'] b, [data-testid='toast-text'] img").count() == 0
    _no_badges(page)
    assert shot.stat().st_size > 20_000
    page.context.close()
