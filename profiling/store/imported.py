"""An import is a stranger's file (issue 40): every field of every row is checked against the
store's own schema (the declared type of its column, NOT NULL) and the ranges the store itself
writes, before anything is written; one bad field refuses the whole file with a one-line
message naming the row and the field.

What the store makes, and so all an import may hold: an id as `write.new_id` makes it (16
URL-safe characters); `created` a number of seconds between 2020 and tomorrow; a known kind and
status; a trace hash of 64 lowercase hex characters (the trace's path is built from it, inside
the store's traces folder, never from the file); text of at most MAX_TEXT characters (a Summary's
JSON at most MAX_SUMMARY, and a JSON object); a run with its child rows at most MAX_RUN_BYTES and
MAX_CHILD_ROWS. Imported runs are marked as imported (origin 'import', no Space of origin), so a
forged `origin_space` never shows one as a public Space's own run.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from profiling.store.model_summary import MODEL_KINDS, BadSummary, model_run
from profiling.store.traces import is_hash
from profiling.user_values import show

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{16}")  # secrets.token_urlsafe(write.ID_BYTES)
KINDS = ("profile", "compare", "sweep", *MODEL_KINDS)
STATUSES = ("ok", "unavailable", "refused", "failed", "oom", "skipped")
EARLIEST = 1_577_836_800.0  # 2020-01-01 UTC: before this tool, no run was made
AHEAD_S = 86_400  # another machine's clock may run a day ahead
MAX_TEXT = 65_536  # characters of one text field (a reason, a kernel's full name)
MAX_SUMMARY = 8 * 2**20  # characters of a Summary's JSON (a GPU run's memory timeline is inside)
MAX_RUN_BYTES = 16 * 2**20  # a run and its child rows (~7 KB on a CPU, ~100 KB on a GPU)
MAX_CHILD_ROWS = 100_000  # child rows of one run
IMPORTED = {"origin": "import", "origin_space": ""}


class Refused(ValueError):
    """A field that no store of this tool writes: the import is refused, nothing written."""


@dataclass(frozen=True)
class Column:
    name: str
    declared: str  # TEXT, INTEGER or REAL
    required: bool  # NOT NULL without a default


def columns_of(connection: Any, table: str) -> list[Column]:
    """The target store's own columns of `table`, with their declared types."""
    rows = connection.execute(f"PRAGMA table_info({table})").fetchall()
    return [Column(r[1], r[2].upper(), bool(r[3]) and r[4] is None) for r in rows]


def _native(value: Any) -> Any:
    """A numpy scalar as Python's; a list or an array (a Parquet list column) is refused."""
    if isinstance(value, str | bytes | int | float) or value is None:
        return value
    try:
        return value.item()
    except (AttributeError, ValueError):
        raise Refused(f"must be a single value, not {show(value)}") from None


def field(column: Column, value: Any) -> Any:
    """One value checked against its column's declared type; what SQLite stores."""
    value = _native(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if column.required:
            raise Refused("is missing")
        return None
    if column.declared == "TEXT":
        if not isinstance(value, str):
            raise Refused(f"must be text, not {show(value)}")
        limit = MAX_SUMMARY if column.name == "summary_json" else MAX_TEXT
        if len(value) > limit:
            raise Refused(f"is {len(value):,} characters long, more than {limit:,}")
        return value
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise Refused(f"must be a finite number, not {show(value)}")
    if column.declared == "INTEGER":
        if value != int(value) or abs(value) >= 2**63:
            raise Refused(f"must be a whole number of 64 bits, not {show(value)}")
        return int(value)
    return float(value)


def _run_rules(run: dict[str, Any]) -> None:
    """The ranges the store writes, past the declared types (each raises naming its field)."""
    rules = (
        ("id", ID_PATTERN.fullmatch(run["id"]) is not None, "an id as the store makes them "
         "(16 letters, digits, '-' or '_')"),
        ("created", EARLIEST <= run["created"] <= time.time() + AHEAD_S,
         "seconds since 1970 between 2020-01-01 and tomorrow"),
        ("kind", run["kind"] in KINDS, f"one of {', '.join(KINDS)}"),
        ("status", run["status"] in STATUSES, f"one of {', '.join(STATUSES)}"),
        ("trace_hash", run.get("trace_hash") is None
         or is_hash(run["trace_hash"]), "64 lowercase hex characters"),
        ("trace_bytes", (run.get("trace_bytes") or 0) >= 0, "0 or more bytes"),
        ("trace_pruned", run.get("trace_pruned") in (None, 0, 1), "0 or 1"),
    )  # fmt: skip
    for name, holds, expected in rules:
        if not holds:
            raise Refused(f"{name} must be {expected}, not {show(run.get(name))}")
    if run["kind"] in MODEL_KINDS:  # a model run's own fields (schema v3)
        for name, holds in (("preset", isinstance(run.get("preset"), str) and run["preset"]),
                            ("layers", (run.get("layers") or 0) >= 1)):  # fmt: skip
            if not holds:
                raise Refused(f"{name} of a model run must be given, not {show(run.get(name))}")


def check_model_summary(run: dict[str, Any], children: dict[str, list[dict[str, Any]]]) -> None:
    """A model run's summary, read as a reopened run's is: each field's type and range."""
    if run["kind"] not in MODEL_KINDS:
        return
    for row in children.get("summaries") or ():
        try:
            model_run(_json(row["summary_json"]))
        except BadSummary as exc:
            raise Refused(f"summary_json: {exc}") from None


def _fields(raw: Any, columns: list[Column], required: tuple[str, ...]) -> dict[str, Any]:
    """Every known column a row has (or must have) checked; columns it does not know left out."""
    if not isinstance(raw, dict):
        raise Refused(f"is not a row of named fields: {show(raw)}")
    row = {}
    for column in columns:
        if column.name in raw or column.required or column.name in required:
            try:
                row[column.name] = field(column, raw.get(column.name))
                if row[column.name] is None and column.name in required:
                    raise Refused("is missing")
            except Refused as exc:
                raise Refused(f"{column.name} {exc}") from None
    return row


def checked_run(raw: Any, columns: list[Column]) -> dict[str, Any]:
    """A runs row: every known column checked, the run's own rules, marked as imported."""
    run = _fields(raw, columns, ("id", "created"))
    _run_rules(run)
    return {**run, **IMPORTED}


def checked_child(raw: Any, columns: list[Column]) -> dict[str, Any]:
    """A child table's row (its run_id included), every known column checked."""
    row = _fields(raw, columns, ("run_id",))
    if "summary_json" in row and not isinstance(_json(row["summary_json"]), dict):
        raise Refused("summary_json must be a Summary as a JSON object")
    return row


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def size(row: dict[str, Any]) -> int:
    """A row's bytes as stored, near enough: its text's length, 8 for a number."""
    return sum(len(v) if isinstance(v, str) else 8 for v in row.values())


def check_run_size(run: dict[str, Any], children: dict[str, list[dict[str, Any]]]) -> None:
    rows = sum(len(found) for found in children.values())
    if rows > MAX_CHILD_ROWS:
        raise Refused(f"has {rows:,} child rows, more than {MAX_CHILD_ROWS:,}")
    total = size(run) + sum(size(row) for found in children.values() for row in found)
    if total > MAX_RUN_BYTES:
        raise Refused(f"takes {total / 2**20:.1f} MiB with its child rows, more than "
                      f"{MAX_RUN_BYTES / 2**20:.0f} MiB")  # fmt: skip
