"""Tables as text: aligned for a terminal, or GitHub-flavoured Markdown for docs and zips.

Numbers print with three significant digits (scientific when tiny or huge), the same in the
CLI, the Compare and Sweep zips and the benchmarks' reports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

# C0 and C1 controls and the Unicode line and paragraph separators: a name read from a trace
# that holds one would end a printed line or table row early, or drive the terminal (ESC)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """`text` with each control character written as its escape (a tab as \\t, ESC as
    \\x1b): one line whatever a trace's names hold."""
    return CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def count_text(value: float) -> str:
    """A count per step: `1,428` when whole, `2.50` when the steps differ."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def format_cell(value: Any, digits: int = 3) -> str:
    """One number as the tables print it: 3 significant digits, scientific when tiny or huge;
    text with its control characters escaped."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, float):
        if value != 0 and (abs(value) < 10 ** -(digits - 1) or abs(value) >= 1e7):
            return f"{value:.{digits - 1}e}"
        return f"{value:,.{digits}g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def text_table(table: pd.DataFrame, max_width: int = 60) -> str:
    """Aligned plain text for a terminal: numbers formatted, long text cut."""
    shown = table.map(lambda value: cut(format_cell(value), max_width))
    return shown.to_string(index=False)


def markdown(table: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table (pandas' to_markdown needs tabulate; this does not)."""

    def escaped(text: str) -> str:  # a bare | or newline would end the cell or the row
        return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")

    def cell(value: Any) -> str:
        return escaped(format_cell(value, digits))

    head = "| " + " | ".join(escaped(str(column)) for column in table.columns) + " |"
    rule = "|" + "|".join("---" for _ in table.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"


def cut(text: str, width: int) -> str:
    """`text`, ending in … when it is longer than `width` characters."""
    return text if len(text) <= width else text[: width - 1] + "…"


def shape_text(shape: Mapping[str, Any]) -> str:
    """`B8 H16 S1024 D64 bfloat16 causal`, without S when the shape has no seq_len (a sweep)."""
    length = f" S{shape['seq_len']}" if "seq_len" in shape else ""
    mask = "causal" if shape["causal"] else "full"
    mode = "" if shape.get("mode", "forward") == "forward" else f" {shape['mode']}"
    heads = f"H{shape['heads']}" + (f"/KV{shape['kv_heads']}" if shape.get("kv_heads") else "")
    queries = f" Q{shape['q_len']}" if shape.get("q_len") else ""
    window = f" window {shape['window']}" if shape.get("window") else ""
    return (
        f"B{shape['batch']} {heads}{queries}{length} D{shape['head_dim']} {shape['dtype']} "
        f"{mask}{window}{mode}"
    )


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """'1 ProfilerStep', '3 ProfilerSteps', '1 attn_fwd span': a count with its noun agreeing
    (`plural` where adding an s is wrong)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
