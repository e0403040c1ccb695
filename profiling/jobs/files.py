"""What a Compare or a Sweep leaves on disk: its folder, removed when the job is cancelled,
and the one zip of its traces and tables that the page and the CLI hand over."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from profiling.jobs.queue import JobCancelled

Progress = Callable[[float, str], None]


def cancelled(stop: Callable[[], bool] | None, out: Path, made: bool) -> None:
    """Between two runs of a job: end it if its client cancelled it, removing the folder it
    made (the runs so far and their traces are nobody's now)."""
    if stop is not None and stop():
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise JobCancelled(f"cancelled; {out.name} removed" if made else "cancelled")


def job_folder(out_dir: str | Path | None, kind: str) -> Path:
    """A job's folder: the one asked for, else a fresh temporary one ("attnprof-sweep-…")."""
    return Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix=f"attnprof-{kind}-"))


def write_zip(entries: Iterable[tuple[str, Path | str | bytes]], name: str) -> Path:
    """Write (name in zip, file or text) pairs into a zip in a fresh temp folder; its path."""
    path = Path(tempfile.mkdtemp(prefix="attnprof-zip-")) / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name_in_zip, content in entries:
            if isinstance(content, Path):
                stored = content.suffix == ".gz"  # already compressed
                method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
                archive.write(content, name_in_zip, method)
            else:
                archive.writestr(name_in_zip, content)
    return path


def run_progress(report: Progress, index: int, count: int, name: str) -> Progress:
    """The progress of run `index` of `count` as a share of the whole job, its text prefixed
    with `name` and the run's place ("naive (2/6): warm-up")."""

    def step(fraction: float, text: str) -> None:
        done = index + min(max(fraction, 0.0), 1.0)
        report(done / count, f"{name} ({index + 1}/{count}): {text}")

    return step
