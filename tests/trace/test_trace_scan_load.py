"""How the C scanner is built and loaded (profiling.trace.scan): only a library this user owns,
in a folder no one else can write; no home folder needed; no temporary left behind; whether it
is on said once in the log; its tables bounded by the piece's size.

Each test builds with the machine's compiler in a folder of its own (SOURCE moved there): the
scanner the rest of the suite loaded is left as it is.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from profiling.trace import scan as trace_scan

COMPILER = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
if COMPILER is None and not os.environ.get("ATTNPROF_REQUIRE_SCANNER"):
    pytest.skip("no C compiler here", allow_module_level=True)

# A library that says it was loaded: its constructor runs at dlopen, before any check could.
PLANTED = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(getenv("PLANTED_MARKER"), "w");
    if (f) fclose(f);
}
int scan_piece(void) { return 0; }
"""


@pytest.fixture
def fresh(tmp_path, monkeypatch) -> Path:
    """trace_scan as if never loaded, its source in tmp_path/src, HOME in tmp_path/home."""
    source = tmp_path / "src"
    source.mkdir(mode=0o700)
    for original in (trace_scan.SOURCE, trace_scan.HEADER):
        shutil.copy(original, source / original.name)
    monkeypatch.setattr(trace_scan, "SOURCE", source / trace_scan.SOURCE.name)
    monkeypatch.setattr(trace_scan, "HEADER", source / trace_scan.HEADER.name)
    for name in ("REASON", "LOADED_FROM", "_loaded"):
        monkeypatch.setattr(trace_scan, name, [])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ATTNPROF_SCANNER", raising=False)
    monkeypatch.setenv("PLANTED_MARKER", str(tmp_path / "planted-ran"))
    return tmp_path


def cached_name() -> str:
    """The name _load looks for: built from the (moved) source."""
    trace_scan._loaded.clear()
    folder = trace_scan.SOURCE.parent / "__pycache__"
    folder.mkdir(mode=0o700, exist_ok=True)
    before = set(folder.iterdir())
    assert trace_scan._load() is not None, trace_scan.REASON
    (built,) = set(folder.iterdir()) - before
    built.unlink()
    trace_scan.REASON.clear()
    trace_scan.LOADED_FROM.clear()
    return built.name


def plant(folder: Path, name: str) -> Path:
    folder.mkdir(exist_ok=True)
    c_file = folder.parent / "planted.c"
    c_file.write_text(PLANTED)
    target = folder / name
    subprocess.run([COMPILER, "-shared", "-fPIC", "-o", target, c_file], check=True)
    return target


def works(library) -> bool:
    return trace_scan._typed(library) is library and hasattr(library, "gather")


def test_the_scanner_is_built_and_loaded_in_a_clean_folder(fresh):
    library = trace_scan._load()
    assert library is not None and works(library), trace_scan.REASON
    (built,) = trace_scan.LOADED_FROM
    assert built.parent == fresh / "src" / "__pycache__"
    assert os.stat(built).st_mode & 0o022 == 0


def test_a_library_in_a_folder_others_can_write_is_refused(fresh):
    name = cached_name()
    shared = fresh / "src" / "__pycache__"
    plant(shared, name)
    shared.chmod(0o777)
    library = trace_scan._load()
    assert not (fresh / "planted-ran").exists(), "a planted library ran"
    assert any("writable by others" in r and str(shared) in r for r in trace_scan.REASON)
    assert library is not None and works(library)  # built anew in the home cache instead
    assert trace_scan.LOADED_FROM[0].parent == fresh / "home" / ".cache" / "attention-profiler"


@pytest.mark.parametrize("owned_by_another", ["folder", "library"])
def test_a_library_or_folder_another_user_owns_is_refused(fresh, owned_by_another):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user takes root")
    name = cached_name()
    folder = fresh / "src" / "__pycache__"
    planted = plant(folder, name)
    os.chown(folder if owned_by_another == "folder" else planted, 65534, 65534)
    library = trace_scan._load()
    assert not (fresh / "planted-ran").exists(), "a planted library ran"
    assert any("owned by uid 65534" in r for r in trace_scan.REASON), trace_scan.REASON
    assert library is not None and trace_scan.LOADED_FROM[0].parent.name == "attention-profiler"


def test_a_library_others_can_write_is_refused_in_a_clean_folder(fresh):
    name = cached_name()
    planted = plant(fresh / "src" / "__pycache__", name)
    planted.chmod(0o777)
    trace_scan._load()
    assert not (fresh / "planted-ran").exists(), "a planted library ran"
    assert any("writable by others" in r and name in r for r in trace_scan.REASON)


def test_no_home_folder_is_needed(fresh, monkeypatch):
    """Path.home() raised out of every trace read where there was no home (it was looked up
    before the first folder was tried)."""

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    assert trace_scan._load() is not None, trace_scan.REASON
    trace_scan.REASON.clear()
    (fresh / "src" / "__pycache__").chmod(0o777)  # the first folder refused: home is asked
    assert trace_scan._load() is None
    assert any("no home folder" in r for r in trace_scan.REASON), trace_scan.REASON


@pytest.mark.parametrize("compiler", ["exec sleep 30", "exit 1"], ids=["time-out", "failing"])
def test_a_failed_build_leaves_no_temporary(fresh, monkeypatch, compiler):
    script = fresh / "cc.sh"
    script.write_text(f"#!/bin/sh\n{compiler}\n")
    script.chmod(0o700)
    monkeypatch.setenv("CC", str(script))
    monkeypatch.setattr(trace_scan, "BUILD_SECONDS", 1)
    target = fresh / "out" / "trace_scan-x.so"
    target.parent.mkdir()
    assert not trace_scan._build(target)
    assert list(target.parent.iterdir()) == [], "a temporary was left"
    assert trace_scan.REASON


def test_whether_the_scanner_is_on_is_logged_once(fresh, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=trace_scan.__name__)
    assert trace_scan.scanner() is not None and trace_scan.scanner() is not None
    (on,) = caplog.records
    assert "scanner on" in on.message and on.levelno == logging.INFO
    caplog.clear()
    monkeypatch.setattr(trace_scan, "_loaded", [])
    trace_scan.SOURCE.write_text("this is not C")  # a new hash: built anew, and it fails
    assert trace_scan.scanner() is None and trace_scan.scanner() is None
    (off,) = caplog.records
    assert off.levelno == logging.WARNING and "slower" in off.message
    assert "failed" in off.message  # the compiler's reason, not only that it is off


def test_a_piece_of_empty_events_takes_no_rows():
    """Rows were sized by count('{'): a 12 MiB piece of `{},` made 839 MB of tables."""
    if trace_scan.scanner() is None:
        pytest.fail(f"no scanner: {trace_scan.REASON}")
    trace_scan._tables.tables = None
    for unit, most in [(b"{},", 2), (b'{"ph":"X"},', 20)]:  # bytes of tables per piece byte
        piece = b"[" + (unit * 100_000)[:-1] + b"]"
        found = trace_scan.scan(piece)
        assert found is not None and found.n_events == 100_000
        tables = sum(t.nbytes for t in trace_scan._tables.tables)
        assert tables <= most * len(piece), (unit, tables / len(piece))
        trace_scan._tables.tables = None


def test_the_tables_grow_until_a_dense_piece_fits():
    """A piece denser than typical is scanned, not declined: rows double until it fits."""
    piece = b"[" + b",".join([b'{"ph":"M"}'] * 50_000) + b"]"
    trace_scan._tables.tables = None
    found = trace_scan.scan(piece)
    assert found is not None and found.ints.shape[1] == 50_000
    assert np.all(found.ints[trace_scan.PH] == trace_scan.PH_M)
