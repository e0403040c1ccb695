"""Hardware counters from Nsight Compute (issue 36): measured, not modelled.

torch.profiler cannot read counters (its option is gone, and CUPTI takes one subscriber at a
time), so after the profiled run the same measured step runs once more in its own process
under `ncu` (`step.py`, started by `collect.py`), inside an NVTX range so only its kernels are
profiled. `report.py` reads the `.ncu-rep` with NVIDIA's `ncu_report` module; `join.py` lays
the measured figures beside the profiled kernels and the modelled roofline. report.py and
join.py import no torch: they run where the report is read, not where it was made.
"""
