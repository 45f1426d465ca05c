"""Lowering: a (passed) Graph -> operator functions in AOT order + a static memory plan.

1. Reshapes of constants are folded (a constant stays a constant).
2. Alias ops (reshape) put their input and output in one buffer *class* and generate no code, unless
   both ends are model inputs/outputs (then the kernel's copy runs).
3. Every other node becomes one operator function: its kernel is emitted into the operators file scope.
4. Liveness over the call order: a class is live from the step that writes it to the last step that
   reads it. An elementwise kernel may write its output over an input that dies at that step
   (`KernelCode.inplace`), merging the two classes. Model inputs are never written; classes holding a
   model input or output live in the caller's buffer, all others in the workspace pool.
5. `memory.place` assigns pool offsets; scratch buffers of kernels are live for their step only, persistent
   state blocks (`KernelCode.persistent_bytes`) for every step and across runs (`memory.persistent`).
   A user operator's scratch area holds each of its outputs between guard bytes (kernels/custom.py); an output
   class that lives in the workspace is placed in its slot there, the area then living as long as it does.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from utvm import custom_ops
from utvm.compiler import memory
from utvm.compiler.kernels import (
    C_TYPES,
    FileScope,
    KernelCode,
    KernelContext,
    get_kernel,
    get_space,
    has_space,
    is_alias_op,
)
from utvm.compiler.kernels import custom as custom_kernel
from utvm.compiler.schedule import Schedule
from utvm.errors import CompileError
from utvm.ir.graph import Graph, Node
from utvm.target import Target, get_target

C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while _Bool _Complex _Imaginary".split())


def sanitize(name: str) -> str:
    """A tensor or model name as a C identifier fragment: non-alphanumerics -> '_' (docs/architecture.md §7)."""
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
    task: str = ""  # the tuning task key of its workload ("" for kernels without choices)
    schedule: Schedule = field(default_factory=dict)  # the point of the kernel's space it was emitted with
    schedule_source: str = ""  # "default" or "given" (from a tuning log); "" without choices


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
    persistent: dict[str, int] = field(default_factory=dict)  # operator function -> state block offset
    # --memory-pool: the pools in order of preference; offsets above are then in the pools' concatenation
    # (memory.locate gives pool and offset in it) and workspace_bytes is the sum of the pools' sizes.
    pools: tuple[memory.PoolUse, ...] = ()

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
            "persistent": dict(self.persistent),
        }  # the pools are metadata.json's modules.<m>.memory.pools (driver.build_metadata), beside the plan

    @staticmethod
    def from_json(d: dict, pools: Sequence[dict] = ()) -> MemoryPlan:
        """The plan of `d` (to_json) in the pools `pools` (metadata.json's modules.<m>.memory.pools)."""
        return MemoryPlan(
            algorithm=d["algorithm"], workspace_bytes=int(d["workspace_bytes"]),
            lower_bound_bytes=int(d["lower_bound_bytes"]), optimal=bool(d["optimal"]),
            no_reuse_bytes=int(d["no_reuse_bytes"]),
            buffers=tuple(PlannedBuffer(int(b["id"]), tuple(b["tensors"]), int(b["size"]), int(b["live"][0]),
                                        int(b["live"][1]), int(b["offset"])) for b in d["buffers"]),
            locations={t: (str(k), int(w)) for t, (k, w) in d["locations"].items()},
            scratch={k: int(v) for k, v in d["scratch"].items()},
            aliases=int(d["aliases"]), inplace=int(d["inplace"]),
            persistent={k: int(v) for k, v in d.get("persistent", {}).items()},
            pools=tuple(memory.pool_from_json(u) for u in pools))


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


def kernel_contexts(graph: Graph, model_name: str, rounding: str = "single", target: Target | str = "host",
                    skip: Collection[int] = (), file: FileScope | None = None,
                    task_counts: Mapping[str, int] | None = None) -> Iterator[KernelContext]:
    """The KernelContext of every node of `graph` that becomes an operator function, in order, named as
    `lower` names them (`tvmgen_<model>_fused_<op>...`), with the node's run-time inputs as the parameters
    `in0`, ... and its outputs as `out0`, ...; nodes whose index is in `skip` (the aliases lower() found)
    are left out. `lower` emits its kernels in these contexts and the tuner extracts its tasks from them
    (utvm.tune.tasks), so both see the same workloads and task keys. Each context's `task_count` says how
    many nodes of the graph share its workload (a kernel may choose to share code between them);
    `task_counts` overrides it per task key (the tuner compiles one node of a task as the model has n)."""
    prefix = f"tvmgen_{model_name}"
    target = get_target(target)
    file = file if file is not None else FileScope(prefix)
    used_names: set[str] = set()
    contexts = []
    for i, node in enumerate(graph.nodes):
        if i in skip:
            continue
        name = _func_name(prefix, node, used_names)
        rt_inputs = [j for j, x in enumerate(node.inputs) if x and not graph.tensor(x).is_constant]
        params = {j: f"in{k}" for k, j in enumerate(rt_inputs)}
        contexts.append(KernelContext(node, i, graph, rounding, name, file, params,
                                      [f"out{k}" for k in range(len(node.outputs))], target))
    keys = {id(c): c.task_key() for c in contexts if has_space(c.node.op)}
    counts = Counter(keys.values())
    for c in contexts:
        key = keys.get(id(c))
        c.task_count = 1 if key is None else (task_counts or {}).get(key, counts[key])
    yield from contexts


def choose_schedule(ctx: KernelContext, schedules: Mapping[str, Schedule] | None,
                    progress: Callable[[str], None] | None = None) -> tuple[str, Schedule, str]:
    """(task key, schedule, source) of ctx's node: the given schedule of its task when there is one and it
    is legal for this kernel, else the kernel's default point (a refused schedule is reported)."""
    space = get_space(ctx)
    if not space.knobs:
        return "", {}, ""
    key = ctx.task_key()
    given = (schedules or {}).get(key)
    if given is not None:
        given = space.normalize(given)  # a point written before a knob was renamed or became conditional
        reason = space.check(given)
        if reason is None:
            return key, dict(given), "given"
        msg = f"{ctx.label}: the schedule given for task {key} is refused ({reason}); using the default"
        warnings.warn(msg, stacklevel=2)
        if progress:
            progress(msg)
    return key, dict(space.default), "default"


def lower(graph: Graph, model_name: str, rounding: str = "single", algorithm: str = memory.DEFAULT_ALGORITHM,
          progress: Callable[[str], None] | None = None, target: Target | str = "host",
          schedules: Mapping[str, Schedule] | None = None, task_counts: Mapping[str, int] | None = None,
          pools: Sequence[memory.PoolSpec] = ()) -> Lowered:
    """`target`: the CPU the code is for; `schedules`: task key -> schedule (e.g. the best of a tuning log)
    for kernels with choices; the rest take their default point; `pools`: memory pools in order of
    preference (memory.place_pools; none: one workspace pool)."""
    prefix = f"tvmgen_{model_name}"
    target = get_target(target)
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
    for ctx in kernel_contexts(graph, model_name, rounding, target, aliased, ops_file, task_counts):
        i, node, name = ctx.index, ctx.node, ctx.func_name
        kernel = get_kernel(node, i)
        rt_inputs = [(j, x) for j, x in enumerate(node.inputs) if x and not graph.tensor(x).is_constant]
        task, ctx.schedule, source = choose_schedule(ctx, schedules, progress)
        if progress:
            progress(f"kernel {name} ({node.label(i)})" + (f" schedule {ctx.schedule}" if ctx.schedule else ""))
        code = kernel(ctx)
        if not isinstance(code, KernelCode):
            raise CompileError(f"{node.label(i)}: kernel returned {type(code).__name__}, not KernelCode")
        funcs.append(OperatorFunc(name, i, node, tuple(x for _j, x in rt_inputs), tuple(node.outputs), code,
                                  task, dict(ctx.schedule), source))

    plan = _plan(graph, funcs, cls, algorithm, len(aliased), pools)
    return Lowered(graph, model_name, funcs, copies, plan, ops_file, output_consts)


def _plan(graph: Graph, funcs: list[OperatorFunc], cls: _Classes, algorithm: str, n_alias: int,
          pools: Sequence[memory.PoolSpec] = ()) -> MemoryPlan:
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
    # User operators (kernels/custom.py): an output class in the workspace, written first by the operator, is
    # placed in the output's slot of the operator's scratch area (between its guard bands), which then lives
    # until the class's last use. The kernel writes every other output through the slot and copies it out.
    in_slot: dict[str, tuple[int, int]] = {}  # root -> (step, offset of its data in that step's scratch)
    scratch_end: dict[int, int] = {}
    for s, f in enumerate(funcs):
        if f.node.op != custom_ops.OP or f.code.scratch_bytes <= 0:
            continue
        slots, _size = custom_kernel.output_slots([nbytes[t] for t in f.outputs])
        for t, off in zip(f.outputs, slots, strict=True):
            r = cls.find(t)
            if (r in cls.external or r in in_slot or start.get(r) != s or r not in members
                    or max(nbytes[m] for m in members[r]) != nbytes[t]):
                continue
            in_slot[r] = (s, off)
            scratch_end[s] = max(scratch_end.get(s, s), end[r])
    roots = [r for r in members if r not in cls.external and r not in in_slot]
    items: list[memory.Interval] = []
    root_of_id: dict[int, str] = {}
    for k, r in enumerate(roots):
        size = max(nbytes[t] for t in members[r])
        if r not in start:
            raise CompileError(f"tensor {r!r} is read but never written")
        items.append(memory.Interval(k, size, start[r], end[r]))
        root_of_id[k] = r
    scratch_ids: dict[int, str] = {}
    scratch_step: dict[int, int] = {}
    for s, f in enumerate(funcs):
        if f.code.scratch_bytes > 0:
            k = len(items)
            items.append(memory.Interval(k, f.code.scratch_bytes, s, scratch_end.get(s, s)))
            scratch_ids[k] = f.name
            scratch_step[k] = s
    persistent_ids: dict[int, str] = {}
    for f in funcs:
        if f.code.persistent_bytes > 0:
            k = len(items)
            items.append(memory.persistent(k, f.code.persistent_bytes, len(funcs)))
            persistent_ids[k] = f.name
    pool_uses: tuple[memory.PoolUse, ...] = ()
    if pools:
        placement, pool_uses = memory.place_pools(items, pools, algorithm)
    else:
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
        elif it.id in scratch_ids:
            held = [r for r, (s, _off) in in_slot.items() if s == scratch_step[it.id]]
            for r in held:
                for t in members[r]:
                    locations[t] = ("workspace", placement.offsets[it.id] + in_slot[r][1])
            held_tensors = tuple(t for r in held for t in members[r])
            buffers.append(PlannedBuffer(it.id, (f"scratch:{scratch_ids[it.id]}", *held_tensors), it.size, it.start,
                                         it.end, placement.offsets[it.id]))
        else:
            buffers.append(PlannedBuffer(it.id, (f"persistent:{persistent_ids[it.id]}",), it.size, it.start, it.end,
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
        persistent={name: placement.offsets[k] for k, name in persistent_ids.items()},
        pools=pool_uses,
    )
