"""The two shapes every H200 measurement uses: the post's (the app's default on a GPU) and
issue #7's long one. One definition, so the GPU tests, the results tables and the benchmarks
always measure the same problems."""

from __future__ import annotations

SHAPES: dict[str, dict[str, int | str]] = {
    "post": {"batch": 8, "heads": 16, "seq_len": 1024, "head_dim": 64, "dtype": "bfloat16"},
    "long": {"batch": 4, "heads": 16, "seq_len": 4096, "head_dim": 128, "dtype": "bfloat16"},
}
