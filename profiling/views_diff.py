"""What the Diff tab shows: a headline read off the two delta tables, what each side was
counted over, and the tables themselves, for two uploads or two runs of the last Compare.

Pure functions (no gradio). The labels and the picks are checked here; the uploads in
profiling.uploads.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.diff import diff, labelled
from profiling.trace import Trace
from profiling.trace_events import TraceError
from profiling.uploads import load_upload
from profiling.views_shared import clip
from profiling.workload import ConfigError, show

MAX_LABEL = 32  # characters of a Diff label (shown in column headers)
KERNEL_DIFF_TYPES = ["str", "str", "str", *["number"] * 6, "str"]
OPERATOR_DIFF_TYPES = ["str", "str", *["number"] * 9]
# Shares of the page width: the headers carry the labels, so numbers need room to show them.
KERNEL_DIFF_WIDTHS = ["22%", "8%", "8%", *["7%"] * 6, "20%"]
OPERATOR_DIFF_WIDTHS = ["20%", "8%", *["8%"] * 9]
ALLOWED_LABEL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.+()/:@")


@dataclass
class DiffPage:
    headline: str
    kernels: pd.DataFrame
    operators: pd.DataFrame


def diff_label(raw: Any, default: str) -> str:
    """A label for a Diff column header: short, plain characters, or the default when empty."""
    if raw is None:
        return default
    if not isinstance(raw, str):
        raise ConfigError(f"a label must be text, got {show(raw)}")
    text = raw.strip()
    if not text:
        return default
    if len(text) > MAX_LABEL:
        raise ConfigError(f"a label may have at most {MAX_LABEL} characters, got {len(text)}")
    if not set(text) <= ALLOWED_LABEL:
        raise ConfigError(f"label {show(text)} may use letters, digits, spaces and _-.+()/:@ only")
    return text


_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|~$])")
_MD_LINE_START = re.compile(r"^(\s*)([-+#>]|\d+[.)])", re.MULTILINE)


def escape_markdown(text: str) -> str:
    """Text from a trace or a caller, shown in a Markdown component as it is: HTML escaped,
    and the characters that make emphasis, code, links, tables or maths backslash-escaped (a
    kernel named `*mm*` or `[x](http://…)` must not become italics or a link)."""
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


def count_text(n: float) -> str:
    """A count per window: whole when it is, else to 0.01."""
    return f"{n:,.0f}" if abs(n - round(n)) < 1e-9 else f"{n:,.2f}"


def signed_us(us: float) -> str:
    """A change in µs with its sign (± for none)."""
    sign = "+" if us > 0 else "−" if us < 0 else "±"
    return f"{sign}{abs(us):,.1f} µs"


def diff_headline(kernels: pd.DataFrame, operators: pd.DataFrame) -> str:
    """One line read off the top rows: what B has more or fewer of than A, and what it costs.

    GPU work when either trace has any, else CPU operators (a CPU run has no kernels). One
    changed name is the whole story ("B has 1 fewer Memcpy DtoD per forward"); several lead
    with the totals and name the largest change.
    """
    la, lb = kernels.attrs.get("labels", operators.attrs.get("labels", ("A", "B")))
    ua, ub = kernels.attrs.get("units", ("per forward", "per forward"))
    per = ua if ua == ub else "per window"  # which windows, and a warning: diff_scopes
    gpu = not kernels.empty
    table, key = (kernels, "kernel") if gpu else (operators, "operator")
    noun = "GPU operation" if gpu else "operator call"  # a kernel, memcpy or memset on a GPU
    items = noun + "s"
    if table.empty:
        return "Nothing to compare: neither trace holds GPU work or CPU operators."
    changed = table[table["delta_count"].abs() > 1e-9]
    measure = "delta_us" if gpu else "delta_self_us"  # operator totals nest, self times do not

    def moved(row: pd.Series) -> str:
        return signed_us(row[measure]) if gpu else f"self {signed_us(row[measure])}"

    na, nb = table["count_a"].sum(), table["count_b"].sum()
    totals = _totals(kernels, operators, gpu, f"{count_text(na)} → {count_text(nb)}")
    if changed.empty:
        top = table.loc[table[measure].abs().idxmax()]
        if abs(top[measure]) < 0.05:
            return f"{lb} and {la} run the same {items} {per}, the same number of times."
        return (
            f"{lb} runs the same {items} as {la} {per} ({totals}); the largest change is "
            f"{clip(top[key], 60)} ({moved(top)})."
        )
    top = changed.loc[changed[measure].abs().idxmax()]
    word = "more" if top["delta_count"] > 0 else "fewer"
    change = f"{count_text(abs(top['delta_count']))} {word} {clip(top[key], 60)}"
    if len(changed) == 1:
        line = f"{lb} has {change} {per} ({moved(top)}); {items}: {totals}."
    else:
        delta = nb - na
        if abs(delta) < 1e-9:
            lead = f"{lb} runs as many {items} {per} as {la}"
        else:
            many = items if abs(delta) != 1 else noun
            lead = f"{lb} runs {count_text(abs(delta))} {'more' if delta > 0 else 'fewer'} {many} "
            lead += f"{per} than {la}"
        line = f"{lead} ({totals}); the largest change: {change} ({moved(top)})."
    return line + _time_change(table, key, top, measure)


def _totals(kernels: pd.DataFrame, operators: pd.DataFrame, gpu: bool, counts: str) -> str:
    """Both sides' counts and times: GPU time, else CPU self time (operator totals nest, as
    aten::linear holds aten::mm; self times do not)."""
    if gpu:
        ta, tb = kernels["total_us_a"].sum(), kernels["total_us_b"].sum()
        return f"{counts}, {ta:,.1f} → {tb:,.1f} µs, {signed_us(tb - ta)}"
    ta, tb = operators["self_us_a"].sum(), operators["self_us_b"].sum()
    times = f"self {ta:,.1f} → {tb:,.1f} µs, {signed_us(tb - ta)}"
    return f"{counts}, {times}; no GPU work in either trace"


def _time_change(table: pd.DataFrame, key: str, counted: pd.Series, measure: str) -> str:
    """The name whose time (`measure`: total for GPU work, self for CPU operators) moved most,
    when that is not the count change named already (a GEMM 450 µs slower outweighs 3 more
    fill_ calls)."""
    top = table.loc[table[measure].abs().idxmax()]
    if top[key] == counted[key] or abs(top[measure]) <= 2 * abs(counted[measure]):
        return ""
    what = "time" if measure == "delta_us" else "self time"
    return f" The largest change in {what}: {clip(top[key], 60)} ({signed_us(top[measure])})."


def diff_scopes(kernels: pd.DataFrame) -> str:
    """What each side was counted over; a warning when the two differ."""
    (la, lb), (sa, sb) = kernels.attrs["labels"], kernels.attrs["scopes"]
    ua, ub = kernels.attrs["units"]
    text = f"Counted over: {la}, {sa}; {lb}, {sb}."
    if ua != ub:
        text += (
            f" ⚠ The two are counted over different windows ({ua} against {ub}), so their "
            "figures do not compare like for like: profile both the same way."
        )
    return text


def _rounded(table: pd.DataFrame) -> pd.DataFrame:
    out = table.copy()
    for c in out.columns:
        if c.startswith(("count", "delta_count")):
            out[c] = out[c].astype(float).round(2)
        elif c.endswith("_us") or "_us_" in c:
            out[c] = out[c].astype(float).round(1)
    return out


def diff_page(a: Trace | Path, b: Trace | Path, label_a: str, label_b: str) -> DiffPage:
    """Two traces → headline and the two delta tables (columns named after the labels)."""
    if label_a == label_b:
        raise ConfigError(f"the two labels must differ (both are {show(label_a)})")
    kernels, operators = diff(a, b, label_a, label_b)
    return DiffPage(
        # Markdown on the page: names from an uploaded trace are escaped so they read as text
        headline=escape_markdown(f"{diff_headline(kernels, operators)}\n\n{diff_scopes(kernels)}"),
        kernels=labelled(_rounded(kernels)),
        operators=labelled(_rounded(operators)),
    )


def diff_upload_page(trace_a: Any, trace_b: Any, label_a: Any, label_b: Any) -> DiffPage:
    """Two uploaded traces, each bounded like an Analyse upload."""
    la, lb = diff_label(label_a, "A"), diff_label(label_b, "B")
    return diff_page(load_upload(trace_a, "A"), load_upload(trace_b, "B"), la, lb)


def diff_runs_page(run_a: Any, run_b: Any, traces: dict[str, str] | None) -> DiffPage:
    """Two runs of this session's last Compare; the paths come from server-side state only."""
    if not traces:
        raise ConfigError("run a Compare first: the variants that ran can then be diffed here")
    for pick in (run_a, run_b):
        if not isinstance(pick, str) or pick not in traces:
            raise ConfigError(
                f"{show(pick)} is not a run of the last Compare; pick one of: {', '.join(traces)}"
            )
    if run_a == run_b:
        raise ConfigError("pick two different runs")
    paths = [Path(traces[run_a]), Path(traces[run_b])]
    if not all(p.exists() for p in paths):
        raise TraceError(
            "the traces of that Compare have been cleaned up (the app keeps the last few "
            "jobs); run Compare again"
        )
    return diff_page(paths[0], paths[1], run_a, run_b)


def diff_picks(traces: dict[str, str] | None) -> tuple[list[str], str | None, str | None]:
    """Choices for the two compare-set dropdowns and a sensible first pair."""
    names = list(traces or {})
    first = names[0] if names else None
    second = names[1] if len(names) > 1 else first
    return names, first, second
