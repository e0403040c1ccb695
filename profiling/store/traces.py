"""The traces kept beside the store: one `.json.gz` per distinct content, and the size cap.

A trace is named by the SHA-256 of its gzip member after the header: the deflate stream and
the trailer (the JSON's CRC-32 and length). The header holds the file's name and time, which
differ between two copies of one trace; the rest is the same for the same JSON at the same
level, and hashing it is several times less work per click than decompressing.
Files are written under a temporary name and renamed, so a reader never sees half a trace.
Over the cap, the traces whose latest run is oldest go first; their runs stay, marked
trace_pruned, and the pruning is said (logged, and returned).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from profiling.user_values import show

log = logging.getLogger(__name__)
CHUNK = 1 << 20
HASH_PATTERN = re.compile(r"[0-9a-f]{64}")  # a SHA-256, as content_hash writes it
# a trace being copied in: hidden, never "*.json.gz" (no reader takes it for a kept trace), and
# found by this pattern if its writer was killed mid-copy (write.apply_cap removes it)
INCOMING_PREFIX, INCOMING_SUFFIX = ".incoming-", ".gz"
INCOMING_PATTERN = f"{INCOMING_PREFIX}*{INCOMING_SUFFIX}"


def _header_length(head: bytes) -> int:
    """Bytes of a gzip member's header (RFC 1952: fixed 10, then the optional fields)."""
    if len(head) < 10 or head[:2] != b"\x1f\x8b":
        return 0  # not gzip: the whole file is its content
    flags, at = head[3], 10
    if flags & 0x04:  # FEXTRA: a 2-byte length, then that many bytes
        at += 2 + int.from_bytes(head[at : at + 2], "little")
    for flag in (0x08, 0x10):  # FNAME, FCOMMENT: zero-terminated
        if flags & flag:
            at = head.index(b"\0", at) + 1
    return at + (2 if flags & 0x02 else 0)  # FHCRC


def content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        head = fh.read(64 * 1024)
        try:
            digest.update(head[_header_length(head) :])
        except ValueError:  # a header field longer than 64 KiB: hash all of it
            digest.update(head)
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def is_hash(digest: object) -> bool:
    return isinstance(digest, str) and HASH_PATTERN.fullmatch(digest) is not None


def trace_path(folder: Path, digest: str) -> Path:
    """A kept trace's file, inside `folder` whatever a row says: built from a hash only (an
    imported `trace_hash` of `/abs/dir/secret` once served and deleted an outside file)."""
    if not is_hash(digest):
        raise ValueError(f"a stored trace is named by 64 lowercase hex characters, not "
                         f"{show(digest)}")  # fmt: skip
    return folder / f"{digest}.json.gz"


def keep(source: Path, folder: Path) -> tuple[str, int]:
    """Copy a run's .json.gz into `folder` under its hash (once); (hash, bytes)."""
    digest = content_hash(source)
    target = trace_path(folder, digest)
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # beside the target, so the rename is one step on one file system
        handle, temporary = tempfile.mkstemp(
            dir=folder, prefix=INCOMING_PREFIX, suffix=INCOMING_SUFFIX
        )
        os.close(handle)
        try:
            shutil.copyfile(source, temporary)
            os.replace(temporary, target)
        finally:
            Path(temporary).unlink(missing_ok=True)
    return digest, target.stat().st_size


@dataclass
class Pruned:
    """What the size cap removed."""

    traces: int = 0
    bytes: int = 0
    runs: int = 0
    cap: int = 0

    def __bool__(self) -> bool:
        return self.traces > 0

    def message(self) -> str:
        return (
            f"the run store's traces passed their size cap ({self.cap / 1e9:.2f} GB): the "
            f"{self.traces} oldest ({self.bytes / 1e6:.1f} MB, of {self.runs} runs) were "
            "deleted; those runs are kept, marked 'trace pruned'"
        )


def total_bytes(connection: sqlite3.Connection) -> int:
    row = connection.execute("SELECT coalesce(sum(bytes), 0) FROM traces WHERE pruned = 0")
    return int(row.fetchone()[0])


def prune(connection: sqlite3.Connection, cap: int) -> Pruned:
    """Mark the oldest traces (by their latest run) pruned until the rest fit under `cap`
    bytes, and their runs, in the caller's transaction; delete_files removes the files once
    the marks are committed."""
    over = total_bytes(connection) - cap
    done = Pruned(cap=cap)
    if over <= 0:
        return done
    oldest = connection.execute(
        "SELECT hash, bytes FROM traces WHERE pruned = 0 ORDER BY last_used, hash"
    )
    doomed = []
    for digest, size in oldest:
        if done.bytes >= over:
            break
        doomed.append(digest)
        done.traces, done.bytes = done.traces + 1, done.bytes + size
    for digest in doomed:
        connection.execute("UPDATE traces SET pruned = 1 WHERE hash = ?", (digest,))
        marked = connection.execute(
            "UPDATE runs SET trace_pruned = 1 WHERE trace_hash = ?", (digest,)
        )
        done.runs += marked.rowcount
    return done


def delete_files(folder: Path, connection: sqlite3.Connection) -> None:
    """Remove the files of traces marked pruned (after the marks are committed)."""
    for (digest,) in connection.execute("SELECT hash FROM traces WHERE pruned = 1"):
        if is_hash(digest):  # a row written before imports were checked may hold a path
            trace_path(folder, digest).unlink(missing_ok=True)
