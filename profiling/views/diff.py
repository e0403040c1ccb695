"""What the Diff tab shows: a headline read off the two delta tables, what each side was
counted over, and the tables themselves, for two uploads or two runs of the last Compare.

Pure functions (no gradio). The labels and the picks are checked here; the uploads in
profiling.views.uploads.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from profiling.analysis.diff import as_trace, diff, labelled, structural_weight
from profiling.analysis.diff_phases import phase_table
from profiling.analysis.role_views import role_diff, role_diff_view, role_lines
from profiling.trace.device import device_line
from profiling.trace.events import TraceError
from profiling.trace.model import Trace
from profiling.user_values import LABEL_PUNCTUATION, ConfigError, plain_label, show
from profiling.views.shared import clip
from profiling.views.uploads import load_upload

MAX_LABEL = 32  # characters of a Diff label (shown in column headers)
# One per column of diff.KERNEL_DIFF_COLUMNS and OPERATOR_DIFF_COLUMNS (spread and change last)
KERNEL_DIFF_TYPES = ["str", "str", "str", *["number"] * 6, "str", "number", "str"]
OPERATOR_DIFF_TYPES = ["str", "str", *["number"] * 11, "str"]


ROLE_LINES = 4  # sentences about roles only one side has, in the headline


@dataclass
class DiffPage:
    headline: str  # plain text, as /diff returns it; the page shows headline_markdown() of it
    kernels: pd.DataFrame
    operators: pd.DataFrame
    roles: pd.DataFrame | None = None  # A and B aligned by role in attention


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
    if not plain_label(text):
        raise ConfigError(
            f"label {show(text)} may use letters and digits (any script), spaces and "
            f"{LABEL_PUNCTUATION.strip()} only"
        )
    return text


_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|~$])")
_MD_LINE_START = re.compile(r"^(\s*)([-+#>]|\d+[.)])", re.MULTILINE)


def escape_markdown(text: str) -> str:
    """Text from a trace or a caller, shown in a Markdown component as it is: HTML escaped,
    and the characters that make emphasis, code, links, tables or maths backslash-escaped (a
    kernel named `*mm*` or `[x](http://…)` must not become italics or a link)."""
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), text)


NO_KERNELS = (
    "No kernel table: neither trace holds GPU work (CPU runs), so the operator table below is "
    "the whole comparison."
)


def result_view(headline: str | None, kernels: pd.DataFrame | None) -> tuple[str, bool, str]:
    """What the page shows of a Diff's outputs: the plain headline as Markdown (names from an
    uploaded trace escaped, so they read as text), whether the kernel table is shown, and the
    line saying why not (a table of headers only looks like something went missing)."""
    if not headline:  # no Diff yet, or it failed: the page as it started
        return "", True, ""
    if kernels is not None and len(kernels):
        return escape_markdown(headline), True, ""
    return escape_markdown(headline), False, NO_KERNELS


def count_text(n: float) -> str:
    """A count per window: whole when it is, else to 0.01."""
    return f"{n:,.0f}" if abs(n - round(n)) < 1e-9 else f"{n:,.2f}"


def signed_us(us: float) -> str:
    """A change in µs with its sign (± for none)."""
    sign = "+" if us > 0 else "−" if us < 0 else "±"
    return f"{sign}{abs(us):,.1f} µs"


def diff_headline(kernels: pd.DataFrame, operators: pd.DataFrame) -> str:
    """One line read off the tables, in plain text: what B runs more or fewer times than A and
    what that costs first (a change in what the runs do), then the largest change in time that
    lies beyond the runs' step-to-step spread; a change within that spread is called noise.

    GPU work when either trace has any, else CPU operators (a CPU run has no kernels), read
    by self time there (operator totals nest, as aten::linear holds aten::mm).
    """
    la, lb = kernels.attrs.get("labels", operators.attrs.get("labels", ("A", "B")))
    ua, ub = kernels.attrs.get("units", ("per forward", "per forward"))
    per = ua if ua == ub else "per window"  # which windows, and a warning: diff_scopes
    gpu = not kernels.empty
    table, key = (kernels, "kernel") if gpu else (operators, "operator")
    if table.empty:
        return "Nothing to compare: neither trace holds GPU work or CPU operators."
    read = _Reading(table, key, gpu)
    counted = table[table["change"] == "count"]
    totals = _totals(kernels, operators, gpu)
    if counted.empty:
        return _same_calls(read, (la, lb), per, totals)
    weights = structural_weight(counted, "total_us" if gpu else "self_us")
    top = counted.iloc[int(weights.argmax())]  # the first of equals, in table order
    word = "more" if top["delta_count"] > 0 else "fewer"
    change = f"{count_text(abs(top['delta_count']))} {word} {clip(top[key], 60)}"
    if len(counted) == 1:
        line = f"{lb} has {change} {per} ({read.moved(top)}); {read.items}: {totals}."
    else:
        delta = table["count_b"].sum() - table["count_a"].sum()
        if abs(delta) < 1e-9:
            lead = f"{lb} runs as many {read.items} {per} as {la}"
        else:
            many = read.items if abs(delta) != 1 else read.noun
            lead = f"{lb} runs {count_text(abs(delta))} {'more' if delta > 0 else 'fewer'} {many} "
            lead += f"{per} than {la}"
        line = f"{lead} ({totals}); the largest change: {change} ({read.moved(top)})."
    return line + read.time_change(top, 2 * float(weights.max()))


@dataclass
class _Reading:
    """How one table is read for the headline: its name column, the time that counts (total
    for GPU work, self for CPU operators) and that time's spread."""

    table: pd.DataFrame
    key: str
    gpu: bool

    @property
    def noun(self) -> str:
        return "GPU operation" if self.gpu else "operator call"  # a kernel, memcpy or memset

    @property
    def items(self) -> str:
        return self.noun + "s"

    def delta(self, row: pd.Series) -> float:
        return float(row["delta_us"] if self.gpu else row["delta_self_us"])

    def noise(self, row: pd.Series) -> bool:
        """The row's change in time lies within its spread (unknown spread: not noise)."""
        return bool(abs(self.delta(row)) <= row["spread_us" if self.gpu else "spread_self_us"])

    def moved(self, row: pd.Series) -> str:
        text = signed_us(self.delta(row)) if self.gpu else f"self {signed_us(self.delta(row))}"
        return text + (", within noise" if self.noise(row) else "")

    def largest(self, beyond_noise: bool) -> pd.Series | None:
        """The row whose time moved most (of those beyond their spread, if asked)."""
        rows = [row for _, row in self.table.iterrows() if not (beyond_noise and self.noise(row))]
        return max(rows, key=lambda row: abs(self.delta(row)), default=None)

    def time_change(self, named: pd.Series, outweighs: float) -> str:
        """The largest change in time beyond noise when it is not the change named already and
        is more than `outweighs` (a GEMM 450 µs slower outweighs 3 more fill_ calls); and the
        largest change within noise when that is larger still, so a big number in the table
        is not taken for news."""
        what = "time" if self.gpu else "self time"
        text, said = "", max(outweighs, abs(self.delta(named)) if not self.noise(named) else 0)
        real = self.largest(beyond_noise=True)
        if real is not None and real[self.key] != named[self.key] and abs(self.delta(real)) > said:
            text = f" The largest change in {what}: {clip(real[self.key], 60)} "
            text += f"({signed_us(self.delta(real))})."
            said = abs(self.delta(real))
        loud = self.largest(beyond_noise=False)
        if loud is not None and self.noise(loud) and abs(self.delta(loud)) > max(said, 0.05):
            text += (
                f" {clip(loud[self.key], 60)}'s {signed_us(self.delta(loud))} lies within the "
                "runs' step-to-step spread: noise."
            )
        return text


def _same_calls(read: _Reading, labels: tuple[str, str], per: str, totals: str) -> str:
    """The headline when both run the same names the same number of times: only time moved."""
    la, lb = labels
    loud = read.largest(beyond_noise=False)
    if loud is None or abs(read.delta(loud)) < 0.05:
        return f"{lb} and {la} run the same {read.items} {per}, the same number of times."
    lead = f"{lb} runs the same {read.items} as {la} {per} ({totals})"
    real = read.largest(beyond_noise=True)
    if real is None:
        return f"{lead}; every change in time lies within the runs' step-to-step spread: noise."
    line = f"{lead}; the largest change is {clip(real[read.key], 60)} ({read.moved(real)})."
    return line + read.time_change(real, abs(read.delta(real)))


def _totals(kernels: pd.DataFrame, operators: pd.DataFrame, gpu: bool) -> str:
    """Both sides' counts and times: GPU time, else CPU self time (operator totals nest, as
    aten::linear holds aten::mm; self times do not); marked when within the sums' spread."""
    table, measure = (kernels, "total_us") if gpu else (operators, "self_us")
    na, nb = table["count_a"].sum(), table["count_b"].sum()
    ta, tb = table[f"{measure}_a"].sum(), table[f"{measure}_b"].sum()
    spread = table.attrs.get("sum_spread", {}).get(measure, float("nan"))
    noise = ", within noise" if abs(tb - ta) <= spread else ""
    times = f"{ta:,.1f} → {tb:,.1f} µs, {signed_us(tb - ta)}{noise}"
    counts = f"{count_text(na)} → {count_text(nb)}"
    if gpu:
        return f"{counts}, {times}"
    return f"{counts}, self {times}; no GPU work in either trace"


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
    lone = [label for label, n in zip((la, lb), kernels.attrs["windows"], strict=True) if n < 2]
    if lone:
        verb = "has" if len(lone) == 1 else "have"
        text += (
            f" No step-to-step spread: {' and '.join(lone)} {verb} fewer than two windows, so "
            "no change in time can be called noise."
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
    """Two traces → headline and the two delta tables (columns named after the labels); two
    training traces also get a line per phase (attn_fwd, attn_bwd), aligned by name."""
    if label_a == label_b:
        raise ConfigError(f"the two labels must differ (both are {show(label_a)})")
    a, b = as_trace(a), as_trace(b)
    kernels, operators = diff(a, b, label_a, label_b)
    phases = phase_table(a, b)
    by_phase = "" if phases is None else "\n".join(phase_lines(phases, (label_a, label_b))) + "\n\n"
    roles = role_diff(a, b)
    units = [f" {unit}" if unit else "" for unit in kernels.attrs.get("units", ("", ""))]
    lines = role_lines(roles, (label_a, label_b), units)[:ROLE_LINES]
    by_role = "By role: " + "; ".join(lines) + ".\n\n" if lines else ""
    headline = f"{diff_headline(kernels, operators)}\n\n{by_phase}{by_role}{diff_scopes(kernels)}"
    devices = device_line(a.device_properties, b.device_properties, (label_a, label_b))
    headline = headline if devices is None else f"{devices}\n\n{headline}"
    return DiffPage(
        headline=headline,
        kernels=labelled(_rounded(kernels)),
        operators=labelled(_rounded(operators)),
        roles=role_diff_view(roles, label_a, label_b),
    )


def phase_lines(table: pd.DataFrame, labels: tuple[str, str]) -> list[str]:
    """One line per phase for the Diff's headline, in the tables' B − A sense (a CPU-only
    trace's phases have no GPU µs: their CPU µs are compared instead)."""
    label_a, label_b = labels
    lines = []
    for row in table.itertuples(index=False):
        if pd.isna(row.steps_a) or pd.isna(row.steps_b):
            where = label_a if pd.isna(row.steps_b) else label_b
            lines.append(f"{row.phase}: only in {where}")
            continue
        if pd.isna(row.gpu_us_a) or pd.isna(row.gpu_us_b):
            lines.append(
                f"{row.phase}: {row.cpu_us_a:,.1f} → {row.cpu_us_b:,.1f} CPU µs per step "
                f"({signed_us(row.delta_cpu_us)}; no GPU work) ({label_a} → {label_b})"
            )
            continue
        lines.append(
            f"{row.phase}: {row.gpu_us_a:,.1f} → {row.gpu_us_b:,.1f} GPU µs per step "
            f"({signed_us(row.delta_gpu_us)}), {count_text(row.kernels_a)} → "
            f"{count_text(row.kernels_b)} kernels ({label_a} → {label_b})"
        )
    return lines


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
