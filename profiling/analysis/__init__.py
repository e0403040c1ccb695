"""Figures from a trace, torch-free, so an uploaded trace is analysed on any machine.

Owns the windows a run is counted over and each step's figures (`summary`), the median and
IQR and when a spread is large (`spread`), launch statistics (`launch`, `launch_tables`),
Diff (`diff`, `diff_phases`), Analyse of an upload (`analyze`), the memory timeline
(`memory_timeline`), the run-level roofline (`bounds`, with the datasheet `peaks`), roles
across runs (`role_views`), roofline rows of a run or a trace (`roofline_runs`), and the
tables' columns and headers (`columns`).

May import: kernels and gantt (the same layer), trace, the base modules; never torch,
attention, gradio or plotly.
"""
