"""Issue 31, point 7, on the H200: a `--timing cuda-graph` run keeps what the eager run knows.

For naive and sdpa-flash (forward and a training step) at the post's shape, runs eager and
cuda-graph and checks that
- the graph run's kernels have the eager run's roles (role → kernels per step: equal; for a
  training step, where a name alone cannot tell softmax backward's `mul` from the scale, as
  many kernels per step), and none is left "(no known role)";
- sdpa-flash's graph run says "SDPA flash" (read off its kernel, `pytorch_flash::flash_fwd_kernel`,
  since a replay has no aten op), as the eager run does;
- sdpa-math's graph run says its pinned backend.

    python3 benchmarks/graph_roles_h200.py --out DIR

Writes DIR/graph_roles.json (each run's `ran`, backend and role table), DIR/graph_roles.txt
(the CLI's own output for the two graph runs) and the graph runs' traces
(DIR/<variant>_<mode>_cuda-graph.json.gz: real fixtures for tests/fixtures); prints one
PASS/FAIL line per check and exits 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.shapes import SHAPES
from profiling.kernels.roles import UNKNOWN
from profiling.run.runner import run
from profiling.workload.spec import Workload

RUNS = [("naive", "forward"), ("sdpa-flash", "forward"), ("naive", "train"),
        ("sdpa-flash", "train"), ("sdpa-math", "forward")]  # fmt: skip


def _profile(variant: str, mode: str, timing: str, out: Path) -> dict[str, Any]:
    workload = Workload.from_user(
        variant=variant, device="cuda", mode=mode, timing=timing, **SHAPES["post"]
    )
    result = run(workload, out_dir=out / f"{variant}_{mode}_{timing}")
    roles = result.trace.roles()
    if timing == "cuda-graph":
        shutil.copy(result.trace_gz, out / f"{variant}_{mode}_cuda-graph.json.gz")
    return {
        "ran": result.summary.ran,
        "roles": {
            f"{row.get('phase', '')}|{row['role']}": row["calls"]
            for row in roles.to_dict("records")
        },
        "kernels": dict(zip(result.kernels["kernel"], result.kernels["role"], strict=True)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {}
    checks: list[tuple[str, bool, str]] = []
    for variant, mode in RUNS:
        eager = _profile(variant, mode, "eager", out)
        graph = _profile(variant, mode, "cuda-graph", out)
        found[f"{variant}/{mode}"] = {"eager": eager, "cuda-graph": graph}
        name = f"{variant} {mode}"
        unknown = [role for role in graph["roles"] if role.endswith(UNKNOWN)]
        checks.append((f"{name}: no kernel without a role in the graph run", not unknown,
                       str(unknown)))  # fmt: skip
        if variant != "sdpa-math" and mode == "forward":  # math's upcasts read as copies
            same = graph["roles"] == eager["roles"]
            checks.append((f"{name}: graph roles == eager roles", same,
                           f"eager {eager['roles']} graph {graph['roles']}"))  # fmt: skip
        elif mode == "train":  # by name alone, softmax backward's mul reads as a scale
            counts = [sum(found["roles"].values()) for found in (eager, graph)]
            checks.append((f"{name}: as many kernels per step in both runs", counts[0] == counts[1],
                           f"eager {eager['roles']} graph {graph['roles']}"))  # fmt: skip
        if variant.startswith("sdpa"):
            backend = variant.removeprefix("sdpa-")
            said = graph["ran"].startswith(f"SDPA {backend}")
            checks.append((f"{name}: graph run says SDPA {backend}", said, graph["ran"]))
    (out / "graph_roles.json").write_text(json.dumps(found, indent=1, ensure_ascii=False))
    with open(out / "graph_roles.txt", "w") as text:
        for variant in ("naive", "sdpa-flash"):
            command = [sys.executable, "-m", "profiling", "--variant", variant, "--device",
                       "cuda", "--timing", "cuda-graph", "--out", str(out / "cli")]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            text.write(f"$ {' '.join(command[1:])}\n{done.stdout}{done.stderr}\n")
    for label, passed, detail in checks:
        print(f"{'PASS' if passed else 'FAIL'} {label}" + ("" if passed else f": {detail}"))
    return 0 if all(passed for _, passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
