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
"""
