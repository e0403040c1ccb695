"""A run's figures as text: the Summary rows (`summary`) and the timing block's rows (`timing`),
one formatting for the CLI, the page's strip, the store's `history show` and the docs.

Entry points: `summary.summary_rows`, `timing.timing_rows`. May import analysis, kernels and the
base modules (text_tables, user_values); never torch, gradio or plotly (import-linter).
"""
