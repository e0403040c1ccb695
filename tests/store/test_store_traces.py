"""The kept traces' names and files (profiling/store/traces.py), rule by rule.

A trace is named by the SHA-256 of its gzip member after the header, so the same JSON saved
under another file name or time is kept once; the header's length is RFC 1952's, written out
here per optional field. Hashing reads a bounded head and then fixed chunks (memory does not
grow with the trace); a copy goes in under a hidden temporary name beside its target, and a
copy whose writer was killed is removed by the next prune once it is old enough."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import struct
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest

from profiling.store import open_store, traces
from profiling.store.traces import _header_length, content_hash, keep, trace_path
from profiling.store.write import STRAY_AGE_S, apply_cap, record
from tests.store.store_helpers import OTHER_TRACE, TRACE, run_data

FTEXT, FHCRC, FEXTRA, FNAME, FCOMMENT = 0x01, 0x02, 0x04, 0x08, 0x10
OLDEST_BYTES = TRACE.stat().st_size


def header(flags: int = 0, extra: bytes = b"", name: bytes = b"", comment: bytes = b"") -> bytes:
    """A gzip member's header with these optional fields (RFC 1952, 2.3.1)."""
    fixed = b"\x1f\x8b\x08" + bytes([flags]) + struct.pack("<I", 1_700_000_000) + b"\x00\x03"
    fields = b""
    if flags & FEXTRA:
        fields += struct.pack("<H", len(extra)) + extra
    if flags & FNAME:
        fields += name + b"\0"
    if flags & FCOMMENT:
        fields += comment + b"\0"
    if flags & FHCRC:
        fields += struct.pack("<H", zlib.crc32(fixed + fields) & 0xFFFF)
    return fixed + fields


def member(payload: bytes, head: bytes) -> bytes:
    """A whole gzip member: `head`, the raw deflate stream, CRC-32 and length."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = deflate.compress(payload) + deflate.flush()
    return head + body + struct.pack("<II", zlib.crc32(payload), len(payload) & 0xFFFFFFFF)


@pytest.mark.parametrize(
    ("head", "length"),
    [
        (header(), 10),
        (header(FTEXT), 10),
        (header(FEXTRA, extra=b"abcde"), 17),
        (header(FEXTRA, extra=b"x" * 258), 270),  # the length is little-endian: 0x0102
        (header(FNAME, name=b"a.json"), 17),
        (header(FCOMMENT, comment=b"hi"), 13),
        (header(FHCRC), 12),
        (header(FEXTRA | FNAME | FCOMMENT | FHCRC, b"xyz", b"n", b"c"), 21),
        (header(FNAME | FCOMMENT, name=b"first", comment=b""), 17),  # the comment starts after
    ],
    ids=["fixed", "text", "extra", "extra-258", "name", "comment", "hcrc", "all", "name+comment"],
)
def test_the_header_length_is_rfc_1952s(head: bytes, length: int) -> None:
    assert len(head) == length  # the writer above, checked against the numbers written out
    assert _header_length(head + b"deflate stream follows\0\0") == length


def test_a_file_that_is_not_gzip_is_hashed_whole() -> None:
    assert _header_length(b'{"traceEvents": []}') == 0
    assert _header_length(b"\x1f\x8b\x08\x00") == 0  # shorter than the fixed header
    assert _header_length(header()) == 10  # exactly the fixed header: a member, still gzip
    assert _header_length(b"\x1f\x8c" + bytes(20)) == 0  # not the gzip magic


def test_the_same_json_under_another_name_and_time_has_one_hash(tmp_path: Path) -> None:
    payload = b'{"traceEvents": [' + b'{"ph": "X"},' * 1000 + b"{}]}"
    plain, named = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    plain.write_bytes(member(payload, header()))
    named.write_bytes(member(payload, header(FEXTRA | FNAME | FHCRC, b"ab", b"run 2.json")))
    assert gzip.decompress(named.read_bytes()) == payload  # a real gzip file
    assert content_hash(plain) == content_hash(named)
    other = tmp_path / "c.json.gz"
    other.write_bytes(member(payload + b" ", header()))
    assert content_hash(other) != content_hash(plain)


def test_the_hash_covers_every_byte_after_the_header(tmp_path: Path) -> None:
    """Past the 64 KiB head and past several 1 MiB chunks: SHA-256 of the rest, exactly."""
    head = header(FNAME, name=b"big.json")
    data = head + os.urandom(3 * traces.CHUNK + 100_000)
    path = tmp_path / "big.json.gz"
    path.write_bytes(data)
    assert content_hash(path) == hashlib.sha256(data[len(head) :]).hexdigest()


def test_a_header_field_past_the_head_hashes_the_whole_file(tmp_path: Path) -> None:
    data = header(FNAME, name=b"n" * (70 * 1024)) + b"rest"
    path = tmp_path / "long-name.json.gz"
    path.write_bytes(data)
    assert content_hash(path) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(("name_length", "skipped"), [(65_525, 65_536), (65_526, 0)])
def test_the_head_read_for_the_header_is_64_kib(tmp_path: Path, name_length, skipped) -> None:
    """A name whose terminator is the head's last byte is skipped; one byte longer, and the
    header is not in the head: the whole file is hashed."""
    data = header(FNAME, name=b"n" * name_length) + b"rest"
    path = tmp_path / "edge.json.gz"
    path.write_bytes(data)
    assert content_hash(path) == hashlib.sha256(data[skipped:]).hexdigest()


def test_hashing_holds_a_bounded_part_of_the_file_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "large.json.gz"
    path.write_bytes(header() + os.urandom(24 * 2**20))
    tracemalloc.start()
    try:
        content_hash(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak / 2**20:.1f} MiB held to hash 24 MiB"


def test_a_name_that_is_not_a_hash_is_refused_and_said(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^a stored trace is named by 64 lowercase hex "
                       r"characters, not '/abs/dir/secret'$"):  # fmt: skip
        trace_path(tmp_path, "/abs/dir/secret")
    digest = "ab" * 32
    assert trace_path(tmp_path, digest) == tmp_path / f"{digest}.json.gz"


def test_keep_makes_its_folder_and_copies_once(tmp_path: Path) -> None:
    source = tmp_path / "run.json.gz"
    source.write_bytes(member(b'{"traceEvents": []}', header(FNAME, name=b"run.json")))
    folder = tmp_path / "store" / "traces"  # neither folder exists yet
    digest, size = keep(source, folder)
    kept = trace_path(folder, digest)
    assert (digest, size) == (content_hash(source), source.stat().st_size)
    assert kept.read_bytes() == source.read_bytes()
    assert os.listdir(folder) == [kept.name]  # no temporary left
    written = kept.stat().st_mtime_ns
    time.sleep(0.01)
    assert keep(source, folder) == (digest, size) and kept.stat().st_mtime_ns == written


def test_a_copy_goes_in_under_a_hidden_name_beside_its_target(tmp_path, monkeypatch) -> None:
    source = tmp_path / "run.json.gz"
    source.write_bytes(member(b'{"traceEvents": []}', header()))
    folder = tmp_path / "traces"
    seen: list[Path] = []
    found: list[set[Path]] = []  # what a prune would take for an unfinished copy, meanwhile
    real = shutil.copyfile

    def copy(src, dst, *args, **kwargs):
        seen.append(Path(dst))
        found.append(set(folder.glob(traces.INCOMING_PATTERN)))
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(traces.shutil, "copyfile", copy)
    keep(source, folder)
    (temporary,) = seen
    assert temporary.parent == folder  # one file system: the rename is atomic
    assert found == [{temporary}]
    assert temporary.name.startswith(".") and not temporary.name.endswith(".json.gz")


def test_a_copy_whose_writer_was_killed_is_removed_once_old(tmp_path: Path) -> None:
    store = open_store(tmp_path / "runs.sqlite")
    store.traces.mkdir(parents=True, exist_ok=True)
    old, young = store.traces / ".incoming-abc.gz", store.traces / ".incoming-def.gz"
    for stray in (old, young):
        stray.write_bytes(b"half a trace")
    long_ago = time.time() - STRAY_AGE_S - 60
    os.utime(old, (long_ago, long_ago))
    apply_cap(store, 10**9)
    assert not old.exists() and young.exists()  # the young one may be a copy going on now


@pytest.mark.parametrize(
    ("room", "pruned"),
    [(0, 0), (-1, 1), (-OLDEST_BYTES, 1), (-OLDEST_BYTES - 1, 2)],
    ids=["at-cap", "a-byte-over", "the-oldest-over", "a-byte-more"],
)
def test_the_size_cap_prunes_the_oldest_traces_until_the_rest_fit_and_no_more(
    tmp_path: Path, room: int, pruned: int
) -> None:
    """Two kept traces, the cap set `room` bytes from their total: at the cap nothing goes,
    a byte over takes the oldest, and only a byte more than the oldest takes both."""
    store = open_store(tmp_path / "runs.sqlite")
    for trace in (TRACE, OTHER_TRACE):  # TRACE's run is the older
        record(store, run_data(trace=trace))
    total = TRACE.stat().st_size + OTHER_TRACE.stat().st_size
    done = apply_cap(store, total + room)
    assert (done.traces, done.runs) == (pruned, pruned)
    assert len(list(store.traces.glob("*.json.gz"))) == 2 - pruned
