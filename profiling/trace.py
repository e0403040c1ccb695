"""The trace model: any torch.profiler Chrome trace → one tidy table of spans.

Every view (kernel table, Gantt, per-forward summary, diff, analyse) reads this table and never
the raw JSON again, as HTA keeps parsing apart from its analyses. We parse ourselves instead of
using HTA because we need one small, dependency-free table per trace that also works on a
user's upload, and because a million-event trace has to load in seconds: orjson, one pass of
list comprehensions to pull columns, then numpy per lane (depth and overlap by sorting and
`searchsorted`, not a per-event stack).
"""

from __future__ import annotations

import gzip
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

# torch.profiler's `cat` values (lower-cased), newer names first, older Kineto names after.
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "memcpy", "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
# Our coarse category per span, used for colour and for the tables.
CATEGORY = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu annotation",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "cpu_op": "cpu op",
    "operator": "cpu op",
    "user_annotation": "annotation",
    "python_function": "python",
}
SPAN_COLUMNS = [
    "lane", "kind", "pid", "tid", "name", "cat", "category", "start_us", "dur_us", "end_us",
    "depth", "parent", "self_us", "overlap", "correlation", "external_id", "link", "step", "args",
]  # fmt: skip
_STEP = re.compile(r"^ProfilerStep#(\d+)$")

DEFAULT_MAX_BYTES = 2 * 1024**3  # expanded JSON; the app passes its own, smaller limits


class TraceError(ValueError):
    """The input is not a readable Chrome trace; the message says what is wrong."""


@dataclass
class Trace:
    spans: pd.DataFrame
    t0_us: float  # absolute `ts` of time zero (the first ProfilerStep, else the first span)
    meta: dict[str, Any] = field(default_factory=dict)  # top-level keys except traceEvents
    lanes: list[str] = field(default_factory=list)  # display order: CPU lanes, then GPU lanes
    n_events: int = 0
    n_flows: int = 0
    skipped: int = 0  # complete events without a usable ts/dur (counted, not hidden)

    @property
    def device_properties(self) -> list[dict[str, Any]]:
        props = self.meta.get("deviceProperties") or []
        return props if isinstance(props, list) else []

    @property
    def has_gpu(self) -> bool:
        return bool((self.spans["kind"] == "gpu").any())

    def steps(self) -> pd.DataFrame:
        """ProfilerStep spans (the active steps of a scheduled run), in order."""
        s = self.spans
        return s[(s["category"] == "annotation") & s["name"].str.match(_STEP.pattern)]


def read_bytes(source: str | Path | bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """Raw JSON bytes of a plain or gzip trace, refusing more than `max_bytes` once expanded."""
    if isinstance(source, bytes):
        fh: io.BufferedIOBase = io.BytesIO(source)
    else:
        try:
            fh = open(source, "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise TraceError(f"cannot open trace: {exc.strerror}") from None
    with fh:
        magic = fh.read(2)
        fh.seek(0)
        stream = gzip.GzipFile(fileobj=fh) if magic == b"\x1f\x8b" else fh
        try:
            data = stream.read(max_bytes + 1)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise TraceError(f"the gzip stream is corrupt ({exc})") from None
    if len(data) > max_bytes:
        raise TraceError(
            f"the trace expands to more than {max_bytes / 1024**2:.0f} MiB of JSON; "
            "profile fewer steps or trim it before uploading"
        )
    return data


def load(source: str | Path | bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
    """Parse a Chrome trace file (or its bytes), plain or gzip."""
    data = read_bytes(source, max_bytes)
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"not valid JSON ({exc})") from None
    return from_document(doc)


def from_document(doc: Any) -> Trace:
    """Build the spans table from an already decoded trace document."""
    if isinstance(doc, list):  # the Chrome format also allows a bare array of events
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError("JSON is not a Chrome trace: no `traceEvents` list")
    events = doc["traceEvents"]
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}

    complete = [e for e in events if type(e) is dict and e.get("ph") == "X"]
    n_flows = sum(1 for e in events if type(e) is dict and e.get("ph") == "s")
    names_meta = _lane_metadata(events)
    if not complete:
        raise TraceError(
            "the trace holds no complete (`ph: X`) events: nothing ran while it recorded"
        )

    cat = pd.Series([str(e.get("cat", "")).lower() for e in complete], dtype="object")
    keep = (cat != "trace").to_numpy()  # the profiler's own "PyTorch Profiler (0)" bar
    complete = [e for e, k in zip(complete, keep, strict=True) if k]
    cat = cat[keep].reset_index(drop=True)
    ts = pd.to_numeric(pd.Series([e.get("ts") for e in complete], dtype="object"), errors="coerce")
    dur = pd.to_numeric(
        pd.Series([e.get("dur", 0) for e in complete], dtype="object"), errors="coerce"
    )
    usable = (ts.notna() & dur.notna() & (dur >= 0)).to_numpy()
    skipped = int((~usable).sum())
    if skipped:
        complete = [e for e, k in zip(complete, usable, strict=True) if k]
        cat, ts, dur = (c[usable].reset_index(drop=True) for c in (cat, ts, dur))
    if not complete:
        raise TraceError("no complete event has a numeric `ts` and `dur`")

    args = [e.get("args") if type(e.get("args")) is dict else {} for e in complete]
    df = pd.DataFrame(
        {
            "pid": [str(e.get("pid", "")) for e in complete],
            "tid": [str(e.get("tid", "")) for e in complete],
            "name": [str(e.get("name", "")) for e in complete],
            "cat": cat.to_numpy(),
            "ts": ts.to_numpy(dtype=float),
            "dur_us": dur.to_numpy(dtype=float),
            "correlation": _int_column([a.get("correlation") for a in args]),
            "external_id": _int_column([a.get("External id") for a in args]),
        }
    )
    df["args"] = args
    df["kind"] = np.where(df["cat"].isin(GPU_CATS), "gpu", "cpu")
    df["category"] = df["cat"].map(CATEGORY).fillna(df["cat"].replace("", "other"))

    steps = df["name"].str.match(_STEP.pattern) & (df["kind"] == "cpu")
    t0 = float(df.loc[steps, "ts"].min()) if steps.any() else float(df["ts"].min())
    df["start_us"] = df["ts"] - t0
    df["end_us"] = df["start_us"] + df["dur_us"]
    df = df.drop(columns="ts")

    df["lane"], lanes = _lanes(df, names_meta)
    df = df.sort_values(
        ["lane", "start_us", "dur_us"], ascending=[True, True, False], kind="stable"
    )
    df = df.reset_index(drop=True)
    df["depth"], df["overlap"] = _depth_and_overlap(df)
    df["parent"] = _parents(df)
    df["self_us"] = _self_time(df)
    df["link"] = _links(df)
    df["step"] = _steps(df, steps_mask=df["name"].str.match(_STEP.pattern) & (df["kind"] == "cpu"))
    df["lane"] = pd.Categorical(df["lane"], categories=lanes, ordered=True)
    return Trace(
        spans=df[SPAN_COLUMNS],
        t0_us=t0,
        meta=meta,
        lanes=lanes,
        n_events=len(events),
        n_flows=n_flows,
        skipped=skipped,
    )


def _int_column(values: list[Any]) -> np.ndarray:
    """Integer ids with -1 for missing (ids in traces are ints; anything else counts as absent)."""
    return np.fromiter(
        (v if type(v) is int else -1 for v in values), dtype=np.int64, count=len(values)
    )


def _lane_metadata(events: list[Any]) -> dict[tuple[str, str], str]:
    """Readable names from `ph: M` events: (pid, "") → process label, (pid, tid) → thread name."""
    names: dict[tuple[str, str], str] = {}
    for e in events:
        if type(e) is not dict or e.get("ph") != "M":
            continue
        a = e.get("args") if type(e.get("args")) is dict else {}
        pid, tid = str(e.get("pid", "")), str(e.get("tid", ""))
        if e.get("name") == "process_labels" and a.get("labels"):
            names[(pid, "")] = str(a["labels"])
        elif e.get("name") == "thread_name" and a.get("name"):
            names[(pid, tid)] = str(a["name"]).strip()
    return names


def _lanes(df: pd.DataFrame, names: dict[tuple[str, str], str]) -> tuple[np.ndarray, list[str]]:
    """One lane per CPU thread and per GPU stream; GPU annotations get a lane above their stream."""
    keys = df[["kind", "pid", "tid"]].drop_duplicates()
    annotated = set(
        map(tuple, df.loc[df["cat"] == "gpu_user_annotation", ["pid", "tid"]].to_numpy())
    )
    label: dict[tuple[str, str, str, bool], str] = {}
    order: list[tuple[int, float, float, str]] = []
    for kind, pid, tid in keys.itertuples(index=False):
        if kind == "gpu":
            device = names.get((pid, ""), f"GPU {pid}")
            text = f"{device} · stream {tid}"
            label[(kind, pid, tid, False)] = text
            order.append((2, _num(pid), _num(tid) + 0.5, text))
            if (pid, tid) in annotated:
                ann = f"{text} · annotations"
                label[(kind, pid, tid, True)] = ann
                order.append((2, _num(pid), _num(tid), ann))
        else:
            thread = names.get((pid, tid)) or f"thread {tid}"
            text = f"CPU · {thread}" if thread.startswith("thread") else f"CPU · {thread} ({tid})"
            label[(kind, pid, tid, False)] = text
            order.append((1, _num(pid), _num(tid), text))
    is_ann = (df["cat"] == "gpu_user_annotation").to_numpy()
    lane = np.array(
        [
            label[(k, p, t, a)]
            for k, p, t, a in zip(df["kind"], df["pid"], df["tid"], is_ann, strict=True)
        ],
        dtype=object,
    )
    lanes = [text for *_, text in sorted(order)]
    return lane, list(dict.fromkeys(lanes))


def _num(x: str) -> float:
    try:
        return float(x)
    except ValueError:
        return float("inf")


def _depth_and_overlap(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Nesting depth = spans still open when this one starts; overlap = crosses an open span's end.

    Rows are sorted by lane, start, longest first. In a properly nested lane the number of spans
    started before i minus those already ended is exactly i's depth. A span that starts inside an
    earlier one but ends after every earlier span has ended is a partial overlap: both are kept
    and both flagged, never dropped.
    """
    depth = np.zeros(len(df), dtype=np.int64)
    overlap = np.zeros(len(df), dtype=bool)
    lane_codes = df["lane"].to_numpy()
    bounds = np.flatnonzero(lane_codes[1:] != lane_codes[:-1]) + 1
    starts_all, ends_all = df["start_us"].to_numpy(), df["end_us"].to_numpy()
    eps = 1e-3  # timestamps are floats in µs with ns resolution
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(df)], strict=True):
        s, e = starts_all[lo:hi], ends_all[lo:hi]
        ended = np.searchsorted(np.sort(e), s + eps, side="right") - (e <= s + eps)
        depth[lo:hi] = np.maximum(np.arange(hi - lo) - ended, 0)
        if hi - lo > 1:
            prev_max = np.maximum.accumulate(np.r_[-np.inf, e[:-1]])
            crossing = (s < prev_max - eps) & (e > prev_max + eps)
            if crossing.any():
                overlap[lo:hi] |= crossing
                # flag the span whose end was crossed too
                arg = _running_argmax(e)
                crossed = arg[np.flatnonzero(crossing) - 1]
                overlap[lo + crossed] = True
    return depth, overlap


def _parents(df: pd.DataFrame) -> np.ndarray:
    """Row of the enclosing span: the last span one level up that started earlier in the lane."""
    parent = np.full(len(df), -1, dtype=np.int64)
    depth = df["depth"].to_numpy()
    lane = df["lane"].to_numpy()
    order = np.arange(len(df))
    for d in range(1, int(depth.max()) + 1 if len(df) else 0):
        child = order[depth == d]
        above = order[depth == d - 1]
        if not len(child) or not len(above):
            continue
        i = np.searchsorted(above, child, side="right") - 1
        ok = i >= 0
        cand = above[np.clip(i, 0, None)]
        ok &= lane[cand] == lane[child]
        parent[child[ok]] = cand[ok]
    return parent


def _self_time(df: pd.DataFrame) -> np.ndarray:
    """Duration minus the time spent in direct children (what key_averages calls self time)."""
    dur = df["dur_us"].to_numpy()
    parent = df["parent"].to_numpy()
    has = parent >= 0
    children = np.bincount(parent[has], weights=dur[has], minlength=len(df))
    return np.maximum(dur - children, 0.0)


def _running_argmax(x: np.ndarray) -> np.ndarray:
    running = np.maximum.accumulate(x)
    idx = np.where(x == running, np.arange(len(x)), 0)
    return np.maximum.accumulate(idx)


def _links(df: pd.DataFrame) -> np.ndarray:
    """Row of the counterpart: GPU work → its runtime launch, launch → its (first) GPU work.

    torch writes the same correlation id into the launch's args, the kernel's args and the
    `ac2g` flow pair between them, so one join on it recovers every arrow Perfetto draws.
    """
    link = np.full(len(df), -1, dtype=np.int64)
    corr = df["correlation"].to_numpy()
    has = corr >= 0
    gpu = has & (df["kind"] == "gpu").to_numpy() & (df["cat"] != "gpu_user_annotation").to_numpy()
    launch = has & df["cat"].isin(LAUNCH_CATS).to_numpy()
    g = pd.Series(np.flatnonzero(gpu), index=corr[gpu])
    lnc = pd.Series(np.flatnonzero(launch), index=corr[launch])
    g, lnc = g[~g.index.duplicated()], lnc[~lnc.index.duplicated()]
    link[g.to_numpy()] = lnc.reindex(g.index).fillna(-1).astype(np.int64).to_numpy()
    link[lnc.to_numpy()] = g.reindex(lnc.index).fillna(-1).astype(np.int64).to_numpy()
    return link


def _steps(df: pd.DataFrame, steps_mask: pd.Series) -> np.ndarray:
    """ProfilerStep number each span belongs to (GPU work: its launch's step), -1 outside."""
    step = np.full(len(df), -1, dtype=np.int64)
    windows = df[steps_mask].sort_values("start_us")
    if windows.empty:
        return step
    numbers = windows["name"].str.extract(_STEP)[0].astype(int).to_numpy()
    w_start, w_end = windows["start_us"].to_numpy(), windows["end_us"].to_numpy()
    start = df["start_us"].to_numpy()
    i = np.searchsorted(w_start, start, side="right") - 1
    inside = (i >= 0) & (start <= w_end[np.clip(i, 0, None)])
    cpu = (df["kind"] == "cpu").to_numpy()
    step[cpu & inside] = numbers[i[cpu & inside]]
    link = df["link"].to_numpy()
    gpu_linked = ~cpu & (link >= 0)
    step[gpu_linked] = step[link[gpu_linked]]
    return step
