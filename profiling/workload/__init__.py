"""What the user asked for, validated once: a Workload, or a list of them for Compare and Sweep.

Owns every field, type, range and known variant id (`spec.Workload.from_user`, `LIMITS`,
the page's ranges and the CPU budget), which variants can run here and why not
(`availability`), the memory a run needs and its refusal before any allocation (`memory`),
and the Compare/Sweep lists with their FLOP and GPU-slot budgets (`request`).

Entry points: `spec.Workload.from_user`, `spec.page_workload`, `request.compare_request`,
`request.sweep_request`, `memory.check_memory`.
May import: attention (the variants), analysis (the FLOP counts), the base modules.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- the workload's controls: name, type, API default and docstring line, page label, info and
  per-device range, CLI flag: `profiling/workload/controls.py` (`CONTROLS`); built into the page by
  `profiling/page/controls.py` (`shape_controls`, `shape_handler`) and into the CLI by
  `profiling/cli/flags.py` (`add_shape_flags`)
- a workload's fields, types, ranges, known variant ids, device detection:
  `profiling/workload/spec.py` (`Workload.from_user`, `LIMITS`, `known_variants`, `resolve_device`)
- the page's slider ranges (declared per control in `profiling/workload/controls.py`) and the CPU
  budget per run, enforced in the backend: `profiling/workload/spec.py` (`check_page_ranges`,
  `check_cpu_budget`, `page_workload`)
- Compare/Sweep lists, job FLOP budget, GPU-slot seconds: `profiling/workload/request.py`
- the memory a run needs, and refusing it before allocation: `profiling/workload/memory.py` (from
  each variant's `score_matrices`, `backward_matrices`, `upcasts`, `layout`); what one step
  needs per variant and device, drawn by the Sweep beside what it measured:
  `memory.step_estimate_bytes`
- what one measured step is (`forward`, `backward`, `train`) and its phases' spans:
  `Workload.mode`, `.phases`, `.measured` (`profiling/workload/spec.py`); the step itself in
  `profiling/run/training.py` (`measured_step`)
- a workload's choices and bounds (dtypes, devices, modes, `LIMITS`): `profiling/vocabulary.py`,
  checked by `profiling/workload/spec.py`; the CLI's flags read them without torch
- how the measured steps are timed (`eager`, `cuda-graph`, `cold-l2`), and that the last two need a
  GPU: `profiling/workload/spec.py` (`TIMINGS`, `check_timing`); the capture, replay and L2 flush
  in `profiling/run/timing.py` (`prepare`)
- the number of measured steps and their range: `profiling/workload/spec.py` (`steps`: `LIMITS`),
  the page's range per device with its control in `profiling/workload/controls.py`
"""
