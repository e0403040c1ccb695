"""What the user asked for, validated once: a Workload, or a list of them for Compare and Sweep.

Owns every field, type, range and known variant id (`spec.Workload.from_user`, `LIMITS`,
the page's ranges and the CPU budget), which variants can run here and why not
(`availability`), the memory a run needs and its refusal before any allocation (`memory`),
and the Compare/Sweep lists with their FLOP and GPU-slot budgets (`request`).

Entry points: `spec.Workload.from_user`, `spec.page_workload`, `request.compare_request`,
`request.sweep_request`, `memory.check_memory`.
May import: attention (the variants), analysis (the FLOP counts), the base modules.
"""
