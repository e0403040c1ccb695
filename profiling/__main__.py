"""Command line: profile one variant (or all) like the post's scripts, no UI.

python -m profiling --variant sdpa-flash --seq-len 1024 --dtype bfloat16 --out traces
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention import VARIANTS
from profiling.config import DEVICES, DTYPES, LIMITS, ConfigError, RunConfig, resolve_device
from profiling.runner import RunError, VariantUnavailable, run
from profiling.summary import summary_rows


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage too)
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m profiling", description=__doc__.splitlines()[0])
    p.add_argument("--variant", required=True, help=f"one of: {', '.join(VARIANTS)}, or all")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--dtype", default="bfloat16", help=", ".join(DTYPES))
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--no-causal", action="store_true", help="full (non-causal) attention")
    p.add_argument("--device", default="auto", choices=DEVICES)
    p.add_argument("--steps", type=int, default=3, help=f"active profiler steps {LIMITS['steps']}")
    p.add_argument("--out", default="traces", help="folder for <variant>/<tag>.json.gz and .txt")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    names = list(VARIANTS) if args.variant == "all" else [args.variant]
    try:
        configs = [
            RunConfig.from_user(
                variant=name, seq_len=args.seq_len, dtype=args.dtype, batch=args.batch,
                heads=args.heads, head_dim=args.head_dim, causal=not args.no_causal,
                device=args.device, steps=args.steps,
            )
            for name in names
        ]  # fmt: skip
        device = resolve_device(args.device)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failures = 0
    overview: list[str] = []
    for config in configs:
        out = Path(args.out) / config.variant
        try:
            result = run(config, out_dir=out)
        except VariantUnavailable as exc:
            overview.append(f"{config.variant:22s} unavailable: {exc}")
            print(f"{config.variant}: unavailable — {exc}\n")
            failures += len(configs) == 1
            continue
        except (ConfigError, RunError) as exc:
            overview.append(f"{config.variant:22s} refused: {exc}")
            print(f"{config.variant}: {exc}\n", file=sys.stderr)
            failures += 1
            continue
        result.trace_json.unlink(missing_ok=True)  # keep what the post keeps: .json.gz and .txt
        s = result.summary
        width = max(len(k) for k, _ in summary_rows(s))
        print("\n".join(f"{k:>{width}}  {v}" for k, v in summary_rows(s)))
        print(f"{'trace':>{width}}  {result.trace_gz}\n{'table':>{width}}  {result.table_txt}\n")
        print(result.table_txt.read_text())
        gpu = f"{s.gpu_us_per_forward:9.1f}" if s.gpu_us_per_forward is not None else "      n/a"
        overview.append(
            f"{config.variant:22s} kernels/fwd {s.kernels_per_forward:5.2f}  GPU µs {gpu}  "
            f"CPU µs {s.cpu_us_per_forward:9.1f}  rel.err {s.rel_err:.1e}  ran: {s.ran}"
        )
    if len(configs) > 1:
        print(f"== {len(configs)} variants on {device} ==")
        print("\n".join(overview))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
