"""A trace's Gantt chart as a PNG for docs/, drawn by Chromium (no kaleido here).

    python benchmarks/render_gantt.py TRACE.json.gz OUT.png [--train] [--title TEXT]

The figure is the one the page draws (`run_trace.read(...).gantt()`), written into a
standalone HTML page with plotly.js inlined (no network) and screenshotted by Playwright's
Chromium at 1400 px wide. `--train` reads the trace as a train run's (its attn_step, with
attn_fwd and attn_bwd as phases), as the page does for a run of that mode.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import sync_playwright
from plotly.offline import get_plotlyjs

from profiling.run import trace as run_trace
from profiling.vocabulary import BACKWARD, FORWARD, STEP

CHROMIUM = "/usr/bin/chromium"
PAGE = """<!doctype html><html><head><meta charset="utf-8"><script>{js}</script></head>
<body style="margin:0"><div id="plot" style="width:1400px"></div><script>
const figure = {figure};
figure.layout.width = 1400;
Plotly.newPlot("plot", figure.data, figure.layout, {{staticPlot: true}})
  .then(() => document.body.setAttribute("data-drawn", "yes"));
</script></body></html>"""


def render(trace: Path, out: Path, train: bool, title: str | None) -> None:
    phases = (FORWARD, BACKWARD) if train else (FORWARD,)
    read = run_trace.read(trace, STEP if train else FORWARD, phases)
    png(read.gantt(title or trace.name).to_json(), out)


def png(figure: str, out: Path, height: int = 900) -> None:
    """A plotly figure's JSON drawn by Chromium into a PNG, 1400 px wide."""
    with tempfile.TemporaryDirectory() as folder:
        html = Path(folder) / "gantt.html"
        html.write_text(PAGE.format(js=get_plotlyjs(), figure=figure), encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": height})
            page.goto(html.as_uri())
            page.wait_for_selector("body[data-drawn=yes]")
            page.locator("#plot").screenshot(path=str(out))
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--title")
    args = parser.parse_args()
    render(args.trace, args.out, args.train, args.title)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
