"""Lists of runs: Compare (`compare`: one workload per variant, their figures side by side),
Sweep (`sweep`: one variant over lengths), the queue that keeps one job per device at a time
(`queue`), and the files a job leaves (`files`).

May import: run, workload, analysis and below.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- where a Compare's or Sweep's points run (this process, one after another; or a Ray cluster, one
  per GPU) and which points end a Sweep variant's run: `profiling/jobs/executor.py` (chains of
  points, `SerialExecutor`, `Placement`, and `run_chains`, the loop both jobs share with its
  cancel checks), `profiling/jobs/ray.py` (imported only for `--ray` /
  `ATTNPROF_RAY_ADDRESS`); the rule itself: `sweep._ends_variant`
- a model Sweep (issue 43): a model workload's implementations over sequence lengths (a
  caller's lengths read loosely, at most MAX_POINTS), every length validated first, full batches
  only, a refused length kept as a point with its workload: `profiling/jobs/model_sweep.py`
- the app's cluster (ATTNPROF_RAY_ADDRESS): checked once at start, said once in the log, an
  unreachable one leaves the jobs here, and no page message names it:
  `profiling/jobs/executor.py` (`check_app_ray`, `app_executor`)
- a Compare's counter passes share one bound: `compare.compare_workloads` hands each its
  `profiling.run.counters.pass_seconds` share
"""
