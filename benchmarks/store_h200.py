"""Issue 34 on the H200: runs made through the page's path and through the CLI are stored and
reopened with identical figures; the store is exported for a CPU machine to import.

    python benchmarks/store_h200.py --out "$OUT"          # about 1–2 minutes on an H200

1. The page's path (profile_tab.profile's own lines: run → views_profile.page → keep →
   mark_kept; through profile_tab itself when gradio is installed) for sdpa-flash and naive at
   the post's shape; each run reopened from the store and its kept trace
   (views_reopen.reopened) and compared with the page it showed: strip, Gantt JSON, kernel,
   role, roofline and operator tables, summary JSON.
2. The CLI: `python -m profiling --variant sdpa-flash ... --store S`; `history show ID` prints
   the same summary lines the run printed. A CLI Compare (naive, sdpa-flash) keeps its rows.
3. `history export`: Parquet (+ child tables, traces) and JSON Lines, in one tarball.
Writes $OUT/store_h200.json (every check, the run ids) and $OUT/store_h200.tar.gz.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEVICE = ["cuda"]  # --cpu-check: the script itself checked on a CPU, at a tiny shape
SHAPE = dict(seq_len=1024, dtype="bfloat16", batch=8, heads=16, head_dim=64, causal=True)
CLI_SHAPE = ["--seq-len", "1024", "--dtype", "bfloat16", "--batch", "8", "--heads", "16",
             "--head-dim", "64"]  # fmt: skip


def same_frames(a: pd.DataFrame | None, b: pd.DataFrame | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    try:
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True),
                                      check_dtype=False)  # fmt: skip
    except AssertionError:
        return False
    return True


def as_json(value) -> str:
    """A value as the API's JSON writes it (numpy scalars as numbers, not their str)."""
    return json.dumps(
        value, sort_keys=True, default=lambda o: o.item() if hasattr(o, "item") else str(o)
    )


def page_run(variant: str, store) -> dict:
    """One run the way the Profile handler makes it, then reopened from the store."""
    from profiling.run.runner import run
    from profiling.store.hooks import keep, profile_run
    from profiling.views import history as views_history
    from profiling.views import profile as views_profile
    from profiling.views import reopen as views_reopen
    from profiling.workload.spec import Workload

    result = run(Workload.from_user(variant=variant, device=DEVICE[0], **SHAPE))
    shown = views_profile.page(result)
    roles, roofline = shown.summary.get("roles"), shown.summary.get("roofline")
    views_history.mark_kept(shown, keep([profile_run(result, "app", roles, roofline)]))
    run_id = shown.summary["run_id"]
    again, _origin = views_reopen.reopened(store, run_id)
    kept_strip = shown.strip.split('<div class="ap-extra" id="kept">')[0]
    # the memory timeline over one step is not kept in the store (History shows no memory
    # section): compared without it, and said in the output
    summary = {k: v for k, v in shown.summary.items() if k not in ("run_id", "memory_timeline")}
    reopened = {k: v for k, v in again.summary.items() if k != "memory_timeline"}
    checks = {
        "strip": again.strip == kept_strip,
        "gantt": again.figure.to_json() == shown.figure.to_json(),
        "kernels": same_frames(again.kernels, shown.kernels),
        "roles": same_frames(again.roles, shown.roles),
        "roofline": same_frames(again.roofline, shown.roofline),
        "operators": same_frames(again.operators, shown.operators),
        "summary": as_json(reopened) == as_json(summary),
    }
    differ = sorted(k for k in summary.keys() | reopened.keys()
                    if as_json(summary.get(k)) != as_json(reopened.get(k)))  # fmt: skip
    return {"variant": variant, "run_id": run_id, "identical": all(checks.values()), **checks,
            "memory_timeline_kept": again.summary.get("memory_timeline") is not None,
            "summary_keys_that_differ": differ,
            "gpu_us_per_forward": result.summary.gpu_us_per_forward}  # fmt: skip


def through_gradio(store) -> dict | None:
    """The Profile handler itself and History's /history_run, where gradio is installed."""
    try:
        from profiling.page import history_tab, profile_tab
    except ImportError as exc:
        return {"skipped": f"gradio not installed here ({exc})"}
    shown = profile_tab.profile("sdpa-flash", **SHAPE, progress=lambda *a, **k: None)
    run_id = shown[1]["run_id"]
    back = history_tab.history_run(run_id)
    strip = shown[0].split('<div class="ap-extra" id="kept">')[0]
    return {"run_id": run_id, "strip": back[1] == strip,
            "gantt": back[2].to_json() == shown[5].to_json(),
            "kernels": same_frames(back[3], shown[3]),
            "operators": same_frames(back[7], shown[2])}  # fmt: skip


def cli(store_path: Path, out: Path) -> dict:
    """A CLI run kept, and `history show` printing the summary lines the run printed."""
    base = [sys.executable, "-m", "profiling"]
    made = subprocess.run([*base, "--variant", "sdpa-flash", *CLI_SHAPE, "--store",
                           str(store_path), "--out", str(out / "cli")],
                          cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    run_id = made.stderr.split("kept in the run store: ", 1)[-1].split(" ", 1)[0]
    shown = subprocess.run([*base, "history", "--store", str(store_path), "show", run_id],
                           cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    rows = [line for line in shown.stdout.splitlines()[1:] if line.strip()]
    rows = rows[: next((i for i, r in enumerate(rows) if r.startswith("==")), len(rows))]
    compared = subprocess.run([*base, "compare", "--variants", "naive,sdpa-flash", *CLI_SHAPE,
                               "--store", str(store_path), "--out", str(out / "cli-compare")],
                              cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    return {"run_id": run_id, "returncode": made.returncode,
            "summary_lines": len(rows),
            "identical": made.returncode == 0 and bool(rows)
            and all(row in made.stdout.splitlines() for row in rows),
            "compare_kept": compared.stderr.count("kept in the run store"),
            "stderr_tail": made.stderr[-800:]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "store-h200"))
    parser.add_argument("--cpu-check", action="store_true", help="tiny shape on the CPU")
    args = parser.parse_args()
    if args.cpu_check:
        DEVICE[0] = "cpu"
        SHAPE.update(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=32)
        CLI_SHAPE[:] = ["--seq-len", "128", "--dtype", "float32", "--batch", "1", "--heads",
                        "2", "--head-dim", "32", "--device", "cpu"]  # fmt: skip
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    store_path = out / "store" / "runs.sqlite"
    os.environ["ATTNPROF_STORE"] = str(store_path)
    from profiling.store import open_store
    from profiling.store.exchange import export_runs

    store = open_store()
    found = {"page": [page_run(v, store) for v in ("sdpa-flash", "naive")],
             "gradio": through_gradio(store), "cli": cli(store_path, out)}  # fmt: skip
    exported = out / "export"
    exported.mkdir(exist_ok=True)
    found["exported"] = {}
    for name in ("h200-runs.jsonl", "h200-runs.parquet"):
        try:
            found["exported"][name] = export_runs(store, exported / name)[0]
        except ImportError as exc:  # Parquet needs pyarrow: the JSON Lines export is enough
            found["exported"][name] = f"not written: {exc}"
    (out / "store_h200.json").write_text(json.dumps(found, indent=2, default=str))
    with tarfile.open(out / "store_h200.tar.gz", "w:gz") as tar:
        tar.add(exported, arcname="export")
        tar.add(out / "store_h200.json", arcname="store_h200.json")
    print(json.dumps(found, indent=2, default=str))
    ok = all(r["identical"] for r in found["page"]) and found["cli"]["identical"]
    print("ALL IDENTICAL" if ok else "MISMATCH: see store_h200.json")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
