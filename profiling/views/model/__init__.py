"""A model run as the Model tab, its API and `python -m profiling model` show it (issue 43):
the "which attn_implementation?" table, the step's categories per implementation, attention's
share per decoder layer, and for SDPA the backend that ran inside the model and torch's reasons.

Pure functions of `profiling.run.model.result.ModelRun` (plain data): no torch, no gradio.
Entry points: `table.comparison`, `table.categories`, `table.layers`, `why.lines`; a stored
model run in History: `stored.stored_model`, `stored.model_page`; the files a run hands over:
`files.trace_files`, `files.sweep_zip`; a model Sweep's chart and table: `sweep.sweep_page`.

Each rule decided here:
- which implementation the table calls fastest (a decode by its bare wall, else the step's
  time from the trace), when a run is host-bound and shows the GPU's busy time (the trace's
  step less its idle gaps) and idle share beside the wall, and the columns' names: `table.py`
- how SDPA's choice inside the model is said (the backend the trace shows, the call as torch saw
  it, each backend's verdict with torch's words): `why.py`
- a stored model run's views (its summary read back checked, its Gantt from its kept trace in
  the upload worker), a stranger's text kept text (escaped; a code block's fence longer than any
  backticks inside), its download name and Diff label: `stored.py`
- a trace's and a Sweep zip's file names (the workload's fields only, reduced to safe
  characters): `files.py`
"""
