"""The names a run writes into its trace and every analysis reads back out of it.

Plain constants with no imports, so the runner (which needs torch) and the trace analyses
(which must not: an uploaded trace is read without it) share one definition.
"""

from __future__ import annotations

FORWARD = "attn_fwd"  # the record_function span around one profiled forward
BACKWARD = "attn_bwd"  # around one profiled backward (a backward or train run)
STEP = "attn_step"  # around a train run's forward and backward: one measured step
# A model run's spans (issue 43; profiling/run/model/ writes them, profiling/analysis/model/
# reads them): one measured step, each decoder layer, each call of the attention function, each
# norm. The step span holds every thread's launches, like attn_step (on a GPU a train step's
# backward runs on autograd's device thread).
MODEL_STEP = "model_step"
MODEL_LAYER = "model_layer_"  # + the decoder layer's index
MODEL_ATTENTION = "model_attention"
MODEL_NORM = "model_norm"
# Spans whose GPU work any thread may launch while they last: autograd runs the backward on its
# own thread (a ProfilerStep holds every thread's work too); an attn_fwd holds its own thread's.
ALL_THREADS = (BACKWARD, STEP, MODEL_STEP)
# The spans one measured step of each mode is made of, in order (Workload.phases, and a stored
# run's trace read again: profiling/views/reopen.py)
MODE_PHASES = {"forward": (FORWARD,), "backward": (BACKWARD,), "train": (FORWARD, BACKWARD)}
GPU_WORK = ("kernel", "memcpy", "memset")  # the span categories counted as a forward's GPU work


def measured_span(mode: str) -> str:
    """The span around one measured step: the phase itself, or a train step's STEP."""
    return STEP if mode == "train" else MODE_PHASES[mode][0]


# The aten op each SDPA backend dispatches to: how a trace tells which backend really ran.
BACKEND_OPS: dict[str, str] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (CPU)",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "aten::_scaled_dot_product_attention_math": "math",
}

# A workload's choices and bounds (profiling.workload.spec checks them; the CLI's flags name them
# without importing torch, so `analyze` and `diff` start in a second, not four)
DTYPE_NAMES = ("float32", "float16", "bfloat16")
DEVICES = ("auto", "cuda", "cpu")
# What a run measures: the forward (today's default), the backward alone (its forward runs
# outside the measured phase), or one training step (forward + backward).
MODES = ("forward", "backward", "train")
# How the measured steps are timed (issue 23; profiling/run/timing.py runs them): launched
# eagerly (today's), replayed as a CUDA graph, or each after an L2 flush. The last two need a GPU.
TIMINGS = ("eager", "cuda-graph", "cold-l2")
# name: (lowest, highest). Wide enough for the H200's largest sensible runs; the memory
# estimate, not these bounds, is what refuses a run too big for the machine at hand.
LIMITS: dict[str, tuple[int, int]] = {
    "seq_len": (16, 131072),
    "batch": (1, 64),
    "heads": (1, 128),
    "head_dim": (16, 256),
    "steps": (1, 50),  # the measured (active) steps: their median and IQR are reported
    "q_len": (1, 131072),
    "kv_heads": (1, 128),
    "window": (1, 131072),
}

# Around the L2 flush a cold-l2 run makes before each measured step (issue 23): outside every
# measured window, so no figure counts it; the launch statistics leave its GPU work out too.
L2_FLUSH = "attn_l2_flush"
