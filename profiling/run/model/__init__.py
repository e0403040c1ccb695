"""A model run (issue 43): attention inside a real transformers decoder, profiled for each
`attn_implementation`.

`runner.run(model_workload)` builds the preset once with random weights (`build`: meta device,
`to_empty`, filled in place), then for each implementation (`implementations`: eager, sdpa and
sdpa with each backend forced, flex_attention, a kernels-hub FlashAttention or its Triton
fallback in `kernels`) warms up, profiles the measured steps (`steps`: prefill, decode against
the KV cache, train) with the spans of `markers`, reads the trace once, times the step apart
and checks the logits against eager's in float32. Returns `result.ModelRun` (plain data).

May import: workload, analysis, gantt, trace, attention, transformers, torch; shares the
variants' runner lock (`profiling/run/runner.py`, RUN_LOCK).

Each rule decided here:
- which implementation cannot run a model here, and why (soft-capping, CUDA-only backends,
  half-only backends, compilers, kernels): `implementations.py` (`unavailable`)
- the Hub's FlashAttention or the Triton fallback, and the fallback's per-sequence run of a
  padded batch: `kernels.py` (`hub`, `fallback`)
- the spans a model run writes (one per decoder layer, attention call, norm), and SDPA's real
  call caught for its reasons: `markers.py` (`marked`, `sdpa_calls`)
- what one measured step is per mode, and what is prepared outside it: `steps.py` (`Step`)
- the logits error (max |Δ| over max |eager float32|, real tokens only), the bare timing
  (CUDA events, or perf_counter on a CPU), tokens/s in decode: `runner.py`; the float32
  reference computed on each sequence's real tokens alone: `steps.py` (`real_logits`)
"""
