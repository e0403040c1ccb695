"""A Profile run's trace, read once: its per-forward figures, kernel table, launch statistics,
Compare timeline and Gantt all come from the one object `read` returns.

Two readers stand behind it, and no caller knows which one ran. A run's own trace (a few
hundred typed, properly nested events) is read as plain records by profiling.run.records,
about 5× faster than building the spans table at that size; anything else (a big trace,
partial overlaps, odd field types) goes to the trace model. The file is read once either way:
its bytes go to the records reader first and, if it declines them, to the model.

The launch statistics and the timeline read the spans table's columns; the records provide
those columns (small_trace.span_columns), so profiling.analysis.launch's rules are written once. A
RunTrace is plain data: it pickles across a ZeroGPU worker boundary, and it imports neither
torch nor plotly (the Gantt is a FigureSpec, made into a plotly figure by the page).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from profiling.analysis.launch import LaunchStats, launch_stats
from profiling.analysis.summary import ForwardStats, forward_work, per_forward
from profiling.gantt.spec import FigureSpec, gantt_spec
from profiling.kernels.chains import table_spans
from profiling.kernels.names import kernel_table
from profiling.kernels.roles import KernelSpans, record_chains, role_table, roles
from profiling.run import gantt_records
from profiling.run import records as small_trace
from profiling.run.records import SmallTrace
from profiling.trace import events as trace_events
from profiling.trace import model as trace_model
from profiling.vocabulary import FORWARD

RECORDS, TABLE = "records", "table"


@dataclass
class Phase:
    """One phase's figures (attn_fwd or attn_bwd): per step, as the run's own."""

    stats: ForwardStats
    kernels: pd.DataFrame
    spans: KernelSpans = field(default_factory=KernelSpans, repr=False)  # one by one
    steps: int = 1  # how many measured steps the figures are divided by

    def roles(self) -> pd.DataFrame:
        """µs per step by role in attention (profiling.kernels.roles)."""
        return role_table(self.spans, self.steps)


@dataclass
class RunTrace:
    """One run's trace and what the run computed from it. Built by `read` only."""

    lanes: list[str]
    stats: ForwardStats  # per measured step (a forward, a backward or both), kernels decoded
    kernels: pd.DataFrame  # per kernel name, per measured step
    source: SmallTrace | trace_model.Trace = field(repr=False)
    _columns: pd.DataFrame | None = field(default=None, repr=False)
    # each phase of the step by its span's name, in order (one phase: the step's own figures)
    phases: dict[str, Phase] = field(default_factory=dict, repr=False)
    step: Phase | None = field(default=None, repr=False)  # the whole measured step

    def roles(self) -> pd.DataFrame:
        """µs per measured step by role in attention; with more than one phase, each phase's
        rows in turn, the phase named in a last column."""
        if len(self.phases) < 2:
            return self.step.roles() if self.step else role_table(KernelSpans())
        tables = [phase.roles().assign(phase=name) for name, phase in self.phases.items()]
        return pd.concat(tables, ignore_index=True)

    @property
    def reader(self) -> str:
        """Which reader ran ("records" or "table"): for benchmarks and tests; no view asks."""
        return RECORDS if isinstance(self.source, SmallTrace) else TABLE

    def columns(self) -> pd.DataFrame:
        """The spans table's columns (at least those profiling.analysis.launch and compare.timeline
        read), made once from the records, or the model's table itself."""
        if self._columns is None:
            if isinstance(self.source, SmallTrace):
                self._columns = small_trace.span_columns(self.source)
            else:
                self._columns = self.source.spans
        return self._columns

    def launch_stats(self) -> LaunchStats:
        """GPU busy/idle and launch figures (the page's block under the summary strip)."""
        # launch_stats reads the spans and has_gpu; times are already from the first step
        return launch_stats(trace_model.Trace(spans=self.columns(), t0_us=0.0, lanes=self.lanes))

    def gantt(self, title: str | None = None) -> FigureSpec:
        """The run's Gantt as plain data, one bar per span where the trace allows it."""
        if isinstance(self.source, SmallTrace):
            return gantt_records.gantt(self.source, title)
        return gantt_spec(self.source.spans, self.lanes, title=title)


def read(
    path: str | Path,
    measured: str = FORWARD,
    phases: tuple[str, ...] = (FORWARD,),
    max_bytes: int = trace_events.DEFAULT_MAX_BYTES,
) -> RunTrace:
    """The run's trace at `path`, read once; raises TraceError as trace.load does. `measured`
    names the span around one measured step, `phases` the spans it is made of; `max_bytes`
    caps the JSON once expanded (a stored trace reopened on the page: an upload's cap).

    Bytes the records reader declines after decoding them are decoded again by the model: a
    rare path (every variant's H200 run in tests/gpu/test_gpu.py is read as records)."""
    data = trace_events.read_bytes(path, max_bytes)
    records = small_trace.parse(data)
    if records is not None:
        return of_records(records, measured, phases)
    # the bytes read above: no second file read
    return of_table(trace_model.load(data), measured, phases)


def of_records(
    records: SmallTrace, measured: str = FORWARD, phases: tuple[str, ...] = (FORWARD,)
) -> RunTrace:
    """A run's trace read as records (`read` picks the reader; tests build both to compare)."""

    def phase(name: str) -> Phase:
        windows, work = small_trace.forward_work(records, name)
        stats = small_trace.per_forward(records, windows, work, own_run=True)
        names = [span.name for span in work]
        chains = record_chains(records.spans, work)
        found = roles(names, chains, in_run=True)  # a run of this app: attention throughout
        per = max(len(windows), 1)
        kernels = small_trace.kernel_table(work, per=per, own_run=True, roles=found)
        spans = KernelSpans(
            tuple(names), tuple(span.dur for span in work), tuple(found),
            tuple(span.args for span in work), tuple(chains),
        )  # fmt: skip
        return Phase(stats, kernels, spans, per)

    return _built(records.lanes, records, phase, measured, phases)


def of_table(
    table: trace_model.Trace, measured: str = FORWARD, phases: tuple[str, ...] = (FORWARD,)
) -> RunTrace:
    """A run's trace read as the trace model's spans table."""

    def phase(name: str) -> Phase:
        windows, work = forward_work(table, name)
        stats = per_forward(table, windows=windows, work=work, own_run=True)
        spans = table_spans(table.spans, work.index.to_numpy())
        per = max(len(windows), 1)
        kernels = kernel_table(work, per=per, own_run=True, roles=list(spans.roles))
        return Phase(stats, kernels, spans, per)

    return _built(table.lanes, table, phase, measured, phases)


def _built(lanes, source, phase: Callable[[str], Phase], measured: str, phases) -> RunTrace:
    """The step's figures and each phase's (the step's own where it is the one phase)."""
    step = phase(measured)
    by_name = {name: step if name == measured else phase(name) for name in phases}
    return RunTrace(lanes, step.stats, step.kernels, source, phases=by_name, step=step)
