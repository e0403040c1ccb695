"""A roofline table per run or per trace: each kernel call's Work (profiling.kernels.work, from
the best source there is) gathered into roofline rows (profiling.kernels.roofline), phase by
phase. A run of this app sizes its kernels from its workload; an uploaded trace only from what
it recorded (bytes of copies, the launching operators' shapes), so the rest is "not placed".

Pure data: no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from profiling.kernels.roles import KernelSpans
from profiling.kernels.roofline import kernel_work, roofline_rows
from profiling.kernels.work import AttentionShape, Work
from profiling.trace.events import span_args
from profiling.trace.query import first_rows

OpArgs = Callable[[int], Mapping[str, Any] | None]  # a launching op's args by its span index


def phases_roofline(
    phases: Mapping[str, KernelSpans],
    shape: AttentionShape | None,
    device_name: str,
    dtype: str,
    op_args: OpArgs | None = None,
) -> pd.DataFrame:
    """Roofline rows for every kernel call of every phase (columns.ROOFLINE_COLUMNS);
    kernels that share a key (KernelSpans.keys) share one Work, computed once."""
    names: list[str] = []
    durations: list[float] = []
    roles: list[str] = []
    phase_of: list[str] = []
    works: list[Work] = []
    for phase, spans in phases.items():
        names += spans.names
        durations += spans.durations
        roles += spans.roles
        phase_of += [phase] * len(spans.names)

        def work_of(index: int, phase: str = phase, spans: KernelSpans = spans) -> Work:
            chain = spans.chains[index]
            launcher = op_args(chain.ids[0]) if op_args and chain.ids else None
            return kernel_work(spans.roles[index], spans.names[index], phase, shape,
                               span_args(spans.args[index]), chain.names, launcher)  # fmt: skip

        if len(spans.keys):
            which, distinct = pd.factorize(np.asarray(spans.keys))  # hashed, not sorted
            shared = np.empty(len(distinct), dtype=object)
            shared[:] = [work_of(i) for i in first_rows(which, len(distinct)).tolist()]
            works += shared[which].tolist()
        else:
            works += [work_of(i) for i in range(len(spans.names))]
    return roofline_rows(names, durations, roles, phase_of, works, device_name, dtype)


def table_op_args(spans: pd.DataFrame) -> OpArgs:
    """Op args by span index in a spans table (those kept: ops with recorded shapes)."""
    args = spans["args"].to_numpy()
    return lambda index: span_args(args[index]) or None


def workload_shape(workload: Any) -> AttentionShape:
    """A run's AttentionShape from its Workload (duck-typed: this module imports no torch).
    The visible pairs are those its FLOP count uses, so kernels and run agree."""
    per_pair = 4.0 * workload.batch * workload.heads * workload.head_dim
    return AttentionShape.from_numbers(
        workload.batch,
        workload.heads,
        workload.seq_len,
        workload.head_dim,
        workload.torch_dtype.itemsize,
        key_heads=workload.key_heads,
        queries=workload.queries,
        visible_pairs=round(workload.forward_flops / per_pair),
    )


def run_roofline(result: Any) -> pd.DataFrame:
    """A ProfileResult's roofline rows, every phase's kernels, sized by its workload."""
    phases = {name: phase.spans for name, phase in result.trace.phases.items()}
    summary = result.summary
    return phases_roofline(
        phases, workload_shape(result.config), summary.device_name, result.config.dtype
    )
