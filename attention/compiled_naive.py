"""torch.compile of the in-place naive module: Inductor fuses scale, mask and softmax.

Compiled on its first call, in warm-up; each build starts from a clean dynamo state (see
attention/flex.py).
"""

from __future__ import annotations

import torch

from attention.naive import NaiveCausalAttention, problem_mask
from attention.rules import compiler
from attention.variant import Built, Problem, Variant


def build(problem: Problem) -> Built:
    torch._dynamo.reset()
    naive = NaiveCausalAttention(problem.head_dim, inplace=True, group=problem.group)
    module = torch.compile(naive, dynamic=False)
    mask = problem_mask(problem)

    def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return module(q, k, v, mask)

    on_gpu = problem.device == "cuda"
    return Built(forward, "torch.compile (Inductor)" if on_gpu else "torch.compile (Inductor, C++)")


VARIANT = Variant(
    id="compiled-naive",
    label="torch.compile(naive in-place)",
    lesson="Inductor fuses scale, mask and softmax into Triton kernels around two cuBLAS matmuls",
    backward_lesson=(
        "Inductor fuses the backward's pointwise work (softmax backward, mask, scale) into "
        "one kernel, but the S² probabilities are still saved for it"
    ),
    layout="bhsd",
    build=build,
    unavailable=compiler("torch.compile"),
    warmup_calls=5,
    score_matrices=2,
    backward_matrices=3,  # saved probabilities, their gradient, the scores' gradient
    first_run="compiles",
)
