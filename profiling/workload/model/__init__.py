"""A model workload (issue 43): attention inside a real transformers decoder, not alone.

Owns the architecture presets (`presets`: transformers' own config classes, built from the
hyperparameters of each model's published config.json written into the preset; nothing is
downloaded), and what the user asks of a model run, validated once (`spec.ModelWorkload`:
preset, decoder layers, dtype, batch, sequence length, each sequence's length, mode,
implementations), with the memory estimate that bounds the layers before anything is allocated.

Entry points: `spec.ModelWorkload.from_user`, `presets.PRESETS`, `presets.build_config`.
May import: transformers' config classes, torch (dtypes), the base modules.

Each rule decided here:
- a preset's hyperparameters and where they come from: `presets.py` (`PRESETS`, `SOURCES`)
- the fields, their ranges, the implementations' ids, the ragged lengths and their padding
  side (right for prefill and train, left for decode): `spec.py` (`ModelWorkload.validated`)
- the memory a model run needs and the largest layer count it allows: `spec.py`
  (`memory_bytes`, `check_memory`)
- the CPU budget of a model run: `spec.py` (`CPU_MAX_FLOPS`)
"""
