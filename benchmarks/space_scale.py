"""The Space end to end with a big or a hostile trace: serve app.py, upload through gradio_client.

    python benchmarks/gen_trace_stream.py --events 10000000 --out /tmp/t1e7.json.gz
    python benchmarks/space_scale.py /tmp/t1e7.json.gz [--port 7871]
    python benchmarks/space_scale.py --hostile [--dir /tmp/hostile] [--port 7871]

Starts `python app.py` on this machine and samples, every 0.1 s, the RSS of the server with all
its descendants (upload workers and the trace reader's helpers).

With a trace: uploads it to `/analyze` as the page's Analyse tab does and prints the seconds from
upload to answer, the peak RSS, and the first lines of the summary. Issue #24: the Space takes
uploads up to 200 MiB.

With --hostile (issue 32): writes four hostile uploads (a gzip bomb of ~3.2 GiB of identical
events; one event whose name is 256 MiB of `}`; 200k identical nested spans; 10⁷ tiny events)
and, for each, prints how it ended (analysed, or the refusal's first words) and in how many
seconds, the peak RSS while it was read, the slowest of the small fixture's `/analyze` calls
made by a second client once a second while it was read (and first, as a baseline, three
of them alone), and the RSS once it was over against the RSS before it.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "fixtures" / "naive_8_16_1024_64_bf16.json.gz"
MiB = 1024**2
HEAD = b'{"traceEvents":['


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def _family(pid: int) -> list[int]:
    """`pid` and its descendants (children of any of its threads)."""
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                for child in children.read().split():
                    found += _family(int(child))
    except OSError:
        pass
    return found


class Watch:
    """The server family's RSS, sampled on a thread: `peak` since the last reset, `now`."""

    def __init__(self, server: subprocess.Popen[bytes]) -> None:
        self.server, self.peak = server, 0
        threading.Thread(target=self._run, daemon=True).start()

    def now(self) -> int:
        return sum(map(_rss_kib, _family(self.server.pid))) * 1024

    def _run(self) -> None:
        while self.server.poll() is None:
            self.peak = max(self.peak, self.now())
            time.sleep(0.1)


def _gz_repeated(path: Path, unit: bytes, total: int, head: bytes = HEAD) -> Path:
    """`head`, then `unit` repeated to ~`total` bytes: one 64 MiB member compressed once and
    written again and again (a valid multi-member gzip); the last event closes the list."""
    block = unit * (64 * MiB // len(unit))
    member = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = member.compress(block) + member.flush()
    with open(path, "wb") as fh:
        fh.write(gzip.compress(head))
        for _ in range(max(total // len(block), 1)):
            fh.write(data)
        fh.write(gzip.compress(unit.rstrip(b",") + b"]}"))
    return path


def hostile_uploads(folder: Path) -> dict[str, Path]:
    """The four hostile uploads of issue 32, written once into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    event = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":1},'
    nested = b'{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":0,"dur":10},'
    made = {
        "gzip bomb, 3.2 GiB of events": folder / "bomb.json.gz",
        "one event, a 256 MiB name of }": folder / "long_name.json.gz",
        "200k identical nested spans": folder / "nested.json.gz",
        "10^7 tiny events": folder / "tiny.json.gz",
    }
    paths = list(made.values())
    if not paths[0].exists():
        _gz_repeated(paths[0], event, 3200 * MiB)
    if not paths[1].exists():
        name = b'{"ph":"X","name":"' + b"}" * (256 * MiB) + b'","pid":1,"tid":1,"ts":1,"dur":1}]}'
        paths[1].write_bytes(gzip.compress(HEAD + name, compresslevel=9))
    if not paths[2].exists():
        paths[2].write_bytes(gzip.compress(HEAD + nested * 199_999 + nested[:-1] + b"]}"))
    if not paths[3].exists():
        with gzip.open(paths[3], "wb", compresslevel=6) as out:
            out.write(HEAD)
            for start in range(0, 10**7, 10**5):
                out.write(b",".join(b'{"ph":"X","name":"a","pid":1,"tid":1,"ts":%d,"dur":1}'
                                    % ts for ts in range(start, start + 10**5)))  # fmt: skip
                out.write(b"]}" if start + 10**5 >= 10**7 else b",")
    return made


def _serve(port: int) -> tuple[subprocess.Popen[bytes], Any]:
    from gradio_client import Client

    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "PYTHONPATH": path}
    server = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    for _ in range(180):
        if server.poll() is not None:  # it died (an import failed): no use waiting
            raise SystemExit(f"the app exited with {server.returncode} before it listened")
        try:
            return server, Client(f"http://127.0.0.1:{port}/", verbose=False)
        except Exception:  # not listening yet
            time.sleep(1)
    server.terminate()
    raise SystemExit("the app did not start in 3 minutes")


def _small_calls(client: Any, job: Any) -> list[float]:
    """The small fixture's /analyze once a second while `job` runs: the seconds of each."""
    from gradio_client import handle_file

    took: list[float] = []
    while not job.done():
        time.sleep(1)
        if not job.done():
            asked = time.perf_counter()
            client.predict(trace=handle_file(str(SMALL)), api_name="/analyze")
            took.append(time.perf_counter() - asked)
    return took


def one_hostile(label: str, path: Path, clients: tuple[Any, Any], watch: Watch) -> None:
    from gradio_client import handle_file

    hostile, small = clients
    time.sleep(3)  # the previous worker gone, the idle one started
    before, watch.peak = watch.now(), 0
    began = time.perf_counter()
    job = hostile.submit(trace=handle_file(str(path)), api_name="/analyze")
    calls: list[float] = []
    side = threading.Thread(target=lambda: calls.extend(_small_calls(small, job)))
    side.start()
    try:
        job.result()
        outcome = "analysed"
    except Exception as exc:  # the refusal the user sees
        outcome = "refused: " + str(exc).replace("\n", " ")[:110]
    took = time.perf_counter() - began
    side.join()
    time.sleep(3)
    after, slowest = watch.now(), max(calls, default=0.0)
    print(f"| {label} | {path.stat().st_size / MiB:.1f} MB | {took:.1f} s | {outcome} | "
          f"{watch.peak / 1e9:.2f} GB | {slowest:.2f} s ({len(calls)} calls) | "
          f"{before / 1e6:.0f} → {after / 1e6:.0f} MB |", flush=True)  # fmt: skip


def main() -> None:
    from gradio_client import Client, handle_file

    parser = argparse.ArgumentParser()
    parser.add_argument("trace", nargs="?")
    parser.add_argument("--port", type=int, default=7871)
    parser.add_argument("--hostile", action="store_true")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/attnprof-hostile"))
    args = parser.parse_args()
    made = hostile_uploads(args.dir) if args.hostile else {}
    server, client = _serve(args.port)
    watch = Watch(server)
    try:
        if not args.hostile:
            began = time.perf_counter()
            answer = client.predict(trace=handle_file(args.trace), api_name="/analyze")
            took = time.perf_counter() - began
            print(f"/analyze {took:.1f} s; server and its children: peak RSS "
                  f"{watch.peak / 1e6:.0f} MB\n{str(answer[0])[:400]}")  # fmt: skip
            return
        small = Client(f"http://127.0.0.1:{args.port}/", verbose=False)
        alone = []
        for _ in range(4):  # the first one warms the server; the next three are the baseline
            began = time.perf_counter()
            small.predict(trace=handle_file(str(SMALL)), api_name="/analyze")
            alone.append(time.perf_counter() - began)
            time.sleep(1)
        print("small /analyze alone: " + ", ".join(f"{s:.2f}" for s in alone[1:]) + " s")
        print(
            "| upload | gzip | answered in | how | peak RSS, server and children | small "
            "/analyze meanwhile, slowest | RSS before → after |\n" + "|---" * 7 + "|"
        )
        for label, path in made.items():
            one_hostile(label, path, (client, small), watch)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
