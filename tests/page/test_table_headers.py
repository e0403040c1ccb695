"""Before any run every table of the page shows a header of its own, never Gradio's
placeholder columns "1 2 3" (issue 42, item 8)."""

from __future__ import annotations

import gradio as gr

import app
from profiling.page.controls import NOTHING_YET


def test_no_table_starts_with_placeholder_headers():
    tables = [block for block in app.demo.blocks.values() if isinstance(block, gr.Dataframe)]
    assert len(tables) > 10  # every tab's tables
    for table in tables:
        headers = table.get_config()["value"]["headers"]
        assert headers != ["1", "2", "3"], table.elem_id
        assert all(header.strip() for header in headers), (table.elem_id, headers)
    assert any(table.get_config()["value"]["headers"] == [NOTHING_YET] for table in tables)
