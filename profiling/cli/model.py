"""`python -m profiling model`: one preset's decoder layers under each attn_implementation,
printed as the "which attn_implementation?" table, the step's categories, attention per layer
and SDPA's reasons (the Model tab's views); each implementation kept in the run store as the
variants' runs are (--store PATH, --no-store). Flags are text; the model workload validates
them."""

from __future__ import annotations

import argparse
import sys

from profiling.cli.flags import (
    Parser,
    add_store_flags,
    check_out,
    print_progress,
    printed_table,
    said_kept,
    store_of,
)
from profiling.user_values import ConfigError

DESCRIPTION = "attention inside a transformers model, for each attn_implementation"


def model_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m profiling model", description=DESCRIPTION)
    flag = parser.add_argument
    flag("--preset", default="tiny", help="tiny, tiny-gemma-2, llama-3.1-8b, qwen2.5-7b, "
         "mistral-7b or gemma-2-9b")  # fmt: skip
    flag("--layers", type=int, default=2, help="decoder layers to build (default 2)")
    flag("--dtype", default="bfloat16", help="float32, float16 or bfloat16")
    flag("--batch", type=int, default=2)
    flag("--seq-len", type=int, default=64, help="padded length of every sequence")
    flag("--seq-lens", default="", help="a Sweep: comma-separated lengths, one model run each "
         "(full batches)")  # fmt: skip
    flag("--lengths", default="", help="each sequence's real tokens, comma-separated (ragged)")
    flag("--mode", default="prefill", help="prefill, decode or train")
    flag("--new-tokens", type=int, default=8, help="decode: tokens generated, one a step")
    flag("--attn", default="eager,sdpa", help="comma-separated implementations: eager, sdpa, "
         "sdpa-math, sdpa-efficient, sdpa-flash, sdpa-cudnn, flex_attention, kernels")  # fmt: skip
    flag("--device", default="auto", help="auto, cuda or cpu")
    flag("--steps", type=int, default=2, help="measured steps")
    flag("--no-check", action="store_true", help="skip the logits check against eager float32")
    flag("--out", default="traces/model", help="folder for each implementation's trace")
    flag("--markdown", action="store_true", help="print Markdown tables")
    add_store_flags(parser, runs=True)  # each implementation kept as a run (issue 43)
    return parser


def model_main(argv: list[str]) -> int:
    args = model_parser().parse_args(argv)
    from profiling.run.model.runner import run
    from profiling.views.model import table, why
    from profiling.workload.model.spec import ModelWorkload

    try:
        check_out(args.out)
        workload = ModelWorkload.from_user(
            preset=args.preset, layers=args.layers, dtype=args.dtype, batch=args.batch,
            seq_len=args.seq_len, lengths=args.lengths, mode=args.mode,
            new_tokens=args.new_tokens, implementations=args.attn, device=args.device,
            steps=args.steps, check=not args.no_check,
        )  # fmt: skip
        if args.seq_lens:
            return _swept(workload, args)
        result = run(workload, args.out, print_progress)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from profiling.store.hooks import keep, model_runs

    said_kept(keep(model_runs(result, "cli"), store_of(args)))
    print(table.verdict(result))
    print(printed_table(table.comparison(result), args.markdown))
    print("\nthe step, µs by category (they add up to the step):")
    print(printed_table(table.categories(result), args.markdown))
    print("\nattention per decoder layer:")
    print(printed_table(table.layers(result), args.markdown))
    print()
    print(why.text(result))
    return 1 if any(item.failed for item in result.runs) else 0


def _swept(workload, args: argparse.Namespace) -> int:
    """`--seq-lens`: the implementations over lengths, as one table."""
    from pathlib import Path

    from profiling.jobs.model_sweep import sweep
    from profiling.store.hooks import keep, model_sweep_runs
    from profiling.views.model import table

    try:
        seq_lens = [int(part) for part in args.seq_lens.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(
            f"--seq-lens must be whole numbers separated by commas: {args.seq_lens!r}"
        ) from None
    points = sweep(workload, seq_lens, Path(args.out), print_progress)
    said_kept(keep(model_sweep_runs(points, "cli"), store_of(args)))
    print(printed_table(table.sweep(points), args.markdown))
    failed = any(item.failed for p in points if p.result for item in p.result.runs)
    return 1 if failed else 0
