"""The C scanner against msgspec on mutated pieces: for every input, the scanner declines it
(msgspec's to read) or gives exactly decode_piece's columns, and never columns for a piece
msgspec refuses. The inputs: every file of the given corpora (fuzz/corpus, and what libFuzzer
grew from it, which reaches the scanner's branches), then mutations of them until time is up.

    python -m tests.fuzz.differential --seconds 600 [--corpus DIR ...] [--seed N]

A piece that breaks the contract is written to --artifacts and named in the error.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec
import numpy as np

from profiling.trace.chunks import ChunkColumns, decode_piece
from profiling.trace.events import TraceError
from profiling.trace.scan_columns import scanned_columns

from .run import SCRATCH

CORPUS = Path(__file__).with_name("corpus")
TOKENS = [line[1:-1].encode().decode("unicode_escape").encode()
          for line in Path(__file__).with_name("trace.dict").read_text().splitlines()
          if line.startswith('"')]  # fmt: skip
NUMBERS = [b"0", b"-0", b"1e22", b"1e23", b"9007199254740993", b"-9223372036854775808",
           b"18446744073709551616", b"1" * 30, b"0." + b"0" * 30 + b"1", b"5e-324"]  # fmt: skip
MAX_SIZE = 1 << 16


def assert_same_columns(scanned: ChunkColumns, reference: ChunkColumns) -> None:
    """Every field equal: arrays in dtype and value (floats to the sign of zero, NaN equal to
    NaN), lists element by element and of the same types (EventArgs, not dicts)."""
    for field in dataclasses.fields(ChunkColumns):
        mine, theirs = getattr(scanned, field.name), getattr(reference, field.name)
        assert type(mine) is type(theirs), field.name
        if isinstance(theirs, np.ndarray):
            assert (mine.dtype, mine.shape) == (theirs.dtype, theirs.shape), field.name
            assert np.array_equal(mine, theirs, equal_nan=theirs.dtype.kind == "f"), field.name
            if theirs.dtype.kind == "f":
                assert np.array_equal(np.signbit(mine), np.signbit(theirs)), field.name
        else:
            if isinstance(theirs, list):
                assert list(map(type, mine)) == list(map(type, theirs)), field.name
            assert mine == theirs, field.name


def scanned_as_decoded(piece: bytes) -> bool:
    """Whether the scanner read the piece; if so its columns are msgspec's. A piece msgspec
    refuses it must decline: the reader would otherwise accept what it refuses without cc."""
    try:
        reference = decode_piece(piece)
    except (msgspec.DecodeError, TraceError, RecursionError):
        assert scanned_columns(piece) is None, "columns from a piece msgspec refuses"
        return False
    scanned = scanned_columns(piece)
    if scanned is not None:
        assert_same_columns(scanned, reference)
    return scanned is not None


def _flip(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]


def _delete(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    at = rng.randrange(len(data))
    return data[:at] + data[at + rng.randint(1, 8) :]


def _token(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(TOKENS + NUMBERS) + data[at:]


def _number(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    """A number in the piece replaced by one at an edge of what the scanner converts."""
    starts = [k for k in range(len(data)) if data[k : k + 1].isdigit()]
    if not starts:
        return data
    at = rng.choice(starts)
    end = at
    while end < len(data) and data[end : end + 1] in b"0123456789.eE+-":
        end += 1
    return data[:at] + rng.choice(NUMBERS) + data[end:]


def _repeat(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    at = rng.randrange(len(data))
    part = data[at : at + rng.randint(1, 64)]
    return data[:at] + part * rng.randint(2, 4) + data[at:]


def _splice(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    other = rng.choice(pool)
    return data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]


MUTATIONS: list[Callable[[random.Random, bytes, list[bytes]], bytes]] = [
    _flip, _delete, _token, _number, _repeat, _splice]  # fmt: skip


def corpus(folders: Iterable[Path]) -> list[bytes]:
    return [p.read_bytes() for folder in folders for p in sorted(folder.iterdir()) if p.is_file()]


def fuzz(seconds: float, folders: Iterable[Path], artifacts: Path, seed: int = 0) -> dict:
    """Check every corpus input, then mutants for `seconds`: how many of each were checked
    and how many the scanner read (AssertionError, naming the saved piece, on a difference)."""
    pool = [p for p in corpus(folders) if p] or [b"[]"]
    rng, counts = random.Random(seed), {"inputs": 0, "mutants": 0, "scanned": 0}
    for piece in pool:
        counts["scanned"] += _checked(piece, artifacts)
        counts["inputs"] += 1
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        piece = rng.choice(pool)
        for _ in range(rng.randint(1, 4)):
            piece = rng.choice(MUTATIONS)(rng, piece, pool)[:MAX_SIZE] or b"["
        counts["scanned"] += _checked(piece, artifacts)
        counts["mutants"] += 1
        if rng.random() < 0.05 and len(pool) < 10_000:
            pool.append(piece)  # mutants of mutants: deeper changes
    return counts


def _checked(piece: bytes, artifacts: Path) -> bool:
    try:
        return scanned_as_decoded(piece)
    except AssertionError as exc:
        artifacts.mkdir(parents=True, exist_ok=True)
        saved = artifacts / f"differs-{hashlib.sha1(piece).hexdigest()[:16]}"
        saved.write_bytes(piece)
        raise AssertionError(f"scanner and msgspec differ on {saved}: {exc}") from exc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--corpus", type=Path, action="append", default=[])
    parser.add_argument("--artifacts", type=Path, default=SCRATCH / "artifacts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(fuzz(args.seconds, [CORPUS, *args.corpus], args.artifacts, args.seed))


if __name__ == "__main__":
    main()
