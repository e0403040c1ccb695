"""What a tab, an API endpoint or a CLI command shows: one pure module per tab (`profile`,
`compare`, `diff`, `sweep`, `analyze`), what they share (`shared`: the page's limits, uploads'
temp folders, table values), the timing block (`timing`), the figures built with plotly
(`compare_figures`, `roofline_figure`), a Summary as text (`text/summary`, `text/timing`), and
uploaded files (`uploads`).

No gradio (the page wraps these values in components) and no torch. May import: jobs, run's
plain result types, workload, analysis and below.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- a Summary as text (the CLI, the page's strip, the docs): `profiling/views/text/summary.py`
  (`summary_rows`)
- issue 23's figures as text (CLI, strip): `profiling/views/text/timing.py` (`timing_rows`,
  appended by `summary_rows`); the page's block, timeline figure and Compare's timing table in
  `profiling/views/timing.py`
- limits of the page (uploads, queue, temp folders): `profiling/views/shared.py`
- a table column's least width (its header's longest word: `fit_header_widths`; the page's CSS
  keeps header words whole, `profiling/page/style.py`) and when a role table says "in
  attention" (`roles_title`): `profiling/views/shared.py`
- an upload read in a worker process, and its memory and wall-clock limits:
  `profiling/views/upload_worker.py` (`UPLOAD_MEMORY_BYTES`, `UPLOAD_SECONDS`, `run_upload`)
- a stored run's Profile view, rebuilt from the store and its trace: `profiling/views/reopen.py`
  (its trace, and History's Diff's, read in the upload worker under an upload's limits:
  `profiling/views/history.py`'s `stored_trace_figures`, `diff_stored`); the store named by its
  file name only on the page, a download by the run's tag: `profiling/views/history.py`
"""
