"""Issue 43 on the GPU: each preset (2 decoder layers) × attn_implementation at prefill S=4096
with ragged lengths 4096,3000,2048,512 (B=4, bf16), and a decode of 64 tokens against that
prompt's KV cache; attention's share, the backend that ran, the step's GPU time read from the
trace against a bare timing of the same step with CUDA events (±5% is the issue's bar), the
logits error against eager in float32, and the build time of the 2 layers.

    python3 benchmarks/model_gpu.py --out DIR [--presets llama-3.1-8b,...] [--steps 2]

Runs every preset's non-flex implementations first, then flex_attention (its first call per
shape compiles), then the decodes, writing DIR/model.jsonl after each run and DIR/model.md
(the table for docs/results-model.md) at the end and after each row, so a run cut short by a
time limit still leaves what it measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiling.run.model.runner import run
from profiling.views.model.table import step_ms
from profiling.workload.model.spec import IMPLEMENTATIONS, ModelWorkload

PRESETS = ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "gemma-2-9b")
RAGGED = {"batch": 4, "seq_len": 4096, "lengths": "4096,3000,2048,512", "dtype": "bfloat16"}
PREFILL_FIRST = tuple(name for name in IMPLEMENTATIONS if name != "flex_attention")
DECODE = ("eager", "sdpa", "kernels")  # flex left out of decode to bound the device time
HEADER = (
    "| preset | mode | implementation | step ms (trace) | CUDA events ms | trace/events | "
    "attention % | backend / kernel | logits err | tokens/s | build s | ran |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def row(preset: str, mode: str, result, item) -> dict:
    if not item.ok:
        return {"preset": preset, "mode": mode, "implementation": item.id,
                "ran": item.refused or item.failed}  # fmt: skip
    ms = step_ms(item)
    kernel = item.attention_kernels[0][0] if item.attention_kernels else ""
    return {
        "preset": preset, "mode": mode, "implementation": item.id, "step_ms": ms,
        "events_ms": item.timed_ms, "ratio": ms / item.timed_ms if item.timed_ms else None,
        "attention_pct": 100 * item.split.attention_share,
        "backend": item.backend or "", "kernel": kernel, "logits_err": item.logits_error,
        "tokens_per_s": item.tokens_per_s, "build_s": result.build_s,
        "ran": item.ran + (f" ({item.note})" if item.note else ""),
        "categories_us": item.split.categories, "layers": item.split.layers,
    }  # fmt: skip


def markdown(rows: list[dict]) -> str:
    lines = [HEADER]
    for r in rows:
        if "step_ms" not in r:
            lines.append(f"| {r['preset']} | {r['mode']} | {r['implementation']} | | | | | | | | | "
                         f"{r['ran'][:160]} |")  # fmt: skip
            continue
        err = f"{r['logits_err']:.1e}" if r["logits_err"] is not None else ""
        tps = f"{r['tokens_per_s']:.0f}" if r["tokens_per_s"] else ""
        backend = " · ".join(x for x in (r["backend"], r["kernel"][:60]) if x)
        lines.append(
            f"| {r['preset']} | {r['mode']} | {r['implementation']} | {r['step_ms']:.2f} | "
            f"{r['events_ms']:.2f} | {r['ratio']:.3f} | {r['attention_pct']:.1f} | {backend} | "
            f"{err} | {tps} | {r['build_s']:.2f} | {r['ran'][:90]} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    presets = [p for p in args.presets.split(",") if p]
    plan = [(p, "prefill", PREFILL_FIRST) for p in presets]
    plan += [(p, "prefill", ("flex_attention",)) for p in presets]
    plan += [(p, "decode", DECODE) for p in presets]
    rows: list[dict] = []
    for preset, mode, implementations in plan:
        began = time.perf_counter()
        workload = ModelWorkload.from_user(
            preset=preset, mode=mode, new_tokens=64, implementations=list(implementations),
            steps=args.steps, check=mode == "prefill", **RAGGED,
        )  # fmt: skip
        result = run(workload, tempfile.mkdtemp(prefix=f"model-{preset}-{mode}-"))
        for item in result.runs:
            rows.append(row(preset, mode, result, item))
            with open(out / "model.jsonl", "a") as lines:
                lines.write(json.dumps(rows[-1], default=str) + "\n")
        (out / "model.md").write_text(markdown(rows))
        print(f"{preset} {mode} {','.join(implementations)}: {time.perf_counter() - began:.1f} s",
              flush=True)  # fmt: skip
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
