"""The app's own temp files: which entries it made, and deleting them by count and by age.

Every trace, table and zip the app writes lives in a fresh `tempfile.mkdtemp` folder directly in
the temp dir, named `attnprof-XXXXXXXX` (a run), `attnprof-compare-…`, `attnprof-sweep-…` or
`attnprof-zip-…`; no path is ever built from user input. Gradio serves copies from its own cache
(`GRADIO_TEMP_DIR`), which `gr.Blocks(delete_cache=...)` empties; these folders are ours to
delete: the newest few are kept (RunDirs in profiling.views.shared), and any older than the
cache age is deleted, including those a previous process left behind.

No gradio here: the page's wiring calls these, and the tests drive them directly.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

PREFIX = "attnprof-"
# What tempfile.mkdtemp(prefix=...) makes for the runner, compare, sweep and zips: the prefix,
# an optional kind, then mkdtemp's 8 random characters. Nothing else in the temp dir matches
# (not `attnprof-gradio-…`, the test suite's Gradio cache, nor a name a user could choose).
APP_DIR = re.compile(r"^attnprof-(?:compare-|sweep-|zip-)?[a-z0-9_]{8}$")


def temp_root() -> Path:
    return Path(tempfile.gettempdir())


def is_app_dir(path: Path, root: Path | None = None) -> bool:
    """A folder the app made: directly in the temp dir, named like mkdtemp names ours, not a
    symlink, owned by this user, and never Gradio's cache."""
    path = Path(path)
    root = Path(root) if root is not None else temp_root()
    if path.parent != root or not APP_DIR.match(path.name):
        return False
    try:
        info = path.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    gradio_cache = os.environ.get("GRADIO_TEMP_DIR")
    return not (gradio_cache and Path(gradio_cache).resolve() == path.resolve())


def app_dirs(root: Path | None = None) -> list[Path]:
    """Every folder the app made in the temp dir (its own and a previous process's)."""
    root = Path(root) if root is not None else temp_root()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return [root / n for n in names if n.startswith(PREFIX) and is_app_dir(root / n, root)]


def age_s(path: Path, now: float | None = None) -> float:
    """Seconds since the folder or anything directly in it last changed."""
    now = time.time() if now is None else now
    try:
        newest = path.stat().st_mtime
        with os.scandir(path) as entries:
            for entry in entries:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return 0.0
    return now - newest


def delete_stale(
    max_age_s: float, root: Path | None = None, now: float | None = None
) -> list[Path]:
    """Delete the app's folders older than `max_age_s`; returns what was deleted."""
    gone = []
    for path in app_dirs(root):
        if age_s(path, now) > max_age_s:
            shutil.rmtree(path, ignore_errors=True)
            gone.append(path)
    return gone


def footprint(root: Path | None = None) -> tuple[int, int]:
    """(folders, bytes) the app's temp folders hold right now."""
    dirs = app_dirs(root)
    size = 0
    for d in dirs:
        for folder, _, names in os.walk(d):
            for n in names:
                try:
                    size += os.lstat(os.path.join(folder, n)).st_size
                except OSError:
                    continue
    return len(dirs), size


class StaleSweeper:
    """delete_stale at most once every `every_s` seconds (cheap to call on every run)."""

    def __init__(self, max_age_s: float, every_s: float) -> None:
        self.max_age_s = max_age_s
        self.every_s = every_s
        self._last = float("-inf")
        self._lock = threading.Lock()

    def maybe_sweep(self, now: float | None = None) -> list[Path]:
        clock = time.monotonic()
        with self._lock:
            if clock - self._last < self.every_s:
                return []
            self._last = clock
        return delete_stale(self.max_age_s, now=now)
