"""The page's Gradio wiring, one module per tab (the only package here that imports gradio).

Each tab module holds its handlers (the API endpoints, named after the tab), its GPU function
where it runs one, and a `build()` that lays the tab out and wires its listeners; what a tab
shows is computed without gradio in its profiling.views_<tab> module. errors.py is the one
place a backend error becomes a gr.Error.

Each rule decided here, and where (docs/architecture.md keeps only an index):
- backend error → what the user sees (HTML-escaped, the generic one worded by what was being
  done): `profiling/page/errors.py`; History's failed events leave no badges:
  `profiling/page/history_tab.py`
"""
