"""What each kernel is: its decoded name and category (`names`), its role in attention
(`roles`, one kernel at a time; `chains`, a whole spans table once per signature), its FLOPs
and bytes (`work` from the workload's shapes, `shapes` from recorded shapes) and its place on
the roofline (`roofline`).

Part of the analysis layer: may import analysis, trace and the base modules; never torch.
"""
