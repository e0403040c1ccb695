"""The run's correctness checks against float64: the output (`check.relative_error`: the
"rel. err" of every run) and, for backward and training steps, the gradients
(`grad.gradient_errors`). Both work in chunks sized by the memory the run's memory check left
spare, so the reference never holds the S² matrix (profiling.workload.memory sizes the chunk).

May import torch, attention.masks and the workload; nothing of the trace or the views.
"""
