"""Where a trace's JSON can be cut: its structure, found block by block in bounded work and memory.

profiling.trace.stream cuts the inflated stream into pieces of whole events. An uploaded trace
is a stranger's bytes, so every scan here looks at each byte once, keeps its state (inside a
string, after a backslash, depth) from one block to the next, and holds temporaries of one
sub-block at most (numpy arrays of ~30 bytes per structural byte of SUB bytes), never of the
whole buffer: a 255 KB gzip whose one event name was 256 MiB of `}` once cost 7.1 GB and a
regex pass over the growing buffer per 4 MiB block. Limits a stranger cannot push past are
decided here: one event's size (MAX_EVENT) and nesting (MAX_DEPTH).
"""

from __future__ import annotations

import re

import numpy as np

from profiling.trace.events import TraceError

SUB = 1024**2  # bytes scanned in one numpy pass (bounds its temporaries to ~30 MB)
MAX_EVENT = 64 * 1024**2  # bytes of one event at most (torch's largest are a few KiB)
MAX_DEPTH = 1000  # nesting inside the events array at most (msgspec refuses ~500 levels)
_QUOTE, _SLASH, _OPEN, _CLOSE, _COMMA = 1, 2, 3, 4, 5
_CLASS = np.zeros(256, dtype=np.int8)
for _byte, _code in ((b'"', 1), (b"\\", 2), (b"{", 3), (b"[", 3), (b"}", 4), (b"]", 4), (b",", 5)):
    _CLASS[_byte[0]] = _code


def event_too_big() -> TraceError:
    return TraceError(
        f"one event of the trace is larger than {MAX_EVENT // 1024**2} MiB (the limit for one "
        "event; torch.profiler writes a few KiB): not a trace this tool reads"
    )


def too_deep() -> TraceError:
    return TraceError(f"not valid JSON (nested too deeply: more than {MAX_DEPTH} levels)")


class Structure:
    """A JSON text's brackets, commas and opening quotes outside strings, with the depth after
    each, handed out block by block; the state between blocks is three scalars."""

    def __init__(self) -> None:
        self.in_string = False
        self.escaped = False  # the next byte follows an unescaped backslash
        self.depth = 0

    def scan(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions in data, kinds, depth after each) of data's structural bytes outside
        strings (a quote: only those that open one); the state moves to data's end."""
        where = np.flatnonzero(_CLASS[data])
        if self.escaped and len(where) and where[0] == 0:
            where = where[1:]  # escaped by the backslash that ended the last block
        self.escaped = False
        kind = _CLASS[data[where]]
        is_slash = kind == _SLASH
        if is_slash.any():
            where, kind = self._unescaped(where, kind, is_slash, len(data))
        quote = kind == _QUOTE
        before = np.cumsum(quote) - quote + self.in_string  # quotes before each, and the state
        outside = before % 2 == 0
        self.in_string = bool((int(self.in_string) + int(quote.sum())) % 2)
        where, kind = where[outside], kind[outside]
        step = (kind == _OPEN).astype(np.int64) - (kind == _CLOSE)
        depth = np.cumsum(step) + self.depth
        if len(depth):
            self.depth = int(depth[-1])
        return where, kind, depth

    def _unescaped(
        self, where: np.ndarray, kind: np.ndarray, is_slash: np.ndarray, size: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Drop backslashes and the bytes they escape: in a run of them, each at an even offset
        escapes the next byte."""
        slash = where[is_slash]
        index = np.arange(len(slash))
        run_start = np.r_[True, np.diff(slash) != 1]
        offset = index - np.maximum.accumulate(np.where(run_start, index, 0))
        escaped = slash[offset % 2 == 0] + 1
        self.escaped = bool(len(escaped)) and int(escaped[-1]) == size
        at = np.clip(np.searchsorted(escaped, where), 0, len(escaped) - 1)
        keep = ~is_slash & (escaped[at] != where)
        return where[keep], kind[keep]


class ExactCuts:
    """The commas between events of the array whose `[` is buf[0], and where it closes, found
    by scanning each byte of buf once as blocks arrive (buf[0] is a separator before events)."""

    def __init__(self) -> None:
        self.structure = Structure()
        self.scanned = 1  # buf[:scanned] is scanned
        self.last_comma = 0  # the last comma between two events (0: none yet)
        self.close = -1  # the array's closing `]` (-1: not yet)

    def advance(self, buf: bytearray) -> None:
        """Scan what arrived; refuse an event past MAX_EVENT or nesting past MAX_DEPTH."""
        data = np.frombuffer(buf, dtype=np.uint8)
        while self.close < 0 and self.scanned < len(data):
            start = self.scanned
            where, kind, depth = self.structure.scan(data[start : start + SUB])
            self.scanned = min(start + SUB, len(data))
            if len(depth) and int(depth.max()) > MAX_DEPTH:
                raise too_deep()
            closed = np.flatnonzero(depth < 0)
            if len(closed):
                self.close = start + int(where[closed[0]])
                where, kind, depth = where[: closed[0]], kind[: closed[0]], depth[: closed[0]]
            commas = where[(kind == _COMMA) & (depth == 0)]
            if len(commas):
                self.last_comma = start + int(commas[-1])
        del data  # no view left on buf: it may grow again
        if self.close < 0 and self.scanned - self.last_comma > MAX_EVENT:
            raise event_too_big()

    def taken(self, cut: int) -> None:
        """buf lost its first `cut` bytes."""
        self.scanned -= cut
        self.last_comma = 0 if self.last_comma <= cut else self.last_comma - cut
        if self.close >= 0:
            self.close -= cut


def closing_bracket(buf: bytearray) -> int:
    """Where the array whose separator is buf[0] closes (-1: it does not), one scan of buf."""
    cuts = ExactCuts()
    cuts.advance(buf)
    return cuts.close


_CUT = re.compile(rb"\}\s*(,)\s*\{")
WINDOW = 64 * 1024  # the fast cut is looked for in windows of this many bytes, last first
_OVERLAP = 256  # a cut straddling two windows is found if its whitespace is shorter


class FastCuts:
    """The last `}` `,` `{` in buf: what every writer puts between two events, guessed without
    knowing strings (the decoder checks each piece). Only the bytes that arrived since the last
    look are searched, the last window first; a window's matches are the most kept at once."""

    def __init__(self) -> None:
        self.searched = 1
        self.last_comma = 0

    def advance(self, buf: bytearray) -> None:
        floor = max(self.searched - _OVERLAP, 1)
        end = len(buf)
        while end > floor:
            begin = max(end - WINDOW, floor)
            commas = [m.start(1) for m in _CUT.finditer(buf, begin, min(end + _OVERLAP, len(buf)))]
            if commas:
                self.last_comma = max(self.last_comma, commas[-1])
                break
            end = begin
        self.searched = len(buf)

    def taken(self, cut: int) -> None:
        self.searched = max(self.searched - cut, 1)
        self.last_comma = 0 if self.last_comma <= cut else self.last_comma - cut
