"""Where the store lives and its caps (profiling/store/location.py), rule by rule: an
environment variable is a stranger's value, so each is read as the module says or refused
with its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiling.store import location

ENV = ("ATTNPROF_STORE", "SPACE_ID", "XDG_DATA_HOME", "ATTNPROF_STORE_MAX_BYTES",
       "ATTNPROF_STORE_MAX_RUNS")  # fmt: skip


@pytest.fixture
def env(monkeypatch, tmp_path):
    """No store variable set, HOME in tmp_path, no Space's /data."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(location, "SPACE_DATA", tmp_path / "no-data")
    return monkeypatch


@pytest.mark.parametrize("off", ["off", "OFF", " none ", "0", "False"])
def test_the_store_can_be_turned_off(env, off):
    env.setenv("ATTNPROF_STORE", off)
    assert location.default_path() is None


def test_a_path_named_is_taken_as_given_with_its_home_expanded(env, tmp_path):
    env.setenv("ATTNPROF_STORE", "  ~/stores/mine.sqlite ")
    assert location.default_path() == tmp_path / "home" / "stores" / "mine.sqlite"


def test_with_nothing_named_the_store_is_in_the_users_data_folder(env, tmp_path):
    assert location.default_path() == (
        tmp_path / "home" / ".local" / "share" / "attention-profiler" / "runs.sqlite"
    )
    env.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert location.default_path() == tmp_path / "xdg" / "attention-profiler" / "runs.sqlite"


def test_a_space_with_persistent_storage_keeps_the_store_there(env, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    env.setattr(location, "SPACE_DATA", data)
    assert location.default_path() != data / "attention-profiler" / "runs.sqlite"  # no Space
    env.setenv("SPACE_ID", "someone/attention-profiler")
    assert location.default_path() == data / "attention-profiler" / "runs.sqlite"
    env.setenv("ATTNPROF_STORE", str(tmp_path / "named.sqlite"))  # a name still comes first
    assert location.default_path() == tmp_path / "named.sqlite"


def test_a_space_without_persistent_storage_uses_the_data_folder(env, tmp_path):
    env.setenv("SPACE_ID", "someone/attention-profiler")
    assert location.default_path() == (
        tmp_path / "home" / ".local" / "share" / "attention-profiler" / "runs.sqlite"
    )


def test_the_traces_live_beside_the_store():
    assert location.traces_folder(Path("/x/runs.sqlite")) == Path("/x/runs.sqlite.traces")


def test_the_caps_default_and_read_numbers(env):
    assert location.max_bytes() == 2 * 1024**3 and location.max_runs() == 100_000
    env.setenv("ATTNPROF_STORE_MAX_BYTES", " 1e9 ")
    env.setenv("ATTNPROF_STORE_MAX_RUNS", "1")
    assert location.max_bytes() == 10**9 and location.max_runs() == 1
    env.setenv("ATTNPROF_STORE_MAX_BYTES", "0")  # no traces kept at all
    assert location.max_bytes() == 0


@pytest.mark.parametrize(
    ("name", "raw", "said"),
    [
        ("ATTNPROF_STORE_MAX_BYTES", "lots",
         "ATTNPROF_STORE_MAX_BYTES must be a number of bytes, not 'lots'"),
        ("ATTNPROF_STORE_MAX_BYTES", "inf",
         "ATTNPROF_STORE_MAX_BYTES must be a number of bytes, not 'inf'"),
        ("ATTNPROF_STORE_MAX_BYTES", "-1",
         "ATTNPROF_STORE_MAX_BYTES must be 0 or more bytes, not '-1'"),
        ("ATTNPROF_STORE_MAX_RUNS", "0", "ATTNPROF_STORE_MAX_RUNS must be 1 or more runs, not '0'"),
        ("ATTNPROF_STORE_MAX_RUNS", "x" * 50,
         f"ATTNPROF_STORE_MAX_RUNS must be a number of runs, not '{'x' * 40}'"),
    ],
)  # fmt: skip
def test_a_cap_that_is_not_a_number_or_too_small_is_refused_by_name(env, name, raw, said):
    env.setenv(name, raw)
    cap = location.max_bytes if name.endswith("BYTES") else location.max_runs
    with pytest.raises(ValueError) as refused:
        cap()
    assert str(refused.value) == said


def test_the_space_a_run_comes_from(env):
    assert location.public_space() is None and location.this_space() == ""
    env.setenv("SPACE_ID", "")
    assert location.public_space() is None
    env.setenv("SPACE_ID", "someone/app")
    assert location.public_space() == "someone/app" == location.this_space()
