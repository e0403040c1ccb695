"""What a tab, an API endpoint or a CLI command shows: one pure module per tab (`profile`,
`compare`, `diff`, `sweep`, `analyze`), what they share (`shared`: the page's limits, uploads'
temp folders, table values), the timing block (`timing`), the figures built with plotly
(`compare_figures`, `roofline_figure`), a Summary as text (`summary_text`, `timing_text`), and
uploaded files (`uploads`).

No gradio (the page wraps these values in components) and no torch. May import: jobs, run's
plain result types, workload, analysis and below.
"""
