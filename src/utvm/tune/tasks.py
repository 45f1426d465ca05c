"""Tuning tasks: the distinct workloads of a model's kernels that have choices (docs/architecture.md §11).

    tasks = extract_tasks("kws_ref_model.tflite", "cortex-m4", rounding="double")
    for t in tasks:
        print(t.key, t.description, t.count, t.space.size, t.space.default)

A task is one workload (op, shapes, dtypes, quantization class, attributes, rounding, target) of a node
whose kernel registered a schedule space; nodes with the same workload share one task (`count` says how
many) and one schedule. The model goes through the compiler's passes first and the tasks come from the
same `KernelContext`s the lowering emits its kernels in (`utvm.compiler.lower.kernel_contexts`), so a task
key here is the key `compile` looks up in `schedules=` and records in metadata.json (`operator_functions[*]
.task`). Keys are stable: the same model on the same target with the same rounding gives the same keys on
every run and machine.

`Task.graph` is a graph of the first node of the task alone: its constant inputs with their data, its
run-time inputs as graph inputs and its outputs as graph outputs. The tuner compiles candidates from it
(`compile(task.graph, passes=False, ...)`: it is already past the passes) and checks them against
`utvm.ir.run_reference` of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from utvm.compiler.schedule import Space, describe_workload
from utvm.ir.graph import Graph, Node
from utvm.target import Target, get_target


@dataclass(frozen=True)
class Task:
    """One distinct workload with a schedule space."""

    key: str  # utvm.compiler.schedule.task_key of the workload
    workload: Mapping[str, Any]
    description: str  # one readable line (schedule.describe_workload)
    space: Space  # with its default point
    count: int  # nodes of the model that share this workload
    graph: Graph  # the first such node alone (see the module docstring)
    node: str  # the label of that node in the compiled graph
    target: str
    rounding: str

    @property
    def op(self) -> str:
        return str(self.workload.get("op", ""))


def node_graph(graph: Graph, node: Node, name: str = "task") -> Graph:
    """`node` alone: its constant inputs (with data), its run-time inputs as graph inputs (each once, in
    order of first use), its outputs as graph outputs."""
    names = [x for x in (*node.inputs, *node.outputs) if x]
    tensors = {x: graph.tensor(x) for x in names}
    inputs: list[str] = []
    for x in node.inputs:
        if x and not tensors[x].is_constant and x not in inputs:
            inputs.append(x)
    return Graph(tensors, (node,), tuple(inputs), tuple(node.outputs), name=name)


def _load(model: Graph | str | os.PathLike[str]) -> Graph:
    if isinstance(model, Graph):
        return model
    from utvm.errors import UsageError
    from utvm.frontend import load

    path = Path(model)
    if not path.is_file():
        raise UsageError(f"{path}: no such model file" if not path.exists() else f"{path}: not a model file")
    return load(path)


def extract_tasks(model: Graph | str | os.PathLike[str], target: Target | str = "host",
                  rounding: str = "single", passes: bool = True) -> list[Task]:
    """The tasks of `model` (a Graph as imported, or a .tflite/.onnx path) on `target`, in the order their
    first node runs. `passes=False` for a graph that is already past the compiler's passes."""
    from utvm.compiler.driver import CompileOptions, run_passes
    from utvm.compiler.kernels import get_kernel, get_space
    from utvm.compiler.lower import fold_constant_aliases, kernel_contexts

    tgt = get_target(target)
    CompileOptions(rounding=rounding, target=tgt.name).validate()
    graph = _load(model)
    if passes:
        graph, _log = run_passes(graph)
    graph = fold_constant_aliases(graph)
    found: dict[str, dict[str, Any]] = {}
    for ctx in kernel_contexts(graph, "task", rounding, tgt):
        get_kernel(ctx.node, ctx.index)  # an unsupported operator fails here, as it would in compile
        space = get_space(ctx)
        if not space.knobs:
            continue
        key = ctx.task_key()
        if key in found:
            found[key]["count"] += 1
            continue
        workload = ctx.workload()
        found[key] = {"workload": workload, "space": space, "count": 1, "node": ctx.label,
                      "graph": node_graph(graph, ctx.node, "task")}
    return [Task(key, d["workload"], describe_workload(d["workload"]), d["space"], d["count"], d["graph"],
                 d["node"], tgt.name, rounding) for key, d in found.items()]
