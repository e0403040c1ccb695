"""Issue 41: the worker pool on a machine with one GPU (a local cluster told it has one). GPU
points get a worker holding that whole GPU, and no more workers than GPUs however many points
there are: a second GPU worker would wait for a GPU that never frees. Apart from
tests/jobs/test_ray_schedule.py, whose cluster has three GPUs (one is where the rule's bound
shows)."""

from __future__ import annotations

import pytest
import ray

from profiling.jobs.ray import RayExecutor
from tests.jobs import ray_points
from tests.jobs.ray_points import Said, point_job


@pytest.fixture(scope="module")
def one_gpu():
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_gpu_points_take_turns_on_the_one_gpus_worker(one_gpu, tmp_path):
    executor = RayExecutor(None)
    try:
        chains = [[point_job(i, tmp_path, ray_points.where, device="auto")] for i in (0, 1)]
        values = [chain[0].value for chain in executor.run(chains, Said().hooks())]
        assert executor.kind == "GPU" and executor._pool_options["num_gpus"] == 1
        assert len(executor._pool) == 1  # one GPU: one worker, whatever the points
        assert [len(v["gpus"]) for v in values] == [1, 1]  # each ran holding the GPU
        assert values[0]["pid"] == values[1]["pid"]  # one after the other, on that worker
    finally:
        executor.close()


def test_a_job_of_one_point_starts_one_worker_however_many_are_allowed(one_gpu, tmp_path):
    executor = RayExecutor(None, workers=2)
    try:
        executor.run([[point_job(0, tmp_path)]], Said().hooks())
        assert executor.kind == "CPU" and len(executor._pool) == 1  # not the two allowed
    finally:
        executor.close()
