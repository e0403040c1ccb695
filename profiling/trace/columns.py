"""Complete trace events → interned columns: codes per row into small arrays of values.

The column half of building profiling.trace.model's table. As HTA's symbol table does, a name, cat,
pid or tid is stored once and each row holds its code: a trace's million spans share a few
hundred names. Each column is pulled from the decoded structs in one C-level pass and interned
through a dict or numpy, never a per-row pandas operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from profiling.trace.events import lane_label

if TYPE_CHECKING:
    from profiling.trace.chunks import ChunkColumns


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize with missing values as one more code. (Its `use_na_sentinel=False` does
    the same but scans every string for NA first: 0.15 s per 10⁶ names.)"""
    codes, uniques = pd.factorize(values)
    missing = codes < 0
    if missing.any():
        uniques = np.append(np.asarray(uniques, dtype=object), None)
        codes[missing] = len(uniques) - 1
    return codes, np.asarray(uniques, dtype=object)


def _factorize_ids(values: np.ndarray) -> tuple[np.ndarray, Any]:
    """pid/tid codes into the sorted distinct ids (np.unique's answer without its sort of every
    row), else, for ids that are not all ints, as objects."""
    if values.dtype == object:
        return _factorize(values)
    codes, uniques = pd.factorize(values)  # hashing, then a sort of the few distinct ids
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], uniques[order].astype(object)


@dataclass
class EventColumns:
    """The usable complete events as columns: `*_codes` per row index the value arrays."""

    ts: np.ndarray  # absolute µs
    dur: np.ndarray
    cat_codes: np.ndarray
    cats: np.ndarray  # lower-cased `cat` values
    name_codes: np.ndarray
    names: np.ndarray
    pid_codes: np.ndarray
    pids: np.ndarray
    tid_codes: np.ndarray
    tids: np.ndarray
    correlation: np.ndarray  # -1: none (GPU work and launches only)
    external: np.ndarray
    args: np.ndarray  # objects: GPU work's args (read with span_args), a shared {} elsewhere
    skipped: int  # complete events without a usable ts/dur (counted, not hidden)

    def drop_rows(self) -> None:
        """Let the per-row columns go once the spans table's arrays hold them (the value
        arrays stay: the table's categoricals are built from them)."""
        for name in ROW_COLUMNS:
            setattr(self, name, NO_ROWS)


ROW_COLUMNS = ("ts", "dur", "cat_codes", "name_codes", "pid_codes", "tid_codes", "correlation",
               "external", "args")  # fmt: skip
NO_ROWS = np.empty(0)  # what a dropped column holds


def merge_chunks(chunks: list[ChunkColumns]) -> EventColumns:
    """The pieces' columns as one table: their codes renumbered into one list of values each."""
    cat_codes, cat_values = _merged_codes(chunks, "cat_codes", "cat_values")
    name_codes, name_values = _merged_codes(chunks, "name_codes", "name_values")
    pid_codes, pid_values = _factorize_ids(_joined(chunks, "pid"))
    tid_codes, tid_values = _factorize_ids(_joined(chunks, "tid"))
    args = np.empty(sum(len(c.ts) for c in chunks), dtype=object)
    args.fill({})  # one shared empty dict for the rest
    shapes: dict[bytes, Any] = {}  # one object per distinct shape in the whole trace
    offset = 0
    for chunk in chunks:
        args[chunk.gpu_rows + offset] = _objects(chunk.gpu_args)
        pairs = zip(chunk.shape_keys, chunk.shape_values, strict=True)
        shared = [shapes.setdefault(key, value) for key, value in pairs]
        args[chunk.shaped_rows + offset] = _objects(shared)[chunk.shape_codes]
        offset += len(chunk.ts)
    return EventColumns(
        ts=_joined(chunks, "ts"),
        dur=_joined(chunks, "dur"),
        cat_codes=cat_codes,
        cats=np.array([str(c).lower() if c is not None else "" for c in cat_values], dtype=object),
        name_codes=name_codes,
        names=_texts(name_values),
        pid_codes=pid_codes,
        pids=_texts(pid_values),
        tid_codes=tid_codes,
        tids=_texts(tid_values),
        correlation=_joined(chunks, "correlation"),
        external=_joined(chunks, "external"),
        args=args,
        skipped=sum(c.skipped for c in chunks),
    )


def _objects(values: list[Any]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _joined(chunks: list[ChunkColumns], name: str) -> np.ndarray:
    parts = [getattr(c, name) for c in chunks]
    if any(p.dtype == object for p in parts) and not all(p.dtype == object for p in parts):
        parts = [p.astype(object) for p in parts]
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _merged_codes(
    chunks: list[ChunkColumns], codes: str, values: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each piece's codes into its own values, renumbered into the values of all pieces."""
    seen: dict[Any, int] = {}
    parts = []
    for chunk in chunks:
        renumber = np.array(
            [seen.setdefault(v, len(seen)) for v in getattr(chunk, values)], dtype=np.int64
        )
        parts.append(renumber[getattr(chunk, codes)] if len(renumber) else getattr(chunk, codes))
    joined = np.concatenate(parts).astype(np.int64, copy=False)
    return joined, np.array(list(seen), dtype=object)


def _texts(values: np.ndarray) -> np.ndarray:
    """Interned values as text, a missing one as ""."""
    return np.array([str(v) if v is not None else "" for v in values], dtype=object)


def from_codes(codes: np.ndarray, categories: Any, ordered: bool = False) -> pd.Categorical:
    """Codes are valid by construction, so pandas' validation pass is skipped."""
    if len(categories) <= _SMALL_VOCABULARY:
        dtype = _dtype(tuple(categories), ordered)
    else:
        dtype = pd.CategoricalDtype(pd.Index(categories, dtype=object), ordered=ordered)
    return pd.Categorical.from_codes(codes, dtype=dtype, validate=False)


_SMALL_VOCABULARY = 1024


@lru_cache(maxsize=256)
def _dtype(categories: tuple[Any, ...], ordered: bool) -> pd.CategoricalDtype:
    """Categorical dtypes of small vocabularies (kinds, cats, lanes, a run's op names), shared:
    making one costs ~55 µs, a run's trace needs seven, and repeated runs see the same ones."""
    return pd.CategoricalDtype(pd.Index(categories, dtype=object), ordered=ordered)


def categorical(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """Codes into `values`, merging values that only differed before str()/lower(): the
    categories np.unique(values.astype(str)) gives (numpy's text drops trailing NULs), sorted
    in Python. numpy's fixed-width copies of 10⁴ kilobyte kernel names were ~0.5 GB at the
    peak of a 10⁷-event read (issue 42). Each row's code is written once, in the small integer
    type pandas keeps (a code per row of int64 is 80 MB at 10⁷ spans)."""
    texts = [str(v).rstrip("\x00") for v in values]
    uniques = sorted(set(texts))
    position = {text: i for i, text in enumerate(uniques)}
    remap = np.array([position[t] for t in texts], dtype=_code_type(len(uniques)))
    return from_codes(remap[codes], _objects(uniques))


def _code_type(n_categories: int) -> type[np.signedinteger]:
    """The type pandas stores a Categorical's codes in (coerce_indexer_dtype): no copy."""
    for kind in (np.int8, np.int16, np.int32):
        if n_categories < np.iinfo(kind).max:
            return kind
    return np.int64


def lane_codes(
    gpu: np.ndarray,
    pid_codes: np.ndarray,
    tid_codes: np.ndarray,
    is_ann: np.ndarray,
    pids: np.ndarray,
    tids: np.ndarray,
    names: dict[tuple[str, str], str],
) -> tuple[np.ndarray, list[str]]:
    """One lane per CPU thread and per GPU stream; GPU annotations get a lane above their stream."""
    key = ((pid_codes.astype(np.int64) * len(tids) + tid_codes) * 2 + gpu) * 2 + is_ann
    inverse, uniq = pd.factorize(key)  # hashing: a handful of lanes, no sort of every span
    labels: list[str] = []
    order: list[tuple[int, float, float, str]] = []
    for k in uniq:
        ann, rest = k % 2, k // 2
        is_gpu, rest = rest % 2, rest // 2
        pid, tid = str(pids[rest // len(tids)]), str(tids[rest % len(tids)])
        sort, text = lane_label(pid, tid, bool(is_gpu), bool(ann), names)
        labels.append(text)
        order.append((*sort, text))
    lanes = list(dict.fromkeys(text for *_, text in sorted(order)))
    position = {text: i for i, text in enumerate(lanes)}
    lane_code = np.array([position[t] for t in labels], dtype=np.int64)[inverse]
    return lane_code, lanes
