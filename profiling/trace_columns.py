"""Complete trace events → interned columns: codes per row into small arrays of values.

The column half of building profiling.trace's table. As HTA's symbol table does, a name, cat,
pid or tid is stored once and each row holds its code: a trace's million spans share a few
hundred names. Each column is pulled from the decoded structs in one C-level pass and interned
through a dict or numpy, never a per-row pandas operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from profiling.trace_events import EventArgs, TraceError, lane_label, span_args, valid_id


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize with missing values as one more code. (Its `use_na_sentinel=False` does
    the same but scans every string for NA first: 0.15 s per 10⁶ names.)"""
    codes, uniques = pd.factorize(values)
    missing = codes < 0
    if missing.any():
        uniques = np.append(np.asarray(uniques, dtype=object), None)
        codes[missing] = len(uniques) - 1
    return codes, np.asarray(uniques, dtype=object)


def _factorize_list(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """`_factorize` of a list of names or cats (str, or None when missing), through a dict:
    ~3× faster than pandas' hash table on 10⁶ Python strings, which it first scans to decide
    on its string dtype. The same codes: first appearance order, a missing value last."""
    seen: dict[Any, int] = {}
    add = seen.setdefault
    codes = np.fromiter((add(v, len(seen)) for v in values), dtype=np.int64, count=len(values))
    uniques = list(seen)
    if None in seen:  # pandas counts it missing: its code goes after every value's
        at = seen[None]
        codes = np.where(codes == at, len(uniques) - 1, codes - (codes > at))
        uniques.remove(None)
        uniques.append(None)
    return codes, np.array(uniques, dtype=object)


def _factorize_ids(values: list[Any], keep: np.ndarray | None) -> tuple[np.ndarray, Any]:
    """pid/tid codes: integers factorised as a numpy int array (fast), else as objects."""
    try:
        ints = np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        objects = np.array(values, dtype=object)
        return _factorize(objects if keep is None else objects[keep])
    uniques, codes = np.unique(ints if keep is None else ints[keep], return_inverse=True)
    return codes.astype(np.int64), uniques.astype(object)


_COLUMNS = [attrgetter(name) for name in ("cat", "name", "pid", "tid", "ts", "dur")]


def _floats(values: Any) -> np.ndarray:
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError):  # a string or None somewhere: coerce, NaN marks it
        return pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce").to_numpy(float)


@dataclass
class EventColumns:
    """The usable complete events as columns: `*_codes` per row index the value arrays."""

    events: list[Any]  # the kept events themselves, for their args
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
    skipped: int  # complete events without a usable ts/dur (counted, not hidden)


def event_columns(complete: list[Any]) -> EventColumns:
    """The complete (`ph: X`) events as interned columns, those without a usable ts/dur left
    out and counted; raises TraceError when none is left."""
    # One C-level pass per column (rows of tuples transposed with zip(*) took twice as long).
    cat_col, name_col, pid_col, tid_col, ts_col, dur_col = (
        list(map(get, complete)) for get in _COLUMNS
    )
    ts, dur = _floats(ts_col), _floats(dur_col)
    cat_codes, cat_values = _factorize_list(cat_col)
    usable, skipped = _usable(ts, dur, cat_codes, cat_values)
    keep = np.flatnonzero(usable)
    full = len(keep) == len(complete)
    name_codes, name_values = _factorize_list(
        name_col if full else list(compress(name_col, usable))
    )
    pid_codes, pid_values = _factorize_ids(pid_col, None if full else keep)
    tid_codes, tid_values = _factorize_ids(tid_col, None if full else keep)
    return EventColumns(
        events=complete if full else list(compress(complete, usable)),
        ts=ts[keep],
        dur=dur[keep],
        cat_codes=cat_codes[keep],
        cats=np.array([str(c).lower() if c is not None else "" for c in cat_values], dtype=object),
        name_codes=name_codes,
        names=_texts(name_values),
        pid_codes=pid_codes,
        pids=_texts(pid_values),
        tid_codes=tid_codes,
        tids=_texts(tid_values),
        skipped=skipped,
    )


def _usable(
    ts: np.ndarray, dur: np.ndarray, cat_codes: np.ndarray, cat_values: np.ndarray
) -> tuple[np.ndarray, int]:
    """Rows with a numeric ts and dur, and how many lack one. The profiler's own "PyTorch
    Profiler (0)" bar (`cat` Trace) is left out without being counted as skipped."""
    profiler_bar = (cat_values == "Trace")[cat_codes]
    usable = np.isfinite(ts) & np.isfinite(dur) & (dur >= 0) & ~profiler_bar
    skipped = int((~usable).sum()) - int(profiler_bar.sum())
    if not usable.any():
        if not skipped:  # only the profiler's own bar: a schedule that never reached `active`
            raise TraceError(
                "nothing was recorded: the trace holds only the profiler's own span (with a "
                "schedule, export after an active step, e.g. from on_trace_ready)"
            )
        raise TraceError("no complete event has a numeric `ts` and `dur`")
    return usable, skipped


def _texts(values: np.ndarray) -> np.ndarray:
    """Interned values as text, a missing one as ""."""
    return np.array([str(v) if v is not None else "" for v in values], dtype=object)


def args_columns(
    events: list[Any], gpu: np.ndarray, needs_args: np.ndarray, shapes: bool = False
) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Per event: the args it keeps, its correlation id and its External id (-1: none).

    GPU work keeps its decoded fields (kernel table, hover; read with span_args), launches
    give up their two ids, CPU ops keep nothing unless `shapes` (the trace recorded them):
    then those with "Input Dims" keep their args.
    """
    args: list[Any] = [{}] * len(events)  # one shared empty dict for the rest
    correlation = np.full(len(events), -1, dtype=np.int64)
    external = np.full(len(events), -1, dtype=np.int64)
    wanted = np.flatnonzero(needs_args)
    found = [e.args for e in compress(events, needs_args)]
    if all(type(a) is EventArgs for a in found):  # the typed path: plain attribute reads
        correlation[wanted] = _int_column([a.correlation for a in found])
        external[wanted] = _int_column([a.external_id for a in found])
    else:
        found = [span_args(a) for a in found]
        correlation[wanted] = _int_column([a.get("correlation") for a in found])
        external[wanted] = _int_column([a.get("External id") for a in found])
    for i, a, g in zip(wanted, found, gpu[wanted], strict=True):
        if g:
            args[i] = a  # an EventArgs struct (or a dict): read it with span_args
    if shapes:
        for i in np.flatnonzero(~needs_args).tolist():
            if span_args(events[i].args).get("Input Dims") is not None:
                args[i] = events[i].args
    return args, correlation, external


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
    """Codes into `values`, merging values that only differed before str()/lower()."""
    uniques, remap = np.unique(values.astype(str), return_inverse=True)
    return from_codes(remap.reshape(-1)[codes], uniques.astype(object))


def _int_column(values: list[Any]) -> np.ndarray:
    return np.fromiter(map(valid_id, values), dtype=np.int64, count=len(values))


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
    uniq, inverse = np.unique(key, return_inverse=True)
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
