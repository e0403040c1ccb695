"""The roofline pictures of docs/results-h200.md, from H200 traces in tests/fixtures (runs of
this app on the H200, read on any machine): the post's six variants at B8 H16 S1024 D64 bf16
on one roofline, and the decode preset's runs (B16 H32/KV8, one query against 8,192 keys).

    python benchmarks/render_roofline.py OUT_DIR

Each point is a kernel (FLOP/byte, TFLOP/s over its own time), sized by its time, placed as
the page places it (profiling.analysis.roofline_runs: the workload's formulas, a copy's own bytes).
Drawn by Chromium as benchmarks/render_gantt.py draws a Gantt; prints each point as Markdown.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

from benchmarks.render_gantt import png
from profiling.analysis.roofline_runs import phases_roofline, workload_shape
from profiling.run import trace as run_trace
from profiling.text_tables import markdown
from profiling.views.roofline_figure import roofline_spec
from profiling.workload.spec import Workload

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
POST = dict(batch=8, heads=16, seq_len=1024, head_dim=64)
DECODE = dict(batch=16, heads=32, kv_heads=8, seq_len=8192, q_len=1, head_dim=128)
PICTURES = {
    "h200-roofline-post.png": (POST, {
        "naive": "naive_8_16_1024_64_bf16", "naive-inplace": "h200_naive-inplace_8_16_1024_64_bf16",
        "sdpa-math": "h200_sdpa-math_8_16_1024_64_bf16",
        "sdpa-efficient": "h200_sdpa-efficient_8_16_1024_64_bf16",
        "sdpa-flash": "sdpa_flash_8_16_1024_64_bf16", "sdpa-cudnn": "sdpa_cudnn_8_16_1024_64_bf16",
    }),
    "h200-roofline-decode.png": (DECODE, {
        "naive": "h200_decode-naive_16_32_8192_128_bf16",
        "sdpa-auto": "h200_decode-sdpa-auto_16_32_8192_128_bf16",
        "sdpa-cudnn": "h200_decode-sdpa-cudnn_16_32_8192_128_bf16",
        "kernels-local-triton": "h200_decode-kernels-local-triton_16_32_8192_128_bf16",
        "flex": "h200_decode-flex_16_32_8192_128_bf16",
    }),
}  # fmt: skip


def points(shape: dict, fixtures: dict[str, str]) -> pd.DataFrame:
    rows = []
    for variant, fixture in fixtures.items():
        workload = Workload.from_user(variant=variant, device="cpu", dtype="bfloat16", **shape)
        read = run_trace.read(FIXTURES / f"{fixture}.json.gz")
        found = phases_roofline({"attn_fwd": read.phases["attn_fwd"].spans},
                                workload_shape(workload), "NVIDIA H200", "bfloat16")  # fmt: skip
        rows.append(found.assign(variant=variant))
    return pd.concat(rows, ignore_index=True)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for picture, (shape, fixtures) in PICTURES.items():
        table = points(shape, fixtures)
        columns = ["variant", "kernel", "role", "mean_us", "tflops", "tbps", "intensity", "bound",
                   "source"]  # fmt: skip
        print(f"\n### {picture}\n\n{markdown(table[columns].round(2))}")
        figure = roofline_spec(table[table["role"] != ""], "NVIDIA H200", "bfloat16", own_run=True)
        png(figure.to_json(), out / picture, height=560)


if __name__ == "__main__":
    main()
