"""Issue 44's reference point: the loader of Triton's fused-attention tutorial refuses what is
not the tutorial, and the loaded tutorial matches SDPA under Triton's interpreter (CPU).

The tutorial's file is not in the repository (benchmarks/triton_tutorial_fa.py says why); the
interpreter check is `python benchmarks/bench_triton_tutorial_fa.py --smoke`, run by hand
where a copy sits at .tutorial/06-fused-attention.py (not a test: CI has no copy, and a test
that always skips there would hide a break). The GPU timings are the benchmark's, not a test."""

from __future__ import annotations

import pathlib

import pytest
import torch

from benchmarks import triton_tutorial_fa as tut


def tutorial_like(folder: pathlib.Path, name: str = tut.FILENAME, drop: str = "") -> pathlib.Path:
    """A file that defines every name the loader looks for (less `drop`)."""
    path = folder / name
    path.write_text("\n".join(m + " ..." for m in tut.MARKERS if m != drop))
    return path


def test_check_file_accepts_a_file_with_the_tutorials_functions(tmp_path: pathlib.Path) -> None:
    digest = tut.check_file(tutorial_like(tmp_path))
    assert len(digest) == 64 and int(digest, 16) >= 0


@pytest.mark.parametrize("drop", tut.MARKERS)
def test_check_file_refuses_a_file_missing_one_function(tmp_path: pathlib.Path, drop: str) -> None:
    with pytest.raises(ValueError, match="not the fused-attention tutorial"):
        tut.check_file(tutorial_like(tmp_path, drop=drop))


def test_check_file_refuses_other_names_folders_and_large_files(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="expected a file named"):
        tut.check_file(tutorial_like(tmp_path, name="attention.py"))
    (tmp_path / "sub" / tut.FILENAME).mkdir(parents=True)
    with pytest.raises(ValueError, match="not a regular file"):
        tut.check_file(tmp_path / "sub" / tut.FILENAME)
    big = tutorial_like(tmp_path)
    big.write_text(big.read_text() + "#" * tut.MOST_BYTES)
    with pytest.raises(ValueError, match="bytes"):
        tut.check_file(big)


@pytest.mark.parametrize(
    ("dtype", "seq", "problem"),
    [(torch.bfloat16, 128, "fp16"), (torch.float16, 100, "multiple of 128")],
)
def test_forward_refuses_what_the_tutorial_would_get_wrong(
    dtype: torch.dtype, seq: int, problem: str
) -> None:
    """bf16 fails inside its tl.dot; a ragged S would read past the end unmasked."""
    q = torch.zeros(1, 1, seq, 64, dtype=dtype)
    with pytest.raises(ValueError, match=problem):
        tut.forward(object(), q, q, q, causal=True)  # type: ignore[arg-type]
