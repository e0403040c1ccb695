"""Per-forward figures read off the spans table: what one `attn_fwd` cost on CPU and GPU.

GPU work is attributed to a forward through its launch (the correlation link), not by time:
kernels run late, so a forward's kernels often start after its CPU span has ended, and the
first kernels in a trace may belong to a warm-up step whose CPU side was not recorded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profiling.kernels.names import decode, sdpa_backend_of_kernels, short_name
from profiling.trace.events import step_number
from profiling.trace.model import Trace
from profiling.trace.query import is_in, step_rows, values_at
from profiling.vocabulary import ALL_THREADS, BACKEND_OPS, FORWARD, GPU_WORK

CAUSAL_CONVENTION = "causal attention counted as half of the 4·B·H·S²·D FLOPs of full attention"
FULL_CONVENTION = "full attention: 4·B·H·S²·D FLOPs"
PAIRS_CONVENTION = "4·D FLOPs per (query, key) pair a query sees, per head"
BACKWARD_FLOPS = 2.5  # a backward's FLOPs as a multiple of its forward's (FlashAttention's count)
BACKWARD_CONVENTION = f"backward counted as {BACKWARD_FLOPS} × the forward"
NO_GPU_WORK = "n/a (CPU run: no GPU work)"  # a None GPU figure: not "0.00 kernels"


def flops_convention(causal: bool, mode: str = "forward", square: bool = True) -> str:
    """How TFLOP/s counted the work: the causal halving is only said of a causal run, the
    backward's multiple only of a run with a backward; a query length or a window of its own
    counts the (query, key) pairs each query sees."""
    convention = CAUSAL_CONVENTION if causal else FULL_CONVENTION
    if not square:
        convention = PAIRS_CONVENTION
    return convention if mode == "forward" else f"{convention}; {BACKWARD_CONVENTION}"


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> float:
    """Two matmuls of 2·S²·D each per (batch, head); causal does half the work."""
    full = 4.0 * batch * heads * seq_len * seq_len * head_dim
    return full / 2 if causal else full


@dataclass
class ForwardStats:
    forwards: int
    kernels: float
    memcpy: float
    memset: float
    gpu_us: float | None  # None when the trace has no GPU work
    cpu_us: float
    dominant: str
    dominant_decoded: str
    backend: str | None  # SDPA backend read off the aten ops, when SDPA ran
    cpu_us_range: tuple[float, float] | None = None  # fastest and slowest forward, CPU µs
    # per measured step (issue 23: median and IQR): each window's CPU µs, and the GPU µs of
    # the work launched in each profiler step (None without GPU work)
    cpu_us_each: tuple[float, ...] = ()
    gpu_us_each: tuple[float, ...] | None = None


@dataclass
class Summary:
    """What the summary strip shows; plain data so it pickles across a ZeroGPU worker."""

    variant: str
    label: str
    config: dict[str, Any]
    device: str
    device_name: str
    torch_version: str
    ran: str  # what ran: SDPA backend read off the trace, or the kernel's source
    forwards: int
    # the GPU figures are None where they do not exist (a CPU run), never 0.0: see NO_GPU_WORK
    kernels_per_forward: float | None
    memcpy_per_forward: float | None
    memset_per_forward: float | None
    gpu_us_per_forward: float | None
    cpu_us_per_forward: float
    cpu_bound: bool | None
    peak_mib: float | None
    flops_per_forward: float
    tflops: float | None
    tflops_basis: str
    rel_err: float | None
    rel_err_note: str
    dominant_kernel: str
    dominant_decoded: str
    notes: list[str] = field(default_factory=list)
    # fastest and slowest recorded forward (CPU µs): the mean alone hides a noisy host
    cpu_us_range: list[float] = field(default_factory=list)
    # A run's "forward" figures are per measured step: a forward, a backward, or both (train)
    mode: str = "forward"
    phases: list[dict[str, Any]] = field(default_factory=list)  # per phase, per step
    grad_err: dict[str, float] | None = None  # dq, dk, dv vs float64 (runs with a backward)
    grad_err_note: str = ""
    saved: list[dict[str, Any]] | None = None  # what the forward saves for backward
    saved_extra_bytes: int | None = None  # of which neither an input nor the output
    # The roofline at the run's level (analysis/bounds.py): what must move, how fast it did
    bytes_moved: int | None = None
    intensity: float | None = None  # FLOP per byte that must move
    tbps: float | None = None
    pct_peak_tflops: float | None = None
    pct_peak_bandwidth: float | None = None
    roofline_bound: str = ""
    # SDPA runs: torch's verdict per fused backend ("checks": backend, accepts, reasons) and the
    # backend its dispatcher picks ("chosen"), for this run's inputs
    sdpa_backends: dict[str, Any] | None = None
    # Issue 23: how the steps were timed, the spread over them (analysis/spread.py), eager vs
    # graph timed without the profiler (cuda-graph runs), the GPU's clocks during the steps
    # (profiling/run/clocks.py; {"available": False, "reason"} where absent), and memory over
    # one step (profiling/analysis/memory_timeline.py; None on a CPU)
    timing: str = "eager"
    step_spread: dict[str, Any] = field(default_factory=dict)
    launch_compare: dict[str, Any] | None = None
    gpu_clocks: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    # Issue 34: the machine beside the figures (compute capability, device memory in GiB, GPU
    # count, driver, CUDA and triton versions), so stored runs compare across machines
    machine: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def finite(value: Any) -> Any:
    """`value` with every NaN or infinity (in dicts, lists, tuples) as None: strict JSON."""
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def forward_spans(trace: Trace, name: str = FORWARD) -> pd.DataFrame:
    return trace.spans.iloc[forward_rows(trace.spans, name)]


def gpu_work(trace: Trace) -> pd.DataFrame:
    return trace.spans.iloc[work_rows(trace.spans)]


def launched_within(trace: Trace, windows: pd.DataFrame) -> pd.DataFrame:
    """GPU work whose launch started inside one of `windows` (CPU spans on the same thread)."""
    spans = trace.spans
    rows = launched_rows(spans, work_rows(spans), spans.index.get_indexer(windows.index))
    return spans.iloc[rows]


# Row selection works on positions and takes rows from the frame once at the end: taking rows
# of the wide spans table has a fixed cost per call (docs/performance.md, "Why the code").
def forward_rows(spans: pd.DataFrame, name: str) -> np.ndarray:
    is_window = is_in(spans["kind"], "cpu") & is_in(spans["name"], name)
    return np.flatnonzero(is_window & is_in(spans["category"], "annotation"))


def work_rows(spans: pd.DataFrame) -> np.ndarray:
    return np.flatnonzero(is_in(spans["kind"], "gpu") & is_in(spans["category"], *GPU_WORK))


def launched_rows(spans: pd.DataFrame, work: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Those of `work` (GPU rows) whose launch starts inside one of `windows`."""
    link = spans["link"].to_numpy()
    work = work[link[work] >= 0]
    if not len(work) or not len(windows):
        return work[:0]
    return work[starts_inside(spans, link[work], windows)]


def starts_inside(spans: pd.DataFrame, rows: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """For each of `rows`, whether that span starts inside one of `windows` (CPU spans).

    An `attn_fwd` window holds what its own thread did; a ProfilerStep, an `attn_bwd` or an
    `attn_step` holds what every thread did while it lasted (a backward runs on autograd's
    threads, a DataLoader's work on its own): one sorted search per thread, and one for those."""
    start, end = spans["start_us"].to_numpy(), spans["end_us"].to_numpy()
    row_start = start[rows]
    steps = _all_threads(spans, windows)
    inside = _within(row_start, start[windows[steps]], end[windows[steps]])
    local = windows[~steps]
    if len(local):
        thread = _thread_codes(spans)
        row_thread, window_thread = thread[rows], thread[local]
        for code in np.unique(window_thread):
            mine = local[window_thread == code]
            inside |= (row_thread == code) & _within(row_start, start[mine], end[mine])
    return inside


def _all_threads(spans: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per row of `rows` (CPU spans), whether it holds every thread's work (a ProfilerStep's
    name, or one of ALL_THREADS); reads only those rows' names (pandas' accessors cost more
    than the test on a run's few windows)."""
    names = spans["name"].array
    if isinstance(names, pd.Categorical):
        # once per distinct name at the rows (a 10⁷-event trace's 4·10⁴ steps: a pandas
        # lookup per window was 0.3 s), code -1 (missing) reading the last entry: False
        values, codes = np.asarray(names.categories, dtype=object), names.codes[rows]
        holds = np.zeros(len(values) + 1, dtype=bool)
        used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(values)))
        holds[used] = [_holds_all(values[c]) for c in used.tolist()]
        return holds[codes]
    return np.array([_holds_all(n) for n in np.asarray(names)[rows]], dtype=bool)


def _holds_all(name: Any) -> bool:
    return name in ALL_THREADS or step_number(name) >= 0


def _within(times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Whether each of `times` falls in one of the [start, end] intervals."""
    if not len(starts):
        return np.zeros(len(times), dtype=bool)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    last_started = np.searchsorted(starts, times, side="right") - 1
    return (last_started >= 0) & (times <= ends[np.clip(last_started, 0, None)])


def _thread_codes(spans: pd.DataFrame) -> np.ndarray:
    """One integer per (pid, tid) pair."""
    pid, tid = spans["pid"], spans["tid"]
    if isinstance(pid.dtype, pd.CategoricalDtype) and isinstance(tid.dtype, pd.CategoricalDtype):
        width = len(tid.cat.categories) + 1
        return pid.array.codes.astype(np.int64) * width + tid.array.codes
    pairs = pd.MultiIndex.from_arrays([pid.astype(str), tid.astype(str)])
    return pairs.factorize()[0]


def sdpa_backend(trace: Trace, windows: pd.DataFrame | None = None) -> str | None:
    """Which SDPA backend ran, from the aten op it dispatched to (None when SDPA did not run)."""
    spans = trace.spans
    rows = np.flatnonzero(is_in(spans["kind"], "cpu") & is_in(spans["name"], *BACKEND_OPS))
    if windows is not None and not windows.empty and len(rows):
        first, last = windows["start_us"].min(), windows["end_us"].max()
        start = spans["start_us"].to_numpy()[rows]
        rows = rows[(start >= first) & (start <= last)]
    names = values_at(spans["name"], rows)  # not the whole column as objects (10⁷ of them)
    found = list(dict.fromkeys(BACKEND_OPS[name] for name in names))
    return " + ".join(found) if found else None


def forward_work(trace: Trace, name: str = FORWARD) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the forward windows, the GPU work they launched); ProfilerSteps stand in for missing
    `attn_fwd` spans, and with neither the whole trace is one window."""
    spans = trace.spans
    windows = forward_rows(spans, name)
    if not len(windows):
        windows = step_rows(spans)
    work = work_rows(spans)
    if len(windows):
        work = launched_rows(spans, work, windows)
    both = spans.iloc[np.concatenate([windows, work])]  # one take, two slices (views)
    return both.iloc[: len(windows)], both.iloc[len(windows) :]


def _top(names: pd.Series, weights: np.ndarray) -> Any:
    """The name with the largest summed weight (ties: the first name in category order)."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        codes = names.array.codes
        totals = np.bincount(codes, weights=weights, minlength=len(names.cat.categories))
        return names.cat.categories[int(np.argmax(totals))]
    return pd.Series(weights, index=names.to_numpy()).groupby(level=0).sum().idxmax()


def cpu_dominant(top: str) -> tuple[str, str]:
    """The CPU operator with the most self time, and how to read it (a trace without GPU)."""
    if top.startswith("## Call CompiledFxGraph"):  # Inductor's generated code, one call
        return top, (
            "the graph torch.compile generated, run as one call with no operator spans "
            "inside: most self time on the CPU (no GPU)"
        )
    return top, "CPU operator with the most self time (no GPU)"


def per_forward(
    trace: Trace,
    name: str = FORWARD,
    windows: pd.DataFrame | None = None,
    work: pd.DataFrame | None = None,
    *,
    own_run: bool = False,
) -> ForwardStats:
    """Averages over the recorded forwards (pass `forward_work`'s result to avoid redoing it);
    `own_run`: this app made the trace, so the dominant kernel's decoding may add its context."""
    if windows is None or work is None:
        windows, work = forward_work(trace, name)
    has_gpu = trace.has_gpu
    dur = work["dur_us"].to_numpy()
    dominant = ("", "")
    if not work.empty:
        top = _top(work["name"], dur)
        dominant = short_name(top), decode(top, own_run=own_run)
    elif not has_gpu:
        spans = trace.spans
        ops = spans[is_in(spans["category"], "cpu op")]
        if not ops.empty:
            dominant = cpu_dominant(_top(ops["name"], ops["self_us"].to_numpy()))
    counts = [int(is_in(work["category"], category).sum()) for category in GPU_WORK]
    return forward_stats(
        window_us=windows["dur_us"].to_numpy(dtype=float),
        work_us=dur,
        counts=counts,
        has_gpu=has_gpu,
        dominant=dominant,
        backend=sdpa_backend(trace, windows) or sdpa_backend_of_kernels(work["name"].unique()),
        work_steps=work["step"].to_numpy() if "step" in work else None,
    )


def forward_stats(
    window_us: np.ndarray,
    work_us: np.ndarray,
    counts: list[int],
    has_gpu: bool,
    dominant: tuple[str, str],
    backend: str | None,
    work_steps: np.ndarray | None = None,
) -> ForwardStats:
    """The figures from the forwards' CPU spans, their GPU work's durations and its kernel,
    memcpy and memset counts (shared by profiling.run.records, so both paths divide and sum
    alike: numpy's pairwise sums differ from a loop's in the last bits)."""
    forwards = max(len(window_us), 1)
    kernels, memcpy, memset = (count / forwards for count in counts)
    spread = (float(window_us.min()), float(window_us.max())) if len(window_us) > 1 else None
    return ForwardStats(
        forwards=len(window_us),
        kernels=kernels,
        memcpy=memcpy,
        memset=memset,
        gpu_us=float(work_us.sum() / forwards) if has_gpu else None,
        cpu_us=float(np.median(window_us))
        if len(window_us)
        else float("nan"),  # analysis/spread.py
        dominant=dominant[0],
        dominant_decoded=dominant[1],
        backend=backend,
        cpu_us_range=spread,
        cpu_us_each=tuple(float(us) for us in window_us),
        gpu_us_each=_per_step(work_us, work_steps, len(window_us)) if has_gpu else None,
    )


def _per_step(
    work_us: np.ndarray, work_steps: np.ndarray | None, windows: int
) -> tuple[float, ...] | None:
    """The GPU µs of each profiler step's work, in step order; None where the steps are not
    known or do not match the windows (one window per measured step)."""
    if work_steps is None or not len(work_us):
        return None
    steps = np.asarray(work_steps, dtype=float)
    known = steps >= 0
    numbers, which = np.unique(steps[known], return_inverse=True)
    if len(numbers) != windows:
        return None
    # one pass (a mask per step was steps × spans: 34 s for a 10⁷-event trace's 28,000 steps)
    sums = np.bincount(which.reshape(-1), weights=work_us[known], minlength=len(numbers))
    return tuple(float(us) for us in sums)
