"""The Analyse and Diff tabs in a real browser: an uploaded trace whose names are markup (shown as
text, nothing runs), the Gantt of a 10⁵-event trace, CPU traces without a kernel table
(tests/page/browser.py: the shared part).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from benchmarks import gen_trace
from tests.page.browser import (  # the browser, the served app and the helpers, shared
    HEADER_LINES,
    TIMEOUT_MS,
    analyse_upload,
    assert_headers_fit,
    full_page_shot,
    open_page,
    screenshot_path,
    sync_api,
)
from tests.page.test_hardening import IMG, SCRIPT
from tests.page.test_hardening_files import xss_trace

pytestmark = pytest.mark.browser


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
        assert_headers_fit(page)
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
        expect(headline).to_contain_text("no GPU work in either trace", timeout=TIMEOUT_MS)
        expect(page.locator("#diff-no-kernels")).to_contain_text("No kernel table")
        expect(page.locator("#kernel-delta")).to_be_hidden()
        expect(page.locator("#operator-delta")).to_contain_text("aten::masked_fill")
        expect(page.locator("#operator-delta")).to_contain_text("count")  # the change column
        text = headline.inner_text()
        assert "\\" not in text and "in_place" in text  # escapes render, none show
        assert headline.locator("em, strong, a").count() == 0
        shot = full_page_shot(page, "screenshot-diff-cpu.png", tmp_path)

        inplace = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"
        diff_uploads(page, NAIVE, inplace, "naive", "naive_inplace")
        expect(headline).to_contain_text(
            "naive_inplace has 1 fewer Memcpy DtoD per forward", timeout=TIMEOUT_MS
        )
        expect(page.locator("#kernel-delta")).to_be_visible()
        expect(page.locator("#diff-no-kernels")).to_be_hidden()
        expect(page.locator("#kernel-delta")).to_contain_text("noise")
        shot = full_page_shot(page, "screenshot-diff-h200.png", tmp_path)
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
        full_page_shot(page, "analyse-cpu-trace.png", tmp_path)

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
        full_page_shot(page, "analyse-gpu-trace.png", tmp_path)
    finally:
        page.context.close()
