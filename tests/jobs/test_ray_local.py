"""`--ray` with no address, on a machine where no Ray cluster runs: the executor starts one
here. Apart from tests/jobs/test_ray_schedule.py, whose module-wide cluster would already be
running whenever this ran after one of its tests (mutmut orders tests by duration)."""

from __future__ import annotations

import logging
import os
import threading

import ray
import torch

from profiling.jobs.ray import RayExecutor
from tests.jobs.ray_points import Said, point_job


def test_with_no_cluster_running_the_executor_starts_one_here(tmp_path):
    """RayExecutor(None) as the CLI's --ray makes it starts a local cluster with every CPU (and
    GPU) of the machine, quiet: Ray's own lines from WARNING up, no workers' prints, no
    dashboard."""
    assert not ray.is_initialized()
    executor = RayExecutor(None, workers=1)
    try:
        (outcome,) = executor.run([[point_job(0, tmp_path)]], Said().hooks())[0]
        assert outcome.value.label == "naive 32" and ray.is_initialized()
        assert ray.cluster_resources()["CPU"] == os.cpu_count()
        assert ray.cluster_resources().get("GPU", 0) == torch.cuda.device_count()
        assert logging.getLogger("ray").level == logging.WARNING
        assert "ray_print_logs" not in {thread.name for thread in threading.enumerate()}
        assert ray._private.worker._global_node.webui_url == ""
        # a point that may take a GPU gets one where this machine has one, else a CPU worker
        auto = [[point_job(1, tmp_path, device="auto")]]
        assert executor.run(auto, Said().hooks())[0][0].value.label == "naive 32"
        assert executor.kind == ("GPU" if torch.cuda.device_count() else "CPU")
    finally:
        executor.close()
        ray.shutdown()
