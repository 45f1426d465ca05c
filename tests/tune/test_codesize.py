"""utvm.tune.codesize: the machine code a schedule puts in a firmware, as the tuning log records it."""

from __future__ import annotations

import dataclasses

from utvm.support.models import models_dir
from utvm.tune.codesize import code_bytes
from utvm.tune.tasks import extract_tasks

KWS = models_dir() / "mlperf_tiny" / "kws_ref_model.tflite"

def pointwise_task():  # noqa: ANN201 - a Task
    """KWS's 1x1 convolution: four nodes of one workload."""
    tasks = extract_tasks(KWS, "cortex-m4", "double")
    return next(t for t in tasks if t.count == 4 and t.workload["op"] == "conv2d")


def test_a_per_layer_kernel_counts_once_per_node_a_shared_one_once() -> None:
    task = pointwise_task()
    point = {**task.space.default, "share": False}
    one = code_bytes(dataclasses.replace(task, count=1), point, "cortex-m4")
    four = code_bytes(task, point, "cortex-m4")
    assert one is not None and one > 100 and four == 4 * one
    shared = {**point, "share": True}
    s1 = code_bytes(dataclasses.replace(task, count=1), shared, "cortex-m4")
    s4 = code_bytes(task, shared, "cortex-m4")
    assert s1 is not None and s4 is not None
    assert s4 < four  # four calls of one function take less than four copies of it
    assert s1 < s4 < s1 + 4 * 64  # each more node adds only its call


def test_unrolling_costs_code() -> None:
    task = pointwise_task()
    u1 = code_bytes(task, {**task.space.default, "unroll": 1}, "cortex-m4")
    u4 = code_bytes(task, {**task.space.default, "unroll": 4}, "cortex-m4")
    assert u1 is not None and u4 is not None and u4 > u1


def test_the_host_target_is_measured_with_the_host_compiler() -> None:
    task = extract_tasks(KWS, "host", "double")[0]
    assert (code_bytes(task, task.space.default, "host") or 0) > 0


def test_every_task_of_an_mve_build_is_measured() -> None:
    """Helium code needs the hard-float ABI the target's flags carry (<arm_mve.h> refuses a soft-float build):
    each of KWS's cortex-m55 tasks gets a code size."""
    for task in extract_tasks(KWS, "cortex-m55", "double"):
        assert (code_bytes(task, task.space.default, "cortex-m55") or 0) > 0, task.key
