"""Issue 40: a stored trace opened from History is read as an upload is. Measures what opening
a run whose kept trace is 1 GiB of trace JSON (a 3.5 MB gzip) costs the server: its time to
the refusal, the server's resident memory before, at its peak and after, and the message; and
what reopening a run of its own small trace takes (median of 7).

    python -m benchmarks.stored_bomb            (results: docs/performance.md §11.1)

A real store in a temp folder, a real CPU run's summary, the bomb kept as its trace.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import time
from pathlib import Path

MiB = 1024**2


def _status(key: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(key + ":"))


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="attnprof-bomb-"))
    os.environ["ATTNPROF_STORE"] = str(folder / "runs.sqlite")
    import gradio as gr

    from profiling.page import history_tab, profile_tab
    from profiling.store import hooks
    from profiling.store.rows import RunData
    from tests.page.test_history_page import json_bomb

    shape = dict(seq_len=128, dtype="float32", batch=1, heads=2, head_dim=16, causal=True)
    summary = profile_tab.profile("naive", **shape, progress=lambda *a, **k: None)[1]
    bomb = json_bomb(folder / "bomb.json.gz", 1024 * MiB)
    data = RunData("profile", "bench", summary["config"], "ok", summary=copy.deepcopy(summary),
                   trace_gz=bomb)  # fmt: skip
    [run_id] = hooks.keep([data]).ids
    history_tab.history_run(summary["run_id"])  # the worker and the page's imports warm
    times = []
    for _ in range(7):  # a run's own small trace: what the worker's hand-off costs a reopen
        began = time.perf_counter()
        history_tab.history_run(summary["run_id"])
        times.append(time.perf_counter() - began)
        time.sleep(0.5)  # the next idle worker started, as between two clicks
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # VmHWM := VmRSS
    before, began = _status("VmRSS"), time.perf_counter()
    try:
        history_tab.history_run(run_id)
        said = "opened (not refused)"
    except gr.Error as error:
        said = str(error.message)
    seconds = time.perf_counter() - began
    print(json.dumps({
        "reopen_small_ms_median": round(sorted(times)[3] * 1e3),
        "gz_mb": round(bomb.stat().st_size / 1e6, 2), "seconds": round(seconds, 2),
        "rss_before_mib": before // MiB, "rss_peak_mib": _status("VmHWM") // MiB,
        "rss_after_mib": _status("VmRSS") // MiB, "message": said,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
