"""Issue #6 at the handlers (no server): a public Space is called by scripts that ignore the
sliders, so every endpoint re-validates in the backend and answers with a clear gr.Error.

Hypothesis throws generated bad inputs at each handler (unknown variants and dtypes, path-like
and HTML strings, numbers out of range, 0, negatives, ±2**63, NaN, ±inf, fractions, strings and
lists where numbers go, None, junk variant lists and lengths, broken uploads, junk traces): each
must raise gr.Error whose message is a sentence for a person — not the generic "something
unexpected" text (that would mean an unvalidated path reached an exception), no traceback, no
server path, no Python repr of an internal object. Afterwards a valid CPU run still works.

Also here: where the app writes files and how they are cleaned up (by count and by age, 500
runs), that no launch call opens `allowed_paths`, that names from an uploaded trace are
rendered as text, and that only allow-listed kernel repos ever reach `kernels`. The same inputs
through the running app: tests/page/test_hardening_api.py.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re
import stat
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import gradio as gr
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import app
from attention import VARIANTS
from profiling.page import analyze_tab, compare_tab, diff_tab, errors, profile_tab, sweep_tab
from profiling.user_values import plain_label
from profiling.views import shared as views_shared
from profiling.views.diff import MAX_LABEL
from profiling.workload import request as job_request
from profiling.workload.availability import unavailable_reasons
from profiling.workload.spec import DTYPES, page_ranges
from tests.conftest import FIXTURES, NAIVE

ROOT = Path(__file__).resolve().parents[2]
INPLACE = FIXTURES / "h200_naive-inplace_8_16_1024_64_bf16.json.gz"
DEVICE = app.DEVICE
RANGES = page_ranges(DEVICE)
TINY = dict(variant="naive", seq_len=RANGES["seq_len"][0], dtype="float32", batch=1, heads=1,
            head_dim=16, causal=True)  # fmt: skip
SHAPE = {k: v for k, v in TINY.items() if k not in ("variant", "seq_len")}
JOB = {k: v for k, v in TINY.items() if k != "variant"}  # a Compare's shape
TITLES = set(errors.TITLES.values())
IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>window.__xss=1</script>"
SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck))
# Profile's trace .json, .json.gz and operator .txt among its outputs (after the Gantt and the
# memory block's page-only state; the role and roofline outputs follow)
PROFILE_FILES = slice(7, 10)


def no_progress(*args: Any, **kwargs: Any) -> None:
    return None


# -- what a clear error is ---------------------------------------------------------------------
SERVER_PATHS = sorted(
    {str(ROOT), sys.prefix, tempfile.gettempdir() + os.sep, str(Path.home()) + os.sep}
    | ({os.environ["GRADIO_TEMP_DIR"]} if os.environ.get("GRADIO_TEMP_DIR") else set())
)
INTERNALS = re.compile(
    r"Traceback|File \"|<[\w.]+ object at 0x|<class '|<function |<built-in|"
    r"\b(?:[A-Z][a-z]+)+(?:Error|Exception)\b"
)


def clear_message(message: Any, sent: Any) -> str:
    """Assert `message` is a sentence for a person and return it.

    A server path may appear only when the caller sent it (their own value echoed back).
    """
    assert isinstance(message, str) and message.strip(), f"empty message for {sent!r}"
    assert message != views_shared.GENERIC_ERROR, (
        f"an unvalidated input reached an exception: {sent!r}"
    )
    said = _without_echoes(message, sent)  # the caller's own text may look like anything
    assert not INTERNALS.search(said), f"internals in {message!r} for {sent!r}"
    echoed = repr(sent)
    for path in SERVER_PATHS:
        assert path not in message or path in echoed, f"server path in {message!r}"
    return message


def _without_echoes(message: str, sent: Any) -> str:
    """`message` less every text the caller sent, quoted as the handlers echo it ('AaError')."""
    if isinstance(sent, dict | tuple | list):
        for item in sent.values() if isinstance(sent, dict) else sent:
            message = _without_echoes(message, item)
    return message.replace(repr(sent), "") if isinstance(sent, str) else message


def test_an_echoed_value_is_the_callers_and_internals_are_still_caught():
    sent = ((), {"seq_len": "AaError", "variant": "naive"})  # hypothesis found this one
    clear_message("seq_len must be a whole number, got 'AaError'", sent)
    with pytest.raises(AssertionError, match="internals"):
        clear_message("KeyError: 'AaError'", sent)


def refused(fn, *args: Any, **kwargs: Any) -> gr.Error:
    """Call a handler that must refuse; the gr.Error it raised, checked for clarity."""
    try:
        fn(*args, **kwargs)
    except gr.Error as error:
        clear_message(error.message, (args, kwargs))
        assert error.title in TITLES, error.title
        return error
    except Exception as error:
        raise AssertionError(f"{type(error).__name__} escaped for {(args, kwargs)!r}") from error
    raise AssertionError(f"accepted: {(args, kwargs)!r}")


# -- strategies: bad values for each kind of parameter -----------------------------------------
HOSTILE_TEXT = [
    "", " ", "nope", "NAIVE", "naive ", "../../etc/passwd", "/etc/passwd", "..\\..\\boot.ini",
    "naive/../../../app.py", "file:///etc/passwd", IMG, SCRIPT, "naive\x00", "naive; rm -rf /",
    "kernels-community/flash-attn2", "someone/evil-kernel", "{{7*7}}", "${jndi:x}", "%s%n",
    "🔥" * 50, "a" * 5000, "float64", "int8", "torch.float32", "True", "None", "NaN", "1e309",
]  # fmt: skip
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 2**63, -(2**63), 2**64, 10**100, math.nan, math.inf, -math.inf]),
    st.integers(),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(HOSTILE_TEXT),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
NUMBERS = ("seq_len", "batch", "heads", "head_dim")


def _valid_whole(name: str, value: Any) -> bool:
    """Whether the backend would accept `value` for a slider (so it is not a bad input)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return False
        value = int(value)
    if not isinstance(value, int):
        return False
    low, high, _ = RANGES[name]
    return low <= value <= high and (name != "head_dim" or value % 8 == 0)


def bad_number(name: str) -> st.SearchStrategy:
    low, high, _ = RANGES[name]
    return st.one_of(
        st.sampled_from([0, -1, low - 1, high + 1, 2**63, -(2**63), 2**63 - 1, 10**30]),
        st.sampled_from([math.nan, math.inf, -math.inf, low + 0.5, 1e308, -0.0, 5e-324]),
        st.integers(max_value=low - 1) | st.integers(min_value=high + 1),
        st.floats().filter(lambda x: not (math.isfinite(x) and x.is_integer())),
        st.integers(low, high).map(str),  # "128": a string where a number goes
        JUNK,
    ).filter(lambda v: not _valid_whole(name, v))


BAD_VARIANT = st.one_of(st.sampled_from(HOSTILE_TEXT), JUNK).filter(
    lambda v: not (isinstance(v, str) and v.strip() in VARIANTS)
)
BAD_DTYPE = st.one_of(st.sampled_from(HOSTILE_TEXT), JUNK).filter(
    lambda v: not (isinstance(v, str) and v.strip() in DTYPES)
)
BAD_CAUSAL = JUNK.filter(
    lambda v: (
        not isinstance(v, bool) and not (isinstance(v, str) and v.lower() in ("true", "false"))
    )
)
BAD_SHAPE_VALUE = {
    **{name: bad_number(name) for name in NUMBERS},
    "dtype": BAD_DTYPE,
    "causal": BAD_CAUSAL,
}
# known ids that cannot run here (a CPU): refused by the runner before anything is allocated
UNAVAILABLE = [v for v, why in unavailable_reasons(DEVICE, "float32").items() if why]
# valid types, refused all the same: head_dim not a multiple of 8, the CPU budget
BAD_COMBOS = [dict(head_dim=RANGES["head_dim"][0] + 4)] + (
    [dict(seq_len=4096, batch=8, heads=16, head_dim=128)] if DEVICE == "cpu" else []
)


@st.composite
def bad_profile(draw) -> dict:
    """TINY with one to three parameters bad (or a refused combination)."""
    args = dict(TINY)
    choice = draw(st.sampled_from(["variant", "combo", "missing", *BAD_SHAPE_VALUE]))
    if choice == "variant":
        args["variant"] = draw(BAD_VARIANT | st.sampled_from(UNAVAILABLE or ["nope"]))
    elif choice == "combo":
        args.update(draw(st.sampled_from(BAD_COMBOS)))
    elif choice == "missing":
        args[draw(st.sampled_from(list(TINY)))] = None
    else:
        args[choice] = draw(BAD_SHAPE_VALUE[choice])
    for name in draw(st.lists(st.sampled_from(list(BAD_SHAPE_VALUE)), max_size=2)):
        args[name] = draw(BAD_SHAPE_VALUE[name])
    return args


KNOWN = st.sampled_from(list(VARIANTS))


def bad_variant_list(limit: int) -> st.SearchStrategy:
    return st.one_of(
        st.just([]),
        JUNK.filter(lambda v: not isinstance(v, list) or not v or not all(isinstance(x, str)
                                                                          for x in v)),
        st.sampled_from(list(VARIANTS)),  # a string, not a list
        st.lists(KNOWN, min_size=limit + 1, max_size=len(VARIANTS), unique=True),  # too many
        st.integers(job_request.MAX_ENTRIES + 1, 200).map(lambda n: ["naive"] * n),  # too long
        st.lists(KNOWN, max_size=2).flatmap(
            lambda ok: st.lists(BAD_VARIANT, min_size=1, max_size=3).map(lambda bad: ok + bad)
        ),
        st.lists(KNOWN, min_size=1, max_size=2).map(lambda ok: [ok]),  # nested
        st.integers(10**3, 10**5).map(lambda n: ["naive"] * n),  # huge
        st.just(("naive", 3)),
    )  # fmt: skip


@st.composite
def bad_compare(draw) -> dict:
    args = dict(variants=["naive"], **JOB)
    if draw(st.booleans()):
        args["variants"] = draw(bad_variant_list(job_request.MAX_COMPARE_VARIANTS[DEVICE]))
    else:
        shape = draw(bad_profile())
        shape.pop("variant")
        if shape == JOB:  # only the variant was bad
            shape["dtype"] = "float64"
        args.update(shape)
    return args


OFFERED = job_request.sweep_lengths(DEVICE)


def _bad_length(v: Any) -> bool:
    whole = isinstance(v, int) or (isinstance(v, float) and math.isfinite(v) and v.is_integer())
    return isinstance(v, bool) or not whole or int(v) not in OFFERED


BAD_LENGTHS = st.one_of(
    st.just([]),
    JUNK.filter(lambda v: not isinstance(v, list) or not v),
    st.lists(st.sampled_from(OFFERED), max_size=3).flatmap(
        lambda ok: st.lists(JUNK.filter(_bad_length), min_size=1, max_size=2).map(
            lambda bad: ok + bad
        )
    ),
    st.lists(st.integers(RANGES["seq_len"][0], RANGES["seq_len"][1]).filter(_bad_length),
             min_size=1, max_size=3),  # in the slider's range, not one of the choices
    st.integers(job_request.MAX_ENTRIES + 1, 200).map(lambda n: [OFFERED[0]] * n),  # too long
    st.integers(10**3, 10**5).map(lambda n: [OFFERED[0]] * n),
    st.just(OFFERED[:1]).map(lambda x: [x]),  # nested
)  # fmt: skip


@st.composite
def bad_sweep(draw) -> dict:
    args = dict(variants=["naive"], seq_lens=[OFFERED[0]], **SHAPE)
    which = draw(st.sampled_from(["variants", "seq_lens", "points", "shape"]))
    if which == "variants":
        args["variants"] = draw(bad_variant_list(job_request.MAX_SWEEP_VARIANTS[DEVICE]))
    elif which == "seq_lens":
        args["seq_lens"] = draw(BAD_LENGTHS)
    elif which == "points":  # each list fine, the product too large
        args["variants"] = ["naive", "naive-inplace", "sdpa-math"]
        args["seq_lens"] = OFFERED[: job_request.MAX_SWEEP_POINTS[DEVICE] // 3 + 1]
        if len(args["seq_lens"]) * 3 <= job_request.MAX_SWEEP_POINTS[DEVICE]:
            args["seq_lens"] = list(range(1, 20))  # a GPU offers more lengths: junk instead
    else:
        name = draw(st.sampled_from([n for n in BAD_SHAPE_VALUE if n != "seq_len"]))
        args[name] = draw(BAD_SHAPE_VALUE[name])
    return args


# -- uploads -----------------------------------------------------------------------------------
BAD_CONTENT = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"[]", b"{}", b"null", b'"x"', b"1e999", b"\x1f\x8b\x08junk",
                     b'{"traceEvents": 5}', b'{"traceEvents": [1, 2]}', b'{"traceEvents": []}',
                     b'{"traceEvents": [{"ph": "X"}]}', b'{"schemaVersion": 1}',
                     b"[" * 100_000 + b"]" * 100_000,
                     b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * 50_000 + b"]" * 50_000
                     + b"}]}"]),
    st.text(max_size=100).map(str.encode),
    st.builds(lambda d: json.dumps(d).encode(), JUNK),
    st.builds(lambda d: gzip.compress(json.dumps(d).encode()), JUNK),
)  # fmt: skip


class Uploads:
    """Writes a drawn upload into a folder and returns what the handler receives."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.n = 0

    def write(self, data: bytes, suffix: str = ".json") -> str:
        self.n += 1
        path = self.folder / f"upload-{self.n}{suffix}"
        path.write_bytes(data)
        return str(path)

    def strategy(self) -> st.SearchStrategy:
        """A bad trace argument: missing, not a path, a path to nothing, or bad content."""
        missing = self.folder / "gone.json"
        return st.one_of(
            st.sampled_from([None, "", 0, 5, [], {}, ["a.json"], {"path": "/etc/passwd"}]),
            st.sampled_from([str(missing), str(self.folder), os.devnull,
                             str(self.folder / "a\x00b.json"), str(self.folder / ("x" * 300))]),
            st.tuples(BAD_CONTENT, st.sampled_from([".json", ".json.gz", ".gz"])).map(
                lambda pair: self.write(*pair)
            ),
        )  # fmt: skip


@pytest.fixture(scope="module")
def uploads(tmp_path_factory) -> Uploads:
    return Uploads(tmp_path_factory.mktemp("uploads"))


BAD_LABEL = st.one_of(
    st.sampled_from(["x" * (MAX_LABEL + 1), IMG, SCRIPT, "a\nb", "a\x00", "`x`", "[x](y)",
                     "*x*", "{}", "%", "a\u202eb", "../x;"]),
    st.text(min_size=1, max_size=60).filter(
        lambda t: len(t.strip()) > MAX_LABEL or not plain_label(t.strip())
    ),
    st.integers(),
    st.lists(st.text(max_size=3), min_size=1, max_size=2),
    st.floats(),
)  # fmt: skip


# -- the property tests ------------------------------------------------------------------------
EXAMPLES = {"profile": 200, "compare": 100, "sweep": 100, "diff": 80, "analyze": 80}
FLOOR = 200  # generated bad inputs that must reach the handlers in a full run
SENT: Counter[str] = Counter()  # per property test: the inputs its body really sent


def sends_at_least(key: str, floor: int, sent: Counter[str]) -> Callable:
    """Wrap a @given test so that, once hypothesis has finished with it, at least `floor`
    generated inputs must have reached the handler (the body counts them in `sent[key]`).

    Checked inside each test, so test order and `-k` selection cannot skip the check; a
    strategy that dries up (filters rejecting most draws, a space that runs out) fails it.
    """

    def wrap(test: Callable) -> Callable:
        @functools.wraps(test)
        def counted(*args: Any, **kwargs: Any) -> None:
            sent[key] = 0
            test(*args, **kwargs)
            assert sent[key] >= floor, f"only {sent[key]} generated inputs reached {key}"

        counted.sends_at_least = (key, floor)  # read by check_total_sent
        return counted

    return wrap


def check_total_sent(
    sent: Counter[str], examples: dict[str, int], floor: int, tests: Iterable[Any]
) -> None:
    """The property tests send at least `floor` inputs in all, whichever ran before this one:
    each fails itself below its own floor (sends_at_least), so one test per key must carry a
    floor of at least its examples, and the floors must add up to `floor`. Where they all ran
    in this process first, what they really sent must add up too. (This once skipped unless
    every one of them had run before it: under another order or `-k` it checked nothing.)"""
    floors = dict(test.sends_at_least for test in tests if hasattr(test, "sends_at_least"))
    assert set(floors) == set(examples), f"property tests without a floor: {floors}"
    assert all(floors[key] >= examples[key] for key in examples), (floors, examples)
    assert sum(floors.values()) >= floor, floors
    if set(examples) <= set(sent):
        assert sum(sent[key] for key in examples) >= floor, dict(sent)


@sends_at_least("profile", EXAMPLES["profile"], SENT)
@settings(max_examples=EXAMPLES["profile"], **SETTINGS)
@given(args=bad_profile())
@example(args={**TINY, "seq_len": math.nan})
@example(args={**TINY, "batch": 2**63, "heads": -(2**63)})
@example(args={**TINY, "variant": "../../etc/passwd", "dtype": IMG})
def test_profile_refuses_generated_bad_inputs_clearly(args):
    SENT["profile"] += 1
    refused(profile_tab.profile, **args, progress=no_progress)


@sends_at_least("compare", EXAMPLES["compare"], SENT)
@settings(max_examples=EXAMPLES["compare"], **SETTINGS)
@given(args=bad_compare())
def test_compare_refuses_generated_bad_inputs_clearly(args):
    SENT["compare"] += 1
    refused(compare_tab.compare, **args, progress=no_progress)


@sends_at_least("sweep", EXAMPLES["sweep"], SENT)
@settings(max_examples=EXAMPLES["sweep"], **SETTINGS)
@given(args=bad_sweep())
def test_sweep_refuses_generated_bad_inputs_clearly(args):
    SENT["sweep"] += 1
    refused(sweep_tab.sweep, **args, progress=no_progress)


@sends_at_least("diff", EXAMPLES["diff"], SENT)
@settings(max_examples=EXAMPLES["diff"], **SETTINGS)
@given(data=st.data())
def test_diff_refuses_generated_bad_uploads_and_labels_clearly(uploads, data):
    a, b = str(NAIVE), str(INPLACE)
    label_a, label_b = "", ""
    which = data.draw(st.sampled_from(["a", "b", "label", "same"]))
    if which == "a":
        a = data.draw(uploads.strategy())
    elif which == "b":
        b = data.draw(uploads.strategy())
    elif which == "label":
        label_a = data.draw(BAD_LABEL)
    else:
        label_a = label_b = data.draw(st.sampled_from(["x", "A", "naive"]))
    SENT["diff"] += 1
    refused(diff_tab.diff, a, b, label_a, label_b)


@sends_at_least("analyze", EXAMPLES["analyze"], SENT)
@settings(max_examples=EXAMPLES["analyze"], **SETTINGS)
@given(data=st.data())
def test_analyze_refuses_generated_bad_uploads_clearly(uploads, data):
    trace = data.draw(uploads.strategy())
    SENT["analyze"] += 1
    try:
        outputs = analyze_tab.analyze(trace)
    except gr.Error as error:
        clear_message(error.message, trace)
        return
    # a bad upload can still be a (tiny) trace: `[]` or JSON with events is analysed
    assert len(outputs) == 8 and "Summary" in outputs[0], trace


NESTED = b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # msgspec answered JSON nested 50,000 deep with RecursionError: the generic error (Diff)
        (lambda t: str(_write(t / "nested.json", NESTED)), "not valid JSON"),
        # os.stat raised ValueError on a NUL byte: the generic error
        (lambda t: str(t / "a\x00b.json"), "not a valid file name"),
        # refused before, as "cannot open … Is a directory" or (st_size 0) "the file is empty";
        # now named for what they are, before anything opens them (a pipe's reader would block)
        (lambda t: str(t), "not a regular file"),
        (lambda t: os.devnull, "not a regular file"),
        (lambda t: _fifo(t / "pipe.json"), "not a regular file"),
    ],
)
def test_uploads_that_are_not_trace_files_are_refused_before_reading(tmp_path, make, message):
    path = make(tmp_path)
    try:
        for fn, args in (
            (analyze_tab.analyze, (path,)),
            (diff_tab.diff, (str(NAIVE), path, "", "")),
        ):
            error = _within(5, lambda fn=fn, args=args: refused(fn, *args))
            assert message in error.message
    finally:
        _release(path)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _release(path: str) -> None:
    """A reader blocked on a pipe (when the check is missing) is let go, so the run can end."""
    try:
        if stat.S_ISFIFO(os.stat(path).st_mode):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except (OSError, ValueError):
        pass


def _within(seconds: float, fn):
    """fn() in a thread: a handler that blocks (reading a pipe) fails the test, not hangs it."""
    import concurrent.futures

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(fn).result(timeout=seconds)
    finally:
        pool.shutdown(wait=False)


def test_at_least_200_generated_bad_inputs_reach_the_handlers():
    check_total_sent(SENT, EXAMPLES, FLOOR, list(globals().values()))


# Trace-shaped documents with every field junk: a clear result or a clear error, never a crash.
_ANY = st.one_of(
    JUNK,
    st.sampled_from(
        [
            "X",
            "M",
            "kernel",
            "cpu_op",
            "cuda_runtime",
            "attn_fwd",
            "ProfilerStep#1",
            "gpu_memcpy",
            "thread_name",
            IMG,
        ]
    ),
)
EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "M", "i", "f", "s"]) | _ANY,
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "gpu_memcpy",
                                "user_annotation", "gpu_memset"]) | _ANY,
        "name": st.sampled_from(["attn_fwd", "ProfilerStep#1", "aten::mm", "void k<int>()",
                                 "thread_name", "process_labels", IMG, SCRIPT]) | _ANY,
        "pid": _ANY, "tid": _ANY, "ts": st.floats(0, 1e6) | _ANY, "dur": st.floats(0, 1e3) | _ANY,
        "args": st.fixed_dictionaries({}, optional={k: _ANY for k in (
            "correlation", "External id", "stream", "device", "grid", "block", "name", "labels",
            "registers per thread", "shared memory", "est. achieved occupancy %")}) | _ANY,
    },
)  # fmt: skip
TRACE_DOC = st.one_of(
    st.fixed_dictionaries(
        {"traceEvents": st.lists(EVENT, max_size=15)},
        optional={"deviceProperties": _ANY | st.lists(st.dictionaries(st.text(max_size=8), _ANY)),
                  "schemaVersion": _ANY, "cuda_runtime_version": _ANY},
    ),
    st.lists(EVENT, max_size=6),
)  # fmt: skip


@settings(max_examples=50, **SETTINGS)  # two worker reads an example: 100 took 2 min of CI
@given(doc=TRACE_DOC)
# lists where text or an id goes raised ValueError in the parser (numpy arrays of lists): the
# generic error, until the upload boundary turned them into "could not be read"
@example(doc={"traceEvents": [{"ph": []}]})
@example(doc={"traceEvents": [{"ph": "X", "name": [], "ts": 1, "dur": 1}]})
@example(doc={"traceEvents": [{"ph": "X", "ts": 1, "dur": 1, "pid": []}]})
@example(doc={"traceEvents": [{"ph": "X", "ts": 1e308, "dur": 1e308, "cat": {"a": 1}}]})
def test_junk_traces_are_analysed_or_refused_clearly(uploads, doc):
    path = uploads.write(json.dumps(doc).encode())
    for call in (
        lambda: analyze_tab.analyze(path),
        lambda: diff_tab.diff(path, str(NAIVE), "junk", "naive"),
    ):
        try:
            call()
        except gr.Error as error:
            clear_message(error.message, doc)


def test_slider_ranges_are_enforced_in_the_backend():
    """The page's ranges, not only Workload's wider LIMITS: what Gradio's slider used to refuse."""
    high = RANGES["seq_len"][1]
    error = refused(profile_tab.profile, **{**TINY, "seq_len": high * 2}, progress=no_progress)
    assert f"seq_len must be between {RANGES['seq_len'][0]} and {high}" in error.message
    error = refused(
        compare_tab.compare,
        ["naive"],
        **{**JOB, "heads": RANGES["heads"][1] + 1},
        progress=no_progress,
    )
    assert "heads must be between" in error.message
    error = refused(sweep_tab.sweep, ["naive"], [OFFERED[0] + 64], **SHAPE, progress=no_progress)
    assert "must be one of" in error.message


def test_a_valid_small_request_still_succeeds_afterwards():
    outputs = profile_tab.profile(**TINY, progress=no_progress)
    strip, summary, gz = outputs[0], outputs[1], outputs[PROFILE_FILES.stop - 2]
    assert {k: summary["config"][k] for k in TINY} == TINY
    assert "CPU µs / forward" in strip and Path(gz).exists()
