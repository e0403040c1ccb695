"""Issue 41: the upload memory budget is for all workers together (README: "of memory for all
uploads"), not for each: with a per-worker check, N uploads read at once could each take the
whole budget. Two real upload workers (started as run_upload starts them, each holding its
imports) are watched at once under a budget each fits alone and both do not: the watchdog's
check kills the larger one only, and says others were being read. Sizes are measured, not
assumed, so the test holds whatever the workers' imports weigh on this machine."""

from __future__ import annotations

import time

from profiling.views import upload_worker


def _settled_size(worker, tries: int = 100) -> int:
    """The worker's resident bytes once its imports are done (two equal readings 0.1 s apart)."""
    last = -1
    for _ in range(tries):
        size = upload_worker._resident(worker.process.pid)
        if size == last and size > 0:
            return size
        last = size
        time.sleep(0.1)
    return last


def test_the_memory_budget_is_for_all_workers_together(monkeypatch):
    workers = [upload_worker._start() for _ in range(2)]
    try:
        sizes = [_settled_size(worker) for worker in workers]
        assert min(sizes) > 10 * upload_worker.MiB, sizes  # numpy and pandas are in
        budget = max(sizes) + min(sizes) // 2  # room for either alone, not for both
        monkeypatch.setattr(upload_worker, "UPLOAD_MEMORY_BYTES", budget)
        now = time.monotonic()
        for worker in workers:
            worker.started = now
        upload_worker._Pool.check(workers, now)
        killed = [worker for worker in workers if worker.killed]
        assert [worker.killed for worker in killed] == ["memory"], sizes
        assert killed[0].shared  # its user is told others were being read
        assert killed[0].process.wait(timeout=30) != 0
        survivor = next(worker for worker in workers if not worker.killed)
        upload_worker._Pool.check([survivor], time.monotonic())  # alone it fits
        assert not survivor.killed and survivor.process.poll() is None
        said = upload_worker.over_memory(killed[0].shared)
        assert "other uploads were being read at the same time" in said
    finally:
        for worker in workers:
            worker.process.kill()
            worker.process.wait()
