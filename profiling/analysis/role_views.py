"""Kernels by role across runs: Compare's variants × roles table, and Diff's alignment of two
traces role by role ("naive spends 2,984 µs masking; flash masks inside its one fused
kernel"), where aligning by kernel name finds nothing in common.

Pure data, no torch: the roles come from profiling.kernels.roles, each trace's windows from
profiling.analysis.diff (the same windows its kernel diff counts over).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from profiling.analysis.diff import windows
from profiling.analysis.summary import launched_rows, work_rows
from profiling.kernels.chains import table_spans
from profiling.kernels.roles import (
    FUSED_FORWARD,
    GRADIENTS,
    MASK,
    MATMUL,
    PV,
    QK,
    SCALE,
    SOFTMAX,
    UNKNOWN,
    KernelSpans,
    role_table,
)  # fmt: skip
from profiling.trace.model import Trace

FUSED = (FUSED_FORWARD, GRADIENTS)  # roles of kernels that hold the others' work inside
INSIDE_FUSED = (QK, PV, MATMUL, SCALE, MASK, SOFTMAX)  # what a fused kernel does in registers
ROLE_DIFF_COLUMNS = ("role", "us_a", "us_b", "delta_us", "calls_a", "calls_b", "kernels_a",
                     "kernels_b")  # fmt: skip


def role_matrix(rows: Iterable[tuple[str, pd.DataFrame | None]]) -> pd.DataFrame:
    """Variants × roles: µs per measured step in each role (a row per variant, in the order
    given; 0 where the variant has no kernel in that role; a variant without a role table,
    e.g. one that did not run, is left out)."""
    table: dict[str, dict[str, float]] = {}
    for variant, roles in rows:
        if roles is None or roles.empty:
            continue
        table[variant] = roles.groupby("role", sort=False)["us"].sum().to_dict()
    if not table:
        return pd.DataFrame(columns=["variant"])
    frame = pd.DataFrame.from_dict(table, orient="index").fillna(0.0)
    order = frame.sum().sort_values(ascending=False).index  # the largest role first
    return frame[order].rename_axis("variant").reset_index()


def trace_roles(trace: Trace) -> tuple[pd.DataFrame, int]:
    """A trace's role table over the windows Diff counts it by, per window, and how many."""

    spans = trace.spans
    found, _, _ = windows(trace)
    rows = work_rows(spans)
    if len(found):
        rows = launched_rows(spans, rows, spans.index.get_indexer(found.index))
    per = max(len(found), 1)
    kernel_spans = table_spans(spans, rows) if len(rows) else KernelSpans()
    return role_table(kernel_spans, per), per


def role_diff(trace_a: Trace, trace_b: Trace) -> pd.DataFrame:
    """A and B aligned by role: µs and kernels per window on each side, B − A, largest change
    first."""
    sides = [trace_roles(trace)[0].set_index("role") for trace in (trace_a, trace_b)]
    table = sides[0].join(sides[1], how="outer", lsuffix="_a", rsuffix="_b")
    for column in ("us_a", "us_b", "calls_a", "calls_b"):
        table[column] = table[column].fillna(0.0)
    for column in ("kernels_a", "kernels_b"):
        table[column] = table[column].fillna("")
    table["delta_us"] = table["us_b"] - table["us_a"]
    table = table.reset_index().rename(columns={"index": "role"})
    order = table["delta_us"].abs().sort_values(ascending=False, kind="stable").index
    return table.loc[order, list(ROLE_DIFF_COLUMNS)].reset_index(drop=True)


def role_lines(
    table: pd.DataFrame, labels: Sequence[str], unit: str | Sequence[str] = ""
) -> list[str]:
    """Plain sentences for the roles only one side has: "naive spends 2,984.0 µs per forward on
    mask; sdpa-flash does it inside its fused kernel", largest first. `unit`: what one side's
    µs are per (" per forward"), one for both or one per side: a side's figures carry its own
    unit (a CPU run's per backward, an uploaded trace's per step), never the other's."""
    units = (unit, unit) if isinstance(unit, str) else tuple(unit)
    lines = []
    for side, other in ((0, 1), (1, 0)):
        unit = units[side]
        mine, theirs = ("us_a", "us_b")[side], ("us_a", "us_b")[other]
        fused = set(table.loc[table[theirs] > 0, "role"]) & set(FUSED)
        only = table[(table[mine] > 0) & (table[theirs] == 0) & ~table["role"].isin(FUSED)]
        unknown = only["role"].str.endswith(UNKNOWN)
        for row in only[~unknown].sort_values(mine, ascending=False).itertuples():
            inside = fused and row.role in INSIDE_FUSED
            where = "does it inside its fused kernel" if inside else "has no kernel in that role"
            lines.append(
                f"{labels[side]} spends {getattr(row, mine):,.1f} µs{unit} on {row.role}; "
                f"{labels[other]} {where}"
            )
        if unknown.any():
            lines.append(_unknown_line(only[unknown], mine, labels[side], labels[other], unit))
    return lines


def _unknown_line(rows: pd.DataFrame, column: str, label: str, other: str, unit: str) -> str:
    """One sentence for the kernels without a role only one side runs (an upload of a whole
    model has dozens): their total, how many, the longest three by name."""
    rows = rows.sort_values(column, ascending=False)
    names = [role.removesuffix(UNKNOWN) for role in rows["role"]]
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    count = f"{len(names)} kernel{'s' if len(names) > 1 else ''}"
    return (
        f"{label} spends {rows[column].sum():,.1f} µs{unit} in {count} with no known role "
        f"({shown}); {other} runs none of them"
    )


def rounded(table: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """A role table for display: µs and counts rounded."""
    numbers = {column: digits for column in table.columns if table[column].dtype.kind == "f"}
    return table.round(numbers)


def role_diff_view(table: pd.DataFrame, label_a: str, label_b: str) -> pd.DataFrame:
    """role_diff for display: rounded, its columns named after the two sides."""
    names = {"role": "role", "us_a": f"µs {label_a}", "us_b": f"µs {label_b}",
             "delta_us": f"Δ µs ({label_b} − {label_a})", "calls_a": f"kernels {label_a}",
             "calls_b": f"kernels {label_b}", "kernels_a": f"which {label_a}",
             "kernels_b": f"which {label_b}"}  # fmt: skip
    return rounded(table).rename(columns=names)


def as_records(table: pd.DataFrame | None) -> list[dict[str, Any]]:
    """A role table for API callers (JSON)."""
    return [] if table is None else table.to_dict("records")
