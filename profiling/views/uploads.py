"""An uploaded trace (Diff, Analyse), checked before a byte of it is read and read bounded.

Every value an API caller sends is checked here again (a component's own check stops only what
the page itself can send): a path to a regular file, its size, and the JSON once gunzipped.
"""

from __future__ import annotations

import logging
import os
import stat
from typing import Any

from profiling.trace.events import TraceError
from profiling.trace.model import Trace, load
from profiling.user_values import ConfigError, show
from profiling.views import shared as views_shared

log = logging.getLogger(__name__)

# An upload is untrusted: whatever breaks while its JSON becomes spans and tables (a list where
# a name or pid goes has raised ValueError inside numpy/pandas) is about that file. It is logged
# and the caller told so, instead of the generic "something unexpected" error.
# (JSON nested too deeply is already a TraceError: profiling.trace.model says so.)
UPLOAD_FAILURES = (
    ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError, RecursionError,
)  # fmt: skip
UNREADABLE = (
    "could not be read: some of its events do not have the shape torch.profiler writes (a "
    "list or an object where a name, id or time goes?); this has been logged"
)


def upload_stat(path: Any, which: str, missing: str) -> os.stat_result:
    """Check an upload before a byte of it is read: a path to a regular file (not a folder, a
    device or a pipe that would block). Raises ConfigError / TraceError saying what is wrong."""
    if path is None or path == "":
        raise ConfigError(missing)
    if not isinstance(path, str | os.PathLike):
        raise ConfigError(f"{which} must be an uploaded file, got {show(path)}")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise TraceError(f"{which}: cannot open the upload ({exc.strerror})") from None
    except ValueError:  # a NUL byte in the path
        raise TraceError(f"{which}: cannot open the upload (not a valid file name)") from None
    if not stat.S_ISREG(info.st_mode):
        raise TraceError(f"{which}: the upload is not a regular file")
    return info


def load_upload(path: Any, which: str) -> Trace:
    """An uploaded trace, bounded: size checked before reading, gunzipped size capped."""
    missing = f"upload trace {which} (.json or .json.gz from torch.profiler)"
    size = upload_stat(path, f"trace {which}", missing).st_size
    if size > views_shared.TRACE_MAX_UPLOAD_BYTES:
        raise TraceError(
            f"trace {which} is {size_text(size)}; the limit is "
            f"{size_text(views_shared.TRACE_MAX_UPLOAD_BYTES)} (upload the .json.gz)"
        )
    if size == 0:
        raise TraceError(f"trace {which}: the file is empty")
    try:
        return load(path, max_bytes=views_shared.TRACE_MAX_EXPANDED_BYTES)
    except TraceError as exc:
        raise TraceError(f"trace {which}: {exc}") from None
    except UPLOAD_FAILURES:
        log.exception("reading uploaded trace %s failed", which)
        raise TraceError(f"trace {which} {UNREADABLE}") from None


def size_text(n: int) -> str:
    return (
        f"{n / 1024**2:,.1f} MiB".replace(".0 MiB", " MiB")
        if n >= 1024**2
        else f"{n / 1024:,.0f} KiB"
    )
