"""Issue 40: ATTNPROF_RAY_ADDRESS set to a cluster that does not answer. It showed its internal
address to visitors and held the device worker ~22 s a click (ray.init's retries: two minutes
for an address that drops packets). Now it is checked once when the app starts, said once in
the log, and the app's jobs run here without waiting on it; no visitor's message names it."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from profiling.jobs import executor

SHAPE = dict(seq_len=64, dtype="float32", batch=1, heads=2, head_dim=16, causal=True)


@pytest.fixture
def fresh_app_state(monkeypatch):
    """The app's executor and its one check, as in a process that has just started."""
    monkeypatch.setattr(executor, "_APP_EXECUTOR", [])
    monkeypatch.setattr(executor, "_APP_RAY", {})


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_cluster_is_checked_once_and_logged_once(
    fresh_app_state, monkeypatch, caplog
):
    """A closed local port: answered within the check's few seconds, never ray.init's minutes.
    (Only loopback: this workplace sends no test traffic to any other address.)"""
    address = f"127.0.0.1:{_closed_port()}"
    monkeypatch.setenv(executor.RAY_ADDRESS_ENV, address)
    began = time.monotonic()
    with caplog.at_level(logging.ERROR, logger=executor.__name__):
        assert executor.check_app_ray()  # the app's start
        for _ in range(3):  # three clicks: no check again, nothing more in the log
            assert executor.app_executor() is None
            assert executor.check_app_ray()
    assert time.monotonic() - began < executor.RAY_CHECK_SECONDS + 2
    said = [r.getMessage() for r in caplog.records if r.name == executor.__name__]
    assert len(said) == 1 and address in said[0] and "run on this machine" in said[0]


def test_the_apps_compare_runs_here_and_names_no_address(fresh_app_state, monkeypatch):
    """Through the page's Compare handler (real CPU runs): nothing waits on the cluster, and
    nothing the visitor gets names it."""
    from profiling.page import compare_tab

    address = f"127.0.0.1:{_closed_port()}"
    monkeypatch.setenv(executor.RAY_ADDRESS_ENV, address)
    executor.check_app_ray()
    began = time.monotonic()
    shown = compare_tab.compare(["naive", "sdpa-math"], **SHAPE, progress=lambda *a, **k: None)
    assert time.monotonic() - began < 60
    table = shown[0]
    assert list(table["status"]) == ["ok", "ok"]  # both ran here
    # every cell and every other output, whole (a DataFrame's str elides columns)
    text = table.to_csv() + " ".join(str(part) for part in shown[1:])
    assert address not in text


def test_a_failed_join_is_said_without_the_address(monkeypatch, caplog):
    """The app's executor after its start check passed, when ray.init still fails (a port that
    answers but is no Ray cluster; Ray's own failure is replaced here to keep this quick: the
    test is of our message, the real join is tests/jobs/test_ray_cluster.py's)."""
    pytest.importorskip("ray")
    from profiling.jobs import ray as on_ray

    def refused(*args, **kwargs):
        raise ConnectionError("Failed to connect to GCS at address 10.1.2.3:6379")

    monkeypatch.setattr(on_ray.ray, "init", refused)
    monkeypatch.setattr(on_ray.ray, "is_initialized", lambda: False)
    app_side = executor.executor_for("10.1.2.3:6379", public=True)
    with caplog.at_level(logging.ERROR), pytest.raises(executor.ConfigError) as error:
        app_side._connect()
    assert "10.1.2.3" not in str(error.value) and "server's log" in str(error.value)
    logged = [r.getMessage() for r in caplog.records if r.name == on_ray.__name__]
    assert app_side.failed and len(logged) == 1  # the server's log has it all, once:
    assert logged[0].startswith("cannot start or reach the Ray cluster at 10.1.2.3:6379: Failed")
    assert logged[0].endswith("; the app's next Compares and Sweeps run on this machine")
    with pytest.raises(executor.ConfigError, match=r"10\.1\.2\.3"):  # the CLI's own --ray address
        executor.executor_for("10.1.2.3:6379")._connect()


def test_a_join_asks_for_the_address_this_checkouts_code_and_quiet_logs(monkeypatch):
    """What the join asks of ray.init, recorded (the real join, slow to start, is
    tests/jobs/test_ray_cluster.py's): the cluster's workers import this checkout's code, not
    theirs, and Ray's INFO lines and the workers' prints stay off the CLI's output."""
    pytest.importorskip("ray")
    from pathlib import Path

    from profiling.jobs import ray as on_ray

    asked: list[dict] = []

    def recorded(*args, **kwargs):
        asked.append(kwargs)
        raise ConnectionError("refused")

    monkeypatch.setattr(on_ray.ray, "init", recorded)
    monkeypatch.setattr(on_ray.ray, "is_initialized", lambda: False)
    with pytest.raises(executor.ConfigError, match=r"at 10\.1\.2\.3:6379: refused"):
        executor.executor_for("10.1.2.3:6379")._connect()
    root = Path(on_ray.__file__).resolve().parents[2]
    assert asked == [{
        "address": "10.1.2.3:6379", "logging_level": logging.WARNING, "log_to_driver": False,
        "runtime_env": {"py_modules": [str(root / "profiling"), str(root / "attention")]},
    }]  # fmt: skip
    assert (root / "profiling" / "jobs" / "ray.py").is_file()


def test_a_cluster_that_cannot_start_or_be_reached_is_said_whole(monkeypatch):
    """The CLI's words, whole: where the cluster was (this machine, or the address given),
    Ray's own reason, and for an address the token hint unless RAY_AUTH_MODE is set (a local
    start needs no token). Ray's failure is replaced to keep this quick, as above."""
    pytest.importorskip("ray")
    from profiling.jobs import ray as on_ray

    def refused(*args, **kwargs):
        raise RuntimeError("no raylet")

    monkeypatch.setattr(on_ray.ray, "init", refused)
    monkeypatch.setattr(on_ray.ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    said = "cannot start or reach the Ray cluster"
    with pytest.raises(executor.ConfigError) as error:
        executor.executor_for(executor.LOCAL)._connect()
    assert str(error.value) == f"{said} on this machine: no raylet"
    with pytest.raises(executor.ConfigError) as error:
        executor.executor_for("10.1.2.3:6379")._connect()
    hint = " (a cluster that asks for a token is joined by address with RAY_AUTH_MODE=token"
    assert str(error.value).startswith(f"{said} at 10.1.2.3:6379: no raylet{hint}")
    assert str(error.value).endswith("README, More than one GPU)")
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(executor.ConfigError) as error:
        executor.executor_for("10.1.2.3:6379")._connect()
    assert str(error.value) == f"{said} at 10.1.2.3:6379: no raylet"
