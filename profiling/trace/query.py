"""Questions asked of a spans table (trace.model): which rows are steps, operators, a kind.

The analyses' side of the trace model, apart from its parsing as in HTA: every view filters the
table through these, on a categorical's integer codes, so a filter over 10⁶ spans is one
integer pass and the rule for "a step" or "an operator" is written once.
"""

from __future__ import annotations

import ctypes
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from profiling.trace.events import step_number


def step_rows(spans: pd.DataFrame) -> np.ndarray:
    """Positions of the ProfilerStep spans: CPU spans with a step's name, whatever their `cat`
    (torch writes `user_annotation` today; older versions wrote `cpu_op`)."""
    name = spans["name"]
    if isinstance(name.dtype, pd.CategoricalDtype):  # a bool per name, gathered by code (an
        # object per row, as per_value gives, was 0.2 s at 10⁷ spans): code -1 reads False
        step = [step_number(c) >= 0 for c in name.cat.categories]
        named = np.array([*step, False], dtype=bool)[name.array.codes]
    else:
        named = per_value(name, step_number, -1).astype(np.int64) >= 0
    return np.flatnonzero(is_in(spans["kind"], "cpu") & named)


def operator_rows(spans: pd.DataFrame, annotations: bool = False) -> np.ndarray:
    """Positions of the CPU operator spans (`cpu_op`), and with `annotations` the
    record_function spans too (DataLoader's `__next__`, `Optimizer.step`, ProfilerSteps): the
    CPU side of what key_averages tables."""
    wanted = ("cpu op", "annotation") if annotations else ("cpu op",)
    return np.flatnonzero(is_in(spans["kind"], "cpu") & is_in(spans["category"], *wanted))


def own_calls(spans: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows`, whether it is a call of its own. An op that redispatches to itself
    records a span of the same name as the only child of its span (`aten::div_` inside
    `aten::div_`); key_averages merges the two into one call (EventList._remove_dup_nodes),
    so a table that counted both would show twice the calls and total time."""
    parent_all = spans["parent"].to_numpy()
    parent = parent_all[rows]
    has = parent >= 0
    children = np.bincount(parent_all[parent_all >= 0], minlength=len(spans))
    names = spans["name"]
    codes = names.array.codes if isinstance(names.dtype, pd.CategoricalDtype) else names.to_numpy()
    up = np.where(has, parent, 0)
    merged = has & (codes[rows] == codes[up]) & (children[up] == 1)
    return ~merged


def per_value(column: pd.Series, fn: Callable[[Any], Any], missing: Any) -> np.ndarray:
    """`fn` of every row's value, called once per distinct value of a categorical (a trace's
    names repeat thousands of times); a missing value (code -1) gives `missing`."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = [fn(c) for c in column.cat.categories]
        return np.array([*values, missing], dtype=object)[column.array.codes]
    return np.array([fn(v) for v in column.to_numpy()] + [missing], dtype=object)[:-1]


def first_rows(codes: np.ndarray, count: int) -> np.ndarray:
    """The first row of each of `count` codes (0 … count-1, each present), without a sort."""
    first = np.full(count, -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return first


def by_identity(objects: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """A code per entry for the object it holds (equal codes: the same object) and the
    distinct objects: the reader shares one args object per distinct shape, so a question
    about millions of ops' args is answered once per object (docs/performance.md)."""
    ids = _addresses(objects)
    codes, distinct = pd.factorize(ids)  # hashing: no sort of millions of ids
    first = first_rows(codes, len(distinct))
    return codes.astype(np.int64, copy=False), [objects[i] for i in first.tolist()]


def factorize_texts(values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize's codes and uniques (in order of first appearance) for a sequence of
    values, hashed by Python where every value is a str: pandas hashes each string's bytes
    again (its string table), 3.5 s for 10⁶ references to a few hundred kilobyte kernel names
    (issue 42), where a dict reads each str's cached hash and compares identical objects by
    identity (0.1 s). Other values (None, NaN, numbers): pd.factorize itself."""
    if not set(map(type, values)) <= {str}:
        return pd.factorize(np.asarray(values, dtype=object))
    seen: defaultdict[str, int] = defaultdict()
    seen.default_factory = seen.__len__  # numbers each new text as it is first looked up
    codes = np.fromiter(map(seen.__getitem__, values), dtype=np.intp, count=len(values))
    uniques = np.empty(len(seen), dtype=object)
    uniques[:] = list(seen)
    return codes, uniques


def _addresses(objects: Sequence[Any]) -> np.ndarray:
    """id() of each entry. An object array holds the objects' addresses, which CPython's id()
    is: read as integers in one copy, not id() called per entry (0.5 s for the 7·10⁶ CPU
    spans' args of a 10⁷-event trace, issue 42)."""
    if not (isinstance(objects, np.ndarray) and objects.dtype == object and objects.ndim == 1):
        return np.fromiter(map(id, objects), dtype=np.int64, count=len(objects))
    if not len(objects):
        return np.empty(0, dtype=np.int64)
    held = np.ascontiguousarray(objects)  # kept alive while its pointers are read
    pointers = (ctypes.c_size_t * len(held)).from_address(held.ctypes.data)
    return np.frombuffer(pointers, dtype=np.uintp).astype(np.int64)  # a copy, made here


def is_in(column: pd.Series, *values: Any) -> np.ndarray:
    """Rows whose value is one of `values`, compared on a categorical's codes: a filter on a
    spans table costs one integer pass, not a string compare per row (or pandas' overhead)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        wanted = set(values)
        hits = [i for i, c in enumerate(column.cat.categories) if c in wanted]
        codes = column.array.codes
        if len(hits) == 1:
            return codes == hits[0]
        return np.isin(codes, hits)
    return column.isin(values).to_numpy(dtype=bool)


def values_at(column: pd.Series, rows: np.ndarray) -> np.ndarray:
    """`column`'s values at `rows` as a numpy array (a categorical's as objects, NaN where
    missing), read through the codes rather than materialising the column."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        values = np.append(np.asarray(column.dtype.categories, dtype=object), np.nan)
        return values[column.array.codes[rows]]  # code -1 reads the NaN
    return column.to_numpy()[rows]
