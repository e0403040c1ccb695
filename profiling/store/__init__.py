"""The run store (issue 34): every run the page, the API and the CLI make, kept in SQLite with
its trace beside it, so results outlive the page and compare across runs and machines.

What it owns: where the store lives (location), its tables and their migrations (schema),
opening it safely (connection: the refusals, WAL, busy timeout, one transaction per run),
a run as rows (rows), the traces by content hash and their size cap (traces), writing
(write), reading and filtering (query), the trend's regression rule (trend), export and
import (exchange; every imported field checked: imported), and the hooks the page and the CLI
call once a result exists (hooks).

Entry points: `hooks.keep(hooks.profile_run(...))` and friends to record; `open_store`,
`query.list_runs`, `query.get_run`, `query.children` to read; `exchange.export_runs` and
`exchange.import_runs` for other machines.

What it may import: the standard library, pandas (pyarrow for Parquet), and torch-free parts of
profiling (views.text.summary, user_values). Never torch, attention or gradio: the store is written
after a result exists, from the run's plain data, and read without a GPU.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- where the run store lives, its size cap and rows' cap, whose runs a public Space lists:
  `profiling/store/location.py` (the rows' cap applied in `profiling/store/write.py`)
- the store's tables, version and migrations; refusing a foreign, newer or corrupt file; a
  read-only store read as it is; never opening the file outside SQLite (POSIX drops the
  process's locks on any close: issue 40's lost runs); file names quoted in SQLite URIs:
  `profiling/store/schema.py`, `profiling/store/connection.py`
- what an import may hold (each field against the schema and the store's own ranges; refused
  whole, in one line, nothing half-way; imported runs marked): `profiling/store/imported.py`
- a run as the store's rows (every Summary figure a column); a trace's content hash and the cap's
  pruning: `profiling/store/rows.py`, `profiling/store/traces.py`
- which runs are kept (each Profile, Compare row, Sweep point, each implementation of a Model run
  or a Model Sweep's point; never an upload): `profiling/store/hooks.py`, called by the
  Profile/Compare/Sweep/Model tabs and the CLI
- a model run as the store keeps it (issue 43): its row's model columns (schema v3), its summary
  written from the run's plain data and read back with every field checked (the import refuses
  one that fails, a reopened one says why): `profiling/store/model_summary.py`
- the trend's regression rule (slower than the earlier runs' median by > 10% and > their IQR):
  `profiling/store/trend.py` (`RULE`, shown on the page)
"""

from profiling.store.connection import StoreError
from profiling.store.handle import Store, open_store

__all__ = ["Store", "StoreError", "open_store"]
