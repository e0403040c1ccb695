"""The command line's flags (`flags`: built from the workload's choices, without torch) and
its compare | diff | sweep | analyze commands (`commands`, reading the same views as the
page). `python -m profiling` (profiling/__main__.py) is the entry point.
"""
