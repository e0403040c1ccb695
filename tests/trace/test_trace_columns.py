"""The spans table's columns (profiling.trace.columns) and the questions asked of them
(profiling.trace.query), rewritten for speed and memory at 10⁷ events (issue 42), give what
the plain numpy and pandas calls they replaced gave."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from profiling.trace import columns as trace_columns
from profiling.trace import model as trace_model
from profiling.trace.columns import categorical, from_codes
from profiling.trace.query import by_identity, factorize_texts

# text that sorts differently by bytes, case or code point, a trailing NUL numpy's text drops,
# a lone surrogate, digits, "None", and values that are not text
ALPHABET = ["a", "B", "b", "é", "\x00", "z\x00", "", "None", "ß", "\ud800x", "10", "9", "Ω"]


def categorical_before(codes: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """columns.categorical before issue 42, verbatim: the oracle."""
    uniques, remap = np.unique(values.astype(str), return_inverse=True)
    dtype = pd.CategoricalDtype(pd.Index(uniques.astype(object), dtype=object))
    return pd.Categorical.from_codes(remap.reshape(-1)[codes], dtype=dtype)


@pytest.mark.parametrize("seed", range(10))
def test_categorical_gives_numpys_unique_of_the_values_as_text(seed):
    rng = random.Random(seed)
    for _ in range(200):
        size = rng.randint(1, 30)
        values = np.empty(size, dtype=object)
        values[:] = [
            rng.choice(ALPHABET) + rng.choice(ALPHABET)
            if rng.random() < 0.9
            else rng.choice([None, 3, 2.5])
            for _ in range(size)
        ]
        codes = np.array([rng.randrange(size) for _ in range(rng.randint(0, 50))], dtype=np.int64)
        want, got = categorical_before(codes, values), categorical(codes, values)
        assert list(got.categories) == list(want.categories)
        assert got.codes.dtype == want.codes.dtype
        assert np.array_equal(got.codes, want.codes)


@pytest.mark.parametrize("size", [100, 200, 40_000])  # int8, int16 and int32 codes
def test_categorical_codes_are_made_in_pandas_own_type(size, monkeypatch):
    """Each row's code is written once, in the type pandas keeps (no int64 copy at 10⁷ rows)."""
    handed = []
    monkeypatch.setattr(trace_columns, "from_codes", lambda codes, *rest: handed.append(codes)
                        or from_codes(codes, *rest))  # fmt: skip
    values = np.array([f"kernel {i}" for i in range(size)], dtype=object)
    codes = np.arange(size, dtype=np.int64)[::-1]
    want, got = categorical_before(codes, values), categorical(codes, values)
    assert handed[0].dtype == want.codes.dtype == got.codes.dtype
    assert np.array_equal(got.codes, want.codes)
    assert list(got.categories) == list(want.categories)


class Text(str):
    """A str subclass: pandas and a dict may hash it differently from str."""

    def __hash__(self) -> int:
        return 0


@pytest.mark.parametrize("seed", range(10))
def test_factorize_texts_gives_pandas_codes_and_uniques(seed):
    """Texts alone (the fast path), and with None, NaN, numbers equal to each other (1, 1.0,
    True) and str subclasses (pandas' own answer)."""
    rng = random.Random(seed)
    others = [None, float("nan"), 1, 1.0, True, Text("a"), b"a"]
    for _ in range(200):
        texts = [rng.choice(ALPHABET) for _ in range(rng.randint(0, 30))]
        mixed = [rng.choice(others) if rng.random() < 0.2 else t for t in texts]
        for values in (texts, tuple(texts), mixed):
            codes, uniques = factorize_texts(values)
            want_codes, want_uniques = pd.factorize(np.asarray(values, dtype=object))
            assert codes.dtype == want_codes.dtype and np.array_equal(codes, want_codes)
            assert uniques.dtype == want_uniques.dtype
            assert [(type(u), u) for u in uniques] == [(type(u), u) for u in want_uniques]


def test_objects_are_coded_by_identity_as_id_reads_them():
    """query.by_identity reads an object array's pointers instead of calling id(): the same
    codes and objects as id() gives, for shared and equal-but-distinct objects, views with a
    stride, and sequences that are not object arrays."""
    shared, other = {}, {}
    objects = np.empty(9, dtype=object)
    objects[:] = [shared, other, shared, "x", None, 3, shared, other, (1,)]
    for given in (objects, objects[::2], objects[:0], list(objects)):
        codes, distinct = by_identity(given)
        ids = [id(x) for x in given]
        want_codes, _ = pd.factorize(np.array(ids, dtype=np.int64))
        assert np.array_equal(codes, want_codes)
        assert [id(x) for x in distinct] == list(dict.fromkeys(ids))


def test_a_large_tables_links_and_texts_are_made_beside_its_nesting(monkeypatch):
    """From BESIDE_FROM spans on, links, steps and text columns are made on a second thread
    while the nesting runs here: the same table as made on one thread."""
    import threading

    from tests.conftest import H200

    made_on = []
    linked = trace_model._linked_columns

    def recording(*args):
        made_on.append(threading.current_thread() is threading.main_thread())
        return linked(*args)

    monkeypatch.setattr(trace_model, "_linked_columns", recording)
    alone = trace_model.load(H200["naive"]).spans
    monkeypatch.setattr(trace_model, "BESIDE_FROM", 10)
    beside = trace_model.load(H200["naive"]).spans
    assert made_on == [True, False] and len(beside) > 10
    pd.testing.assert_frame_equal(beside, alone)


def test_step_rows_are_the_cpu_spans_named_as_a_step():
    """query.step_rows tests each distinct name once and gathers a bool by code (an object
    per row was 0.2 s at 10⁷ spans): the rows per_value's object column gave, with a missing
    name, GPU spans of a step's name, and names that only look like one."""
    from profiling.trace.events import step_number
    from profiling.trace.query import per_value, step_rows

    rng = np.random.default_rng(2)
    pool = ["ProfilerStep#1", "ProfilerStep#22", "ProfilerStep#x", "aten::mm", None, "Step#3"]
    names = [pool[i] for i in rng.integers(0, len(pool), 500)]
    spans = pd.DataFrame({"name": pd.Categorical(names),
                          "kind": pd.Categorical(rng.choice(["cpu", "gpu"], 500))})  # fmt: skip
    named = per_value(spans["name"], step_number, -1).astype(np.int64) >= 0
    want = np.flatnonzero((spans["kind"] == "cpu").to_numpy() & named)
    assert np.array_equal(step_rows(spans), want) and len(want) > 50
    plain = spans.assign(name=spans["name"].astype(object))
    assert np.array_equal(step_rows(plain), want)
