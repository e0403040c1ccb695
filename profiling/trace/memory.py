"""How a large read uses the process's memory: what the allocators do by default costs a
10⁷-event read seconds and hundreds of MB on the 2-core target (issue 42, measured there).

- The cyclic collector is paused while millions of acyclic objects are made (collector_paused).
- numpy's huge pages are off: zeroing them at first touch was ~17% of the CPU (small_pages).
- What the read and the build freed is handed back before the analyses (trim_heap).

Process-wide settings, each restored after; glibc's (Linux) where named, nothing elsewhere.
Tried and left out: the build's short-lived arrays served from the heap (glibc's mallopt: no
allocation mapped apart) halved its page faults and saved ~1 s of CPU, but the sparse heap it
left raised the analyses' peak by 0.13–0.26 GB.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

import numpy as np


@contextmanager
def collector_paused() -> Iterator[None]:
    """Parsing allocates ~10⁶ tuples and ids, none in cycles; the cyclic collector's passes
    over them cost ~1 s per 10⁶ events, so it is paused (and restored) for the parse, and
    for the analyses of a large table (profiling.analysis.analyze: its full passes over 10⁶
    kernels' tuples were ~3% of a 10⁷-event read, issue 42)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy asks the kernel for 2 MB pages for its large arrays (madvise), and a 10⁷-event
    read makes hundreds of fresh 50–80 MB ones: zeroing (and compacting memory for) huge pages
    at first touch was ~17% of its CPU on the 2-core target (perf: clear_page_erms; system
    time 6.7–7.5 s with them, 5.2–5.5 s without, wall 1.1–1.6 s less; issue 42). Off for the
    read and the analyses, restored after (a setting of the whole process)."""
    switch = _hugepage_switch()
    was = switch(False) if switch is not None else None
    try:
        yield
    finally:
        if switch is not None:
            switch(was)


def _hugepage_switch() -> Callable[[bool], bool] | None:
    """numpy's own switch (what NUMPY_MADVISE_HUGEPAGE sets at import): returns the old value."""
    core = getattr(np, "_core", None) or getattr(np, "core", None)  # numpy 2; 1.26
    return getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)


def trim_heap() -> None:
    """Hand back to the system the heap pages the read freed: glibc keeps them resident, and
    the analyses' large arrays are mapped anew beside them (issue 42: after a 10⁷-event read
    0.55 GB of 2.2 GB was freed heap; the peak went from 2.80 to 2.63 GB). glibc only."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim() -> Callable[[int], int] | None:
    return _libc("malloc_trim")


@lru_cache(maxsize=4)
def _libc(name: str) -> Callable[..., int] | None:
    """A function of glibc's malloc, or None (macOS, musl: nothing to hand back)."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None
