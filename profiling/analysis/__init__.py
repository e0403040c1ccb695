"""Figures from a trace, torch-free, so an uploaded trace is analysed on any machine.

Owns the windows a run is counted over and each step's figures (`summary`), the median and
IQR and when a spread is large (`spread`), launch statistics (`launch`, `launch_tables`),
Diff (`diff`, `diff_phases`), Analyse of an upload (`analyze`), the memory timeline
(`memory_timeline`), the run-level roofline (`bounds`, with the datasheet `peaks`), roles
across runs (`role_views`), roofline rows of a run or a trace (`roofline_runs`), and the
tables' columns and headers (`columns`).

May import: kernels and gantt (the same layer), trace, the base modules; never torch,
attention, gradio or plotly.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- roles across runs (Compare's variants × roles, Diff by role): `profiling/analysis/role_views.py`
- what bounds a run (bytes that must move, TB/s, the roofline): `profiling/analysis/bounds.py`,
  with the datasheet peaks of `profiling/analysis/peaks.py`
- which windows a run is counted over (the `attn_fwd` steps): `profiling/analysis/summary.py`
  (`forward_spans`, `forward_work`) for the spans table; the records reader
  `small_trace.forward_work` is held equal to it on every fixture by
  `tests/run/test_small_trace.py`
- Diff phase by phase: `profiling/analysis/diff_phases.py`
- table columns and headers (per forward, per step, or whole-trace totals: `kernel_columns(unit)`,
  `role_columns(unit)`): `profiling/analysis/columns.py`
- a per-step figure's median, IQR, and when a spread is large: `profiling/analysis/spread.py`
  (`spread`, `LARGE_IQR`); each step's figures in `summary.forward_stats` (`cpu_us_each`,
  `gpu_us_each`, shared by both trace readers)
- what an allocation is (scores, probabilities, saved for backward, output, workspace, gradients)
  and memory in use over a step: `profiling/analysis/memory_timeline.py` (`build`, torch-free);
  recorded around one step by `profiling/run/memory_record.py`
"""
