"""Roles and launch chains of a whole spans table's kernels, decided once per signature.

profiling.kernels.roles decides one kernel at a time from its name and the operators above
its launch. A trace of 10⁶ events holds ~10⁵ kernels but only hundreds of distinct
signatures (kernel name, the names of the ops above it, their recorded shapes, its own
`bytes`), so the chains are walked with numpy (one gather per nesting level for all kernels),
the signatures factorised, and kernel_roles' rules run once per signature. Only the QKᵀ/PV
split by call order, which depends on which op each matmul kernel came from, is per kernel,
and it is numpy too. Same answers as kernel_roles.roles over table_chains (tests pin it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from profiling.kernels.roles import (
    _OP_RULES,
    MATMUL,
    PV,
    QK,
    Chain,
    KernelSpans,
    _by_shape,
    _dims,
    attention_run,
    kernel_role,
)
from profiling.trace.events import EventArgs, span_args, step_number
from profiling.trace.query import by_identity, first_rows

_MATMUL_OP = _OP_RULES[4][0]
_BYTES = attrgetter("bytes")
_encode = msgspec.json.Encoder().encode
_DEPTH_LIMIT = 100_000  # nesting levels walked at most (a parent table is a forest)


class TableChains(Sequence[Chain]):
    """Each kernel's Chain, built when asked for: a 10⁷-event trace has 10⁶ kernels, and the
    roofline reads one chain per signature."""

    def __init__(self, levels: np.ndarray, codes: np.ndarray, names: np.ndarray, args: Any):
        self._levels, self._codes, self._names, self._args = levels, codes, names, args

    def __len__(self) -> int:
        return len(self._levels)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _chain(self._levels[index], self._codes, self._names, self._args)


def _chain(levels: np.ndarray, codes: np.ndarray, names: np.ndarray, args: Any) -> Chain:
    ids = [int(i) for i in levels if i >= 0]
    return Chain(
        tuple(str(names[codes[i]]) for i in ids), tuple(ids), tuple(_dims(args, i) for i in ids)
    )


class TableKernels:
    """The kernels at `rows` of a spans table: role, chain and signature code of each."""

    def __init__(self, spans: pd.DataFrame, rows: np.ndarray) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        parent = spans["parent"].to_numpy()
        launched = spans["link"].to_numpy()[rows]
        start = np.where(launched >= 0, parent[np.maximum(launched, 0)], -1)
        self.levels = _ancestors(parent, start)
        self._codes, self._names = _name_codes(spans["name"])
        self._args = spans["args"].to_numpy() if "args" in spans else None
        # what the rules read: names (every ProfilerStep#N alike: no rule reads N) and shapes
        canonical = _one_step_name(self._names)  # per name; read only at the levels' rows
        level_rows = np.maximum(self.levels, 0)
        level_names = np.where(self.levels >= 0, canonical[self._codes[level_rows]], -1)
        shapes = _shape_codes(self._args, self.levels)
        self.signature, first = _factorised(
            [self._codes[rows], *level_names.T, *shapes.T], len(rows)
        )
        # the roofline's key: the role's signature and the kernel's own `bytes`
        self.key, _ = _factorised([self.signature, _bytes_codes(self._args, rows)], len(rows))
        shared = [_chain(self.levels[i], self._codes, self._names, self._args) for i in first]
        self.names = _texts(self._names)[self._codes[rows]].tolist()
        self.roles = self._roles(first, shared, attention_run(self._names))

    def _roles(self, first: np.ndarray, shared: list[Chain], in_run: bool) -> np.ndarray:
        found = []
        for index, chain in zip(first.tolist(), shared, strict=True):
            role = kernel_role(self.names[index], chain, in_run)
            found.append((_by_shape(chain) or role) if role == MATMUL else role)
        per_signature = np.array(found, dtype=object)
        roles = per_signature[self.signature] if len(self.signature) else per_signature[:0]
        return _split_by_order(roles, self.signature, shared, self.levels)

    def chains(self) -> TableChains:
        return TableChains(self.levels, self._codes, self._names, self._args)


def _texts(names: np.ndarray) -> np.ndarray:
    return np.array([str(name) for name in names], dtype=object)


def _one_step_name(names: np.ndarray) -> np.ndarray:
    """Per distinct name, the code the signature uses: every ProfilerStep#N the first's."""
    canonical = np.arange(len(names), dtype=np.int64)
    steps = [i for i, name in enumerate(names) if step_number(name) >= 0]
    if steps:
        canonical[steps] = steps[0]
    return canonical


def _name_codes(name: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes per row into the distinct names (the trace model's names are categorical)."""
    if isinstance(name.dtype, pd.CategoricalDtype):
        return np.asarray(name.cat.codes, dtype=np.int64), np.asarray(
            name.cat.categories, dtype=object
        )
    codes, values = pd.factorize(name.to_numpy(dtype=object))
    return codes.astype(np.int64), np.asarray(values, dtype=object)


def _ancestors(parent: np.ndarray, start: np.ndarray) -> np.ndarray:
    """[kernel, level] span rows: the launching op, its parent, ... (-1 past the top)."""
    levels = [start]
    current = start
    while len(levels) < _DEPTH_LIMIT:
        above = np.where(current >= 0, parent[np.maximum(current, 0)], -1)
        if not (above >= 0).any():
            break
        levels.append(above)
        current = above
    return np.stack(levels, axis=1).astype(np.int64, copy=False)


def _shape_codes(args: Any, levels: np.ndarray) -> np.ndarray:
    """A code per (kernel, level) for the op's recorded dims, types and concrete inputs (equal
    codes: equal content); 0 where it recorded none."""
    codes = np.zeros(levels.shape, dtype=np.int64)
    if args is None or not levels.size:
        return codes
    inside = levels >= 0
    ops = np.flatnonzero(np.bincount(levels[inside], minlength=len(args)))  # sorted, no sort
    same, distinct = by_identity(args[ops])  # the reader shares one object per shape
    seen: dict[bytes, int] = {b"null": 0}
    object_codes = [seen.setdefault(_shape_key(value), len(seen)) for value in distinct]
    code_of_row = np.zeros(len(args), dtype=np.int64)
    code_of_row[ops] = np.array(object_codes, dtype=np.int64)[same]
    codes[inside] = code_of_row[levels[inside]]
    return codes


def _shape_key(value: Any) -> bytes:
    if type(value) is EventArgs:
        shape = [value.input_dims, value.input_type, value.concrete_inputs]
    else:
        found = span_args(value)
        shape = [found.get("Input Dims"), found.get("Input type"), found.get("Concrete Inputs")]
    return b"null" if shape == [None, None, None] else _encode(shape)


def _bytes_codes(args: Any, rows: np.ndarray) -> np.ndarray:
    """A code per kernel for its own `bytes` arg (a memcpy's size), 0 without one."""
    if args is None:
        return np.zeros(len(rows), dtype=np.int64)
    found = args[rows]
    if set(map(type, found)) <= {EventArgs}:  # a trace's args: one C-level pass
        values = list(map(_BYTES, found))
    else:
        values = [_own_bytes(value) for value in found]
    if set(map(type, values)) <= {int, type(None)}:  # torch's case: hashed, not encoded
        # 1, 2, ... in order of first appearance, None 0: a dict, not an object array for
        # pandas (making that array alone took 0.13 s for 1.3·10⁶ kernels)
        seen: defaultdict[Any, int] = defaultdict()
        seen.default_factory = seen.__len__
        seen[None] = 0
        return np.fromiter(map(seen.__getitem__, values), dtype=np.int64, count=len(values))
    seen: dict[bytes, int] = {b"null": 0}
    return np.fromiter(
        (seen.setdefault(_encode(v), len(seen)) for v in values), dtype=np.int64, count=len(rows)
    )


def _own_bytes(value: Any) -> Any:
    return value.bytes if type(value) is EventArgs else span_args(value).get("bytes")


def _factorised(columns: Sequence[np.ndarray], count: int) -> tuple[np.ndarray, np.ndarray]:
    """One code per row for the combination of `columns` (each ≥ -1; in order of first
    appearance) and the first row of each code. The columns are packed into one int64 key
    as long as their ranges' product fits, and the key hashed once: one hash pass per column
    was 13 passes over 10⁶ kernels (issue 42)."""
    code = np.zeros(count, dtype=np.int64)
    room = 1  # the packed key lies in [0, room)
    for column in columns:
        column = np.asarray(column, dtype=np.int64)
        span = int(column.max()) + 2 if count else 1
        if room * span >= _PACKED:  # renumber what is packed so far: at most `count` values
            code, distinct = pd.factorize(code)
            code, room = code.astype(np.int64), max(len(distinct), 1)
        code = code * span + column + 1
        room *= span
    code, distinct = pd.factorize(code)
    code = code.astype(np.int64)
    return code, first_rows(code, len(distinct))


_PACKED = 2**62  # a packed key's bound: int64 with room to spare


def _split_by_order(
    roles: np.ndarray, signature: np.ndarray, shared: list[Chain], levels: np.ndarray
) -> np.ndarray:
    """kernel_roles.roles' second pass: matmuls no shape placed are QKᵀ and PV when exactly
    two matmul calls sit under one parent op (the first QKᵀ), in launch order."""
    matmul = np.flatnonzero(roles == MATMUL)
    if not len(matmul):
        return roles
    outer = np.array(
        [max((i for i, n in enumerate(c.names) if _MATMUL_OP.search(n)), default=-1)
         for c in shared],
        dtype=np.int64,
    )  # fmt: skip
    depth = np.array([len(c.names) for c in shared], dtype=np.int64)
    level = outer[signature[matmul]]
    replayed = level < 0  # no matmul op above (a graph replay): each kernel its own call
    call = np.where(replayed, -2 - matmul, levels[matmul, np.maximum(level, 0)])
    above = np.where(replayed, 0, level + 1)
    parent = np.where(
        above < depth[signature[matmul]],
        levels[matmul, np.minimum(above, levels.shape[1] - 1)],
        -1,
    )
    calls, _ = pd.factorize(call)
    pair, _ = pd.factorize((parent + 1) * (len(calls) + 1) + calls)
    first = np.unique(pair, return_index=True)[1]  # each distinct call, first appearance
    call_parent = parent[first]
    group, _ = pd.factorize(call_parent)
    size = np.bincount(group)
    rank = pd.Series(group).groupby(group).cumcount().to_numpy()
    named = np.where(rank == 0, QK, PV).astype(object)
    two = size[group] == 2
    by_pair = np.where(two, named, MATMUL)
    roles = roles.copy()
    roles[matmul] = by_pair[pair]
    return roles


def table_spans(spans: pd.DataFrame, rows) -> KernelSpans:
    """The kernels at `rows` of a spans table, one by one, with their roles (decided once per
    signature: profiling.kernels.chains)."""
    kernels = TableKernels(spans, rows)
    return KernelSpans(
        tuple(kernels.names),
        tuple(spans["dur_us"].to_numpy(dtype=float)[rows].tolist()),
        tuple(kernels.roles.tolist()),
        spans["args"].to_numpy()[rows],
        kernels.chains(),
        kernels.key,
    )
