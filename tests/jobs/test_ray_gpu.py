"""Issue 41: Ray work placed on GPUs, one whole GPU per worker, and a point whose worker's CUDA
context broke run again on a fresh worker. A real local Ray cluster (ray.init) that declares
two GPUs: Ray hands each worker its GPU ids (CUDA_VISIBLE_DEVICES) whether or not CUDA is
there, which is what placement is about; the points (tests/jobs/ray_points.py) report what
their worker was given. The broken context is the point's doing, faked in the worker the
point ran on; Ray, the executor and the retry are the real ones."""

from __future__ import annotations

from functools import partial

import pytest
import ray

from profiling.jobs.executor import Hooks, PointJob
from profiling.jobs.ray import RayExecutor
from profiling.workload.spec import Workload
from tests.jobs import ray_points

HOOKS = Hooks(report=lambda fraction, text: None, before=lambda: None,
              ends_chain=lambda value: False)  # fmt: skip


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _job(index: int, run, out) -> PointJob:
    workload = Workload.from_user(variant="naive", device="auto", seq_len=32, batch=1, heads=2,
                                  head_dim=32, dtype="float32", steps=1)  # fmt: skip
    return PointJob(index, f"point {index}", workload, run, out / f"p{index}", ray_points.failed)


def test_each_gpu_point_runs_on_a_worker_with_a_whole_gpu_of_its_own(cluster, tmp_path):
    on_ray = RayExecutor(None)
    try:
        chains = [[_job(0, ray_points.where, tmp_path)], [_job(1, ray_points.where, tmp_path)]]
        answer = on_ray.run(chains, HOOKS)
        values = [chain[0].value for chain in answer]
        assert on_ray.kind == "GPU"
        assert [len(v["gpus"]) for v in values] == [1, 1]  # one GPU id each
        assert values[0]["gpus"] != values[1]["gpus"]  # never the same GPU
        assert values[0]["pid"] != values[1]["pid"]  # two workers, side by side
        assert ray.available_resources().get("GPU", 0) == 0  # two workers hold both GPUs
    finally:
        on_ray.close()


def test_a_point_from_a_broken_cuda_context_runs_again_on_a_fresh_worker(cluster, tmp_path):
    on_ray = RayExecutor(None, workers=1)
    try:
        job = _job(0, partial(ray_points.breaks_once, str(tmp_path)), tmp_path)
        (outcome,) = on_ray.run([[job]], HOOKS)[0]
        broken_pid = int((tmp_path / "broken").read_text())
        assert outcome.value == {"pid": outcome.value["pid"], "broken": False}  # the healthy run's
        assert outcome.value["pid"] != broken_pid  # on another worker
        assert outcome.placement.attempts == 2
    finally:
        on_ray.close()
