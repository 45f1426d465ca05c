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
6. Row-patch stages (utvm.compiler.patch): a `slice` or `concat` (along H, N = 1) with the attribute `rows_view`
   generates no code: its tensors are byte ranges of one buffer (the slice's output at its rows' offset in the
   input, a concat's inputs at theirs in the output), so a class is a buffer with its members at offsets
   (`_Classes`); a view of a model input or output is an offset from the caller's pointer (`MemoryPlan.views`).
   A `slice` with `rows_shift` moves the kept rows of a line buffer to its top (`memmove`, the output located where
   its input starts). A depthwise_conv2d with `in_place_kernel` gets the in-place kernel
   (kernels/depthwise_inplace.py). The nodes of one stage whose code is identical (same op, attributes,
   shapes, quantization, weights, schedule) share one C function: each operator function calls it.
   A user operator's scratch area holds each of its outputs between guard bytes (kernels/custom.py); an output
   class that lives in the workspace is placed in its slot there, the area then living as long as it does.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utvm import custom_ops
from utvm.compiler import memory
from utvm.compiler.kernels import (
    C_TYPES,
    FileScope,
    KernelCode,
    KernelContext,
    cemit,
    dtype_of_ctype,
    get_kernel,
    get_space,
    has_space,
    is_alias_op,
)
from utvm.compiler.kernels import custom as custom_kernel
from utvm.compiler.kernels import depthwise_inplace as dw_inplace
from utvm.compiler.schedule import Schedule
from utvm.errors import CompileError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.support.names import fresh_name
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
    # Row views of model inputs and outputs (patch stages): tensor -> byte offset from the caller's pointer of
    # the input or output `locations` names (views in the workspace have their own offsets in `locations`).
    views: dict[str, int] = field(default_factory=dict)

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
            **({"views": dict(self.views)} if self.views else {}),
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
            pools=tuple(memory.pool_from_json(u) for u in pools),
            views={k: int(v) for k, v in d.get("views", {}).items()})


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
    """Union-find over tensor names with the external binding of each class and each tensor's byte offset in
    its class (views place a tensor inside another; every other union places both at the same bytes)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}
        self.off: dict[str, int] = {}  # offset relative to the parent
        self.external: dict[str, tuple[str, int]] = {}  # root -> ("input"|"output", index)
        self.viewed: set[str] = set()  # roots of classes holding a view (members at different offsets)

    def find(self, t: str) -> str:
        self.parent.setdefault(t, t)
        self.off.setdefault(t, 0)
        path = []
        while self.parent[t] != t:
            path.append(t)
            t = self.parent[t]
        for p in reversed(path):  # compress: each node now points at the root, its offset accumulated
            q = self.parent[p]
            if q != t:
                self.off[p] += self.off[q]
                self.parent[p] = t
        return t

    def offset(self, t: str) -> int:
        """The byte offset of `t` relative to its class's root (may be negative: the root can be a view)."""
        self.find(t)
        return self.off[t]

    def union(self, a: str, b: str, delta: int = 0) -> str:
        """Join the classes of `a` and `b` with `b` at `delta` bytes after `a`; CompileError when the two are
        already joined at another distance."""
        ra, rb = self.find(a), self.find(b)
        oa, ob = self.off[a] if a != ra else 0, self.off[b] if b != rb else 0
        if ra == rb:
            if ob != oa + delta:
                raise CompileError(f"tensors {a!r} and {b!r} would be {delta} bytes apart in one buffer, "
                                   f"but they are {ob - oa}")
            return ra
        ext = self.external.pop(ra, None) or self.external.pop(rb, None)
        self.parent[rb] = ra
        self.off[rb] = oa + delta - ob
        if ext:
            self.external[ra] = ext
        if rb in self.viewed or delta or oa or ob:
            self.viewed.discard(rb)
            self.viewed.add(ra)
        return ra


def _func_name(prefix: str, node: Node, used: set[str]) -> str:
    act = node.attrs.get("activation", "none")
    base = f"{prefix}_fused_{sanitize(node.op)}" + (f"_{sanitize(str(act))}" if act not in ("none", None) else "")
    return fresh_name(base, used)


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
          pools: Sequence[memory.PoolSpec] = (), share: bool = True) -> Lowered:
    """`target`: the CPU the code is for; `schedules`: task key -> schedule (e.g. the best of a tuning log)
    for kernels with choices; the rest take their default point; `pools`: memory pools in order of
    preference (memory.place_pools; none: one workspace pool); `share`: let the identical operators of a
    patch stage call one C function (step 6 of the module docstring; off where a kernel body cannot move to a
    function of its own, e.g. constants read through the operator's context)."""
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
    views = _join_views(graph, cls)

    ops_file = _OpsFile(prefix)
    funcs: list[OperatorFunc] = []
    contexts = list(kernel_contexts(graph, model_name, rounding, target, aliased | views, ops_file, task_counts))
    chosen = [_choose(ctx, schedules, progress) for ctx in contexts]
    sigs = [_share_key(ctx, sched) if share else None for ctx, (_t, sched, _s) in zip(contexts, chosen, strict=True)]
    group = Counter(k for k in sigs if k is not None)
    shared: dict[str, tuple[str, KernelCode]] = {}
    for ctx, (task, sched, source), sig in zip(contexts, chosen, sigs, strict=True):
        i, node, name = ctx.index, ctx.node, ctx.func_name
        ctx.schedule = sched
        rt_inputs = [(j, x) for j, x in enumerate(node.inputs) if x and not graph.tensor(x).is_constant]
        if progress:
            progress(f"kernel {name} ({node.label(i)})" + (f" schedule {ctx.schedule}" if ctx.schedule else ""))
        ops_file.dedupe = sig is not None
        if sig is not None and group[sig] > 1:
            if sig not in shared:
                shared[sig] = _shared_function(ctx, _emit(ctx), graph)
            fn, code = shared[sig]
            code = _calling(ctx, fn, code, graph)
        else:
            code = _emit(ctx)
        ops_file.dedupe = False
        funcs.append(OperatorFunc(name, i, node, tuple(x for _j, x in rt_inputs), tuple(node.outputs), code,
                                  task, dict(ctx.schedule), source))

    plan = _plan(graph, funcs, cls, algorithm, len(aliased), pools)
    return Lowered(graph, model_name, funcs, copies, plan, ops_file, output_consts)


# --- 6: views, shifts, in-place depthwise and shared code of patch stages --------------------------------------

@dataclass
class _OpsFile(FileScope):
    """The operators file, which can give the operators of patch stages one copy of each identical constant
    array: the patches of an operator whose shapes differ (the first and last rows) are emitted apart, but
    their weight tables (packed words, requantization operands) are the same bytes. While `dedupe` is on, an
    array whose element type and initialiser equal an earlier one's is declared as a macro naming it."""

    dedupe: bool = False
    _arrays: dict[tuple[str, str], str] = field(default_factory=dict)
    _depth: int = 0  # inside table() (whose arrays `constant_bytes` counts only through constant())
    _merged: int = 0  # arrays declared as macros so far

    def declare_array(self, name: str, ctype: str, values: np.ndarray | Sequence[Any], body: str) -> None:
        key = (ctype, body)
        if self.dedupe and key in self._arrays:
            self.decls.append(f"#define {name} {self._arrays[key]}  /* the same bytes */")
            self._merged += 1
            if not self._depth:  # a kernel's own array (the GEMM's words): it counts them after declaring
                self.constant_bytes -= int(np.asarray(values).size) * np.dtype(dtype_of_ctype(ctype)).itemsize
            return
        super().declare_array(name, ctype, values, body)
        if self.dedupe:
            self._arrays[key] = name

    def table(self, ctype: str, values: np.ndarray | Sequence[Any], hint: str) -> str:
        self._depth += 1
        try:
            return super().table(ctype, values, hint)
        finally:
            self._depth -= 1

    def constant(self, t: Tensor) -> str:
        merged = self._merged
        name = super().constant(t)
        if self._merged != merged:  # no array of its own: its bytes are another's
            self.constant_bytes -= t.nbytes
        return name


def _rows_view(graph: Graph, node: Node, i: int) -> int:
    """The byte offset of the rows a `slice` view (begin (0, r, 0, 0), full width and depth) starts at."""
    x = graph.tensor(node.inputs[0])
    begin = tuple(int(v) for v in node.attrs.get("begin", ()))
    size = tuple(int(v) for v in node.attrs.get("size", ()))
    y = graph.tensor(node.outputs[0])
    if (len(x.shape) != 4 or x.shape[0] != 1 or len(begin) != 4 or begin[0] or begin[2] or begin[3]
            or tuple(y.shape) != (1, size[1] if len(size) == 4 else -1, x.shape[2], x.shape[3])):
        raise CompileError(f"{node.label(i)}: a row view must take whole rows of an NHWC tensor with N = 1, "
                           f"got begin {list(begin)} size {list(size)} of {list(x.shape)}")
    return begin[1] * (x.nbytes // max(x.shape[1], 1))


def _join_views(graph: Graph, cls: _Classes) -> set[int]:
    """Join the classes of row views and shifts (module docstring, step 6); returns the nodes that generate no
    code (the views)."""
    from utvm.compiler.patch import VIEW

    views: set[int] = set()
    for i, node in enumerate(graph.nodes):
        if node.op == "slice" and node.attrs.get(VIEW):
            cls.union(node.inputs[0], node.outputs[0], _rows_view(graph, node, i))
            views.add(i)
        elif node.op == "concat" and node.attrs.get(VIEW):
            y = graph.tensor(node.outputs[0])
            if int(node.attrs.get("axis", 0)) != 1 or len(y.shape) != 4 or y.shape[0] != 1:
                raise CompileError(f"{node.label(i)}: a concat view joins rows (axis 1, N = 1)")
            off = 0
            for x in node.inputs:
                cls.union(node.outputs[0], x, off)
                off += graph.tensor(x).nbytes
            views.add(i)
        elif _is_shift(node):
            _rows_view(graph, node, i)
            cls.union(node.inputs[0], node.outputs[0], 0)  # written where its input starts (memmove)
    return views


def _choose(ctx: KernelContext, schedules: Mapping[str, Schedule] | None,
            progress: Callable[[str], None] | None) -> tuple[str, Schedule, str]:
    """choose_schedule, except for the kernels of step 6, which have no choices."""
    if _is_shift(ctx.node) or (ctx.node.op == "depthwise_conv2d" and ctx.node.attrs.get(dw_inplace.ATTR)):
        return "", {}, ""
    return choose_schedule(ctx, schedules, progress)


def _is_shift(node: Node) -> bool:
    from utvm.compiler.patch import SHIFT

    return node.op == "slice" and bool(node.attrs.get(SHIFT))


def _shift(ctx: KernelContext) -> KernelCode:
    """The rows a `shift` keeps, moved to the top of their line buffer (the regions may overlap: memmove)."""
    graph, node = ctx.graph, ctx.node
    off = _rows_view(graph, node, ctx.index)
    n = graph.tensor(node.outputs[0]).nbytes
    ctx.helper("string")
    return KernelCode(body=f"memmove((void*){ctx.outputs[0]}, (const void*)((const uint8_t*){ctx.inputs[0]} + {off}), "
                           f"{n}U);\nreturn 0;")


def _emit(ctx: KernelContext) -> KernelCode:
    node, i = ctx.node, ctx.index
    if _is_shift(node):
        code = _shift(ctx)
    elif node.op == "depthwise_conv2d" and node.attrs.get(dw_inplace.ATTR):
        code = dw_inplace.kernel(ctx)
    else:
        code = get_kernel(node, i)(ctx)
    if not isinstance(code, KernelCode):
        raise CompileError(f"{node.label(i)}: kernel returned {type(code).__name__}, not KernelCode")
    return code


def _share_key(ctx: KernelContext, schedule: Schedule) -> str | None:
    """What makes two operators of patch stages one C function: everything their code is made of (None for an
    operator outside a stage, with state, or a user operator)."""
    from utvm.compiler.patch import SHARE_KEY, patch_of

    node, graph = ctx.node, ctx.graph
    if patch_of(graph, node) is None or node.op == custom_ops.OP or not graph.metadata.get(SHARE_KEY, True):
        return None

    def tensor(name: str) -> object:
        if not name:
            return None
        t = graph.tensor(name)
        return [t.name if t.is_constant else None, list(t.shape), t.dtype, t.quant.to_json() if t.quant else None]

    return json.dumps({"op": node.op, "attrs": {k: v for k, v in node.attrs.items()},
                       "in": [tensor(x) for x in node.inputs], "out": [tensor(y) for y in node.outputs],
                       "rounding": ctx.rounding, "target": ctx.target.name, "schedule": dict(schedule)},
                      sort_keys=True, default=list)


def _raw_params(ctx: KernelContext, code: KernelCode, graph: Graph) -> tuple[list[str], list[str]]:
    """(C parameters, argument names) of an operator function's body: inputs, outputs, scratch."""
    node = ctx.node
    ins = [x for x in node.inputs if x and not graph.tensor(x).is_constant]
    params = [f"const {C_TYPES[graph.tensor(x).dtype]}* in{k}" for k, x in enumerate(ins)]
    params += [f"{C_TYPES[graph.tensor(y).dtype]}* out{k}" for k, y in enumerate(node.outputs)]
    args = [f"in{k}" for k in range(len(ins))] + [f"out{k}" for k in range(len(node.outputs))]
    if code.scratch_bytes:
        params.append("uint8_t* scratch")
        args.append("scratch")
    return params, args


def _shared_function(ctx: KernelContext, code: KernelCode, graph: Graph) -> tuple[str, KernelCode]:
    """Put `code`'s body into a file-scope function of its own; returns its name and the code."""
    if code.persistent_bytes:
        raise CompileError(f"{ctx.label}: an operator with state cannot share its code")
    name = ctx.file.unique(f"{ctx.file.prefix}_patch_{ctx.node.op}")
    params, _args = _raw_params(ctx, code, graph)
    head = f"{code.attributes + ' ' if code.attributes else ''}static int32_t {name}({', '.join(params) or 'void'})"
    ctx.file.decls.append(cemit.block(head, code.body.strip()))
    return name, code


def _calling(ctx: KernelContext, fn: str, code: KernelCode, graph: Graph) -> KernelCode:
    """The body of an operator function that runs the shared function `fn` (of `code`) on its arguments."""
    _params, args = _raw_params(ctx, code, graph)
    return KernelCode(body=f"return {fn}({', '.join(args)});", scratch_bytes=code.scratch_bytes, inplace=code.inplace)


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

    def spans(t: str) -> bool:
        """Whether `t` is the whole of its class (no view makes the class larger or puts `t` inside it)."""
        r = cls.find(t)
        if r not in cls.viewed:
            return True
        mine = [m for f in funcs for m in (*f.inputs, *f.outputs) if cls.find(m) == r]
        lo = min(cls.offset(m) for m in mine)
        return cls.offset(t) == lo and max(cls.offset(m) + nbytes[m] for m in mine) == lo + nbytes[t]

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
            if not spans(x) or not spans(out):  # part of a buffer of views: it does not start where x does
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
    # A class's bytes run from its lowest member offset (`base`) to the end of its furthest member.
    base = {r: min(cls.offset(t) for t in ts) for r, ts in members.items()}
    items: list[memory.Interval] = []
    root_of_id: dict[int, str] = {}
    for k, r in enumerate(roots):
        size = max(cls.offset(t) - base[r] + nbytes[t] for t in members[r])
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
                locations[t] = ("workspace", placement.offsets[it.id] + cls.offset(t) - base[r])
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
    views: dict[str, int] = {}
    for r, ext in cls.external.items():
        for t in members.get(r, [r]):
            locations[t] = ext
            off = cls.offset(t) - base.get(r, 0)
            if off:
                views[t] = off
        locations.setdefault(r, ext)
        whole = [t for t in members.get(r, [r]) if t in graph.inputs or t in graph.outputs]
        top = max((cls.offset(t) - base.get(r, 0) + nbytes[t] for t in members.get(r, [r])), default=0)
        if whole and (views.get(whole[0], 0) or top > nbytes[whole[0]]):
            raise CompileError(f"the views of model {ext[0]} {whole[0]!r} reach outside it")
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
        views=views,
    )


def timeline(lowered: Lowered) -> list[dict]:
    """The plan's memory over the execution order (metadata.json's memory.timeline): one entry per operator
    function, `{"step", "function", "live": [{"buffer": id, "bytes": n}], "patch": [k, n] | None}`, where `live`
    lists the plan's buffers (tensors, scratch, state) live at that step with the bytes each occupies (its size
    aligned, memory.extent: the sum at the worst step is the plan's lower bound) and `patch` the patch of a
    row-patch stage the step belongs to (utvm.compiler.patch)."""
    from utvm.compiler.patch import patch_of

    out = []
    for s, f in enumerate(lowered.funcs):
        live = [{"buffer": b.id, "bytes": memory.extent(b.size)} for b in lowered.plan.buffers if b.start <= s <= b.end]
        out.append({"step": s, "function": f.name, "live": live, "patch": patch_of(lowered.graph, f.node)})
    return out
