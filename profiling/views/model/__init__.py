"""A model run as the Model tab, its API and `python -m profiling model` show it (issue 43):
the "which attn_implementation?" table, the step's categories per implementation, attention's
share per decoder layer, and for SDPA the backend that ran inside the model and torch's reasons.

Pure functions of `profiling.run.model.result.ModelRun` (plain data): no torch, no gradio.
Entry points: `table.comparison`, `table.categories`, `table.layers`, `why.lines`.

Each rule decided here:
- which implementation the table calls fastest (the step's time from the trace, else the bare
  timing), and the columns' names: `table.py`
- how SDPA's choice inside the model is said (the backend the trace shows, the call as torch saw
  it, each backend's verdict with torch's words): `why.py`
"""
