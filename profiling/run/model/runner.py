"""A model run: the preset built once, then each implementation warmed up, profiled over its
measured steps (the project's schedule, spans and one trace read), timed apart without the
profiler, and its logits checked against eager's in float32 on the real tokens.

Shares the variants' runner lock (one profiler at a time in a process). An implementation a
known rule refuses is said with its reason and the others still run; one that breaks is said
as a failure, its memory released, and the others still run.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from torch.profiler import ProfilerActivity, profile, schedule

from attention.sdpa import REFUSALS as SDPA_REFUSALS
from attention.sdpa_reasons import backend_checks, chosen_backend, first_line, torch_warnings
from attention.variant import VariantUnavailable
from profiling.analysis.model.padding import pad_figures
from profiling.analysis.model.step import split_step
from profiling.analysis.summary import sdpa_backend
from profiling.gantt.spec import gantt_spec
from profiling.run.export import GZIP_POOL, gzip_file
from profiling.run.model import build as building
from profiling.run.model import kernels
from profiling.run.model.implementations import (
    BACKENDS,
    IMPLEMENTATIONS,
    Implementation,
    unavailable,
)
from profiling.run.model.markers import marked, sdpa_calls
from profiling.run.model.result import ImplementationRun, ModelRun, SdpaAccount
from profiling.run.model.steps import Step, make_step, prefill_logits, real_logits
from profiling.run.result import device_name, machine
from profiling.run.runner import RUN_LOCK, quiet_profiler_logs, torch_reasons
from profiling.trace import model as trace_model
from profiling.user_values import ConfigError
from profiling.workload.availability import error_text
from profiling.workload.model.memory import check_memory
from profiling.workload.model.spec import CPU_MAX_FLOPS, ModelWorkload
from profiling.workload.spec import WAIT, WARMUP, resolve_device

Progress = Callable[[float, str], None]
Lap = Callable[[str], None]  # told each part of the run as it ends (benchmarks/model_overhead.py)
WARMUP_CALLS = 2
log = logging.getLogger(__name__)


def run(
    workload: ModelWorkload,
    out_dir: str | Path | None = None,
    progress: Progress | None = None,
    lap: Lap | None = None,
) -> ModelRun:
    """Validate, build the model once, run each implementation; raises ConfigError. `lap` is
    told the name of each part as it ends (a benchmark's clock; the run itself never waits)."""
    lap = lap or _no_lap
    workload = workload.validated()
    device = resolve_device(workload.device)
    if device == "cpu" and workload.step_flops > CPU_MAX_FLOPS:
        raise ConfigError(
            f"{workload.text()} needs {workload.step_flops / 1e9:,.0f} GFLOP a step; on a CPU "
            f"this app runs at most {CPU_MAX_FLOPS / 1e9:,.0f}: lower seq_len, batch or layers"
        )
    check_memory(workload, device)
    lap("validate + memory check")
    report = progress or (lambda fraction, text: None)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="attnprof-model-"))
    out.mkdir(parents=True, exist_ok=True)
    quiet_profiler_logs()
    with RUN_LOCK, _older_objects_set_aside():
        report(0.02, f"building {workload.layers} decoder layers of {workload.preset}")
        model, build_s = building.build(workload, device)
        inputs = building.batch(workload, device)
        lap("build + batch")
        reference = _reference(model, inputs) if workload.check else None
        lap("float32 reference")
        runs = []
        for index, name in enumerate(workload.implementations):
            report(0.05 + 0.9 * index / len(workload.implementations), f"running {name}")
            runs.append(
                _one(workload, model, inputs, reference, IMPLEMENTATIONS[name], device, out, lap)
            )
            _release(device, hand_back=not runs[-1].ok)
            lap("release")
        del model, reference
        _release(device)
        lap("release")
    report(1.0, "done")
    return ModelRun(
        workload.__dict__.copy(), workload.text(), device, build_s, runs,
        device_name=device_name(device), machine=machine(device), out_dir=str(out),
        versions={"torch": torch.__version__, "transformers": transformers.__version__},
    )  # fmt: skip


@dataclass
class Reference:
    """Eager's logits in float32 on the real tokens, and their largest magnitude."""

    logits: torch.Tensor
    largest: torch.Tensor


def _reference(model, inputs: building.Batch) -> Reference:
    """Eager's logits in float32 on the real tokens (the same weights, upcast; a float32
    model, built eager, is its own reference: nothing is copied)."""
    own = model.config._attn_implementation == "eager" and all(
        parameter.dtype == torch.float32 for parameter in model.parameters()
    )
    if own:
        logits = real_logits(model, inputs)
    else:
        reference = building.float32_copy(model)
        logits = real_logits(reference, inputs).float()
        del reference
    return Reference(logits, logits.abs().max())


def _logits_error(model, inputs, reference: Reference | None, kept) -> float | None:
    """max |Δ| / max |eager float32| on the real tokens, from the last timed step's logits (a
    prefill's), else from one forward more (decode's and train's steps give no prompt logits).
    The difference is taken in float32 (type promotion) without a float32 copy first."""
    if reference is None:
        return None
    if kept is None:
        kept = prefill_logits(model, inputs)
    difference = kept[inputs.real] - reference.logits
    return float(difference.abs_().max() / reference.largest)


@contextlib.contextmanager
def _older_objects_set_aside() -> Iterator[None]:
    """`_release`'s gc.collect scans only what this run made: the objects the process held
    before it (~447k once torch and transformers are imported, 0.22-0.27 s a scan on the H100
    machine) are frozen while it runs; what the run leaves in cycles is still freed. There is
    one permanent generation: an earlier freeze (an imported library froze 375 objects on the
    GPU machine) is handed back with the run's, as gc.unfreeze cannot hand back a part."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _no_lap(part: str) -> None:
    return None


def _one(
    workload, model, inputs, reference, implementation: Implementation, device, out, lap: Lap
) -> ImplementationRun:
    preset = workload.spec
    reason = unavailable(implementation.id, preset, workload.preset, device, workload.torch_dtype)
    if reason:
        return ImplementationRun(implementation.id, refused=f"{implementation.id}: {reason}")
    try:
        ran, note = _set(model, implementation, preset.softcap)
        lap("set implementation")
        result = _measure(workload, model, inputs, reference, implementation, device, out, lap)
        result.ran, result.note = ran, note
        return result
    except VariantUnavailable as exc:
        return ImplementationRun(implementation.id, refused=f"{implementation.id}: {exc}")
    except torch.OutOfMemoryError:
        return ImplementationRun(
            implementation.id, failed=f"out of memory on {device}: lower batch, seq_len or layers"
        )
    except Exception as exc:  # a failure: said as one; the other implementations still run
        log.exception("model run failed: %s %s", workload.text(), implementation.id)
        return ImplementationRun(
            implementation.id, failed=f"{implementation.id} failed: {error_text(exc)}"
        )


def _set(model, implementation: Implementation, softcap: float | None) -> tuple[str, str]:
    """Tell transformers the implementation; for "kernels", the Hub's or the fallback's."""
    if implementation.attn_implementation != "kernels":
        model.set_attn_implementation(implementation.attn_implementation)
        ran = model.config._attn_implementation
        if implementation.id in BACKENDS:  # transformers runs "sdpa"; torch is pinned to one
            ran += f" with only SDPA's {implementation.id[5:]} backend allowed"
        return ran, ""
    resolved = kernels.hub()
    if resolved is not None:
        try:
            model.set_attn_implementation(resolved.attn_implementation)
            return resolved.source, resolved.note
        except Exception as exc:  # the Hub answered but gave no kernel: the fallback, said
            resolved = kernels.fallback(
                softcap, f"transformers could not load it: {error_text(exc)}"
            )
    else:
        resolved = kernels.fallback(softcap, kernels.UNREACHABLE)
    model.set_attn_implementation(resolved.attn_implementation)
    return resolved.source, resolved.note


def _measure(
    workload, model, inputs, reference, implementation: Implementation, device, out: Path, lap
) -> ImplementationRun:
    step = make_step(workload, model, inputs, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with implementation.context():
        calls = _first_call(step, implementation)  # SDPA's real call is caught here
        lap("first call (SDPA's caught)")
        for _ in range(WARMUP_CALLS - 1):
            step()
        sync()
        lap("warm-up")
        account = _account(calls[0], implementation) if calls else None
        del calls
        lap("SDPA account")
        with (
            marked(model),
            profile(
                activities=activities,
                schedule=schedule(wait=WAIT, warmup=WARMUP, active=workload.steps, repeat=1),
            ) as profiler,
        ):
            for _ in range(WAIT + WARMUP + workload.steps):
                step()
                profiler.step()
            sync()
        lap("profiled steps")
        timed_ms, kept = _timed(step, device, workload.steps)
        lap("timed steps")
        error = _logits_error(model, inputs, reference, kept)
        del kept
        lap("logits check")
    path = out / f"model-{implementation.id}.json"
    profiler.export_chrome_trace(str(path))
    lap("export trace")
    result = _read(workload, implementation, path, account, timed_ms, lap)
    result.logits_error = error
    return result


def _first_call(step: Step, implementation: Implementation) -> list:
    """The first warm-up step, SDPA's first call caught. A forced SDPA backend that refuses the
    model's call (torch's words: attention/sdpa.py's REFUSALS) makes the implementation
    unavailable, with torch's reasons, as a variant's pinned backend is (run/runner.py)."""
    refusal = ""
    with sdpa_calls() as calls, torch_warnings() as heard:
        try:
            step()
        except RuntimeError as exc:
            refused = any(words in str(exc) for words in SDPA_REFUSALS)
            forced = implementation.id in BACKENDS and refused
            if isinstance(exc, torch.OutOfMemoryError) or not forced:
                raise
            refusal = first_line(str(exc))
    if refusal:
        hints = "; ".join(torch_reasons(heard))
        raise VariantUnavailable(
            f"torch refuses the model's call under SDPA's {implementation.id[5:]} backend: "
            f"{refusal}" + (f" ({hints})" if hints else "")
        )
    return calls


def _read(
    workload, implementation, path: Path, account, timed_ms: float, lap: Lap
) -> ImplementationRun:
    """The trace, read once: the split, the backend SDPA ran, the Gantt; kept gzipped, the
    .json.gz written on the gzip thread while the trace is read (zlib releases the GIL)."""
    packed = path.with_suffix(".json.gz")
    written = GZIP_POOL.submit(gzip_file, path, packed)
    try:
        trace = trace_model.load(path)
        lap("read trace")
        split = split_step(trace)
        backend = sdpa_backend(trace) if implementation.attn_implementation == "sdpa" else None
        lap("split + backend")
        title = f"{implementation.id}: {workload.text()}"
        gantt = gantt_spec(trace.spans, trace.lanes, title=title)
        lap("gantt")
    finally:
        futures.wait([written])
    written.result()
    path.unlink()
    lap("gzip (what was left of it)")
    result = ImplementationRun(
        implementation.id, split=split, backend=backend, sdpa=account, timed_ms=timed_ms,
        attention_kernels=split.attention_kernels[:5], trace=str(packed), gantt=gantt,
    )  # fmt: skip
    if workload.mode == "prefill" or workload.mode == "train":
        result.pad = pad_figures(
            workload.shape(), workload.seq_len, workload.real_lengths, implementation.id
        )
    if workload.mode == "decode" and timed_ms:
        result.tokens_per_s = workload.batch * workload.new_tokens / (timed_ms / 1e3)
    return result


def _timed(step: Step, device: str, steps: int) -> tuple[float, torch.Tensor | None]:
    """The median of `steps` bare steps (no profiler, no spans): CUDA events on a GPU; and the
    last step's output (a prefill's logits; none is held while the next step runs)."""
    times, kept = [], None
    for _ in range(steps):
        kept = None
        step.prepare()
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            kept = step.run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            kept = step.run()
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times), kept


def _account(call, implementation: Implementation) -> SdpaAccount:
    """torch's checks of the real call, and the backend its dispatcher takes under the pin."""
    with implementation.context():
        chosen = chosen_backend(call)
    checks = [(c.backend, c.accepts, c.reasons) for c in backend_checks(call)]
    mask = "none" if call.mask is None else f"{tuple(call.mask.shape)} {str(call.mask.dtype)[6:]}"
    text = (
        f"q {tuple(call.q.shape)} k {tuple(call.k.shape)} {str(call.q.dtype)[6:]}, mask {mask}, "
        f"is_causal={call.is_causal}, enable_gqa={call.enable_gqa}"
    )
    return SdpaAccount(text, chosen, checks)


def _release(device: str, hand_back: bool = False) -> None:
    """Free what the run left in cycles. Its cached blocks stay with PyTorch's allocator, as
    after a variant's run: the memory check counts them as free and an allocation that needs
    them gets them back (handing them back cost ~0.1 s a click on an H100,
    docs/results-model.md). After a failure they are handed back, as the variants' runner does."""
    gc.collect()
    if hand_back and device == "cuda":
        torch.cuda.empty_cache()
