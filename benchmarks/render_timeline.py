"""Memory timelines side by side as a PNG for docs/, drawn by Chromium (as render_gantt.py).

    python benchmarks/render_timeline.py OUT.png LABEL=SNAPSHOT.pickle[.gz] ... [--title TEXT]

Each snapshot is one the runner recorded (`<tag>.memory.pickle`, or the gzipped fixtures in
tests/fixtures); each panel is the page's figure (views_timing.memory_figure), on one MiB axis.
The score size that names scores and probabilities is the post's shape's (B8 H16 S1024).
"""

from __future__ import annotations

import argparse
import gzip
import pickle
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from benchmarks.render_gantt import CHROMIUM, PAGE
from profiling.analysis import memory_timeline
from profiling.views.timing import memory_figure

POST_SCORES = 8 * 16 * 1024 * 1024


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return pickle.load(fh)  # our own H200 snapshots


def figure(panels: list[tuple[str, Path]], title: str):
    combined = make_subplots(rows=1, cols=len(panels), shared_yaxes=True,
                             subplot_titles=[label for label, _ in panels])  # fmt: skip
    shown: set[str] = set()
    for column, (_, path) in enumerate(panels, start=1):
        timeline = memory_timeline.build(load(path), POST_SCORES)
        for trace in memory_figure(timeline).data:
            trace.showlegend = trace.name not in shown
            shown.add(trace.name)
            combined.add_trace(trace, row=1, col=column)
        combined.update_xaxes(title_text=timeline.x_label, row=1, col=column)
    combined.update_yaxes(title_text="MiB in use", row=1, col=1)
    combined.update_layout(title=title, height=460, legend={"orientation": "h", "y": -0.2})
    return combined


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("panels", nargs="+", help="LABEL=PATH")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    panels = [(text.split("=", 1)[0], Path(text.split("=", 1)[1])) for text in args.panels]
    html = args.out.with_suffix(".html")
    page_text = PAGE.format(js=get_plotlyjs(), figure=figure(panels, args.title).to_json())
    html.write_text(page_text, encoding="utf-8")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(html.resolve().as_uri())
        page.wait_for_selector("body[data-drawn=yes]")
        page.locator("#plot").screenshot(path=str(args.out))
        browser.close()
    html.unlink()
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
