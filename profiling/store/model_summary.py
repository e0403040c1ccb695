"""A model run as the store keeps it (issue 43): each implementation's run of a model workload
is one stored run, its summary one JSON object, written from the run's plain data
(`summary_of`) and read back into a ModelRun holding that one implementation (`model_run`).

A store may be imported (a stranger's file), so reading checks every field: its type, its
range (no negative time, no NaN), the step's categories by name, and the lengths of its lists;
the first bad field raises BadSummary naming it. The import refuses a model run whose summary
fails here (profiling.store.imported), and a reopened one says why it cannot be shown. The
Gantt is not kept here: the kept trace makes it again when the run is reopened.
"""

from __future__ import annotations

import math
from typing import Any

from profiling.analysis.model.padding import PadFigures
from profiling.analysis.model.step import CATEGORIES, StepSplit
from profiling.run.model.result import ImplementationRun, ModelRun, SdpaAccount
from profiling.user_values import show

MODEL_KINDS = ("model", "model-sweep")  # a Model tab's (or CLI's) run, a model Sweep's point
MAX_ITEMS = 4096  # entries of one list (decoder layers, kernels, notes)
DEVICES = ("cpu", "cuda")


class BadSummary(ValueError):
    """A stored model summary no run of this tool writes: the message names the field."""


# -- writing: a run's plain data as JSON ----------------------------------------------------
def _split(split: StepSplit | None) -> dict[str, Any] | None:
    if split is None:
        return None
    return {"step_us": split.step_us, "categories": dict(split.categories),
            "layers": [list(layer) for layer in split.layers], "on_gpu": split.on_gpu,
            "steps": split.steps,
            "attention_kernels": [list(kernel) for kernel in split.attention_kernels]}  # fmt: skip


def _implementation(item: ImplementationRun) -> dict[str, Any]:
    sdpa, pad = item.sdpa, item.pad
    return {
        "id": item.id, "refused": item.refused, "failed": item.failed, "ran": item.ran,
        "note": item.note, "backend": item.backend, "timed_ms": item.timed_ms,
        "logits_error": item.logits_error, "tokens_per_s": item.tokens_per_s,
        "split": _split(item.split),
        "sdpa": None if sdpa is None else {
            "call": sdpa.call, "chosen": sdpa.chosen,
            "checks": [[backend, accepts, list(reasons)]
                       for backend, accepts, reasons in sdpa.checks]},
        "attention_kernels": [list(kernel) for kernel in item.attention_kernels],
        "pad": None if pad is None else {
            "implementation": pad.implementation, "pad_tokens": pad.pad_tokens,
            "tokens": pad.tokens, "pad_flops": pad.pad_flops, "flops": pad.flops},
    }  # fmt: skip


def summary_of(result: ModelRun, item: ImplementationRun) -> dict[str, Any]:
    """One implementation's stored summary: the model run it belongs to, and its own figures."""
    workload = {name: list(value) if isinstance(value, tuple) else value
                for name, value in result.workload.items()}  # fmt: skip
    model = {"workload": workload, "text": result.text, "device": result.device,
             "device_name": result.device_name, "versions": dict(result.versions),
             "machine": dict(result.machine), "build_s": result.build_s,
             "notes": list(result.notes)}  # fmt: skip
    return {"model": model, "implementation": _implementation(item)}


def figures(summary: dict[str, Any], machine_fields: tuple[str, ...]) -> dict[str, Any]:
    """The runs row's figures of a model run: the step's µs from the trace (gpu_us on a GPU,
    cpu_us on a CPU), the median of its bare timed steps (the _median column), what ran, the
    logits' error against eager (rel_err), and the machine."""
    model, item = summary["model"], summary["implementation"]
    split = item.get("split") or {}
    step = split.get("step_us")
    timed = item.get("timed_ms")
    median = None if timed is None else timed * 1e3
    on_gpu = model.get("device") == "cuda"
    machine = model.get("machine") or {}
    return {
        "ran": item.get("ran") or None,
        "gpu_us": step if on_gpu else None, "gpu_us_median": median if on_gpu else None,
        "cpu_us": None if on_gpu else step, "cpu_us_median": None if on_gpu else median,
        "rel_err": item.get("logits_error"), "device_kind": model.get("device"),
        "device_name": model.get("device_name"),
        "torch_version": (model.get("versions") or {}).get("torch"),
        **{name: machine.get(name) for name in machine_fields},
    }  # fmt: skip


# -- reading: every field checked ----------------------------------------------------------
def _bad(where: str, expected: str, value: Any) -> BadSummary:
    return BadSummary(f"the model summary's {where} must be {expected}, not {show(value)}")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(where, "an object", value)
    return value


def _items(value: Any, where: str, size: int | None = None) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise _bad(where, f"a list of at most {MAX_ITEMS} entries", value)
    for entry in value if size else ():
        if not isinstance(entry, list) or len(entry) != size:
            raise _bad(where, f"a list of [{size} values]", entry)
    return value


def _text(value: Any, where: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _bad(where, "text", value)
    return value


def _number(value: Any, where: str, optional: bool = False) -> float | None:
    """A finite number ≥ 0 (times, errors, FLOPs, rates)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(where, "a finite number", value)
    if value < 0:
        raise _bad(where, "0 or more", value)
    return float(value)


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise _bad(where, "a whole number, 0 or more", value)
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(where, "true or false", value)
    return value


def _kernels(value: Any, where: str) -> list[tuple[str, float]]:
    return [(_text(name, where), _number(us, where))
            for name, us in _items(value, where, 2)]  # type: ignore[misc]  # fmt: skip


def _read_split(raw: Any) -> StepSplit | None:
    if raw is None:
        return None
    raw = _object(raw, "split")
    categories = _object(raw.get("categories"), "split.categories")
    for name, us in categories.items():
        if name not in CATEGORIES:
            raise _bad("split.categories", f"named as {', '.join(CATEGORIES)}", name)
        _number(us, f"split.categories[{name}]")
    layers = [
        (
            _whole(index, "split.layers"),
            _number(total, "split.layers"),
            _number(attention, "split.layers"),
        )
        for index, total, attention in _items(raw.get("layers"), "split.layers", 3)
    ]
    return StepSplit(
        _number(raw.get("step_us"), "split.step_us"), {k: float(v) for k, v in categories.items()},
        layers, _flag(raw.get("on_gpu"), "split.on_gpu"), _whole(raw.get("steps"), "split.steps"),
        _kernels(raw.get("attention_kernels"), "split.attention_kernels"),
    )  # type: ignore[arg-type]  # fmt: skip


def _read_sdpa(raw: Any) -> SdpaAccount | None:
    if raw is None:
        return None
    raw = _object(raw, "sdpa")
    checks = []
    for backend, accepts, reasons in _items(raw.get("checks"), "sdpa.checks", 3):
        said = tuple(_text(r, "sdpa.checks' reasons") for r in _items(reasons, "sdpa.checks"))
        checks.append((_text(backend, "sdpa.checks"), _flag(accepts, "sdpa.checks"), said))
    return SdpaAccount(_text(raw.get("call"), "sdpa.call"), _text(raw.get("chosen"),
                       "sdpa.chosen"), checks)  # type: ignore[arg-type]  # fmt: skip


def _read_pad(raw: Any) -> PadFigures | None:
    if raw is None:
        return None
    raw = _object(raw, "pad")
    return PadFigures(
        _text(raw.get("implementation"), "pad.implementation"),
        _whole(raw.get("pad_tokens"), "pad.pad_tokens"), _whole(raw.get("tokens"), "pad.tokens"),
        _number(raw.get("pad_flops"), "pad.pad_flops"), _number(raw.get("flops"), "pad.flops"),
    )  # type: ignore[arg-type]  # fmt: skip


def _read_implementation(raw: Any) -> ImplementationRun:
    raw = _object(raw, "implementation")
    texts = {name: _text(raw.get(name), f"implementation.{name}")
             for name in ("id", "refused", "failed", "ran", "note")}  # fmt: skip
    numbers = {name: _number(raw.get(name), f"implementation.{name}", optional=True)
               for name in ("timed_ms", "logits_error", "tokens_per_s")}  # fmt: skip
    return ImplementationRun(
        **texts, **numbers, split=_read_split(raw.get("split")),
        backend=_text(raw.get("backend"), "implementation.backend", optional=True),
        sdpa=_read_sdpa(raw.get("sdpa")), pad=_read_pad(raw.get("pad")),
        attention_kernels=_kernels(
            raw.get("attention_kernels"), "implementation.attention_kernels"
        ),
    )  # type: ignore[arg-type]  # fmt: skip


def _plain_values(raw: Any, where: str) -> dict[str, Any]:
    """An object of plain values (text, numbers, true/false, null, lists of those)."""
    found = _object(raw, where)
    for name, value in found.items():
        items = value if isinstance(value, list) else [value]
        if len(items) > MAX_ITEMS or not all(
            v is None or isinstance(v, str | bool | int) or
            (isinstance(v, float) and math.isfinite(v)) for v in items
        ):  # fmt: skip
            raise _bad(f"{where}.{name}", "text, a number, true/false or a list of those", value)
    return found


def model_run(summary: Any) -> ModelRun:
    """A stored model summary read back, every field checked (BadSummary names the first bad
    one): the ModelRun of its one implementation."""
    summary = _object(summary, "summary")
    model = _object(summary.get("model"), "model")
    device = model.get("device")
    if device not in DEVICES:
        raise _bad("model.device", " or ".join(DEVICES), device)
    notes = [_text(note, "model.notes") for note in _items(model.get("notes"), "model.notes")]
    return ModelRun(
        _plain_values(model.get("workload"), "model.workload"), _text(model.get("text"),
        "model.text"), device, _number(model.get("build_s"), "model.build_s"),
        [_read_implementation(summary.get("implementation"))], notes,
        device_name=_text(model.get("device_name"), "model.device_name"),
        versions=_plain_values(model.get("versions"), "model.versions"),
        machine=_plain_values(model.get("machine"), "model.machine"),
    )  # type: ignore[arg-type]  # fmt: skip
