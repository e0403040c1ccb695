"""Attention Profiler: profile attention variants with torch.profiler and read what ran.

Data walks one way, and each package is one step of it (docs/architecture.md draws the map;
the `layers` contract in pyproject.toml, checked by `lint-imports` in the test suite, keeps it):

    page | cli        the Gradio page and the command line: wiring, nothing computed
    views            results → what a tab, the API or the CLI shows (no gradio, no torch)
    jobs             lists of runs: Compare, Sweep, the device queue
    run              one profiled run: the only torch.profiler, the only GPU work
    workload         what the user asked for, validated once
    analysis, kernels, gantt   figures from a trace (torch-free; an upload needs no GPU)
    trace            reading any Chrome trace, streamed and bounded
    vocabulary, user_values, text_tables, files   names and helpers every layer shares

A package imports only the layers below it. `attention/` (the variants) is beside this
package and never imports it.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- which variants can run here, and why not (fails closed): each variant's `unavailable` rule;
  collected by `availability.unavailable_reasons`
- which SDPA backend a trace shows: its aten op (`vocabulary.BACKEND_OPS`, `summary.sdpa_backend`),
  else its kernels' names (`kernels.sdpa_backend_of_kernels`: a CUDA graph's replay has no op)
- a caller's loosely typed values read as a field's type: `profiling/user_values.py`
- which spans hold every thread's launches (autograd runs the backward on its own thread):
  `profiling/vocabulary.py` (`ALL_THREADS`), read by `summary.starts_inside` and
  `small_trace._inside`
- names written into a trace (`attn_fwd`, GPU work kinds, SDPA backend ops, the L2 flush's
  `attn_l2_flush`): `profiling/vocabulary.py`
- the spans one measured step of each mode is made of: `profiling/vocabulary.py` (`MODE_PHASES`,
  `measured_span`), read by `Workload` and `views_reopen`
"""
