"""The C scanner's columns (profiling.trace.scan_columns) against msgspec's (trace_chunks).

Its contract: for any piece, None (msgspec reads that piece) or columns exactly equal to
decode_piece's, and never columns where msgspec refuses the piece. Checked on the fixtures and
generated traces cut in 4 KiB pieces, on one piece per rule that must send a piece to msgspec,
on odd pieces it must read, and on random pieces (hypothesis). Where there is no scanner the
module skips, unless ATTNPROF_REQUIRE_SCANNER=1 (.ci/run sets it): then a trace/scan.c that no
longer compiles fails the suite.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.gen_trace_stream import write
from profiling.trace import scan as trace_scan
from profiling.trace import stream as trace_stream
from profiling.trace.chunks import decode_piece
from profiling.trace.events import _EVENTS
from profiling.trace.scan_columns import scanned_columns
from tests.fuzz.differential import scanned_as_decoded

if trace_scan.scanner() is None:  # a scanner that no longer builds: a failure in CI
    WHY = f"no C scanner here: {'; '.join(trace_scan.REASON)}"
    if os.environ.get("ATTNPROF_REQUIRE_SCANNER", "") not in ("", "0"):  # .ci/run sets it
        pytest.fail(f"{WHY}, and ATTNPROF_REQUIRE_SCANNER=1 requires the scanner", pytrace=False)
    pytest.skip(WHY, allow_module_level=True)

FIXTURES = sorted((Path(__file__).parents[1] / "fixtures").glob("*.json.gz"))


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 4 KiB: hundreds per trace, cut at every kind of event."""
    monkeypatch.setattr(trace_stream, "PIECE", 4096)
    monkeypatch.setattr(trace_stream, "BLOCK", 4096)


def pieces_of(source: Path | bytes) -> list[bytes]:
    blocks = trace_stream.inflated(source, 2**30)
    return list(trace_stream.pieces(blocks, trace_stream.Framing(), exact=False))


def piece(*events: str) -> bytes:
    return ("[" + ", ".join(events) + "]").encode()


# fmt: off
KERNEL = {"ph": '"X"', "cat": '"kernel"', "name": '"k"', "pid": "1", "tid": "7", "ts": "10.5",
          "dur": "2", "args": '{"correlation": 3, "External id": 4}'}
SHAPES = '{"Input Dims": [[1, 2]], "Input type": ["float"], "Concrete Inputs": [""]}'
# torch's own bar over the recording: a complete event with text pid and tid, never a row
PROFILER_BAR = ('{"ph": "X", "cat": "Trace", "ts": 5111183402378.472, "dur": 1067.393, '
                '"pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", '
                '"args": {"Op count": 0}}')
# fmt: on


def event(*extra: tuple[str, str], **fields: str | None) -> str:
    """A kernel event as JSON text, `fields` replaced by the text given (None: left out), then
    the `extra` members as written (a repeated key, an escaped one)."""
    members = [(k, v) for k, v in {**KERNEL, **fields}.items() if v is not None]
    return "{" + ", ".join(f'"{k}": {v}' for k, v in [*members, *extra]) + "}"


# -- whole traces ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: re.sub(r"_(8|16)_.*", "", p.name))
def test_every_piece_of_every_fixture_is_scanned_as_msgspec_decodes_it(path, small_pieces):
    assert all(map(scanned_as_decoded, pieces_of(path)))


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    return write(6000, tmp_path_factory.mktemp("gen") / "t.json.gz", seed=3)


def test_a_generated_trace_pretty_printed_and_bare_is_scanned_throughout(generated, small_pieces):
    document = msgspec.json.decode(gzip.decompress(generated.read_bytes()))
    pretty = msgspec.json.format(msgspec.json.encode(document), indent=2)
    for source in (generated, pretty, json.dumps(document["traceEvents"]).encode()):
        found = pieces_of(source)
        assert len(found) > 100 and all(map(scanned_as_decoded, found))


# -- one piece per rule ----------------------------------------------------------------------

# fmt: off
ALL_ARGS = '{"correlation": 3, "External id": 4, ' + SHAPES[1:]
DECLINED = {
    "non-ASCII in a name": piece(event(name='"café"')),
    "non-ASCII in an unknown key's value": piece(event(("note", '"é"'))),
    "invalid UTF-8 msgspec skips": piece(event(("x", '"\xff"'))).replace(b"\xc3\xbf", b"\xff"),
    "an escaped key": piece(event(("no\\u0074e", "1"))),
    "an escaped key spelling ph": piece(event(("p\\u0068", '"X"'), ph=None)),
    "an escaped ph": piece(event(ph='"\\u0058"')),
    "ph a number": piece(event(ph="1")),
    "cat null": piece(event(cat="null")),
    "cat a list": piece(event(cat='["kernel"]')),
    "name a number": piece(event(name="5")),
    "text pid in a complete event": piece(event(pid='"1"')),
    "text tid in a complete event": piece(event(tid='"main"')),
    "float pid": piece(event(pid="1.0")),
    "no tid in a complete event": piece(event(tid=None)),
    "null pid on an instant event": piece(event(ph='"i"', pid="null")),
    "ts text": piece(event(ts='"10"')),
    "dur true": piece(event(dur="true")),
    "ts 2**53 + 1": piece(event(ts="9007199254740993")),
    "ts mantissa past 2**53": piece(event(ts="9007199254740.993")),
    "ts 19 significant digits": piece(event(ts="1234567890.123456789")),
    "dur 19 digits": piece(event(dur="1000000000000000000")),
    "ts exponent 23": piece(event(ts="1e23")),
    "ts exponent -23": piece(event(ts="1e-23")),
    "ts fraction past 1e-22": piece(event(ts="0.00000000000000000000001")),
    "ts -0": piece(event(ts="-0")),
    "dur -0.0": piece(event(dur="-0.0")),
    "correlation of 19 digits": piece(event(args='{"correlation": 1234567890123456789}')),
    "External id of 19 digits": piece(event(args='{"External id": -1234567890123456789}')),
    "args null": piece(event(args="null")),
    "args a list": piece(event(args="[]")),
    "nested 70 deep": piece(event(args='{"note": ' + "[" * 70 + "]" * 70 + "}")),
    "an event that is not an object": piece(event(), "1"),
    **{f"{key} repeated": piece(event((key, value))) for key, value in {
        "ph": '"i"', "cat": '"cpu_op"', "name": '"other"', "pid": "2", "tid": "8", "ts": "11",
        "dur": "3", "args": "{}"}.items()},
    **{f"args {key} repeated": piece(event(cat='"cpu_op"', args=f'{ALL_ARGS[:-1]}, "{key}": {v}}}'))
       for key, v in {"correlation": "5", "External id": "6", "Input Dims": "[[2]]",
                      "Input type": '["int"]', "Concrete Inputs": '["1"]'}.items()},
}
BAD_NUMBERS = ["010", "1.", ".5", "1e", "1e+", "-", "+1", "NaN", "Infinity", "0x10", "1.5.2"]
INVALID = {
    "a trailing comma": piece(event())[:-1] + b",]",
    "unclosed": piece(event())[:-1],
    "an event cut short": piece(event())[:-6] + b"]",
    "a raw tab in a string": piece(event(name='"a\tb"')),
    "a raw newline in a key": piece(event(("no\nte", "1"))),
    "a bad escape": piece(event(name='"a\\x41"')),
    "a short unicode escape": piece(event(name='"\\u12"')),
    "invalid UTF-8 in a name": piece(event(name='"\xff"')).replace(b"\xc3\xbf", b"\xff"),
    "an unquoted key": piece(event()).replace(b'"tid"', b"tid"),
    "a missing colon": piece(event()).replace(b'"tid":', b'"tid"'),
    "a missing comma": piece(event(), event()).replace(b"}, {", b"} {"),
    "trailing bytes": piece(event()) + b" x",
    "two arrays": b"[][]",
    "nothing": b"",
    "an unterminated string": b'[{"ph": "X", "name": "k}]',
    "ts 1e400": piece(event(ts="1e400")),
    "a bad literal": piece(event(("note", "tru"))),
    "single quotes": piece(event(("note", "'x'"))),
    **{f"{text} as ts": piece(event(ts=text)) for text in BAD_NUMBERS},
    **{f"{text} in an unknown key": piece(event(("note", text))) for text in BAD_NUMBERS},
    **{f"{text} in args": piece(event(args=f'{{"grid": [{text}]}}')) for text in BAD_NUMBERS},
}
# fmt: on


def test_the_event_every_rule_changes_is_scanned():
    assert scanned_as_decoded(piece(event(), event(cat='"cpu_op"', args=ALL_ARGS)))


@pytest.mark.parametrize("text", DECLINED.values(), ids=DECLINED.keys())
def test_a_piece_breaking_a_rule_is_declined(text):
    decode_piece(text)  # valid JSON, which msgspec reads
    assert scanned_columns(text) is None


@pytest.mark.parametrize("text", INVALID.values(), ids=INVALID.keys())
def test_invalid_json_is_declined(text):
    with pytest.raises(msgspec.DecodeError):
        decode_piece(text)
    assert scanned_columns(text) is None


# fmt: off
LANES = ['{"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "main"}}',
         '{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}',
         '{"ph": "M", "name": "process_name", "pid": "x", "args": {"name": "python3"}}']
PRETTY = json.loads(piece(event(), event(cat='"cpu_op"', args=SHAPES), *LANES))
ODD_IDS = ("1.5", '"7"', "null", "-3", "true", "[1]", "1e3", "-922337203685477580", "0", "-0")
ACCEPTED = {
    "escapes in names": piece(event(name=r'"a\"b"'), event(name=r'"\u00e9\t\\ \/ \ud83d\ude00"'),
                              event(name='"plain"'), event(name=r'"pl\u0061in"'),
                              event(name=r'"nul \u0000"')),
    "printable ASCII": piece(event(name=json.dumps("".join(map(chr, range(32, 128)))))),
    "missing cat and name": piece(event(cat=None, name=None), event(), event(cat='""')),
    "text pid and tid on an instant event": piece(event(ph='"i"', pid='"Spans"', tid='"x"')),
    "null and missing ts and dur": piece(event(ts="null"), event(dur="null"), event(ts=None),
                                         event(dur=None), event()),
    "a negative dur": piece(event(dur="-5"), event()),
    "other phases": piece(*(event(ph=json.dumps(ph)) for ph in ["x", "XX", "B", "m", "f", ""])),
    "cats in capitals": piece(*(event(cat=json.dumps(c)) for c in ["Kernel", "CUDA_RUNTIME"])),
    "the profiler's cat with int ids": piece(event(cat='"Trace"'), event()),
    "lane events": piece(*LANES, event()),
    "flows": piece('{"ph": "s", "id": 1, "pid": 1, "tid": 7, "ts": 1, "cat": "ac2g"}',
                   '{"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 2, "bp": "e"}', event()),
    "extra keys of every type": piece(event(
        ("id", "1"), ("bp", '"e"'), ("s", "null"), ("x", "true"), ("y", "[1, [2.5, {}], false]"),
        ("z", '{"a": {"ph": [null]}}'), ("f", "-1.5e-300"), ("big", "1234567890123456789012"))),
    "nested args": piece(event(args='{"correlation": 3, "note": {"External id": 9, '
                                    '"correlation": [1]}, "grid": [1, 2, 3], "labels": {}}')),
    "empty and missing args": piece(event(args="{}"), event(args=None), event(args="{ }")),
    "odd ids": piece(*(event(cat=cat, args=f'{{"correlation": {v}, "External id": {v}}}')
                       for v in ODD_IDS for cat in ('"kernel"', '"cuda_runtime"', '"cpu_op"'))),
    "shapes": piece(event(cat='"cpu_op"', args=SHAPES), event(cat='"cpu_op"', args=ALL_ARGS),
                    event(cat='"cpu_op"', args='{"Input Dims": [[1, 2]]}'),
                    event(cat='"cpu_op"', args='{"Input Dims": null, "Input type": []}'),
                    event(cat='"cpu_op"', args='{"Input Dims": [], "Concrete Inputs": ["1"]}'),
                    event(cat='"cpu_op"', args='{"Concrete Inputs": ["2"]}'),
                    event(cat='"kernel"', args=SHAPES)),
    "repeated unknown keys": piece(event(("id", "1"), ("id", "2")),
                                   event(args='{"note": 1, "note": 2, "stream": 3}')),
    "whitespace everywhere": json.dumps(PRETTY, indent=2).encode(),
    "tabs and CRLF": json.dumps(PRETTY, indent="\t", separators=(" ,\r\n", " :\t")).encode(),
    "numbers": piece(*(event(ts=text, dur=text) for text in (
        "1e3", "1.5E-2", "0.000123", "123456789012.345", "-5", "1E+2", "0", "0.0", "5e-22",
        "9007199254740991", "5111183402378.472", "1e22", "12.50", "0e0"))),
    "nested 40 deep": piece(event(("note", "[" * 40 + "]" * 40))),
    "many tiny events": piece(*["{}"] * 600, event()),
    "no events": b"[]",
    "no events, spaced": b" [ \n ] ",
}
REFUSED = {  # valid JSON's syntax, refused by msgspec: surrogates unpaired, numbers past a double
    "a lone high surrogate in an unknown key": piece(event(("note", r'"\ud800"'))),
    "a lone low surrogate in args": piece(event(args=r'{"note": "\udc00"}')),
    "a high surrogate before a letter": piece(event(("note", r'"\ud800\u0041"'))),
    "a lone surrogate in a name": piece(event(name=r'"\udc00"')),
    "1e400 in a typed arg": piece(event(cat='"cpu_op"', args='{"stream": 1e400}')),
    "-1e999 deep in a typed arg": piece(event(cat='"cpu_op"', args='{"grid": [1, -1e999]}')),
    "1e400 as a correlation": piece(event(args='{"correlation": 1e400}')),
    "an int of 5000 digits in a typed arg": piece(event(args=f'{{"device": {"1" * 5000}}}')),
}
# fmt: on


@pytest.mark.parametrize("text", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_odd_but_well_typed_pieces_are_scanned_as_msgspec_decodes_them(text):
    assert scanned_as_decoded(text)


def test_the_profilers_own_bar_keeps_its_piece_on_the_fast_path():
    """Every torch trace holds it; its text pid and tid are never a row's (it was once
    declined for them, and a piece of every trace went to msgspec)."""
    assert scanned_as_decoded(piece(event(), PROFILER_BAR))


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_what_msgspec_refuses_where_the_scanner_only_skips_is_declined(text):
    """Found by this file's first version: the scanner read these, msgspec refuses them (the
    same file would be read with a compiler and refused without)."""
    with pytest.raises(msgspec.DecodeError):
        decode_piece(text)
    assert scanned_columns(text) is None


# -- interning by hash -----------------------------------------------------------------------


def test_same_spans_compares_bytes_not_lengths_or_hashes():
    data = b'"ab" "ab" "ac" "abc"'
    starts, ends = np.array([0, 5, 10, 15, -1]), np.array([4, 9, 14, 20, -1])

    def same(a: int, b: int) -> bool:
        return trace_scan.same_spans(data, starts[[a, b]], ends[[a, b]], np.array([0, 0]))

    assert same(0, 1) and same(4, 4)
    assert not same(0, 2) and not same(0, 3) and not same(0, 4) and not same(4, 0)


def test_each_byte_check_that_fails_sends_the_piece_to_msgspec(monkeypatch):
    """Every call (cats, names, each shape field) guards its interning: one False is None."""
    text = piece(event(), event(name='"m"'), event(cat='"cpu_op"', args=ALL_ARGS))
    real, calls = trace_scan.same_spans, []
    monkeypatch.setattr(trace_scan, "same_spans", lambda *a: calls.append(1) or real(*a))
    assert scanned_as_decoded(text) and len(calls) >= 5
    for failing in range(len(calls)):
        count = iter(range(len(calls)))
        monkeypatch.setattr(
            trace_scan, "same_spans", lambda *a, f=failing, n=count: next(n) != f and real(*a)
        )
        assert scanned_columns(text) is None, f"byte check {failing} ignored"


def test_a_read_decodes_each_name_once_whatever_the_pieces(monkeypatch):
    """Pieces of one read share their decoded names (`texts`, by the bytes as written): a
    name in every piece is decoded once and is one object; a name spelled with an escape is
    its text, and another spelling of the same text still decodes to it."""
    from profiling.trace import scan_columns

    decoded = []
    decoder = scan_columns._TEXT

    class Counting:
        def decode(self, raw):
            decoded.append(bytes(raw))
            return decoder.decode(raw)

    monkeypatch.setattr(scan_columns, "_TEXT", Counting())
    texts: dict[bytes, str] = {}
    first = scanned_columns(piece(event(name='"k\\u0041"'), event(name='"k2"')), texts)
    second = scanned_columns(piece(event(name='"kA"'), event(name='"k\\u0041"')), texts)
    assert first.name_values == ["kA", "k2"] and second.name_values == ["kA"]
    assert second.name_codes.tolist() == [0, 0]  # two spellings, one text, one code
    assert second.name_values[0] is first.name_values[0]
    assert decoded.count(b'"k\\u0041"') == 1 and decoded.count(b'"kA"') == 1
    assert decoded.count(b'"kernel"') == 1  # the cat, once for both pieces
    assert first.name_values == scanned_columns(piece(event(name='"k\\u0041"'),
                                                      event(name='"k2"'))).name_values  # fmt: skip


def test_the_pieces_of_one_read_share_their_decoded_names(small_pieces, monkeypatch):
    from profiling.trace import read as trace_read

    given = []

    def recording(piece, texts=None):
        given.append(texts)
        return scanned_columns(piece, texts)

    monkeypatch.setattr(trace_read, "scanned_columns", recording)
    for _ in range(2):
        trace_read.read_events(FIXTURES[0], 2**30)
    assert len(given) > 20 and all(isinstance(t, dict) for t in given)
    assert len({id(t) for t in given}) == 2  # one per read, not one per piece


# -- random pieces ---------------------------------------------------------------------------


class NumberText(str):
    """A number as written, put in the JSON as is."""


SPELLINGS = [repr, "{:e}".format, "{:E}".format, "{:.17g}".format, "{:.3f}".format]


@st.composite
def number_texts(draw) -> NumberText:
    """A JSON number as some writer spells it: a float's repr or format, or any decimal."""
    if draw(st.booleans()):
        value = draw(st.floats(allow_nan=False, allow_infinity=False) | st.integers(0, 10**12))
        return NumberText(draw(st.sampled_from(SPELLINGS))(value / 1000))
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.just("0") | st.from_regex(r"[1-9][0-9]{0,20}", fullmatch=True))
    fraction = draw(st.just("") | st.from_regex(r"\.[0-9]{1,20}", fullmatch=True))
    exponent = draw(st.just("") | st.from_regex(r"[eE][+-]?[0-9]{1,2}", fullmatch=True))
    return NumberText(sign + whole + fraction + exponent)


ASCII = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6)
TEXT = ASCII | st.text(st.characters(codec="utf-8"), max_size=6)  # astral: surrogate pairs
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**40), 10**40) | FLOATS | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)
ARG_KEYS = st.sampled_from(["correlation", "External id", "Input Dims", "Concrete Inputs", "x"])
TIMES = st.integers(0, 10**13).map(lambda n: NumberText(f"{n / 1000:.3f}"))
# fmt: off
TORCH = {  # each field as torch writes it
    "ph": st.sampled_from(["X", "X", "X", "M", "s", "i", "x", ""]),
    "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "memcpy", "Trace", "", "Kernel"]),
    "name": st.sampled_from(["k", "thread_name", "process_labels"]) | ASCII,
    "pid": st.integers(-5, 10**6), "tid": st.integers(-5, 10**6), "ts": TIMES, "dur": TIMES,
    "args": st.dictionaries(ARG_KEYS, st.integers(-(2**40), 2**40) | st.lists(st.integers(0, 9)),
                            max_size=4),
}
ODD = {  # and spelled or typed otherwise
    "ph": TEXT, "cat": TEXT, "name": TEXT, "pid": number_texts() | TEXT,
    "tid": number_texts() | st.integers(-(2**63), 2**63 - 1),
    "ts": number_texts() | FLOATS | st.none(), "dur": number_texts() | FLOATS | st.none(),
    "args": st.dictionaries(ARG_KEYS, st.integers(-(2**63), 2**63 - 1) | VALUES, max_size=4),
}
FATES = st.sampled_from(["as torch"] * 6 + ["odd", "odd", "any value", "left out", "repeated"])
# fmt: on
SEPARATORS = [(",", ":"), (", ", ": "), (",\n  ", " : "), ("\t,\r\n", ":\t")]


@st.composite
def odd_pieces(draw) -> bytes:
    """Events of torch's fields, one at times left out, repeated, spelled otherwise or any JSON
    value, among unknown keys; spaced one of several ways, non-ASCII escaped or not; at times
    cut short or missing a byte."""
    item, colon = draw(st.sampled_from(SEPARATORS))
    ascii_only = draw(st.sampled_from([True, True, True, False]))

    def text(value) -> str:
        if isinstance(value, NumberText):
            return value
        return json.dumps(value, ensure_ascii=ascii_only, separators=(item, colon))

    events = []
    for _ in range(draw(st.integers(0, 6))):
        members, odd = [], draw(st.sampled_from([False, False, False, True]))
        for key in TORCH:
            fate = draw(FATES) if odd else "as torch"
            values = {"odd": ODD[key], "any value": VALUES}.get(fate, TORCH[key])
            members += [(key, draw(values))] if fate != "left out" else []
            members += [(key, draw(ODD[key] | TORCH[key]))] if fate == "repeated" else []
        unknown = st.sampled_from(["id", "bp", "s", "tts", "Ph", "é"])
        members += draw(st.lists(st.tuples(unknown, VALUES | number_texts()), max_size=odd))
        members = draw(st.permutations(members))
        events.append("{" + item.join(f"{text(k)}{colon}{text(v)}" for k, v in members) + "}")
    data = ("[" + item.join(events) + "]").encode()
    mangle = draw(st.sampled_from(["whole"] * 6 + ["a byte deleted", "cut short"]))
    if mangle != "whole" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] if mangle == "cut short" else data[:at] + data[at + 1 :]
    return data


@settings(max_examples=200, deadline=None)
@given(odd_pieces())
def test_random_pieces_are_declined_or_scanned_as_msgspec_decodes_them(text):
    scanned_as_decoded(text)


@settings(max_examples=300, deadline=None)
@given(number_texts(), number_texts())
def test_ts_and_dur_are_msgspec_floats_to_the_bit(ts, dur):
    text = piece(event(ts=ts, dur=dur))
    found = trace_scan.scan(text)
    plain = all(re.fullmatch(r"(0|[1-9][0-9]{0,5})(\.[0-9]{1,6})?", t) for t in (ts, dur))
    assert found is not None or not plain, "a plain decimal left to msgspec"
    if found is not None:
        (decoded,) = _EVENTS.decode(text)
        assert found.floats[:, 0].tobytes() == np.array([decoded.ts, decoded.dur]).tobytes()
    scanned_as_decoded(text)
