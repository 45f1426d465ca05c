"""utvm.compiler.footprint: the weights and scratch a schedule takes (what the tuning log records), and the
workspace a model's plan needs when operators ask for other scratch sizes (the RAM budget)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from utvm.compiler import compile
from utvm.compiler.footprint import constant_arrays, task_footprint, workspace_peak
from utvm.compiler.lower import lower
from utvm.errors import CompileError
from utvm.frontend import load
from utvm.support import cc
from utvm.support.models import models_dir
from utvm.target import get_target
from utvm.tune.tasks import Task, extract_tasks

KWS = models_dir() / "mlperf_tiny" / "kws_ref_model.tflite"


def pointwise_task() -> Task:
    """KWS's 1x1 convolution: four nodes of one workload (int8 weights 64x64 each)."""
    return next(t for t in extract_tasks(KWS, "cortex-m4", "double") if t.count == 4 and t.workload["op"] == "conv2d")


def gemm_point(task: Task, **knobs: object) -> dict:
    return next(p for p in task.space.points() if p.get("algo") == "gemm"
                and all(p.get(k) == v for k, v in knobs.items()))


def test_pre_widened_weights_take_more_flash_and_count_once_per_node() -> None:
    task = pointwise_task()
    one = dataclasses.replace(task, count=1)
    i8, i16 = gemm_point(task, w_fmt="i8"), gemm_point(task, w_fmt="i16")
    a8 = task_footprint(one.graph, one.key, i8, one.target, one.rounding, 1)
    a16 = task_footprint(one.graph, one.key, i16, one.target, one.rounding, 1)
    assert a8.weights >= 64 * 64  # the int8 weights at least
    assert a16.weights - a8.weights == 64 * 64  # the int16 copy: one more byte per weight
    four = task_footprint(task.graph, task.key, i16, task.target, task.rounding, task.count)
    assert four.weights == 4 * a16.weights  # every node has its own weights and tables


def test_scratch_is_what_the_compiled_operator_asks_for() -> None:
    task = pointwise_task()
    for point in (task.space.default, gemm_point(task, px_block=1), gemm_point(task, px_block=4)):
        fp = task_footprint(task.graph, task.key, point, task.target, task.rounding, task.count)
        compiled = compile(task.graph, target=task.target, rounding=task.rounding, schedules={task.key: point},
                           passes=False, task_counts={task.key: task.count})
        assert fp.scratch == compiled.operators[0].scratch_bytes
    assert (task_footprint(task.graph, task.key, gemm_point(task, px_block=4), task.target, task.rounding).scratch
            > task_footprint(task.graph, task.key, gemm_point(task, px_block=1), task.target, task.rounding).scratch)


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("arm-none-eabi-size") is None,
                    reason="needs the Arm toolchain")
def test_the_constant_bytes_are_what_the_c_compiler_puts_in_rodata(tmp_path: Path) -> None:
    """Each array the footprint counts is a data section of exactly that size in the compiled object, and
    every data section of the operators file is an array it counts: KWS's pre-widened GEMM on the M4 and
    every default Helium kernel of KWS on the M55 (their weight and requantization tables)."""
    m4 = pointwise_task()
    cases = [(m4, gemm_point(m4, w_fmt="i16"))]
    cases += [(t, t.space.default) for t in extract_tasks(KWS, "cortex-m55", "double")]
    for task, point in cases:
        lowered = lower(task.graph, "fp", task.rounding, target=task.target, schedules={task.key: point})
        arrays = constant_arrays(lowered.ops_file)
        assert arrays or task.workload["op"] == "avg_pool2d", task.key  # a pool has no constants
        compiled = compile(task.graph, model_name="fp", target=task.target, rounding=task.rounding,
                           schedules={task.key: point}, passes=False, unpacked_api=True)
        src = tmp_path / "ops.c"
        src.write_text(compiled.sources["tvmgen_fp_ops.c"])
        obj = tmp_path / "ops.o"
        subprocess.run(["arm-none-eabi-gcc", *get_target(task.target).cpu_flags, "-std=c99", "-O2",
                        "-fdata-sections", f"-I{cc.crt_dir() / 'include'}", "-c", str(src), "-o", str(obj)],
                       check=True)
        out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], capture_output=True, text=True,
                             check=True).stdout
        sections = {m[1]: int(m[2]) for m in re.finditer(r"^\.rodata\.(\S+)\s+(\d+)", out, re.MULTILINE)
                    if not m[1].startswith("str")}
        assert sections == {a.name: a.nbytes for a in arrays}, task.key
        assert sum(a.nbytes for a in arrays) == task_footprint(task.graph, task.key, point, task.target,
                                                               task.rounding).weights


def test_a_schedule_the_kernel_refuses_has_no_footprint() -> None:
    task = pointwise_task()
    with pytest.raises(CompileError, match=f"task {task.key}: the kernel refused the schedule"):
        task_footprint(task.graph, task.key, {"algo": "gemm", "px_block": 3}, task.target, task.rounding)


def test_the_workspace_peak_is_the_plan_not_the_sum_of_the_scratch_areas(small_model: Path) -> None:
    """The small model: conv3x3 (step 0) writes y1, the two 1x1 convs (steps 1, 2) read one 288-byte tensor
    and write another, dense (step 3) reads the last; at most two of them are live: 576 bytes."""
    compiled = compile(load(small_model), target="host")
    ops = compiled.operators
    steps = {op.name: s for s, op in enumerate(ops)}
    assert [op.scratch_bytes for op in ops] == [0, 0, 0, 0] and compiled.plan.workspace_bytes == 576
    assert workspace_peak(compiled.plan, steps, {}) == 576
    first, middle, last = ops[0].name, ops[1].name, ops[3].name
    assert workspace_peak(compiled.plan, steps, {first: 288}) == 576  # fits beside y1 while y2 is not live yet
    assert workspace_peak(compiled.plan, steps, {first: 288, last: 288}) == 576
    assert workspace_peak(compiled.plan, steps, {first: 289}) == 576 + 16  # one more aligned block
    assert workspace_peak(compiled.plan, steps, {middle: 16}) == 576 + 16  # two tensors live there already
    # A model whose operators have scratch: resized, dropped, or as they were.
    kws = compile(load(KWS), target="cortex-m4", rounding="double")
    ksteps = {op.name: s for s, op in enumerate(kws.operators)}
    assert workspace_peak(kws.plan, ksteps, {}) == kws.plan.workspace_bytes
    same = {op.name: op.scratch_bytes for op in kws.operators}
    assert workspace_peak(kws.plan, ksteps, same) == kws.plan.workspace_bytes
    none = {op.name: 0 for op in kws.operators}
    assert workspace_peak(kws.plan, ksteps, none) <= kws.plan.workspace_bytes
    with pytest.raises(CompileError, match="operator function nowhere: not in the model's plan"):
        workspace_peak(kws.plan, ksteps, {"nowhere": 16})
