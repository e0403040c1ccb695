"""A store by its path: where its traces go, the traces' size cap and the rows' cap, resolved
once per use.

`open_store()` with no path follows profiling.store.location (ATTNPROF_STORE, a Space's /data,
the per-user folder) and returns None when storing is off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from profiling.store import location


@dataclass(frozen=True)
class Store:
    path: Path
    max_bytes: int = location.DEFAULT_MAX_BYTES
    max_runs: int = location.DEFAULT_MAX_RUNS
    traces: Path = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "traces", location.traces_folder(self.path))


def open_store(
    path: str | Path | None = None, max_bytes: int | None = None, max_runs: int | None = None
) -> Store | None:
    """The store at `path`, or the default one (None when ATTNPROF_STORE is "off"); the caps
    from the environment unless given."""
    chosen = Path(path).expanduser() if path is not None else location.default_path()
    if chosen is None:
        return None
    cap = location.max_bytes() if max_bytes is None else max_bytes
    runs = location.max_runs() if max_runs is None else max_runs
    return Store(chosen.resolve(), cap, runs)
