"""Where the run store lives, how large its traces may grow, and whose runs a page may list.

Looked up when a store is first opened (never at import), so a test or a shell can point
ATTNPROF_STORE elsewhere first. The order: an explicit path (the CLI's --store), then
ATTNPROF_STORE, then a Hugging Face Space's persistent /data, then the per-user data folder.
"""

from __future__ import annotations

import os
from pathlib import Path

STORE_ENV = "ATTNPROF_STORE"  # a path, or "off" to keep nothing
MAX_BYTES_ENV = "ATTNPROF_STORE_MAX_BYTES"  # the traces' size cap, in bytes
DEFAULT_MAX_BYTES = 2 * 1024**3  # 2 GB of traces
MAX_RUNS_ENV = "ATTNPROF_STORE_MAX_RUNS"  # the rows' cap, in runs
# ~7 KB a run on a CPU (a GPU run's kernel rows make it more): ~1 GB; the History list's speed
# was measured at this size (docs/performance.md §11). Public callers can add 3 runs a second.
DEFAULT_MAX_RUNS = 100_000
OFF = ("off", "none", "0", "false")
FILE_NAME = "runs.sqlite"
SPACE_DATA = Path("/data")  # a Space's persistent storage, when it has some


def default_path() -> Path | None:
    """The store's file, or None when ATTNPROF_STORE says "off"."""
    chosen = os.environ.get(STORE_ENV, "").strip()
    if chosen.lower() in OFF:
        return None
    if chosen:
        return Path(chosen).expanduser()
    if os.environ.get("SPACE_ID") and SPACE_DATA.is_dir() and os.access(SPACE_DATA, os.W_OK):
        return SPACE_DATA / "attention-profiler" / FILE_NAME
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "attention-profiler" / FILE_NAME


def traces_folder(store: Path) -> Path:
    """The traces beside the store: `<store>.traces/<sha256>.json.gz`."""
    return store.with_name(store.name + ".traces")


def _cap(name: str, default: int, unit: str, least: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(float(raw))
    except (ValueError, OverflowError):
        raise ValueError(f"{name} must be a number of {unit}, not {raw[:40]!r}") from None
    if value < least:
        raise ValueError(f"{name} must be {least} or more {unit}, not {raw[:40]!r}")
    return value


def max_bytes() -> int:
    """The traces' size cap: ATTNPROF_STORE_MAX_BYTES, else 2 GB."""
    return _cap(MAX_BYTES_ENV, DEFAULT_MAX_BYTES, "bytes", 0)


def max_runs() -> int:
    """The rows' cap: ATTNPROF_STORE_MAX_RUNS, else 100,000 runs (the oldest go first)."""
    return _cap(MAX_RUNS_ENV, DEFAULT_MAX_RUNS, "runs", 1)


def public_space() -> str | None:
    """The Space's id when the page runs on a Hugging Face Space (SPACE_ID is set there): its
    History lists only the runs this Space made, never an imported store's."""
    return os.environ.get("SPACE_ID") or None


def this_space() -> str:
    """What a run made here records as its origin's Space ('' off a Space)."""
    return os.environ.get("SPACE_ID", "")
