"""Lists of runs: Compare (`compare`: one workload per variant, their figures side by side),
Sweep (`sweep`: one variant over lengths), the queue that keeps one job per device at a time
(`queue`), and the files a job leaves (`files`).

May import: run, workload, analysis and below.
"""
