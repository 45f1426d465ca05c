"""Lowering: a (passed) Graph -> operator functions in AOT order + a static memory plan.

1. Reshapes of constants are folded (a constant stays a constant).
2. Alias ops (reshape) put their input and output in one buffer *class* and generate no code, unless
   both ends are model inputs/outputs (then the kernel's copy runs).
3. Every other node becomes one operator function: its kernel is emitted into the operators file scope.
4. Liveness over the call order: a class is live from the step that writes it to the last step that
   reads it. An elementwise kernel may write its output over an input that dies at that step
   (`KernelCode.inplace`), merging the two classes. Model inputs are never written; classes holding a
   model input or output live in the caller's buffer, all others in the workspace pool.
5. `memory.place` assigns pool offsets; scratch buffers of kernels are live for their step only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from utvm.compiler import memory
from utvm.compiler.kernels import C_TYPES, FileScope, KernelCode, KernelContext, get_kernel, is_alias_op
from utvm.errors import CompileError
from utvm.ir.graph import Graph, Node

C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while _Bool _Complex _Imaginary".split())


def sanitize(name: str) -> str:
    """A tensor or model name as a C identifier fragment: non-alphanumerics -> '_' (DESIGN.md §7)."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s or "_"


@dataclass(frozen=True, slots=True)
class OperatorFunc:
    """One generated operator function and the node it computes."""

    name: str  # C symbol, tvmgen_<model>_<op>
    node_index: int
    node: Node
    inputs: tuple[str, ...]  # run-time input tensors, in parameter order (in0, in1, ...)
    outputs: tuple[str, ...]  # output tensors (out0, ...)
    code: KernelCode


@dataclass(frozen=True, slots=True)
class Copy:
    """A step of main that copies bytes into a model output (output = input, duplicated or constant)."""

    src: str
    dst_output: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class PlannedBuffer:
    id: int
    tensors: tuple[str, ...]
    size: int  # bytes (unaligned)
    start: int
    end: int
    offset: int  # in the workspace pool


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    algorithm: str
    workspace_bytes: int
    lower_bound_bytes: int
    optimal: bool
    no_reuse_bytes: int  # sum of aligned sizes: what a plan without reuse would need
    buffers: tuple[PlannedBuffer, ...]
    locations: dict[str, tuple[str, int]]  # tensor -> ("workspace", offset) | ("input"|"output", index)
    scratch: dict[str, int]  # operator function -> scratch offset
    aliases: int  # reshapes turned into aliases
    inplace: int  # operators writing over an input

    def to_json(self) -> dict:
        return {
            "algorithm": self.algorithm,
            "alignment": memory.ALIGNMENT,
            "workspace_bytes": self.workspace_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "optimal": self.optimal,
            "no_reuse_bytes": self.no_reuse_bytes,
            "aliases": self.aliases,
            "inplace": self.inplace,
            "buffers": [{"id": b.id, "tensors": list(b.tensors), "size": b.size, "offset": b.offset,
                         "live": [b.start, b.end]} for b in self.buffers],
            "locations": {t: [k, w] for t, (k, w) in self.locations.items()},
            "scratch": dict(self.scratch),
        }

    @staticmethod
    def from_json(d: dict) -> MemoryPlan:
        return MemoryPlan(
            algorithm=d["algorithm"], workspace_bytes=int(d["workspace_bytes"]),
            lower_bound_bytes=int(d["lower_bound_bytes"]), optimal=bool(d["optimal"]),
            no_reuse_bytes=int(d["no_reuse_bytes"]),
            buffers=tuple(PlannedBuffer(int(b["id"]), tuple(b["tensors"]), int(b["size"]), int(b["live"][0]),
                                        int(b["live"][1]), int(b["offset"])) for b in d["buffers"]),
            locations={t: (str(k), int(w)) for t, (k, w) in d["locations"].items()},
            scratch={k: int(v) for k, v in d["scratch"].items()},
            aliases=int(d["aliases"]), inplace=int(d["inplace"]))


@dataclass
class Lowered:
    graph: Graph
    model_name: str
    funcs: list[OperatorFunc]
    copies: list[Copy]
    plan: MemoryPlan
    ops_file: FileScope
    output_consts: dict[int, str] = field(default_factory=dict)  # output index -> constant tensor name


# --- 1. fold reshapes of constants -------------------------------------------------------------------------

def fold_constant_aliases(graph: Graph) -> Graph:
    tensors = dict(graph.tensors)
    nodes = []
    changed = False
    for node in graph.nodes:
        src = tensors.get(node.inputs[0]) if node.inputs else None
        if (is_alias_op(node.op) and src is not None and src.is_constant and len(node.outputs) == 1
                and node.outputs[0] not in graph.outputs):
            out = tensors[node.outputs[0]]
            tensors[out.name] = out.replace(data=np.asarray(src.data).reshape(out.shape).astype(out.dtype))
            changed = True
            continue
        nodes.append(node)
    return graph.replace(tensors=tensors).with_nodes(nodes) if changed else graph


# --- 2-5 ------------------------------------------------------------------------------------------------------

class _Classes:
    """Union-find over tensor names with the external binding of each class."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.external: dict[str, tuple[str, int]] = {}  # root -> ("input"|"output", index)

    def find(self, t: str) -> str:
        self.parent.setdefault(t, t)
        while self.parent[t] != t:
            self.parent[t] = self.parent[self.parent[t]]
            t = self.parent[t]
        return t

    def union(self, a: str, b: str) -> str:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        ext = self.external.pop(ra, None) or self.external.pop(rb, None)
        self.parent[rb] = ra
        if ext:
            self.external[ra] = ext
        return ra


def _func_name(prefix: str, node: Node, used: set[str]) -> str:
    act = node.attrs.get("activation", "none")
    base = f"{prefix}_fused_{sanitize(node.op)}" + (f"_{sanitize(str(act))}" if act not in ("none", None) else "")
    name, k = base, 1
    while name in used:
        name = f"{base}_{k}"
        k += 1
    used.add(name)
    return name


def lower(graph: Graph, model_name: str, rounding: str = "single", algorithm: str = memory.DEFAULT_ALGORITHM,
          progress: Callable[[str], None] | None = None) -> Lowered:
    prefix = f"tvmgen_{model_name}"
    graph = fold_constant_aliases(graph)
    for t in graph.tensors.values():
        if t.dtype not in C_TYPES:
            raise CompileError(f"tensor {t.name!r}: dtype {t.dtype} has no C type")
    for name in graph.inputs:
        if graph.tensor(name).is_constant:
            raise CompileError(f"model input {name!r} is a constant")

    cls = _Classes()
    copies: list[Copy] = []
    output_consts: dict[int, str] = {}
    for k, name in enumerate(graph.inputs):
        cls.external[cls.find(name)] = ("input", k)
    for k, name in enumerate(graph.outputs):
        t = graph.tensor(name)
        if t.is_constant:
            output_consts[k] = name
            copies.append(Copy(name, k, t.nbytes))
        elif cls.find(name) in cls.external:  # already a model input or an earlier output
            copies.append(Copy(name, k, t.nbytes))
        else:
            cls.external[cls.find(name)] = ("output", k)

    # Aliases first (they only join classes), then kernels for every node that is not an alias.
    aliased: set[int] = set()
    for i, node in enumerate(graph.nodes):
        if is_alias_op(node.op) and len(node.outputs) == 1 and node.inputs and node.inputs[0]:
            src, dst = node.inputs[0], node.outputs[0]
            if graph.tensor(src).nbytes != graph.tensor(dst).nbytes:
                raise CompileError(f"{node.label(i)}: an alias must keep the byte size")
            both_external = cls.find(src) in cls.external and cls.find(dst) in cls.external
            if not both_external and not graph.tensor(src).is_constant:
                cls.union(src, dst)
                aliased.add(i)

    ops_file = FileScope(prefix)
    funcs: list[OperatorFunc] = []
    used_names: set[str] = set()
    for i, node in enumerate(graph.nodes):
        if i in aliased:
            continue
        kernel = get_kernel(node, i)
        name = _func_name(prefix, node, used_names)
        rt_inputs = [(j, x) for j, x in enumerate(node.inputs) if x and not graph.tensor(x).is_constant]
        params = {j: f"in{k}" for k, (j, _x) in enumerate(rt_inputs)}
        ctx = KernelContext(node, i, graph, rounding, name, ops_file, params,
                            [f"out{k}" for k in range(len(node.outputs))])
        if progress:
            progress(f"kernel {name} ({node.label(i)})")
        code = kernel(ctx)
        if not isinstance(code, KernelCode):
            raise CompileError(f"{node.label(i)}: kernel returned {type(code).__name__}, not KernelCode")
        ops_file.uses_libm |= code.uses_libm
        funcs.append(OperatorFunc(name, i, node, tuple(x for _j, x in rt_inputs), tuple(node.outputs), code))

    plan = _plan(graph, funcs, cls, algorithm, len(aliased))
    return Lowered(graph, model_name, funcs, copies, plan, ops_file, output_consts)


def _plan(graph: Graph, funcs: list[OperatorFunc], cls: _Classes, algorithm: str, n_alias: int) -> MemoryPlan:
    nbytes = {name: t.nbytes for name, t in graph.tensors.items()}

    def liveness() -> tuple[dict[str, int], dict[str, int]]:
        start: dict[str, int] = {}
        end: dict[str, int] = {}
        for s, f in enumerate(funcs):
            for t in f.outputs:
                r = cls.find(t)
                start[r] = min(start.get(r, s), s)
                end[r] = max(end.get(r, s), s)
            for t in f.inputs:
                r = cls.find(t)
                end[r] = max(end.get(r, s), s)
                start.setdefault(r, s)
        return start, end

    # In-place: merge an elementwise output into an input class that dies at this step.
    n_inplace = 0
    start, end = liveness()
    for s, f in enumerate(funcs):
        if not f.code.inplace or not f.outputs:
            continue
        out = f.outputs[0]
        ro = cls.find(out)
        if cls.external.get(ro, ("", 0))[0] == "input":
            continue
        for j in f.code.inplace:
            x = f.node.inputs[j] if j < len(f.node.inputs) else ""
            if not x or x not in f.inputs:
                continue
            rx = cls.find(x)
            if rx == ro or rx in cls.external or end.get(rx) != s or nbytes[x] != nbytes[out]:
                continue
            # The class must not be read after this step under another name either (end == s covers it).
            cls.union(out, x)
            n_inplace += 1
            start, end = liveness()
            break

    # Buffers: internal classes and scratch areas.
    members: dict[str, list[str]] = {}
    for f in funcs:
        for t in (*f.inputs, *f.outputs):
            members.setdefault(cls.find(t), [])
    for name, t in graph.tensors.items():
        if not t.is_constant and cls.find(name) in members:
            if name not in members[cls.find(name)]:
                members[cls.find(name)].append(name)
    roots = [r for r in members if r not in cls.external]
    items: list[memory.Interval] = []
    root_of_id: dict[int, str] = {}
    for k, r in enumerate(roots):
        size = max(nbytes[t] for t in members[r])
        if r not in start:
            raise CompileError(f"tensor {r!r} is read but never written")
        items.append(memory.Interval(k, size, start[r], end[r]))
        root_of_id[k] = r
    scratch_ids: dict[int, str] = {}
    for s, f in enumerate(funcs):
        if f.code.scratch_bytes > 0:
            k = len(items)
            items.append(memory.Interval(k, f.code.scratch_bytes, s, s))
            scratch_ids[k] = f.name
    placement = memory.place(items, algorithm)

    locations: dict[str, tuple[str, int]] = {}
    buffers = []
    for it in items:
        if it.id in root_of_id:
            r = root_of_id[it.id]
            for t in members[r]:
                locations[t] = ("workspace", placement.offsets[it.id])
            buffers.append(PlannedBuffer(it.id, tuple(members[r]), it.size, it.start, it.end,
                                         placement.offsets[it.id]))
        else:
            buffers.append(PlannedBuffer(it.id, (f"scratch:{scratch_ids[it.id]}",), it.size, it.start, it.end,
                                         placement.offsets[it.id]))
    for r, ext in cls.external.items():
        for t in members.get(r, [r]):
            locations[t] = ext
        locations.setdefault(r, ext)
    for t in graph.inputs:
        locations.setdefault(t, cls.external.get(cls.find(t), ("input", graph.inputs.index(t))))
    return MemoryPlan(
        algorithm=algorithm,
        workspace_bytes=placement.size,
        lower_bound_bytes=placement.lower_bound,
        optimal=placement.optimal,
        no_reuse_bytes=sum(memory.align(it.size) for it in items),
        buffers=tuple(buffers),
        locations=locations,
        scratch={name: placement.offsets[k] for k, name in scratch_ids.items()},
        aliases=n_alias,
        inplace=n_inplace,
    )
