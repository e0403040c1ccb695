"""The Space end to end with a big trace: serve app.py, upload through gradio_client, time it.

    python benchmarks/gen_trace_stream.py --events 10000000 --out /tmp/t1e7.json.gz
    python benchmarks/space_scale.py /tmp/t1e7.json.gz [--port 7871]

Starts `python app.py` on this machine, uploads FILE to `/analyze` as the page's Analyse tab
does (the summary, tables, Gantt and roofline come back), and prints the seconds from upload
to answer and the peak RSS of the server with its child processes (the trace reader's
helpers), sampled every 0.2 s. The first lines of the summary are printed to show what came
back. Issue #24: the Space takes uploads up to 200 MiB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def _family(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [pid, *map(int, children.read().split())]
    except OSError:
        return [pid]


def main() -> None:
    from gradio_client import Client, handle_file

    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--port", type=int, default=7871)
    args = parser.parse_args()
    env = {**os.environ, "GRADIO_SERVER_PORT": str(args.port), "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    peak = [0]

    def watch() -> None:
        while server.poll() is None:
            peak[0] = max(peak[0], sum(map(_rss_kib, _family(server.pid))))
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()
    try:
        for _ in range(180):
            try:
                client = Client(f"http://127.0.0.1:{args.port}/", verbose=False)
                break
            except Exception:  # not listening yet
                time.sleep(1)
        else:
            raise SystemExit("the app did not start in 3 minutes")
        began = time.perf_counter()
        answer = client.predict(trace=handle_file(args.trace), api_name="/analyze")
        took = time.perf_counter() - began
        print(f"/analyze {took:.1f} s; server and its children: peak RSS {peak[0] / 1024:.0f} MB")
        print(str(answer[0])[:400])
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
