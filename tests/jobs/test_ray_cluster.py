"""Joining a cluster the way the README says (issue 35): `ray start --head` (Ray's own CLI, in a
child), then `python -m profiling sweep|compare --ray …` as children, by `auto` (the sweep)
and by address (the compare). Each command must join that cluster, not start one of its own: its Ray
driver log and its workers' logs are in the cluster's session folder, which only a process
connected to that cluster writes to.

The cluster is private to this module: its own --temp-dir (so `auto` here finds it through its
ray_current_cluster file, and no other process's `ray.init()` finds it), a free port, two CPUs,
no GPU and no dashboard, and its own token (RAY_AUTH_TOKEN: Ray ≥ 2.59 starts `ray start`'s
cluster with token authentication where a token is found). It is stopped by ending its
`ray start --block` process, never with `ray stop`, which stops every Ray of the machine.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray  # noqa: F401  (a missing Ray fails this module, as tests/jobs/test_ray.py: CI has it)

from profiling.jobs.ray import _token_hint

ROOT = Path(__file__).parents[2]
# test_ray.py's tiny CPU points
SHAPE = ["--batch", "1", "--heads", "2", "--head-dim", "32", "--dtype", "float32",
         "--device", "cpu", "--steps", "1", "--no-store"]  # fmt: skip
START_SECONDS, RUN_SECONDS = 90, 180


@dataclass
class Cluster:
    address: str  # 127.0.0.1:PORT
    session: Path  # its session's folder, resolved once it ran (not session_latest, which a
    # cluster started later in the same --temp-dir would point at its own)
    env: dict[str, str]  # every child's: the cluster's token, TMPDIR (for `auto`), no RAY_ADDRESS

    def logs(self) -> Path:
        return self.session / "logs"


def _ray_cli() -> str:
    """The `ray` command of this Python's Ray (the one next to it, else the PATH's)."""
    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.is_file() else shutil.which("ray")
    assert found, "Ray's CLI (`ray`) is missing: pip install -r requirements-ray.txt"
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    root = Path(tempfile.mkdtemp(prefix="attnprof-rc-", dir="/tmp"))  # short: socket paths
    temp, port = root / "ray", _free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(RAY_AUTH_TOKEN=secrets.token_hex(32), TMPDIR=str(root))
    command = [_ray_cli(), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
               "--num-gpus=0", "--include-dashboard=false", f"--temp-dir={temp}",
               "--disable-usage-stats"]  # fmt: skip
    log = (root / "head.log").open("w")
    head = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(head, temp / "ray_current_cluster", root / "head.log")
        yield Cluster(f"127.0.0.1:{port}", (temp / "session_latest").resolve(strict=True), env)
    finally:
        head.terminate()  # `ray start --block` stops its cluster's processes on SIGTERM
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()  # its reaper then ends the rest
            head.wait(timeout=30)
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_until_up(head: subprocess.Popen, address_file: Path, log: Path) -> None:
    """`ray start` writes ray_current_cluster once the head node runs."""
    deadline = time.monotonic() + START_SECONDS
    while not address_file.exists():
        assert head.poll() is None, f"ray start exited {head.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, (
            f"no cluster after {START_SECONDS} s:\n{log.read_text()}"
        )
        time.sleep(0.2)


def _profiling(cluster: Cluster, args: list[str], **env: str) -> tuple[int, str]:
    """`python -m profiling ARGS` in a child, as a user runs it; its pid and output."""
    child = subprocess.Popen(
        [sys.executable, "-m", "profiling", *args], cwd=ROOT, env={**cluster.env, **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    output, _ = child.communicate(timeout=RUN_SECONDS)
    assert child.returncode == 0, output
    return child.pid, output


def _joined(cluster: Cluster, pid: int) -> None:
    """The child `pid` was a driver of this cluster and its points ran in this cluster's
    workers: Ray writes a driver's log, and its job's workers' logs, into the session folder
    of the cluster it is connected to (a cluster of its own would have its own folder)."""
    logs = cluster.logs()
    sessions = sorted(cluster.session.parent.glob("session_2*"))
    assert sessions == [cluster.session], f"another cluster started beside it: {sessions}"
    drivers = list(logs.glob(f"python-core-driver-*_{pid}.log"))
    assert len(drivers) == 1, f"pid {pid} is no driver of this cluster: {sorted(os.listdir(logs))}"
    job = drivers[0].name.removeprefix("python-core-driver-")[:8]  # the job id's 4 bytes
    workers = list(logs.glob(f"worker-*-{job}-*.out"))
    assert workers, f"no worker of job {job} in this cluster: {sorted(os.listdir(logs))}"


def _points(zip_path: Path) -> list[dict]:
    with zipfile.ZipFile(zip_path) as archive:
        return json.loads(archive.read("points.json"))


def test_sweep_joins_the_cluster_ray_start_made(cluster, tmp_path):
    """By `auto`, which finds the cluster and its token itself: the README's two lines."""
    args = ["sweep", "--variants", "naive,sdpa-math", "--seq-lens", "32,64", *SHAPE]
    pid, output = _profiling(cluster, [*args, "--out", str(tmp_path), "--ray", "auto"])
    _joined(cluster, pid)
    [zip_path] = tmp_path.glob("sweep_*.zip")
    points = _points(zip_path)
    assert [(p["variant"], p["seq_len"], p["status"]) for p in points] == [
        ("naive", 32, "ok"), ("naive", 64, "ok"), ("sdpa-math", 32, "ok"), ("sdpa-math", 64, "ok")
    ]  # fmt: skip
    where = {(p["placement"]["host"], p["placement"]["device"]) for p in points}
    assert where == {(socket.gethostname(), "CPU")}, where  # the cluster's one node
    assert "ran on" not in output  # one device: the table as without Ray


def test_compare_joins_the_cluster_at_its_address(cluster, tmp_path):
    """`--ray HOST:PORT`, an address given outright: Ray sends the cluster's token only with
    RAY_AUTH_MODE=token, as the README says (RAY_ADDRESS with `auto` takes the same route)."""
    args = ["compare", "--variants", "naive,sdpa-math", "--seq-len", "32", *SHAPE]
    flag, env = ["--ray", cluster.address], {"RAY_AUTH_MODE": "token"}
    pid, _ = _profiling(cluster, [*args, "--out", str(tmp_path), *flag], **env)
    _joined(cluster, pid)
    [zip_path] = tmp_path.glob("compare_*.zip")
    with zipfile.ZipFile(zip_path) as archive:
        ran_on = list(csv.DictReader(io.StringIO(archive.read("ran_on.csv").decode())))
    assert [(r["variant"], r["host"], r["device"]) for r in ran_on] == [
        ("naive", socket.gethostname(), "CPU"), ("sdpa-math", socket.gethostname(), "CPU")
    ]  # fmt: skip


def test_a_failed_join_by_address_says_how_to_give_the_token(monkeypatch):
    """Joining by address without RAY_AUTH_MODE fails on a cluster with a token after Ray's
    ~20 s of retries, with a message that does not say why: the error adds how."""
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert "RAY_AUTH_MODE=token" in _token_hint("10.0.0.1:6379")
    assert _token_hint(None) == ""  # a cluster started here needs none
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert _token_hint("10.0.0.1:6379") == ""  # asked for already: the failure is elsewhere
