"""The names a run writes into its trace and every analysis reads back out of it.

Plain constants with no imports, so the runner (which needs torch) and the trace analyses
(which must not: an uploaded trace is read without it) share one definition.
"""

from __future__ import annotations

FORWARD = "attn_fwd"  # the record_function span around one profiled forward
BACKWARD = "attn_bwd"  # around one profiled backward (a backward or train run)
STEP = "attn_step"  # around a train run's forward and backward: one measured step
# Spans whose GPU work any thread may launch while they last: autograd runs the backward on its
# own thread (a ProfilerStep holds every thread's work too); an attn_fwd holds its own thread's.
ALL_THREADS = (BACKWARD, STEP)
GPU_WORK = ("kernel", "memcpy", "memset")  # the span categories counted as a forward's GPU work

# The aten op each SDPA backend dispatches to: how a trace tells which backend really ran.
BACKEND_OPS: dict[str, str] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "aten::_scaled_dot_product_attention_math": "math",
}

# Around the L2 flush a cold-l2 run makes before each measured step (issue 23): outside every
# measured window, so no figure counts it; the launch statistics leave its GPU work out too.
L2_FLUSH = "attn_l2_flush"
