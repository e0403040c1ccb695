"""Uploaded traces (Analyse, Diff) are read in a worker process, bounded in memory and in time.

    python -m profiling.views.upload_worker   (started by run_upload, never by hand)

A stranger's upload must not take the server down for everyone: whatever its bytes make the
reader do, it happens in a child process. One watchdog thread here polls every running worker
(with its own helper processes, profiling.trace.helper): past UPLOAD_SECONDS, or when the
workers together hold more than UPLOAD_MEMORY_BYTES, the worker (the largest one, for memory)
is killed with its process group, its user told why, and its memory is the kernel's again. Each
worker also runs under RLIMIT_AS, so one allocation too big to be seen by polling fails in the
worker (MemoryError) instead of growing the server's family. The server never holds the trace.

A plain child process, like trace_helper and for its reason: multiprocessing's spawn and
forkserver import the parent's `__main__` (app.py: gradio, torch, the page) in the child. The
worker is a session leader and not daemonic, so it may start the reader's helpers, and the
kill reaches them. One worker is kept started and idle (its imports take ~0.4 s, a small
trace's whole analysis ~0.2 s); it takes one task and exits, so nothing of a trace outlives
it. Task and answer travel as pickles over its stdin and stdout; only this module's own code
runs there, and the answer (the view's tables and figure, as plain data) is what the page shows.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from profiling.trace.events import TraceError
from profiling.user_values import ConfigError

log = logging.getLogger(__name__)
MiB = 1024**2


def _env_number(name: str, default: float) -> float:
    """A positive limit from the environment, or the default (a bad value is said in the log)."""
    raw = os.environ.get(name, "")
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = 0.0
    if not value > 0:
        log.warning("%s=%r is not a positive number; using %g", name, raw, default)
        return default
    return value


# -- the limits (README's "Limits" section quotes these) -------------------------------------
# Memory of all upload workers together, with their helpers (RSS): with the server's own
# ~0.58 GB and the idle worker's ~0.12 GB, the Space stays under 3 GB. One may use all of it.
UPLOAD_MEMORY_BYTES = int(_env_number("ATTNPROF_UPLOAD_MEMORY_MB", 2048) * MiB)
# Wall-clock seconds one upload may be read for (inside the 60 s a request may take).
UPLOAD_SECONDS = _env_number("ATTNPROF_UPLOAD_SECONDS", 50)
# Address space one worker may reserve: the budget, plus what its libraries map and never
# touch (numpy, pandas and plotly imported: 1.4 GB of address space, 0.12 GB resident).
ADDRESS_SLACK_BYTES = 1536 * MiB
POLL_SECONDS = 0.02  # how often the watchdog looks (a reader can grow ~0.1 GB in 50 ms)
# A read that has taken LONG_READ_SECONDS yields the CPU (nice 19: ~1/70 of a nice-0 thread's
# share) to new, small reads, to the server and to a run being timed on a CPU-only machine.
LONG_READ_SECONDS = 1.0
LONG_READ_NICENESS = 19

TASKS: dict[str, tuple[str, str]] = {  # what a worker may be asked to do: module, function
    "analyze": ("profiling.views.analyze", "analyze_page"),
    "diff": ("profiling.views.diff", "diff_upload_page"),
    # a stored trace (History) is a stranger's bytes too: a store may have been imported
    "stored": ("profiling.views.history", "stored_trace_figures"),
    "stored_diff": ("profiling.views.history", "diff_stored"),
    "stored_model": ("profiling.views.model.stored", "stored_model_gantt"),  # issue 43
}
USER_ERRORS: dict[str, type[Exception]] = {"TraceError": TraceError, "ConfigError": ConfigError}
# The server's upload limits travel with each task, so the server alone decides them.
SENT_LIMITS = ("TRACE_MAX_UPLOAD_BYTES", "TRACE_MAX_EXPANDED_BYTES")  # of profiling.views.shared


def memory_text(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB"


def over_memory(shared: bool) -> str:
    others = " (other uploads were being read at the same time: try again in a minute)"
    return (
        f"this trace needed more than the {memory_text(UPLOAD_MEMORY_BYTES)} of memory the "
        f"Space has for reading uploads{others if shared else ''}; it reads traces of up to "
        "about 10⁷ events (profile fewer steps, or analyse it on your own machine with "
        "`python -m profiling analyze`)"
    )


def over_time() -> str:
    return (
        f"reading this trace took longer than {UPLOAD_SECONDS:g} s, the Space's limit for one "
        "upload (profile fewer steps, or analyse it on your own machine with "
        "`python -m profiling analyze`)"
    )


# -- the worker process ------------------------------------------------------------------------
def _limit_self() -> None:
    """Run under the address-space cap (the reader's helpers inherit it)."""
    import resource

    cap = UPLOAD_MEMORY_BYTES + ADDRESS_SLACK_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _out_of_memory(exc: BaseException) -> bool:
    """A MemoryError anywhere in the chain, in a helper's words, or a thread that could not
    start (its stack is address space too)."""
    seen: BaseException | None = exc
    while seen is not None:
        text = str(seen)
        if isinstance(seen, MemoryError) or "MemoryError" in text:
            return True
        if isinstance(seen, RuntimeError) and "can't start new thread" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _near_cap() -> bool:
    """Whether this worker's address space came within 256 MiB of its cap: a failure then is
    one of memory, whatever exception the allocation that failed turned into."""
    import resource

    cap = resource.getrlimit(resource.RLIMIT_AS)[0]
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmPeak:"))
    return cap != resource.RLIM_INFINITY and peak > cap - 256 * MiB


def _answer(task: str, args: tuple[Any, ...], send: Callable[[Any], None]) -> Any:
    module, name = TASKS[task]
    from profiling.views import shared as views_shared

    limits = args[-1]
    for limit in SENT_LIMITS:
        setattr(views_shared, limit, int(limits[limit]))
    args = args[:-1]
    fn = getattr(importlib.import_module(module), name)
    if task == "analyze":
        return ("ok", fn(*args, progress=lambda f, text: send(("progress", f, text))))
    return ("ok", fn(*args))


def serve(source: IO[bytes], sink: IO[bytes]) -> None:
    """One task from `source`, its answer (progress first) to `sink`."""

    def send(message: Any) -> None:
        pickle.dump(message, sink, protocol=pickle.HIGHEST_PROTOCOL)
        sink.flush()

    try:
        task, args = pickle.load(source)
    except EOFError:  # the server went away before giving a task
        return
    try:
        answer: Any = _answer(task, args, send)
        send(answer)
        return
    except (TraceError, ConfigError) as exc:  # subclasses (TraceTooBig) as their base
        kind = next(name for name, base in USER_ERRORS.items() if isinstance(exc, base))
        answer = ("user", kind, str(exc))
    except BaseException as exc:
        if _out_of_memory(exc) or _near_cap():
            answer = ("memory", "", "")
        else:
            log.exception("reading an uploaded trace failed")
            answer = ("error", type(exc).__name__, str(exc)[:500])
    send(answer)


def main() -> None:
    logging.basicConfig(level=logging.INFO)
    _limit_self()
    sink = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print cannot corrupt an answer
    for module, _ in TASKS.values():
        importlib.import_module(module)  # while idle, so a task starts at once
    serve(sys.stdin.buffer, sink)


# -- the server's side -------------------------------------------------------------------------
@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    started: float = 0.0  # when it was given its task (0: idle)
    killed: str = ""  # why the watchdog killed it: "memory" or "time"
    shared: bool = False  # other workers were running when it was killed for memory
    yielded: bool = False  # reading long enough to run at LONG_READ_NICENESS


def _start() -> _Worker:
    from profiling.trace.scan import said_for_children  # the scanner's state, said here once

    root = str(Path(__file__).resolve().parents[2])  # the checkout, whatever the cwd
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        "MALLOC_ARENA_MAX": "2",  # fewer 64 MiB arenas reserved per thread under RLIMIT_AS
        **said_for_children(),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "profiling.views.upload_worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own process group: a kill takes its helpers too
    )
    return _Worker(process)


def _resident(pid: int) -> int:
    """Bytes resident in `pid` and its descendants (children of any of its threads)."""
    try:
        with open(f"/proc/{pid}/statm") as statm:
            total = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                total += sum(_resident(int(child)) for child in children.read().split())
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _kill(worker: _Worker, why: str) -> None:
    if not worker.killed:
        worker.killed = why
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(worker.process.pid, signal.SIGKILL)


def _yield_cpu(worker: _Worker) -> None:
    """Every thread of the worker and of its helpers (its process group) at nice 19."""
    worker.yielded = True
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PGRP, worker.process.pid, LONG_READ_NICENESS)


@dataclass(eq=False)
class _Pool:
    """The running workers, one idle worker kept started, and the watchdog over them."""

    running: list[_Worker] = field(default_factory=list)
    idle: _Worker | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    watching: bool = False
    work: threading.Event = field(default_factory=threading.Event)  # set while any is running

    def take(self) -> _Worker:
        with self.lock:
            worker, self.idle = self.idle, None
            if worker is None or worker.process.poll() is not None:
                worker = _start()
            worker.started = time.monotonic()
            self.running.append(worker)
            self.work.set()
            if not self.watching:
                self.watching = True
                threading.Thread(target=self._watch, name="upload-watchdog", daemon=True).start()
        threading.Thread(target=self.warm, name="upload-worker-start", daemon=True).start()
        return worker

    def warm(self) -> None:
        """Start the idle worker, if none is waiting."""
        with self.lock:
            if self.idle is None or self.idle.process.poll() is not None:
                self.idle = _start()

    def release(self, worker: _Worker) -> None:
        with self.lock:
            self.running.remove(worker)
        _kill(worker, "")
        worker.process.wait()

    def _watch(self) -> None:
        while True:
            self.work.wait()  # no polling while nothing is read
            time.sleep(POLL_SECONDS)
            with self.lock:
                busy = list(self.running)
                if not busy:
                    self.work.clear()
            self.check(busy, time.monotonic())

    @staticmethod
    def check(busy: list[_Worker], now: float) -> None:
        """Kill a worker past its time, then the largest while all hold more than the budget."""
        sizes = {}
        for worker in busy:
            if now - worker.started > UPLOAD_SECONDS:
                _kill(worker, "time")
            elif not worker.killed:
                sizes[worker] = _resident(worker.process.pid)
                if not worker.yielded and now - worker.started > LONG_READ_SECONDS:
                    _yield_cpu(worker)
        while sizes and sum(sizes.values()) > UPLOAD_MEMORY_BYTES:
            largest = max(sizes, key=sizes.__getitem__)
            largest.shared = len(sizes) > 1
            _kill(largest, "memory")
            del sizes[largest]


POOL = _Pool()


def run_upload(task: str, *args: Any, progress: Callable[[float, str], None] | None = None) -> Any:
    """TASKS[task](*args) in a worker process, bounded; its result, or the error it raised.

    Raises TraceError when the worker ran out of memory or time (saying which), and the
    worker's own TraceError / ConfigError with its message."""
    from profiling.views import shared as views_shared

    limits = {limit: getattr(views_shared, limit) for limit in SENT_LIMITS}
    worker = POOL.take()
    try:
        assert worker.process.stdin is not None and worker.process.stdout is not None
        try:
            task_data = (task, (*map(_plain, args), limits))
            pickle.dump(task_data, worker.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            worker.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died before its task: said below
        answer = _receive(worker.process.stdout, progress)
    finally:
        POOL.release(worker)
    return _result(worker, answer)


def _plain(value: Any) -> Any:
    """A page's upload path as a plain str: Gradio hands a str subclass (gradio.utils.NamedString)
    whose pickle made every worker import gradio before its task, 2 of a small upload's 2.4 s."""
    return str(value) if isinstance(value, str) else value


def _receive(stdout: IO[bytes], progress: Callable[[float, str], None] | None) -> Any:
    while True:
        try:
            message = pickle.load(stdout)
        except (EOFError, pickle.UnpicklingError):
            return None  # killed, or died: the caller says which
        if message[0] != "progress":
            return message
        if progress is not None:
            progress(message[1], message[2])


def _result(worker: _Worker, answer: Any) -> Any:
    if answer is not None and answer[0] == "ok":  # done before the watchdog's kill landed
        return answer[1]
    if worker.killed == "time":
        raise TraceError(over_time())
    if worker.killed == "memory" or (answer is not None and answer[0] == "memory"):
        raise TraceError(over_memory(worker.shared))
    if answer is None:
        raise RuntimeError(
            f"the upload worker ended without an answer (exit code {worker.process.returncode})"
        )
    kind, *rest = answer
    if kind == "user":
        raise USER_ERRORS[rest[0]](rest[1])
    raise RuntimeError(f"the upload worker failed: {rest[0]}: {rest[1]}")


if __name__ == "__main__":
    main()
