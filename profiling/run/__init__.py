"""One profiled run: the only place that starts torch.profiler and does GPU work.

`runner.run(workload)` validates, builds the variant, warms up, times the steps
(`timing`: eager, CUDA graph, cold L2), records memory over one step (`memory_record`),
samples the GPU's clocks (`clocks`), checks the output and gradients against float64
(`reference_check`, `reference_grad`), exports the trace (`export`) and reads it once
(`trace`: the records reader `records` for our own small traces, else the trace model) into a
`result.ProfileResult`. `training` says what one measured step is; `sdpa_account` asks SDPA
which backend it would pick before a run.

Decides: unavailable (a known rule) vs failed (anything else), what `ran` says, what a forward
saves for backward. May import: workload, analysis, kernels, gantt, trace, attention, torch.
"""
