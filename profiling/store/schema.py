"""The store's tables, its version, and the steps that bring an older store up to date.

A store is ours when its SQLite header's application_id is APPLICATION_ID; its user_version is
the number of MIGRATIONS applied. Each step is kept as it was shipped (never edited), so a
store written by any earlier version is brought up by the steps it lacks, in one transaction.
A file with another application_id, or tables of its own and none, or a version newer than
this code knows, is refused before anything is written (profiling.store.connection).
"""

from __future__ import annotations

APPLICATION_ID = 0x41545052  # "ATPR" in the SQLite header: this is an Attention Profiler store

# The runs' real columns besides their id, in the order rows.run_columns fills them (v1).
RUNS_V1 = """
CREATE TABLE runs (
  id TEXT PRIMARY KEY, created REAL NOT NULL, kind TEXT NOT NULL, origin TEXT NOT NULL,
  host TEXT, workload_key TEXT NOT NULL, shape TEXT,
  variant TEXT NOT NULL, seq_len INTEGER, dtype TEXT, batch INTEGER, heads INTEGER,
  head_dim INTEGER, causal INTEGER, device TEXT, steps INTEGER, mode TEXT, kv_heads INTEGER,
  q_len INTEGER, window INTEGER, timing TEXT,
  status TEXT NOT NULL, reason TEXT,
  device_kind TEXT, device_name TEXT, compute_capability TEXT, device_memory_gib REAL,
  gpu_count INTEGER, driver_version TEXT, cuda_version TEXT, torch_version TEXT,
  triton_version TEXT, project_version TEXT,
  ran TEXT, forwards INTEGER,
  gpu_us REAL, gpu_us_median REAL, gpu_us_q1 REAL, gpu_us_q3 REAL,
  cpu_us REAL, cpu_us_median REAL, cpu_us_q1 REAL, cpu_us_q3 REAL,
  kernels REAL, memcpy REAL, memset REAL, flops REAL, tflops REAL, tbps REAL,
  bytes_moved INTEGER, intensity REAL, pct_peak_tflops REAL, pct_peak_bandwidth REAL,
  roofline_bound TEXT, cpu_bound INTEGER, peak_mib REAL, saved_mib REAL,
  rel_err REAL, grad_err_dq REAL, grad_err_dk REAL, grad_err_dv REAL,
  dominant_kernel TEXT, dominant_decoded TEXT,
  sm_mhz_min INTEGER, sm_mhz_max INTEGER, mem_mhz_min INTEGER, mem_mhz_max INTEGER,
  power_w_mean REAL, power_w_max REAL, temp_c_max REAL, throttled TEXT, clock_warning TEXT,
  trace_hash TEXT, trace_bytes INTEGER, trace_pruned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_created ON runs (created);
CREATE INDEX runs_variant ON runs (variant, created);
CREATE INDEX runs_device ON runs (device_name, created);
CREATE INDEX runs_shape ON runs (shape, created);
CREATE INDEX runs_workload ON runs (workload_key, created);
CREATE INDEX runs_trace ON runs (trace_hash);
CREATE TABLE summaries (
  run_id TEXT PRIMARY KEY REFERENCES runs (id), summary_json TEXT NOT NULL
);
CREATE TABLE phases (
  run_id TEXT NOT NULL REFERENCES runs (id), phase TEXT NOT NULL,
  gpu_us REAL, gpu_us_median REAL, gpu_us_q1 REAL, gpu_us_q3 REAL,
  cpu_us REAL, cpu_us_median REAL, cpu_us_q1 REAL, cpu_us_q3 REAL,
  kernels REAL, flops REAL, tflops REAL, dominant_kernel TEXT,
  PRIMARY KEY (run_id, phase)
);
CREATE TABLE kernels (
  run_id TEXT NOT NULL REFERENCES runs (id), phase TEXT, kernel TEXT, role TEXT,
  category TEXT, decoded TEXT, count REAL, total_us REAL, pct_gpu REAL, mean_us REAL,
  min_us REAL, max_us REAL, registers_per_thread INTEGER, shared_memory INTEGER, grid TEXT,
  block TEXT, occupancy_pct INTEGER, occupancy_note TEXT, name TEXT
);
CREATE INDEX kernels_run ON kernels (run_id);
CREATE TABLE roles (
  run_id TEXT NOT NULL REFERENCES runs (id), phase TEXT, role TEXT, us REAL, pct_gpu REAL,
  calls REAL, kernels TEXT
);
CREATE INDEX roles_run ON roles (run_id);
CREATE TABLE traces (
  hash TEXT PRIMARY KEY, bytes INTEGER NOT NULL, last_used REAL NOT NULL,
  pruned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX traces_used ON traces (pruned, last_used);
"""

# v2: where a run was made (a Space lists only its own), the per-kernel roofline and the
# operator table, so a reopened run needs neither its Workload (torch) nor the profiler.
V2 = """
ALTER TABLE runs ADD COLUMN origin_space TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_space ON runs (origin_space, created);
CREATE TABLE roofline (
  run_id TEXT NOT NULL REFERENCES runs (id), kernel TEXT, role TEXT, phase TEXT,
  calls REAL, mean_us REAL, flop_per_call REAL, bytes_per_call REAL, source TEXT,
  tflops REAL, tbps REAL, intensity REAL, bound TEXT, roof TEXT, total_us REAL, name TEXT
);
CREATE INDEX roofline_run ON roofline (run_id);
CREATE TABLE operators (
  run_id TEXT NOT NULL REFERENCES runs (id), operator TEXT, calls INTEGER, cpu_self_us REAL,
  cpu_total_us REAL, cpu_avg_us REAL, device_self_us REAL, device_total_us REAL,
  device_avg_us REAL
);
CREATE INDEX operators_run ON operators (run_id);
"""

# v3 (issue 43): a model run's own workload beside the attention shape's columns: the preset,
# its decoder layers, each sequence's real length ("64,48,32,8"; NULL for a full batch) and
# decode's new tokens (NULL outside decode); NULL for a variant's run. Its figures fill the
# columns a variant's do (the step's µs, what ran, the logits' error as rel_err).
V3 = """
ALTER TABLE runs ADD COLUMN preset TEXT;
ALTER TABLE runs ADD COLUMN layers INTEGER;
ALTER TABLE runs ADD COLUMN lengths TEXT;
ALTER TABLE runs ADD COLUMN new_tokens INTEGER;
"""

MIGRATIONS: tuple[str, ...] = (RUNS_V1, V2, V3)
VERSION = len(MIGRATIONS)
# the whole Summary as JSON sits in its own table: a filter scans the runs' narrow rows only
CHILD_TABLES = ("summaries", "phases", "kernels", "roles", "roofline", "operators")


def statements(script: str) -> list[str]:
    """A migration's statements, one by one (executescript would commit on its own)."""
    return [part.strip() for part in script.split(";") if part.strip()]
