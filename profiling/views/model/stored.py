"""A stored model run (issue 43) as History shows it: the Model tab's views of its one
implementation (its row of the "which attn_implementation?" table, the step's categories,
attention per decoder layer, what ran and SDPA's reasons), rebuilt from the stored summary
(profiling.store.model_summary reads it, every field checked), and its Gantt from the kept
trace, read as an upload is (`stored_model_gantt`, the upload worker's task).

Pure and torch-free: `python -m profiling history show` prints the same tables on a laptop.
Every text from a stored row or summary is a stranger's (a store may be imported): escaped in
HTML and Markdown, and never part of a file name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd

from profiling.gantt.spec import FigureSpec, gantt_spec
from profiling.run.model.result import ModelRun
from profiling.store.model_summary import BadSummary, model_run
from profiling.trace.events import TraceError
from profiling.views.diff import escape_markdown
from profiling.views.model import table, why
from profiling.views.model.files import file_tag
from profiling.views.shared import escaped
from profiling.views.uploads import load_upload


@dataclass
class ModelPage:
    """What History's Run panel shows of a stored model run."""

    strip: str  # HTML: the implementation's figures as cards
    table: pd.DataFrame  # its row of the "which attn_implementation?" table
    categories: pd.DataFrame
    layers: pd.DataFrame
    why: str  # Markdown: what ran, and SDPA's reasons
    summary: dict[str, Any]  # the stored summary, as the API returns it
    gantt: FigureSpec | None = None


def stored_model(run: dict[str, Any]) -> ModelRun:
    """A stored model run's ModelRun (its one implementation), or a TraceError saying why
    there is none (it did not run; its summary is not one this tool writes)."""
    if not run.get("summary_json"):
        raise TraceError(f"run {run['id']} did not run ({run['status']}: {run['reason']})")
    try:
        return model_run(json.loads(run["summary_json"]))
    except (BadSummary, ValueError) as exc:
        raise TraceError(f"run {run['id']} cannot be shown: {exc}") from None


def model_title(run: dict[str, Any]) -> str:
    """The Gantt's title, as the Model tab's (gantt_spec escapes it: plotly reads tags)."""
    return f"{run['variant']}: {run['shape']}"


def stored_model_gantt(path: str, title: str) -> FigureSpec:
    """The upload worker's task: a stored model trace checked and read under an upload's
    limits, drawn as the Model tab draws it (a span per decoder layer)."""
    trace = load_upload(path, "stored")
    return gantt_spec(trace.spans, trace.lanes, title=title)


def _cards(result: ModelRun) -> list[tuple[str, str]]:
    item = result.runs[0]
    split = item.split
    cards = [("implementation", item.id), ("device", result.device_name or result.device)]
    if split is not None:
        per = "GPU" if split.on_gpu else "CPU"
        cards += [(f"step ({per}, trace)", f"{split.step_us / 1e3:,.3f} ms"),
                  ("attention", f"{100 * split.attention_share:.1f} % of the step")]  # fmt: skip
    busy, idle = table.busy_ms(item), table.idle_share(item)
    if table.host_bound(result) and busy is not None and idle is not None:
        cards += [("GPU busy (trace)", f"{busy:,.3f} ms"),
                  ("GPU idle", f"{100 * idle:.1f} % of the traced step")]  # fmt: skip
    if item.timed_ms is not None:
        cards.append(("timed step (median)", f"{item.timed_ms:,.3f} ms"))
    if item.backend:
        cards.append(("SDPA backend", item.backend))
    if item.logits_error is not None:
        cards.append(("logits error vs eager", f"{item.logits_error:.1e}"))
    if item.tokens_per_s:
        cards.append(("tokens/s", f"{item.tokens_per_s:,.0f}"))
    return cards


def strip_html(result: ModelRun) -> str:
    """The implementation's figures as the Profile strip's cards; every text escaped."""
    cards = "".join(
        f'<div class="ap-card" title="{escaped(f"{label}: {value}")}">'
        f'<div class="ap-label">{escaped(label)}</div>'
        f'<div class="ap-value">{escaped(value)}</div></div>'
        for label, value in _cards(result)
    )
    item = result.runs[0]
    ran = f"<b>ran</b> {escaped(item.ran)}" + (f" ({escaped(item.note)})" if item.note else "")
    return (
        f'<div class="ap-strip">{cards}</div><div class="ap-extra"><b>model</b> '
        f"{escaped(result.text)} · {ran}</div>"
    )


def why_markdown(text: str) -> str:
    """Text in a Markdown code block, as the Model tab shows it: the fence longer than any run
    of backticks inside, so no text (a stranger's) can close it and become markup."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def model_page(result: ModelRun, gantt: FigureSpec | None, summary: dict[str, Any]) -> ModelPage:
    """The Model views of one stored implementation."""
    return ModelPage(
        strip_html(result), table.comparison(result), table.categories(result),
        table.layers(result), why_markdown(why.text(result)), summary, gantt,
    )  # fmt: skip


def download_name(run: dict[str, Any]) -> str:
    """A stored model trace's download name, as the Model tab names it, and the start of its id
    (`sdpa_tiny_2L_B4_S64_float32_prefill_1a2b3c4d.json.gz`): letters, digits, `.`, `_`, `-`."""
    name = f"{run.get('variant')}_{file_tag(run)}_{str(run.get('id'))[:8]}"
    return f"{re.sub(r'[^A-Za-z0-9._-]+', '-', name).strip('.-')[:150] or 'model-run'}.json.gz"


def run_label(run: dict[str, Any]) -> str:
    """A stored model run in a Diff's headers: its implementation, and the start of its id."""
    return f"model {run['variant']} · {str(run['id'])[:6]}"


def shown_lines(result: ModelRun) -> list[tuple[str, pd.DataFrame]]:
    """The tables `history show` prints, titled."""
    return [
        ("which attn_implementation?", table.comparison(result)),
        ("the step, µs by category (they add up to the step)", table.categories(result)),
        ("attention per decoder layer", table.layers(result)),
    ]


def kept_markdown(ids: list[str | None], names: list[str], notes: list[str]) -> str:
    """Under a model run's verdict: each implementation's run in History (its permalink), or
    why none was kept."""
    links = [f"[{run_id}](?run={run_id}) ({escape_markdown(name)})"
             for run_id, name in zip(ids, names, strict=False) if run_id]  # fmt: skip
    parts = [f"Kept in History: {', '.join(links)}."] if links else []
    parts += [escape_markdown(note) for note in notes]
    return "\n\n" + " ".join(parts) if parts else ""
