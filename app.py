"""The Space: Gradio components wired to the profiling backend, and nothing else.

Data walks one way: raw inputs → validation (profiling.workload, profiling.job_request) →
one GPU function per job (profile_on_gpu: one run; compare_on_gpu, sweep_on_gpu: several runs
one after another) → plain results → profiling.views / views_compare → components. Diff and
Analyse read uploaded traces on the CPU, in their own concurrency group. Profile, Compare and
Sweep run on profiling.jobs' one device worker, so a job a client cancels stops instead of
running on beside the next one; on a CPU-only machine Diff and Analyse take that worker too, or
an upload parsed alongside a run would inflate its CPU times. Errors a user can act
on become gr.Error with the backend's message; anything else is logged here and shown as a
generic gr.Error, never as a traceback. Profile, Compare and Sweep take their values
unprocessed (preprocess=False): Gradio's own checks answer a string or a list in a slider with a
generic error, so the backend checks every value (types, the sliders' ranges, the choices) and
says what is wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gradio as gr
import spaces  # before torch (imported by profiling/attention) touches CUDA: ZeroGPU patches it

from profiling import job_request, jobs, views
from profiling import views_compare as vc
from profiling.compare import CompareResult
from profiling.compare import compare as run_compare
from profiling.runner import ProfileResult, RunError, VariantUnavailable, run
from profiling.sweep import SweepResult
from profiling.sweep import sweep as run_sweep
from profiling.trace_events import TraceError
from profiling.workload import ConfigError, Workload, page_ranges, page_workload, resolve_device

log = logging.getLogger("attention_profiler")
DEVICE = resolve_device()
START = views.defaults(DEVICE)
RANGES = page_ranges(DEVICE)
USER_ERRORS = (ConfigError, VariantUnavailable, RunError, TraceError)
TITLES = {
    ConfigError: "Check the inputs",
    VariantUnavailable: "Variant unavailable",
    RunError: "The run failed",
    TraceError: "Unreadable trace",
}
CSS = """
.ap-banner { border-left: 4px solid #f59f00; background: rgba(245,159,0,0.10);
  padding: 6px 12px !important; border-radius: 6px; }
#diff-headline p { font-size: 16px; font-weight: 600; }
/* Phones: charts and tables keep a readable width and scroll sideways instead of squeezing
   (a 95 px plot area, numbers broken mid-digit). */
@media (max-width: 720px) {
  #gantt, #an-gantt, #cmp-gantts, #cmp-bars { overflow-x: auto !important; }
  #gantt .js-plotly-plot, #an-gantt .js-plotly-plot, #cmp-gantts .js-plotly-plot,
  #cmp-bars .js-plotly-plot { min-width: 720px; }
  #operators, #kernels, #glance, #sw-table, #an-operators, #an-kernels {
    overflow-x: auto !important; }
  #operators .table-container, #kernels .table-container, #glance .table-container,
  #sw-table .table-container, #an-operators .table-container,
  #an-kernels .table-container { min-width: 640px; }
}
"""
# The launch block and the summary rows (Profile strip, Analyse outputs).
ROWS_CSS = """
.ap-launch { margin-top: 10px; border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 8px 10px; background: var(--block-background-fill); }
.ap-launch-title { font-size: 13px; font-weight: 600; margin-bottom: 4px; }
.ap-launch .ap-note { font-size: 13px; }
.ap-launch dl, dl.ap-rows { display: grid; grid-template-columns: max-content 1fr;
  gap: 2px 14px; margin: 0; font-size: 13px; }
.ap-launch dt, dl.ap-rows dt { color: var(--body-text-color-subdued); }
.ap-launch dd, dl.ap-rows dd { margin: 0; overflow-wrap: anywhere; }
.ap-launch-table { margin-top: 8px; font-size: 12px; border-collapse: collapse; }
.ap-launch-table th, .ap-launch-table td { padding: 2px 8px; text-align: right;
  border-bottom: 1px solid var(--border-color-primary); }
.ap-launch-table th:first-child, .ap-launch-table td:first-child { text-align: left; }
"""
# The strip's look travels with its component, so it holds however the demo is launched.
STRIP_CSS = (
    """
.ap-strip { display: grid; grid-template-columns: repeat(auto-fit, minmax(128px, 1fr));
  gap: 8px; }
.ap-card { border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 8px 10px; background: var(--block-background-fill); }
.ap-label { font-size: 12px; color: var(--body-text-color-subdued); }
.ap-value { font-size: 18px; font-weight: 600; line-height: 1.3; overflow-wrap: break-word; }
.ap-value.ap-long { font-size: 14px; line-height: 1.5; }
.ap-note { font-size: 11px; color: var(--body-text-color-subdued); line-height: 1.25; }
.ap-extra { font-size: 13px; margin-top: 8px; color: var(--body-text-color); }
.ap-empty { display: block; padding: 12px; color: var(--body-text-color-subdued);
  border: 1px dashed var(--border-color-primary); border-radius: 8px; }
"""
    + ROWS_CSS
)
LAUNCH: dict[str, Any] = {"max_file_size": views.MAX_FILE_SIZE, "css": CSS}


def _user_error(exc: Exception) -> gr.Error:
    title = next((t for cls, t in TITLES.items() if isinstance(exc, cls)), "Error")
    return gr.Error(str(exc), title=title, print_exception=False)


def _gpu_seconds(config: Workload, progress: Any = None) -> int:
    return job_request.gpu_seconds(config)


@spaces.GPU(duration=_gpu_seconds)
def profile_on_gpu(config: Workload, progress: Any = None) -> ProfileResult:
    """The only GPU work: one profiled run. Returns plain data (paths, DataFrames, a Summary).

    On ZeroGPU this runs in a forked worker where only gr.Error reaches the user, so the
    backend's errors are translated here as well as in the handler.
    """
    try:
        return run(config, progress=_report(progress))
    except USER_ERRORS as exc:
        raise _user_error(exc) from None
    except Exception:
        log.exception("profile_on_gpu failed for %s", config)
        raise gr.Error(views.GENERIC_ERROR, print_exception=False) from None


RUN_DIRS = views.RunDirs()


def profile(
    variant: str,
    seq_len: float,
    dtype: str,
    batch: float,
    heads: float,
    head_dim: float,
    causal: bool,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:
    """Profile one attention variant with torch.profiler and return what ran.

    Args:
        variant: variant id, e.g. "naive", "sdpa-math", "sdpa-flash" (see the README).
        seq_len: sequence length S.
        dtype: "float32", "float16" or "bfloat16".
        batch: batch size B.
        heads: number of heads H.
        head_dim: head dimension D (a multiple of 8).
        causal: causal mask (true) or full attention (false).

    Returns:
        summary strip (HTML), summary (JSON), operator table, kernel table, kernel-table note,
        Gantt chart (plotly), trace .json, trace .json.gz, operator table .txt.
    """
    try:
        config = page_workload(
            DEVICE, variant=variant, seq_len=seq_len, dtype=dtype, batch=batch, heads=heads,
            head_dim=head_dim, causal=causal,
        )  # fmt: skip
    except ConfigError as exc:
        raise _user_error(exc) from None
    progress(0.0, desc="waiting for the GPU" if DEVICE == "cuda" else "starting")
    try:
        result = profile_on_gpu(config, progress)
        RUN_DIRS.add(result.trace_json.parent)  # kept in the count even if its page fails
        shown = views.page(result)
    except gr.Error:
        raise
    except USER_ERRORS as exc:
        raise _user_error(exc) from None
    except Exception:
        log.exception("profile failed for %s", config)
        raise gr.Error(views.GENERIC_ERROR, print_exception=False) from None
    return (
        shown.strip,
        shown.summary,
        shown.operators,
        shown.kernels,
        shown.kernel_note,
        shown.figure,
        str(shown.files["json"]),
        str(shown.files["gz"]),
        str(shown.files["txt"]),
    )


def show_lesson(variant: str, dtype: str, causal: bool = True) -> str:
    """The chosen variant's lesson (and why it cannot run here)."""
    return views.lesson_markdown(variant, DEVICE, dtype, causal)


def relabel_variants(variant: str, dtype: str, causal: bool = True) -> tuple[Any, str]:
    """Availability depends on the dtype: refresh the dropdown's labels and the lesson."""
    return (
        gr.Dropdown(choices=views.variant_choices(DEVICE, dtype), value=variant),
        views.lesson_markdown(variant, DEVICE, dtype, causal),
    )


# -- Compare, Diff, Sweep, Analyse ---------------------------------------------------------------
JOB_DIRS = views.RunDirs()  # Compare/Sweep trace folders and zips: the newest few are kept


def _report(progress: Any) -> Callable[[float, str], None] | None:
    """The backend's progress(fraction, text) as Gradio's progress(fraction, desc=...).

    Tested against None, not for truth: gr.Progress has a __len__ that is 0 in a request."""
    if progress is None:
        return None
    return lambda fraction, text: progress(fraction, desc=text)


QUIET: dict[str, Any] = {"api_visibility": "private", "queue": False}  # page-only follow-ups


def _cleared(count: int, first: Any = None) -> Callable[[], tuple[Any, ...]]:
    """What a failed event leaves in its outputs: nothing of the previous result (the files
    could otherwise be downloaded as if they were the failed run's)."""
    return lambda: (first, *[None] * (count - 1))


def _variant_picker(
    elem_id: str, defaults: list[str], max_choices: int, info: str | None = None
) -> gr.Dropdown:
    """The multiselect of variants the Compare and Sweep tabs share."""
    return gr.Dropdown(
        choices=vc.variant_choices(DEVICE, START["dtype"]),
        value=defaults,
        multiselect=True,
        max_choices=max_choices,
        label="Variants",
        info=info,
        elem_id=elem_id,
        filterable=False,
    )


def _guarded(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call a backend or view function; its errors become the gr.Error the user sees."""
    try:
        return fn(*args)
    except (gr.Error, jobs.JobCancelled):
        raise
    except USER_ERRORS as exc:
        raise _user_error(exc) from None
    except Exception:
        log.exception("%s failed", what)
        raise gr.Error(views.GENERIC_ERROR, print_exception=False) from None


def _job_seconds(request: job_request.JobRequest, progress: Any = None) -> int:
    return request.gpu_seconds


@spaces.GPU(duration=_job_seconds)
def compare_on_gpu(request: job_request.JobRequest, progress: Any = None) -> CompareResult:
    """The GPU work of a Compare: every variant profiled one after another, plain data back."""
    return _guarded(
        "compare_on_gpu",
        lambda: run_compare(
            request.variants,
            progress=_report(progress),
            stop=jobs.stop_requested,
            **request.shape,
        ),
    )


@spaces.GPU(duration=_job_seconds)
def sweep_on_gpu(request: job_request.JobRequest, progress: Any = None) -> SweepResult:
    """The GPU work of a Sweep: every (variant, seq_len) point, one after another."""
    return _guarded(
        "sweep_on_gpu",
        lambda: run_sweep(
            request.variants,
            request.seq_lens,
            progress=_report(progress),
            check=job_request.point_check(DEVICE),
            stop=jobs.stop_requested,
            **request.shape,
        ),
    )


def _keep(*paths: Any) -> None:
    for path in paths:
        if path is not None:
            JOB_DIRS.add(path)


def compare(
    variants: list[str],
    seq_len: float,
    dtype: str,
    batch: float,
    heads: float,
    head_dim: float,
    causal: bool,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:
    """Profile several variants at one shape, one after another, as the post's table.

    Args:
        variants: variant ids, e.g. ["naive", "naive-inplace", "sdpa-flash"]; unavailable ones
            are listed with the reason.
        seq_len: sequence length S.
        dtype: "float32", "float16" or "bfloat16".
        batch: batch size B.
        heads: number of heads H.
        head_dim: head dimension D (a multiple of 8).
        causal: causal mask (true) or full attention (false).

    Returns:
        the "at a glance" table, a note naming the datasheet peak used, GPU-vs-CPU bar chart,
        stacked mini-Gantts, a zip of every trace and table.
    """
    request = _guarded(
        "compare_request", job_request.compare_request, variants, seq_len, dtype, batch, heads,
        head_dim, causal, DEVICE,
    )  # fmt: skip
    progress(0.0, desc="waiting for the GPU" if DEVICE == "cuda" else "starting")
    result = compare_on_gpu(request, progress)
    _keep(result.out_dir, result.zip_path.parent if result.zip_path else None)
    shown = _guarded("compare views", vc.compare_page, result, DEVICE)
    zip_path = str(shown.zip_path) if shown.zip_path else None
    return shown.glance, shown.note, shown.bars, shown.gantts, zip_path, shown.traces


def fill_diff_picks(traces: dict[str, str] | None) -> tuple[Any, Any]:
    """After a Compare: its runs become the choices of the Diff tab's two dropdowns."""
    names, first, second = vc.diff_picks(traces)
    return gr.Dropdown(choices=names, value=first), gr.Dropdown(choices=names, value=second)


def diff(
    trace_a: str | None, trace_b: str | None, label_a: str = "", label_b: str = ""
) -> tuple[Any, ...]:
    """Per-kernel and per-operator deltas between two torch.profiler traces (B − A).

    Args:
        trace_a: trace A, a Chrome trace (.json or .json.gz) from torch.profiler.
        trace_b: trace B, the same.
        label_a: A's name in the tables (default "A").
        label_b: B's name in the tables (default "B").

    Returns:
        the headline and what each side was counted over, the kernel delta table, the operator
        delta table (per window: forward, step or whole trace; sorted by |Δ total µs|).
    """
    shown = _guarded("diff", vc.diff_upload_page, trace_a, trace_b, label_a, label_b)
    return shown.headline, shown.kernels, shown.operators


def diff_runs(run_a: str, run_b: str, traces: dict[str, str] | None) -> tuple[Any, ...]:
    """Diff two runs of this session's last Compare (paths from server-side state only)."""
    shown = _guarded("diff_runs", vc.diff_runs_page, run_a, run_b, traces)
    return shown.headline, shown.kernels, shown.operators


def sweep(
    variants: list[str],
    seq_lens: list[int],
    dtype: str,
    batch: float,
    heads: float,
    head_dim: float,
    causal: bool,
    progress: gr.Progress = gr.Progress(),  # noqa: B008 - Gradio's injection idiom
) -> tuple[Any, ...]:
    """Profile variants over sequence lengths; refused, unavailable and OOM points are marked.

    Args:
        variants: variant ids, e.g. ["naive", "sdpa-flash"].
        seq_lens: sequence lengths, e.g. [256, 512, 1024].
        dtype: "float32", "float16" or "bfloat16".
        batch: batch size B.
        heads: number of heads H.
        head_dim: head dimension D (a multiple of 8).
        causal: causal mask (true) or full attention (false).

    Returns:
        log–log chart of time per forward vs S, log–log chart of memory vs S, the table of
        points (with status and reason), a zip with one trace per point.
    """
    request = _guarded(
        "sweep_request", job_request.sweep_request, variants, seq_lens, dtype, batch, heads,
        head_dim, causal, DEVICE,
    )  # fmt: skip
    progress(0.0, desc="waiting for the GPU" if DEVICE == "cuda" else "starting")
    result = sweep_on_gpu(request, progress)
    _keep(result.out_dir, result.zip_path.parent if result.zip_path else None)
    shown = _guarded("sweep views", vc.sweep_page, result, DEVICE)
    zip_path = str(shown.zip_path) if shown.zip_path else None
    return shown.time, shown.memory, shown.table, zip_path


def analyze(
    trace: str | None, window_start_us: float | None = None, window_end_us: float | None = None
) -> tuple[Any, ...]:
    """Operator table, kernel table, Gantt and summary of any torch.profiler Chrome trace.

    Args:
        trace: a Chrome trace (.json or .json.gz) exported by torch.profiler, at most 25 MiB
            uploaded and 256 MiB once gunzipped.
        window_start_us: optional start of the Gantt's window, µs from the first profiled step.
        window_end_us: optional end of that window; with both set the slice is drawn one bar
            per span (a large trace is otherwise drawn at reduced detail).

    Returns:
        summary (HTML), GPU idle & launch overhead (HTML), operator table (cpu_op and
        record_function spans, counted as key_averages counts them), kernel table, Gantt chart
        (plotly).
    """
    window = _guarded("analyze", vc.gantt_window, window_start_us, window_end_us)
    shown = _guarded("analyze", vc.analyze_page, trace, window)
    return shown.summary, shown.launch, shown.operators, shown.kernels, shown.figure


def relabel_multiselect(chosen: list[str] | None, dtype: str) -> Any:
    """Availability depends on the dtype: refresh a variant multiselect's labels."""
    return gr.Dropdown(choices=vc.variant_choices(DEVICE, dtype), value=chosen or [])


# -- the page -------------------------------------------------------------------------------------
def _trace_job(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Diff and Analyse: on a CPU-only machine they queue for the device worker (their parse
    would share the cores a run is timing); beside a GPU they run at once in Gradio's threads."""
    return jobs.on_device(fn) if DEVICE == "cpu" else fn


def _slider(name: str, label: str, info: str | None = None, prefix: str = "") -> gr.Slider:
    low, high, step = RANGES[name]
    return gr.Slider(
        low, high, value=START[name], step=step, label=label, info=info,
        elem_id=prefix + name, buttons=["reset"],
    )  # fmt: skip


def _shape_controls(prefix: str, seq_len: bool = True) -> list[Any]:
    """seq_len (optional), dtype, causal, batch, heads, head_dim: the Profile tab's ranges."""
    controls: dict[str, Any] = {}
    if seq_len:
        controls["seq_len"] = _slider("seq_len", "Sequence length S", prefix=prefix)
    with gr.Row():
        controls["dtype"] = gr.Radio(
            ["bfloat16", "float16", "float32"], value=START["dtype"], label="dtype",
            elem_id=prefix + "dtype",
        )  # fmt: skip
        controls["causal"] = gr.Checkbox(
            value=START["causal"], label="Causal mask", elem_id=prefix + "causal"
        )
    with gr.Row():
        controls["batch"] = _slider("batch", "Batch B", prefix=prefix)
        controls["heads"] = _slider("heads", "Heads H", prefix=prefix)
        controls["head_dim"] = _slider("head_dim", "Head dim D", "a multiple of 8", prefix=prefix)
    order = ["seq_len", "dtype", "batch", "heads", "head_dim", "causal"]
    return [controls[k] for k in order if k in controls]


def _table(label: str, elem_id: str, **kwargs: Any) -> gr.Dataframe:
    options: dict[str, Any] = dict(
        interactive=False, wrap=True, max_height=420, show_search="search",
        buttons=["copy", "fullscreen"],
    )  # fmt: skip
    return gr.Dataframe(label=label, elem_id=elem_id, **{**options, **kwargs})


def build_demo(queue_size: int = views.QUEUE_MAX_SIZE) -> gr.Blocks:
    """The page: every component and listener, and the queue. `demo` below is the app's; the
    tests build a second one with a tiny queue to see it fill."""
    with gr.Blocks(title="Attention Profiler", delete_cache=views.DELETE_CACHE) as demo:
        gr.Markdown(
            "# Attention Profiler\n"
            "Pick an attention implementation and a shape, click **Profile**, and see what really "
            "ran: torch.profiler's operator table, the kernels (names decoded), a Gantt chart of "
            "the exported trace, and the trace itself for [Perfetto](https://ui.perfetto.dev). "
            "**Compare** variants, **Diff** two traces, **Sweep** sequence lengths, or **Analyse** "
            "a trace of your own in the other tabs."
        )
        banner = views.banner_markdown(DEVICE)
        gr.Markdown(banner, visible=bool(banner), elem_id="banner", elem_classes=["ap-banner"])
        with gr.Tab("Profile", id="profile"):
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=320):
                    variant = gr.Dropdown(
                        choices=views.variant_choices(DEVICE, START["dtype"]),
                        value=START["variant"],
                        label="Variant",
                        elem_id="variant",
                        filterable=False,
                    )
                    lesson = gr.Markdown(
                        views.lesson_markdown(
                            START["variant"], DEVICE, START["dtype"], START["causal"]
                        ),
                        elem_id="lesson",
                        container=True,
                        min_height=90,
                    )
                with gr.Column(scale=3, min_width=320):
                    seq_len = _slider("seq_len", "Sequence length S")
                    with gr.Row():
                        dtype = gr.Radio(
                            ["bfloat16", "float16", "float32"], value=START["dtype"],
                            label="dtype", elem_id="dtype",
                        )  # fmt: skip
                        causal = gr.Checkbox(
                            value=START["causal"], label="Causal mask", elem_id="causal"
                        )
                    with gr.Row():
                        batch = _slider("batch", "Batch B")
                        heads = _slider("heads", "Heads H")
                        head_dim = _slider("head_dim", "Head dim D", "a multiple of 8")
            run_button = gr.Button("Profile", variant="primary", elem_id="profile-button")

            strip = gr.HTML(views.placeholder_html(), elem_id="summary", css_template=STRIP_CSS)
            with gr.Row():
                json_file = gr.DownloadButton("Trace .json", elem_id="download-json", size="md")
                gz_file = gr.DownloadButton(
                    "Trace .json.gz (Perfetto)", elem_id="download-gz", size="md"
                )
                txt_file = gr.DownloadButton(
                    "Operator table .txt", elem_id="download-txt", size="md"
                )
            gantt = gr.Plot(label="Timeline: CPU ops and GPU kernels", elem_id="gantt")
            operators = _table(
                "Operators (torch.profiler key_averages)", "operators",
                headers=views.operator_headers(DEVICE),
                datatype=views.operator_datatypes(DEVICE),
                column_widths=views.operator_widths(DEVICE),
                max_chars=90,  # key_averages lists kernels too; click a cell for the full name
            )  # fmt: skip
            kernel_info = gr.Markdown("", elem_id="kernel-note")
            kernels = _table(
                "GPU kernels per forward, names decoded", "kernels",
                headers=views.kernel_headers(),
                datatype=views.kernel_datatypes(),
                column_widths=views.kernel_widths(),
                max_chars=100,
                visible=DEVICE == "cuda",  # a CPU run has no kernels: the note above says so
            )  # fmt: skip
            with gr.Accordion("Summary as JSON", open=False):
                summary = gr.JSON(label="summary", elem_id="summary-json")

        with gr.Tab("Compare", id="compare"):
            gr.Markdown(
                "Several variants at one shape, profiled one after another in one GPU job: "
                "the post's *at a glance* table, GPU vs CPU time per forward, and every timeline "
                "on one time axis. Variants that cannot run here are listed with the reason."
            )
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=320):
                    cmp_variants = _variant_picker(
                        "cmp-variants",
                        vc.compare_defaults(DEVICE, START["dtype"]),
                        job_request.MAX_COMPARE_VARIANTS[DEVICE],
                        info=f"at most {job_request.MAX_COMPARE_VARIANTS[DEVICE]}; default: the "
                        "post's six "
                        "(plus Hub kernels where they run)",
                    )
                with gr.Column(scale=3, min_width=320):
                    cmp_shape = _shape_controls("cmp-")
            cmp_button = gr.Button("Compare", variant="primary", elem_id="compare-button")
            cmp_note = gr.Markdown("", elem_id="cmp-note")
            glance = _table(
                "At a glance (per forward)", "glance",
                headers=vc.glance_columns(DEVICE), datatype=vc.glance_datatypes(DEVICE),
                column_widths=vc.glance_widths(DEVICE), max_chars=120, max_height=640,
            )  # fmt: skip
            cmp_zip = gr.DownloadButton(
                "Every trace and table (.zip)", elem_id="cmp-zip", size="md", value=None
            )
            cmp_bars = gr.Plot(label="GPU vs CPU time per forward", elem_id="cmp-bars")
            cmp_gantts = gr.Plot(label="Timelines on one time axis", elem_id="cmp-gantts")
            with gr.Accordion("Datasheet peaks (what “% of peak” divides by)", open=False):
                _table(
                    "NVIDIA datasheet dense peaks, TFLOP/s", "peaks", value=vc.peaks_view(),
                    max_chars=140,
                )  # fmt: skip
            # this session's last Compare: variant → trace, server side
            compare_runs = gr.State({})

        with gr.Tab("Diff", id="diff"):
            gr.Markdown(
                "What changed between two runs, per kernel name and per operator, per window "
                "(per forward with `attn_fwd` spans, else per ProfilerStep, else the whole "
                "trace; the line under the headline says which): count and total µs of each "
                "side and the delta (B − A), largest |Δ| first."
            )
            with gr.Row(equal_height=False):
                with gr.Column(min_width=320):
                    gr.Markdown(
                        "**Two uploaded traces** (`.json` / `.json.gz` from torch.profiler)"
                    )
                    with gr.Row():
                        file_a = gr.File(
                            label="Trace A", file_types=[".json", ".gz"], elem_id="diff-file-a"
                        )
                        file_b = gr.File(
                            label="Trace B", file_types=[".json", ".gz"], elem_id="diff-file-b"
                        )
                    with gr.Row():
                        label_a = gr.Textbox(
                            "", label="Label A", placeholder="A", elem_id="label-a"
                        )
                        label_b = gr.Textbox(
                            "", label="Label B", placeholder="B", elem_id="label-b"
                        )
                    diff_button = gr.Button(
                        "Diff uploads", variant="primary", elem_id="diff-button"
                    )
                with gr.Column(min_width=320):
                    gr.Markdown("**Or two runs of your last Compare**")
                    with gr.Row():
                        pick_a = gr.Dropdown([], label="Run A", elem_id="pick-a")
                        pick_b = gr.Dropdown([], label="Run B", elem_id="pick-b")
                    diff_runs_button = gr.Button("Diff these runs", elem_id="diff-runs-button")
            diff_headline = gr.Markdown("", elem_id="diff-headline")
            kernel_delta = _table(
                "Kernels: per name, per window", "kernel-delta", datatype=vc.KERNEL_DIFF_TYPES,
                column_widths=vc.KERNEL_DIFF_WIDTHS, max_chars=80,
            )  # fmt: skip
            operator_delta = _table(
                "Operators (cpu_op spans): per name, per window", "operator-delta",
                datatype=vc.OPERATOR_DIFF_TYPES, column_widths=vc.OPERATOR_DIFF_WIDTHS,
                max_chars=80,
            )  # fmt: skip

        with gr.Tab("Sweep", id="sweep"):
            gr.Markdown(
                "Variants over sequence lengths, to see where the quadratic cost bites. Points the "
                "memory estimate or the CPU budget refuses, and out-of-memory runs, are marked on "
                "the charts and listed in the table, never dropped."
            )
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=320):
                    sw_variants = _variant_picker(
                        "sw-variants",
                        vc.sweep_defaults(DEVICE, START["dtype"]),
                        job_request.MAX_SWEEP_VARIANTS[DEVICE],
                    )
                    sw_lengths = gr.CheckboxGroup(
                        job_request.sweep_lengths(DEVICE),
                        value=vc.sweep_default_lengths(DEVICE),
                        label="Sequence lengths S",
                        info=f"at most {job_request.MAX_SWEEP_POINTS[DEVICE]} points "
                        "(variants × lengths)",
                        elem_id="sw-lengths",
                    )
                with gr.Column(scale=3, min_width=320):
                    sw_shape = _shape_controls("sw-", seq_len=False)
            sw_button = gr.Button("Sweep", variant="primary", elem_id="sweep-button")
            sw_time = gr.Plot(label="Time per forward vs S (log–log)", elem_id="sw-time")
            sw_memory = gr.Plot(label="Memory vs S (log–log)", elem_id="sw-memory")
            sw_table = _table(
                "Points", "sw-table", headers=vc.sweep_columns(DEVICE),
                datatype=vc.sweep_datatypes(DEVICE), max_chars=140,
            )  # fmt: skip
            sw_zip = gr.DownloadButton(
                "Every trace and the table (.zip)", elem_id="sw-zip", size="md"
            )

        with gr.Tab("Analyse", id="analyze"):
            gr.Markdown(
                "Upload a Chrome trace from any torch.profiler run (`.json` or `.json.gz`, at most "
                f"{views.TRACE_MAX_UPLOAD_BYTES // 1024**2} MiB, "
                f"{views.TRACE_MAX_EXPANDED_BYTES // 1024**2} MiB once gunzipped): operator table, "
                "kernel table, GPU idle & launch figures and a Gantt chart."
            )
            an_file = gr.File(
                label="Trace (.json / .json.gz)", file_types=[".json", ".gz"], elem_id="an-file"
            )
            with gr.Row():
                an_from = gr.Number(
                    None,
                    label="Gantt window from (µs)",
                    elem_id="an-from",
                    precision=None,
                    info="optional: µs from the first profiled step (0 and 0: whole trace)",
                )
                an_to = gr.Number(
                    None,
                    label="to (µs)",
                    elem_id="an-to",
                    precision=None,
                    info="both set: that slice drawn one bar per span (large traces are "
                    "otherwise drawn at reduced detail, aggregated spans in grey)",
                )
            an_button = gr.Button("Analyse", variant="primary", elem_id="analyze-button")
            an_summary = gr.HTML("", elem_id="an-summary", css_template=ROWS_CSS)
            an_launch = gr.HTML("", elem_id="an-launch", css_template=ROWS_CSS)
            an_gantt = gr.Plot(label="Timeline", elem_id="an-gantt")
            an_operators = _table(
                "Operators and record_function spans (whole trace, counted as key_averages)",
                "an-operators",
                headers=list(vc.ANALYZE_OPERATOR_COLUMNS.values()),
                datatype=["str", *["number"] * 5], max_chars=90,
            )  # fmt: skip
            an_kernels = _table(
                "GPU kernels, names decoded", "an-kernels", headers=views.kernel_headers(),
                datatype=views.kernel_datatypes(), column_widths=views.kernel_widths(),
                max_chars=100,
            )  # fmt: skip

        inputs = [variant, seq_len, dtype, batch, heads, head_dim, causal]
        outputs = [
            strip,
            summary,
            operators,
            kernels,
            kernel_info,
            gantt,
            json_file,
            gz_file,
            txt_file,
        ]
        run_button.click(
            jobs.on_device(profile),
            inputs=inputs,
            outputs=outputs,
            api_name="profile",
            concurrency_limit=1,
            concurrency_id=views.GPU_GROUP,
            trigger_mode="once",
            preprocess=False,  # raw values reach the backend, which checks every one
        ).failure(_cleared(len(outputs), views.failed_html()), None, outputs, **QUIET)
        lesson_inputs = [variant, dtype, causal]
        for control in (variant, causal):
            control.change(show_lesson, lesson_inputs, lesson, **QUIET)
        dtype.change(relabel_variants, lesson_inputs, [variant, lesson], **QUIET)

        cmp_outputs = [glance, cmp_note, cmp_bars, cmp_gantts, cmp_zip]
        compared = cmp_button.click(
            jobs.on_device(compare),
            inputs=[cmp_variants, *cmp_shape],
            outputs=[*cmp_outputs, compare_runs],
            api_name="compare",
            concurrency_limit=1,
            concurrency_id=views.GPU_GROUP,
            trigger_mode="once",
            preprocess=False,  # raw values reach the backend, which checks every one
        )
        compared.success(
            fill_diff_picks, compare_runs, [pick_a, pick_b], api_visibility="private", queue=False
        )
        compared.failure(_cleared(len(cmp_outputs)), None, cmp_outputs, **QUIET)
        cmp_dtype = cmp_shape[1]
        cmp_dtype.change(
            relabel_multiselect, [cmp_variants, cmp_dtype], cmp_variants, api_visibility="private",
            queue=False,
        )  # fmt: skip

        diff_outputs = [diff_headline, kernel_delta, operator_delta]
        clear_diff = _cleared(len(diff_outputs))
        diff_button.click(
            _trace_job(diff),
            inputs=[file_a, file_b, label_a, label_b],
            outputs=diff_outputs,
            api_name="diff",
            concurrency_limit=vc.TRACE_CONCURRENCY,
            concurrency_id=vc.TRACE_GROUP,
            trigger_mode="once",
        ).failure(clear_diff, None, diff_outputs, **QUIET)
        diff_runs_button.click(
            _trace_job(diff_runs),
            inputs=[pick_a, pick_b, compare_runs],
            outputs=diff_outputs,
            api_visibility="private",
            concurrency_limit=vc.TRACE_CONCURRENCY,
            concurrency_id=vc.TRACE_GROUP,
            trigger_mode="once",
        ).failure(clear_diff, None, diff_outputs, **QUIET)

        sw_outputs = [sw_time, sw_memory, sw_table, sw_zip]
        sw_button.click(
            jobs.on_device(sweep),
            inputs=[sw_variants, sw_lengths, *sw_shape],
            outputs=sw_outputs,
            api_name="sweep",
            concurrency_limit=1,
            concurrency_id=views.GPU_GROUP,
            trigger_mode="once",
            preprocess=False,  # raw values reach the backend, which checks every one
        ).failure(_cleared(len(sw_outputs)), None, sw_outputs, **QUIET)
        sw_dtype = sw_shape[0]
        sw_dtype.change(
            relabel_multiselect, [sw_variants, sw_dtype], sw_variants, api_visibility="private",
            queue=False,
        )  # fmt: skip

        an_outputs = [an_summary, an_launch, an_operators, an_kernels, an_gantt]
        an_button.click(
            _trace_job(analyze),
            inputs=[an_file, an_from, an_to],
            outputs=an_outputs,
            api_name="analyze",
            concurrency_limit=vc.TRACE_CONCURRENCY,
            concurrency_id=vc.TRACE_GROUP,
            trigger_mode="once",
        ).failure(_cleared(len(an_outputs)), None, an_outputs, **QUIET)
    demo.queue(max_size=queue_size)
    return demo


demo = build_demo()
views.STALE.maybe_sweep()  # a previous process's temp folders older than the cache age


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    demo.launch(**LAUNCH)
