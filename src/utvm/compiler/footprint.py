"""What a schedule costs in memory besides its machine code: constant bytes in flash and scratch bytes in the
workspace (the tuning log's `weights` and `scratch`, docs/tuning.md), and the workspace a model needs when its
operators ask for other scratch sizes (the RAM budget of applying a tuning log, utvm.tune.budget).

Both figures are read where the compiler knows them, from the lowering of a graph (utvm.compiler.lower),
without building anything:

- **weights**: the file-scope constant arrays the kernels emitted, as the file records each when it is
  declared (`FileScope.arrays`: name -> bytes), whichever path made it: the model's constants
  (`FileScope.constant`), a kernel's tables (`ctx.table`: requantization tables, weights pre-widened to
  int16 or reordered for a GEMM) and the GEMM's word tables. (`FileScope.constant_bytes` counts some of
  these only.) An array is the node's own when it is one of the node's constants or its name starts with the
  operator function's name (`ctx.table` names tables so); any other array is shared by the file and counts
  once however many nodes the task has.
- **scratch**: `KernelCode.scratch_bytes` of the operator function: the buffer the memory planner places at
  the operator's step, live during that call only.

`workspace_peak` plans a compiled model's buffers again with some operators' scratch sizes replaced: the
tensors, their lifetimes, in-place merges and state blocks are those of the model's plan, so only what the
schedules change (their scratch) changes, and the planner (utvm.compiler.memory) says what the peak is; the
peak is not the sum of the scratch areas, a larger scratch may fit where a dead tensor was.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from utvm.compiler import memory
from utvm.compiler.kernels import FileScope
from utvm.compiler.lower import MemoryPlan, lower
from utvm.compiler.schedule import Schedule
from utvm.errors import CompileError
from utvm.ir.graph import Graph
from utvm.target import Target


@dataclass(frozen=True, slots=True)
class ConstantArray:
    name: str
    nbytes: int


def constant_arrays(file: FileScope) -> list[ConstantArray]:
    """The file-scope constant arrays of `file` (one generated C file), in declaration order, with their
    bytes, as the file recorded them when they were declared (`FileScope.arrays`)."""
    return [ConstantArray(name, nbytes) for name, nbytes in file.arrays.items()]


@dataclass(frozen=True, slots=True)
class TaskFootprint:
    """Memory one schedule of a task takes besides code."""

    #: bytes of constant arrays in flash for `count` nodes of the task: the node's own arrays once per node,
    #: arrays shared by the file once
    weights: int
    #: bytes of the scratch buffer one call asks for (each node has its own, live during its call only)
    scratch: int


def task_footprint(graph: Graph, task: str, schedule: Schedule, target: Target | str, rounding: str,
                   count: int = 1) -> TaskFootprint:
    """The footprint of `schedule` for the task `task` of `graph`, a graph of one node of the task past the
    compiler's passes (utvm.tune.tasks.Task.graph), for `count` nodes of it (the model's). A schedule the
    kernel refuses is a CompileError (its footprint would be the default point's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a refused schedule is reported below, once
        lowered = lower(graph, "fp", rounding, target=target, schedules={task: dict(schedule)},
                        task_counts={task: count})
    funcs = [f for f in lowered.funcs if f.task == task]
    if len(funcs) != 1:
        raise CompileError(f"task {task}: the graph has {len(funcs)} operator(s) of the task, not one")
    f = funcs[0]
    if f.schedule_source != "given":
        raise CompileError(f"task {task}: the kernel refused the schedule {dict(schedule)}")
    own = set(lowered.ops_file.constants.values())
    per_node = shared = 0
    for a in constant_arrays(lowered.ops_file):
        if a.name in own or a.name.startswith(f"{f.name}_"):
            per_node += a.nbytes
        else:
            shared += a.nbytes
    return TaskFootprint(per_node * max(int(count), 1) + shared, int(f.code.scratch_bytes))


def workspace_peak(plan: MemoryPlan, steps: Mapping[str, int], scratch: Mapping[str, int],
                   algorithm: str = memory.DEFAULT_ALGORITHM,
                   pools: Sequence[memory.PoolSpec] = ()) -> int:
    """The workspace bytes of `plan` (a compiled model's) when the operator functions named in `scratch` ask
    for that many scratch bytes instead: the same buffers and lifetimes, the scratch areas resized (added at
    the operator's step `steps[name]` when the plan had none, dropped at 0), planned again with `algorithm`.
    With `pools` (--memory-pool), the plan must also fit them: a CompileError naming the overflow if not.
    Every operator's scratch area in `plan` is named `scratch:<function>` (compiler.lower)."""
    items: list[memory.Interval] = []
    seen: set[str] = set()
    for b in plan.buffers:
        size = b.size
        tag = b.tensors[0] if b.tensors else ""
        if tag.startswith("scratch:") and tag[len("scratch:"):] in scratch:
            name = tag[len("scratch:"):]
            seen.add(name)
            size = int(scratch[name])
            if size <= 0 and len(b.tensors) == 1:  # no scratch: no buffer (a user operator's area holds outputs)
                continue
        items.append(memory.Interval(b.id, size, b.start, b.end))
    next_id = max((it.id for it in items), default=-1) + 1
    for name, size in scratch.items():
        if name in seen or int(size) <= 0:
            continue
        if name not in steps:
            raise CompileError(f"operator function {name}: not in the model's plan")
        items.append(memory.Interval(next_id, int(size), steps[name], steps[name]))
        next_id += 1
    if not items:
        return 0
    if pools:
        memory.place_pools(items, pools, algorithm)
    return memory.place(items, algorithm).size
