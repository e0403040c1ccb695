"""Model runs in the run store (issue 43): each implementation of a real tiny transformers
model run (CPU) is one stored run, listed with a readable label, read back into the Model
views it showed, found on its own trend; an older store gains v3's columns by migration; an
import checks a model run's fields and summary as strictly as the store reads them back.
Real SQLite, a real transformers model, no mocks."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from profiling.run.model.result import ImplementationRun
from profiling.run.model.runner import run
from profiling.store import open_store, query, schema
from profiling.store.exchange import export_runs, import_runs
from profiling.store.hooks import keep, model_runs
from profiling.store.model_summary import BadSummary, model_run, summary_of
from profiling.store.model_summary import figures as model_figures
from profiling.store.rows import MACHINE_FIELDS
from profiling.store.write import record
from profiling.views.model import table, why
from profiling.workload.model.spec import ModelWorkload
from tests.store.store_helpers import count, run_data
from tests.store.test_store_import import spoil

RAGGED = dict(preset="tiny", batch=2, seq_len=32, lengths="32,20", dtype="float32", steps=1)
LABEL = "tiny ×2 layers B2 S32 lengths 32,20 float32 prefill"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """eager and sdpa run on a CPU; kernels is refused there, with its reason."""
    workload = ModelWorkload.from_user(implementations="eager,sdpa,kernels", **RAGGED)
    return run(workload, tmp_path_factory.mktemp("model"))


@pytest.fixture
def store(tmp_path):
    return open_store(tmp_path / "runs.sqlite")


def _kept(store, model) -> dict[str, dict[str, Any]]:
    ids = keep(model_runs(model, "test"), store).ids
    pairs = zip(model.runs, ids, strict=True)
    return {item.id: query.get_run(store, run_id) for item, run_id in pairs}


def test_each_implementation_is_one_run_listed_with_a_readable_label(store, model):
    rows = _kept(store, model)
    listed, total = query.list_runs(store)
    assert total == 3 and set(listed["kind"]) == {"model"}
    assert listed["variant"].tolist() == ["kernels", "sdpa", "eager"]  # newest first
    assert set(listed["shape"]) == {LABEL}  # preset, layers, shape, lengths, dtype, mode
    assert query.list_runs(store, query.checked_filters(shape="lengths 32,20"))[1] == 3
    eager, sdpa, kernels = rows["eager"], rows["sdpa"], rows["kernels"]
    for row in rows.values():
        assert (row["preset"], row["layers"], row["lengths"], row["new_tokens"]) == (
            "tiny", 2, "32,20", None)  # fmt: skip
        assert (row["batch"], row["seq_len"], row["dtype"], row["mode"]) == (
            2, 32, "float32", "prefill")  # fmt: skip
    items = {item.id: item for item in model.runs}
    for name, row in (("eager", eager), ("sdpa", sdpa)):
        item = items[name]
        assert row["status"] == "ok" and row["ran"] == item.ran and row["trace_hash"]
        assert row["cpu_us"] == pytest.approx(item.split.step_us)  # the step, from the trace
        assert row["cpu_us_median"] == pytest.approx(item.timed_ms * 1e3)  # the bare median
        assert row["rel_err"] == pytest.approx(item.logits_error, abs=1e-12)
        assert row["gpu_us"] is None and row["device_name"] == model.device_name
    assert kernels["status"] == "unavailable" and "needs a CUDA GPU" in kernels["reason"]
    assert kernels["summary_json"] is None and kernels["trace_hash"] is None
    assert len({row["workload_key"] for row in rows.values()}) == 3  # one per implementation


def test_a_stored_model_run_reads_back_into_the_views_it_showed(store, model):
    rows = _kept(store, model)
    for item in model.runs[:2]:
        stored = model_run(json.loads(rows[item.id]["summary_json"]))
        alone = type(model)(model.workload, model.text, model.device, model.build_s, [item])
        assert table.comparison(stored).equals(table.comparison(alone))
        assert table.categories(stored).equals(table.categories(alone))
        assert table.layers(stored).equals(table.layers(alone))
        assert why.lines(stored) == why.lines(alone)
        assert stored.runs[0].sdpa == item.sdpa and stored.runs[0].pad == item.pad
    assert "SDPA" in why.text(model_run(json.loads(rows["sdpa"]["summary_json"])))


def test_a_model_run_has_its_own_trend_apart_from_a_variants(store, model, tmp_path):
    """Its trend holds the runs of its model workload: one decoder layer fewer is another."""
    first, again = _kept(store, model), _kept(store, model)
    fewer = ModelWorkload.from_user(implementations="sdpa", layers=1, check=False, **RAGGED)
    (shallow,) = _kept(store, run(fewer, tmp_path)).values()
    variant = query.get_run(store, record(store, run_data(variant="sdpa")).run_id)
    trend = query.workload_runs(store, first["sdpa"])
    assert trend["id"].tolist() == [first["sdpa"]["id"], again["sdpa"]["id"]]
    assert query.workload_runs(store, shallow)["id"].tolist() == [shallow["id"]]
    assert query.workload_runs(store, variant)["id"].tolist() == [variant["id"]]


def _v2_store(path: Path) -> None:
    """A store as the second schema left it, with one run."""
    with sqlite3.connect(path) as connection:
        for script in schema.MIGRATIONS[:2]:
            for statement in schema.statements(script):
                connection.execute(statement)
        connection.execute(
            "INSERT INTO runs (id, created, kind, origin, workload_key, variant, status) "
            "VALUES ('old-run', 1.7e9, 'profile', 'cli', '[]', 'naive', 'ok')"
        )
        connection.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
        connection.execute("PRAGMA user_version = 2")


def test_a_v2_store_is_migrated_and_then_keeps_model_runs(store, model):
    _v2_store(store.path)
    rows = _kept(store, model)
    with sqlite3.connect(store.path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == schema.VERSION == 3
    old = query.get_run(store, "old-run")
    assert (old["preset"], old["layers"], old["lengths"], old["new_tokens"]) == (None,) * 4
    assert rows["eager"]["preset"] == "tiny" and count(store) == 4


def _exported(tmp_path: Path, model, suffix: str) -> Path:
    source = open_store(tmp_path / "source.sqlite")
    keep(model_runs(model, "test"), source)
    path = tmp_path / f"runs{suffix}"
    export_runs(source, path)
    return path


def _in_summary(change):
    """A change to the summary JSON of the runs spoil() reaches (sdpa's: the second run)."""

    def changed(row: dict) -> None:
        summary = json.loads(row["summary_json"])
        change(summary)
        row["summary_json"] = json.dumps(summary)

    return changed


def _set(path: str, value: Any):
    def change(summary: dict) -> None:
        *parents, name = path.split(".")
        held = summary
        for parent in parents:
            held = held[parent]
        held[name] = value

    return change


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_exported_model_runs_import_whole(tmp_path, model, suffix):
    path = _exported(tmp_path, model, suffix)
    store = open_store(tmp_path / "here.sqlite")
    assert import_runs(store, path).added == 3
    runs = query.list_runs(store)[0]
    assert set(runs["kind"]) == {"model"} and set(runs["shape"]) == {LABEL}
    sdpa = query.get_run(store, runs[runs["variant"] == "sdpa"]["id"].iloc[0])
    assert model_run(json.loads(sdpa["summary_json"])).runs[0].backend == "flash (CPU)"


# (case, change, table, what the message says); a run's change reaches the second and third runs
# (sdpa's, kernels'), every run's where a Parquet column must keep one type ("every")
BAD = [
    ("kind unknown", lambda run: run.update(kind="model-x"), "run", "kind must be one of"),
    ("model without preset", lambda run: run.update(preset=None), "run",
     "preset of a model run must be given"),
    ("model of 0 layers", lambda run: run.update(layers=0), "run",
     "layers of a model run must be given"),
    ("every layers as text", lambda run: run.update(layers="two"), "run",
     "layers must be a finite number"),
    ("summary without its model", _in_summary(lambda s: s.pop("model")), "summaries",
     "model must be an object"),
    ("a negative step", _in_summary(_set("implementation.split.step_us", -1.0)), "summaries",
     "split.step_us must be 0 or more"),
    ("a category of its own", _in_summary(_set("implementation.split.categories.evil", 1.0)),
     "summaries", "split.categories must be named as"),
    ("a category's time as text", _in_summary(_set("implementation.split.categories.norms",
     "x")), "summaries", r"split.categories\[norms\] must be a finite number"),
    ("a layer of two values", _in_summary(_set("implementation.split.layers", [[0, 1.0]])),
     "summaries", r"split.layers must be a list of \[3 values\]"),
    ("a backend's verdict as text", _in_summary(_set("implementation.sdpa.checks",
     [["flash", "yes", []]])), "summaries", "sdpa.checks must be true or false"),
    ("pad tokens negative", _in_summary(_set("implementation.pad.pad_tokens", -3)),
     "summaries", "pad.pad_tokens must be a whole number"),
    ("an error of infinity", _in_summary(_set("implementation.logits_error", float("inf"))),
     "summaries", "logits_error must be a finite number"),
    ("a device of its own", _in_summary(_set("model.device", "tpu")), "summaries",
     "model.device must be cpu or cuda"),
    ("a workload of objects", _in_summary(_set("model.workload.preset", {"a": 1})),
     "summaries", "model.workload.preset must be text, a number"),
    ("100000 notes", _in_summary(_set("model.notes", ["n"] * 100_000)), "summaries",
     "model.notes must be a list of at most 4096"),
]  # fmt: skip


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
@pytest.mark.parametrize(("case", "change", "table", "said"), BAD, ids=[b[0] for b in BAD])
def test_each_bad_model_field_refuses_the_file(tmp_path, model, suffix, case, change, table, said):
    path = _exported(tmp_path, model, suffix)
    spoil(path, change, every=case.startswith("every "), table=table)
    store = open_store(tmp_path / "here.sqlite")
    with pytest.raises(ValueError) as refused:
        import_runs(store, path)
    message = str(refused.value)
    assert path.name in message and "nothing was imported" in message, message[:400]
    assert re.search(said, message), message[:400]
    assert "\n" not in message and len(message) < 400
    assert not store.path.exists() or count(store) == 0


def test_a_summary_written_is_read_back_field_for_field(model):
    eager = model.runs[0]
    decoded = replace(eager, tokens_per_s=812.5, pad=None, sdpa=None)  # a decode's figure
    for item in [*model.runs[:2], decoded]:
        written = summary_of(model, item)
        parsed = model_run(json.loads(json.dumps(written)))
        assert summary_of(parsed, parsed.runs[0]) == written
        assert parsed.runs[0] == replace(item, gantt=None, trace="")  # every field kept
    with pytest.raises(BadSummary, match="summary must be an object"):
        model_run([1, 2])


def _filed(model, **workload) -> list[dict[str, Any]]:
    """The config each implementation is filed under, with the workload's fields changed."""
    changed = replace(model, workload={**model.workload, **workload})
    return [data.config for data in model_runs(changed, "test")]


def test_each_implementation_is_filed_under_its_workload_where_it_ran(model):
    """History's filters, the trend's workload key and the import's checks read these."""
    runs = model_runs(model, "page")
    assert model.workload["device"] == "auto" and model.device == "cpu"  # the device it ran on
    for data, item in zip(runs, model.runs, strict=True):
        assert data.config == {
            "seq_len": 32, "dtype": "float32", "batch": 2, "mode": "prefill", "steps": 1,
            "preset": "tiny", "layers": 2, "variant": item.id, "causal": True,
            "timing": "eager", "device": "cpu", "lengths": "32,20", "new_tokens": None,
        }  # fmt: skip
        assert (data.kind, data.origin, data.label) == ("model", "page", LABEL)
    # a full batch's lengths are not kept (one workload with the same batch given without them)
    assert {c["lengths"] for c in _filed(model, lengths=(32, 32))} == {None}
    assert {c["lengths"] for c in _filed(model, lengths=None)} == {None}
    decode = _filed(model, mode="decode", new_tokens=5)
    assert {(c["mode"], c["new_tokens"]) for c in decode} == {("decode", 5)}
    assert {c["new_tokens"] for c in _filed(model, new_tokens=5)} == {None}  # prefill has none


def test_an_implementation_that_did_not_run_keeps_its_reason_and_no_trace(model, tmp_path):
    """Out of memory is its own status (History's filter); a trace written before a failure
    is not kept: only a run that ran has figures to go with it."""
    written = tmp_path / "partial.json.gz"
    written.write_bytes(b"")
    items = [
        ImplementationRun("sdpa", failed="CUDA out of memory. Tried to allocate 2.00 GiB"),
        ImplementationRun("eager", failed="RuntimeError: shape mismatch", trace=str(written)),
        ImplementationRun("kernels", refused="needs a CUDA GPU"),
    ]
    got = [(d.status, d.reason, d.summary, d.trace_gz)
           for d in model_runs(replace(model, runs=items), "test")]  # fmt: skip
    assert got == [
        ("oom", "CUDA out of memory. Tried to allocate 2.00 GiB", None, None),
        ("failed", "RuntimeError: shape mismatch", None, None),
        ("unavailable", "needs a CUDA GPU", None, None),
    ]
    ran = model_runs(model, "test")[0]
    assert ran.status == "ok" and ran.trace_gz == Path(model.runs[0].trace)


K = "implementation."
# (path in the summary, a bad value, the refusal after "the model summary's "): a stranger's
# import is told which field of which run is wrong, by the name it has in the file
BAD_FIELDS = [
    (("model",), 5, "model must be an object, not 5"),
    (("model", "device"), "tpu", "model.device must be cpu or cuda, not 'tpu'"),
    (("model", "notes"), ["ok", 3], "model.notes must be text, not 3"),
    (("model", "text"), 7, "model.text must be text, not 7"),
    (("model", "build_s"), "fast", "model.build_s must be a finite number, not 'fast'"),
    (("model", "device_name"), None, "model.device_name must be text, not None"),
    (("model", "versions"), [], "model.versions must be an object, not []"),
    (("model", "versions", "torch"), {"x": 1},
     "model.versions.torch must be text, a number, true/false or a list of those, not {'x': 1}"),
    (("model", "machine"), "h100", "model.machine must be an object, not 'h100'"),
    (("model", "machine", "gpu_count"), float("nan"),
     "model.machine.gpu_count must be text, a number, true/false or a list of those, not nan"),
    (("model", "workload"), 3, "model.workload must be an object, not 3"),
    (("implementation",), [], "implementation must be an object, not []"),
    (("implementation", "id"), 1, "implementation.id must be text, not 1"),
    (("implementation", "backend"), 2, "implementation.backend must be text, not 2"),
    (("implementation", "timed_ms"), "slow",
     "implementation.timed_ms must be a finite number, not 'slow'"),
    (("implementation", "attention_kernels"), [["a"]],
     K + "attention_kernels must be a list of [2 values], not ['a']"),
    (("implementation", "attention_kernels"), [[1, 2.0]],
     K + "attention_kernels must be text, not 1"),
    (("implementation", "attention_kernels"), [["a", "b"]],
     K + "attention_kernels must be a finite number, not 'b'"),
    (("implementation", "split"), 1, "split must be an object, not 1"),
    (("implementation", "split", "categories"), [], "split.categories must be an object, not []"),
    (("implementation", "split", "categories"), {"other": 1.0},
     "split.categories must be named as attention, GEMMs (projections, MLP, LM head), norms, "
     "rotary and other elementwise, copies, idle gaps, framework (Python, markers), not 'other'"),
    (("implementation", "split", "categories", "norms"), "x",
     "split.categories[norms] must be a finite number, not 'x'"),
    (("implementation", "split", "layers"), [[0, 1.0]],
     "split.layers must be a list of [3 values], not [0, 1.0]"),
    (("implementation", "split", "layers"), [[-1, 1.0, 1.0]],
     "split.layers must be a whole number, 0 or more, not -1"),
    (("implementation", "split", "layers"), [[0, "a", 1.0]],
     "split.layers must be a finite number, not 'a'"),
    (("implementation", "split", "layers"), [[0, 1.0, "b"]],
     "split.layers must be a finite number, not 'b'"),
    (("implementation", "split", "on_gpu"), "no", "split.on_gpu must be true or false, not 'no'"),
    (("implementation", "split", "steps"), 1.5,
     "split.steps must be a whole number, 0 or more, not 1.5"),
    (("implementation", "split", "step_us"), None,
     "split.step_us must be a finite number, not None"),
    (("implementation", "split", "attention_kernels"), [[1, 1.0]],
     "split.attention_kernels must be text, not 1"),
    (("implementation", "sdpa"), 2, "sdpa must be an object, not 2"),
    (("implementation", "sdpa", "checks"), [["flash", True]],
     "sdpa.checks must be a list of [3 values], not ['flash', True]"),
    (("implementation", "sdpa", "checks"), [[1, True, []]], "sdpa.checks must be text, not 1"),
    (("implementation", "sdpa", "checks"), [["flash", "y", []]],
     "sdpa.checks must be true or false, not 'y'"),
    (("implementation", "sdpa", "checks"), [["flash", True, "why"]],
     "sdpa.checks must be a list of at most 4096 entries, not 'why'"),
    (("implementation", "sdpa", "checks"), [["flash", True, [3]]],
     "sdpa.checks' reasons must be text, not 3"),
    (("implementation", "sdpa", "call"), 1, "sdpa.call must be text, not 1"),
    (("implementation", "sdpa", "chosen"), None, "sdpa.chosen must be text, not None"),
    (("implementation", "pad"), 1, "pad must be an object, not 1"),
    (("implementation", "pad", "implementation"), 2, "pad.implementation must be text, not 2"),
    (("implementation", "pad", "pad_tokens"), -1,
     "pad.pad_tokens must be a whole number, 0 or more, not -1"),
    (("implementation", "pad", "tokens"), True,
     "pad.tokens must be a whole number, 0 or more, not True"),
    (("implementation", "pad", "tokens"), 2**63,
     "pad.tokens must be a whole number, 0 or more, not 9223372036854775808"),
    (("implementation", "pad", "pad_flops"), "x", "pad.pad_flops must be a finite number, not 'x'"),
    (("implementation", "pad", "flops"), -2.0, "pad.flops must be 0 or more, not -2.0"),
]  # fmt: skip


def _sdpa_summary(model) -> dict[str, Any]:
    """sdpa's summary as the store keeps it (JSON): it has SDPA's account and the padding."""
    sdpa = next(item for item in model.runs if item.id == "sdpa")
    assert sdpa.sdpa is not None and sdpa.pad is not None
    return json.loads(json.dumps(summary_of(model, sdpa)))


def _changed(summary: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    node = summary
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return summary


@pytest.mark.parametrize(
    "path, bad, said", BAD_FIELDS, ids=[f"{i}-{'.'.join(c[0])}" for i, c in enumerate(BAD_FIELDS)]
)
def test_a_bad_field_is_refused_by_its_name(model, path, bad, said):
    with pytest.raises(BadSummary) as refused:
        model_run(_changed(_sdpa_summary(model), path, bad))
    assert str(refused.value) == f"the model summary's {said}"


@pytest.mark.parametrize(
    "path, edge",
    [
        (("implementation", "pad", "tokens"), 2**63 - 1),  # the largest SQLite integer
        (("model", "notes"), [""] * 4096),  # a list at its limit
        (("model", "versions", "torch"), ["2.11"] * 4096),
        (("model", "machine", "device_memory_gib"), 79.6),  # a finite float
        (("model", "device"), "cuda"),
    ],
    ids=["largest-integer", "notes-at-limit", "versions-at-limit", "float", "cuda"],
)
def test_values_at_the_limits_are_read(model, path, edge):
    read = model_run(_changed(_sdpa_summary(model), path, edge))
    assert read.runs[0].id == "sdpa"


def test_a_runs_row_files_its_figures_under_the_device_it_ran_on(model):
    """History's columns: the step and its bare median as CPU figures here, as GPU figures for
    a run made on a GPU (an imported one, say); the machine's fields beside them."""
    eager = model.runs[0]
    summary = json.loads(json.dumps(summary_of(model, eager)))
    step, median = eager.split.step_us, eager.timed_ms * 1e3
    same = {
        "ran": eager.ran, "rel_err": eager.logits_error, "device_name": model.device_name,
        "torch_version": model.versions["torch"],
        **{name: model.machine[name] for name in MACHINE_FIELDS},
    }  # fmt: skip
    assert model.machine["gpu_count"] == 0 and model.machine["triton_version"]
    assert model_figures(summary, MACHINE_FIELDS) == {
        **same, "gpu_us": None, "gpu_us_median": None, "cpu_us": step, "cpu_us_median": median,
        "device_kind": "cpu",
    }  # fmt: skip
    gpu = {"device": "cuda", "machine": {**model.machine, "gpu_count": 1}}
    summary["model"] |= gpu
    assert model_figures(summary, MACHINE_FIELDS) == {
        **same, "gpu_count": 1, "gpu_us": step, "gpu_us_median": median, "cpu_us": None,
        "cpu_us_median": None, "device_kind": "cuda",
    }  # fmt: skip
    summary["implementation"] |= {"timed_ms": None, "ran": ""}  # not timed apart; ran unsaid
    found = model_figures(summary, MACHINE_FIELDS)
    assert (found["gpu_us_median"], found["ran"]) == (None, None)
