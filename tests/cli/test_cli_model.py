"""`python -m profiling model` (issue 43): the comparison table, the categories, attention per
layer and SDPA's reasons printed; a bad flag refused in one line with status 2."""

from __future__ import annotations

from profiling.__main__ import main


def test_model_prints_the_comparison_and_the_reasons(tmp_path, capsys):
    rc = main(["model", "--preset", "tiny", "--layers", "2", "--batch", "2", "--seq-len", "32",
               "--lengths", "32,20", "--dtype", "float32", "--mode", "prefill", "--steps", "1",
               "--attn", "eager,sdpa,kernels", "--out", str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("which attn_implementation?")
    for line in ("the step, µs by category", "attention per decoder layer",
                 "the trace shows SDPA's flash (CPU) backend ran",
                 "refused: kernels: a kernels-hub FlashAttention needs a CUDA GPU"):  # fmt: skip
        assert line in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model-eager.json.gz", "model-sdpa.json.gz"
    ]  # fmt: skip


def test_model_refuses_a_bad_request_in_one_line(tmp_path, capsys):
    rc = main(["model", "--batch", "2", "--lengths", "64", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip() == (
        "error: lengths gives 1 sequence length(s) for a batch of 2: give one per sequence"
    )


def test_model_sweeps_sequence_lengths(tmp_path, capsys):
    rc = main(["model", "--seq-lens", "32,16", "--batch", "1", "--dtype", "float32",
               "--attn", "sdpa,sdpa-cudnn", "--steps", "1", "--no-check",
               "--out", str(tmp_path)])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    rows = [line.split() for line in lines[1:]]
    assert [(row[0], row[1]) for row in rows] == [
        ("16", "sdpa"), ("16", "sdpa-cudnn"), ("32", "sdpa"), ("32", "sdpa-cudnn")
    ]  # fmt: skip
    assert "needs a CUDA GPU" in lines[2]


def test_model_sweep_refuses_ragged_lengths(tmp_path, capsys):
    rc = main(["model", "--seq-lens", "32,16", "--batch", "2", "--lengths", "64,20",
               "--out", str(tmp_path)])  # fmt: skip
    assert rc == 2
    assert "a model sweep runs full batches" in capsys.readouterr().err


def test_a_host_bound_gpu_decode_prints_the_gpu_busy_time_and_why(tmp_path, capsys, monkeypatch):
    """The CLI prints what the views say: a GPU decode's busy time per step beside its wall
    (the run itself replaced by the H100's figures: this machine has no GPU)."""
    import profiling.run.model.runner as runner
    from tests.views.test_model_views import BUSY_DECODE

    monkeypatch.setattr(runner, "run", lambda workload, out, progress: BUSY_DECODE)
    rc = main(["model", "--mode", "decode", "--no-store", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.splitlines()
    assert lines[0].startswith("which attn_implementation? sdpa: 222.71 ms")
    assert "GPU busy ms/step (the GPU's work, from the trace): eager 122.83 ms" in out
    assert "the profiler widens a host-bound step's launch gaps" in out.lower()
    header = next(line for line in lines if line.lstrip().startswith("implementation"))
    assert "GPU busy ms/step" in header and "idle % of step" in header
    sdpa = next(line.split() for line in lines if line.split()[:1] == ["sdpa"])
    assert sdpa[1:5] == ["521", "114", "78.2", "223"]  # span, busy, idle %, wall (3 figures)
