"""One profiled run: the only place that starts torch.profiler and does GPU work.

`runner.run(workload)` validates, builds the variant, warms up, times the steps
(`timing`: eager, CUDA graph, cold L2), records memory over one step (`memory_record`),
samples the GPU's clocks (`clocks`), checks the output and gradients against float64
(`reference/check`, `reference/grad`), exports the trace (`export`) and reads it once
(`trace`: the records reader `records` for our own small traces, else the trace model) into a
`result.ProfileResult`. `training` says what one measured step is; `sdpa_account` asks SDPA
which backend it would pick before a run.

Decides: unavailable (a known rule) vs failed (anything else), what `ran` says, what a forward
saves for backward. May import: workload, analysis, kernels, gantt, trace, attention, torch.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- unavailable (a known rule) vs failed (anything else): `attention.variant.VariantUnavailable`
  raised by rules; `profiling/run/runner.py` turns the rest into `RunError`
- why SDPA picks a backend (torch's checks and its pick, for the run's inputs):
  `attention/sdpa_reasons.py` (reads the checks' C++ warnings off stderr; asks with every backend
  enabled), asked through `Built.explain` by the runner, and before a run by
  `profiling/run/sdpa_account.py` (the picker, on empty tensors of the shape on screen)
- what a forward saves for backward, and the gradients' error: `profiling/run/training.py`
  (`saved_for_backward`), `profiling/run/reference/grad.py`
- a run's result and Summary from what it left (trace, key_averages, checks):
  `profiling/run/result.py` (`build_result`)
- reading a run's trace (once): `profiling/run/trace.py` (`read`: records reader, else the trace
  model)
- the GPU's clocks, power, temperature, throttle reasons, and when to warn:
  `profiling/run/clocks.py` (`Sampler`, `warning`, `BENIGN`)
- what one step of a CPU run allocated at once (the Sweep's measured memory on a CPU):
  `profiling/run/cpu_memory.py` (`step_peak_bytes`: the profiler's CPU memory records, after the
  run's profiler)
- hardware counters: whether they can run here (and why not), the ncu line, the metrics read, how
  ncu's kernels match the profiled ones: `profiling/run/counters.py` (`unavailable_reason`,
  `ncu_reason`, `ncu_command`, `MAX_KERNELS`; its time: `PASS_SECONDS` a pass, `JOB_SECONDS`
  a job, ncu's process group killed past it, `bounded_run`; its child `run/counters_step.py`),
  `profiling/analysis/counters.py` (`METRICS`, `read_report`), `analysis/counters_join.py`
  (`match`: function name in launch order); shown by `profiling/views/counters.py`
"""
