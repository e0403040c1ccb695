"""What each kernel is: its decoded name and category (`names`), its role in attention
(`roles`, one kernel at a time; `chains`, a whole spans table once per signature), its FLOPs
and bytes (`work` from the workload's shapes, `shapes` from recorded shapes) and its place on
the roofline (`roofline`).

Part of the analysis layer: may import analysis, trace and the base modules; never torch.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- a kernel's role in attention (QKᵀ, mask, softmax, fused forward, dQ/dK/dV, …), and when a kernel
  is attention's at all (this app's run, its name, an attention op above it; else a plain role:
  GEMM, elementwise, collective, …): `profiling/kernels/roles.py` (`kernel_role`, `attention_run`,
  `plain_role`; a CUDA graph's replayed kernels by name: `replayed_role`; `roles` over a phase;
  chains from either reader: `record_chains`, `table_chains`)
- a kernel's FLOPs, bytes and their source; its bound: `profiling/kernels/work.py` (per role, from
  the workload), `profiling/kernels/shapes.py` (from recorded shapes),
  `profiling/kernels/roofline.py` (`kernel_work` picks the source, `roofline_rows`,
  `kernel_bound`); a run's or a trace's rows: `profiling/analysis/roofline_runs.py`; the chart:
  `profiling/views/roofline_figure.py` with the roofs of `peaks.roofs`
- whether CUPTI's occupancy estimate means anything: `profiling/kernels/names.py` (`_occupancy`: 0%
  for a grid that gives every SM a warp is flagged, not printed)
- what a kernel name means; hints only for our own runs: `profiling/kernels/names.py`
  (`decode(name, own_run=…)`)
- a kernel's own name: the kernel inside a wrapper (`cutlass::Kernel<…>`, `cutlass::device_kernel
  <…>`, `ck_tile::kentry<…>`), past a `std::enable_if<…>::type` return type, a generic `kernel`
  with its namespace (`gemvx::kernel`): `profiling/kernels/demangled.py` (`own_function`), used
  by `names.own_name` and `names.short_name`
- a kernel's role in attention (its name, the ops above its launch, their shapes):
  `profiling/kernels/roles.py` (the rules, one kernel at a time); a whole spans table's kernels
  once per signature in `profiling/kernels/chains.py` (`TableKernels`, held equal to the rules by
  `tests/kernels/test_kernel_roles.py`)
"""
