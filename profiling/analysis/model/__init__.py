"""Figures of a model run (issue 43), torch-free: what a decoder step's time is spent on, and
what a ragged batch's padding costs.

Owns the step's categories (`step`: attention kernels, the projections' and MLP's GEMMs, norms,
rotary and other elementwise work, copies, idle gaps; attention's share per decoder layer) and
the padding's tokens and FLOPs (`padding`: what a padded batch computes that a varlen kernel
does not).

May import: trace, kernels (the names), the base modules; never torch, attention, gradio or
plotly.

Each rule decided here:
- which category a GPU kernel (or, on a CPU, an aten op) belongs to, and that the categories
  and the idle gaps add up to the step: `step.py` (`category`, `split_step`)
- attention's share of each decoder layer: `step.py` (`layer_shares`, the spans named
  `LAYER_PREFIX` + index)
- the tokens and FLOPs a padded batch spends on pads, per implementation: `padding.py`
  (`model_flops`, `pad_figures`, `SKIPS_PADS`)
"""
