"""The Gantt chart as plain data: `spec.gantt_spec` builds a FigureSpec (lanes, bars, the
detail on hover) that the page turns into a plotly figure; `rows`, `bars` and `detail` are its
parts. Part of the analysis layer: torch-free and plotly-free (a run's Gantt is made without
importing plotly).
"""
