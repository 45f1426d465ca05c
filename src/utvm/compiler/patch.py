"""Below the layer-by-layer bound: row-patch stages, in-place depthwise, and the plan that chooses them.

The layer-by-layer bound assumes every operator holds its whole input and whole output at once. This module
plans and writes two ways under it (docs/compiler.md, "Below the layer-by-layer bound"):

**Patch stages.** A *stage* is a run of consecutive spatial operators (conv2d, depthwise_conv2d, max/avg pool;
N = 1, NHWC) where each intermediate tensor feeds only the next operator. Its output Y is split along H into
row patches of `rows` rows; each patch runs every operator of the stage on just the rows it needs. Rows are
the right cut for NHWC: a band of rows is one contiguous slice of a tensor, so a patch reads its input rows
in place (a *view* of the stage input X) and writes its output rows in place (a view of Y). The receptive
field of a patch (its *halo*) is derived per operator from kernel size, stride, dilation and padding
(`Rows.need`): output rows [a, b) read input rows [a*s - pt, (b-1)*s - pt + (k-1)*d + 1), clipped to the
image; what the clip removes is that patch's padding, so padding is applied only at the true image border and
every output element sees exactly the taps it sees in the whole-image operator (bit-exact by construction).

Patches run top to bottom, so the halo rows a patch shares with the next one are *kept* (cached), never
recomputed: each intermediate tensor lives in a line buffer holding the rows its consumer reads; before a
patch, the rows still needed move to the buffer's top (a `memmove`, the *shift*) and the producer writes only
its new rows below them. No MAC is repeated (`extra_macs` is 0, or below 0 where a VALID window never reads a
row the whole-image operator computes); the cost of a stage is one call per operator and patch and the
bytes moved. An intermediate whose consumer never shares rows between patches (a 1x1 window) needs no line
buffer: it is a tensor per patch, live between its producer and its consumer only. The memory planner then
sees X and Y whole, the line buffers, and small per-patch tensors. A pointwise -> depthwise -> pointwise
block computed row by row (the fusion that removes its two intermediate buffers) is such a stage.

The rewrite keeps the graph a graph of ordinary operators, so the reference interpreter runs it unchanged
(tests compare it with the unsplit graph): the patches' operators with their own padding, `slice` nodes
(attribute `rows_view`: a band of rows read in place; `rows_shift`: the kept rows moved to the top of their line
buffer) and `concat` nodes along H (`rows_view`: the pieces a buffer or Y is made of, written in place). Lowering
(`lower.py`) turns views into offsets in one buffer, emits the shifts as `memmove` and shares one C function
between the patches of an operator with identical shapes (`graph.metadata["patches"]` names every node of a
stage with its patch `[k, n]`, k from 1).

**In-place depthwise.** A depthwise_conv2d whose output has its input's shape (stride 1, padding that keeps
H and W, depth multiplier 1, int8) can write each output channel over its own input channel through a
one-channel temporary (`kernels/depthwise_inplace.py`): its input and output then share one buffer. The rewrite
marks such a node with the attribute `in_place_kernel`.

**The plan.** `plan(graph, ...)` estimates the activation bytes live at every step of the layer-by-layer
schedule (with the kernels' scratch of a lowering of it), of each candidate stage (every run of at least two
chained operators, every patch height) and of each in-place depthwise, and the *overhead* of each: extra
work in MAC-equivalents = recomputed MACs + `CALL_COST` per extra operator call + `MOVE_COST` per byte moved
(+ `INPLACE_COST` per output byte of an in-place depthwise), over the model's MACs. For a target peak T a
dynamic program over the execution order covers every step above T with stages or in-place kernels at the
least overhead; the smallest T whose cover stays within `--patch-overhead` is the smallest reachable peak, and
`--memory-limit L` takes the cheapest cover for T = L (the driver lowers it and checks the real plan).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from utvm.compiler.lower import Lowered
from utvm.compiler.memory import ALIGNMENT
from utvm.errors import CompileError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.ir.stats import node_macs
from utvm.support.names import fresh_name

#: operators a stage may hold (their attribute `padding` is (top, left, bottom, right))
SPATIAL_OPS = ("conv2d", "depthwise_conv2d", "max_pool2d", "avg_pool2d")
#: The planner's costs, in MAC-equivalents (calibrated on qemu-cortex-m4's instruction counts of KWS and the
#: MobileNet-style models, docs/compiler.md): one more operator call (call, prologue, loop and table setup,
#: packed argument checks); one byte moved by a shift; one input byte a call reads again (the halo rows a
#: window kernel copies or widens once more per call); the last, odd pixel of a call (the kernels block pixels
#: in pairs: an odd count runs one pixel through the scalar tail), per MAC of that pixel; one MAC of an in-place
#: depthwise (portable C through its padded plane, where the registered kernel has SIMD paths).
CALL_COST = 600
MOVE_COST = 1
REREAD_COST = 2
TAIL_COST = 1.5
INPLACE_COST = 4
#: default --patch-overhead: extra work over the model's MACs
DEFAULT_OVERHEAD = 0.10
#: patch heights (rows of the stage output per patch) the planner tries
ROW_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: the attributes of the nodes the rewrite makes: a slice / concat along H that is a view (no code), a slice that
#: moves the kept rows of a line buffer to its top (lower.py, step 6), a depthwise_conv2d the plan runs in place
#: (kernels/depthwise_inplace.py)
VIEW = "rows_view"
SHIFT = "rows_shift"
INPLACE = "in_place_kernel"
#: graph.metadata key: node name -> [k, n] (patch k of n, from 1) for every node of a stage
PATCHES_KEY = "patches"
#: graph.metadata key: whether the identical operators of the stages may share one C function
SHARE_KEY = "patch_code_shared"


def _ext(n: int) -> int:
    """Bytes a buffer of n bytes occupies in a plan (memory.extent)."""
    return (max(n, 1) + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


# --- rows ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Rows:
    """How a spatial operator maps its output rows to input rows (along H)."""

    kernel: int
    stride: int
    dilation: int
    pad_top: int
    in_rows: int
    out_rows: int

    def need(self, a: int, b: int) -> tuple[int, int, int, int]:
        """(lo, hi, pad_top, pad_bottom): output rows [a, b) read input rows [lo, hi), with that padding."""
        span = (self.kernel - 1) * self.dilation + 1
        first = a * self.stride - self.pad_top
        last = (b - 1) * self.stride - self.pad_top + span
        lo, hi = max(0, first), min(self.in_rows, last)
        return lo, hi, lo - first, last - hi


def rows_of(graph: Graph, node: Node) -> Rows | None:
    """The row geometry of `node` if a stage may hold it (a spatial op on one run-time NHWC input with N = 1,
    constant weights, no ceil_mode), else None."""
    if node.op not in SPATIAL_OPS or len(node.outputs) != 1 or not node.inputs or not node.inputs[0]:
        return None
    x, y = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0])
    if x.is_constant or len(x.shape) != 4 or len(y.shape) != 4 or x.shape[0] != 1 or y.shape[0] != 1:
        return None
    if any(k > 0 and v and not graph.tensor(v).is_constant for k, v in enumerate(node.inputs)):
        return None  # run-time weights or bias
    a = node.attrs
    if node.op in ("conv2d", "depthwise_conv2d"):
        kh = graph.tensor(node.inputs[1]).shape[1]
    else:
        if a.get("ceil_mode", False):
            return None
        kh = int(a.get("pool", (1, 1))[0])
    return Rows(int(kh), int(a.get("strides", (1, 1))[0]), int(a.get("dilation", (1, 1))[0]),
                int(a.get("padding", (0, 0, 0, 0))[0]), int(x.shape[1]), int(y.shape[1]))


@dataclass(frozen=True, slots=True)
class Step:
    """One call of operator t of a stage: it computes its output rows `out` from input rows `inp` (with that
    call's padding), in patch `patch` (from 1: patch k ends with the k-th write into the stage output).

    How the line buffer of its output (operator t's output, t < m - 1) changes at this call: the rows `keep` stay
    (moved to the buffer's top when `keep[0]` is not its first row: a *shift* of `shift` rows), the new rows
    follow, and the buffer then holds `window`. `held` is what the buffer of its input (operator t - 1's output,
    t > 0) holds while it reads `inp` from it."""

    t: int
    out: tuple[int, int]
    inp: tuple[int, int]
    pad: tuple[int, int]
    patch: int
    keep: tuple[int, int] | None = None
    shift: int = 0
    window: tuple[int, int] = (0, 0)
    held: tuple[int, int] = (0, 0)


def _grid(targets: Sequence[int], step: int) -> list[int]:
    """Chunk boundaries of an operator whose next operator needs its rows up to each of `targets` (ascending):
    the targets, with every gap wider than `step` cut into `step`-row chunks aligned on the gap's end (so the
    warm-up, the receptive field of the first output rows, is computed in steady-state chunks too)."""
    out: list[int] = []
    prev = 0
    for tgt in targets:
        if tgt <= prev:
            continue
        cuts = []
        c = tgt - step
        while c > prev:
            cuts.append(c)
            c -= step
        out += [*reversed(cuts), tgt]
        prev = tgt
    return out


def row_schedule(rows: Sequence[Rows], out_rows: int, step: int) -> list[Step] | None:
    """The calls of a stage whose output is produced `step` rows at a time, top to bottom: each operator runs
    in chunks of its own share of a step (`step` times the strides after it), aligned on what the next operator
    reads, so that its line buffer holds no more than one chunk and its halo, warm-up included; halo rows stay
    in the line buffers (never recomputed), and rows no later call reads are not computed. None when a call
    would read no input row (a window entirely in the padding)."""
    m = len(rows)
    steps = [step] * m
    for t in range(m - 2, -1, -1):
        steps[t] = steps[t + 1] * rows[t + 1].stride
    grids: list[list[int]] = [[]] * m
    grids[m - 1] = [min(y + step, out_rows) for y in range(0, out_rows, step)]
    for t in range(m - 1, 0, -1):
        targets, prev = [], 0
        for b in grids[t]:
            lo, hi, _pt, _pb = rows[t].need(prev, b)
            if hi <= lo:
                return None
            targets.append(hi)
            prev = b
        grids[t - 1] = _grid(sorted(set(targets)), steps[t - 1])
    done = [0] * m
    calls: list[tuple[int, tuple[int, int], tuple[int, int], tuple[int, int], int]] = []
    patch = 1

    def produce(t: int, target: int) -> bool:
        while done[t] < target:
            a = done[t]
            b = next(g for g in grids[t] if g > a)
            lo, hi, pt, pb = rows[t].need(a, b)
            if hi <= lo or (t > 0 and not produce(t - 1, hi)):
                return False
            calls.append((t, (a, b), (lo, hi), (pt, pb), patch))
            done[t] = b
        return True

    for y in grids[m - 1]:
        if not produce(m - 1, y):
            return None
        patch += 1
    # the line buffers: what each write keeps and what each read finds
    reads: list[list[int]] = [[] for _ in range(m)]  # per operator, its calls
    for k, call in enumerate(calls):
        reads[call[0]].append(k)
    buf = [(0, 0)] * m
    out: list[Step] = []
    for k, (t, (a, b), (lo, hi), pad, n) in enumerate(calls):
        held = buf[t - 1] if t > 0 else (0, 0)
        if t > 0 and not held[0] <= lo < hi <= held[1]:  # pragma: no cover - the schedule's own invariant
            raise CompileError(f"row schedule: operator {t} reads rows {lo}..{hi} of a buffer holding {held}")
        keep, shift, window = None, 0, (0, 0)
        if t < m - 1:
            later = [calls[j][2][0] for j in reads[t + 1] if j > k]
            next_lo = later[0] if later else b
            blo, bhi = buf[t]
            if bhi > blo and next_lo < bhi:
                keep = (max(blo, next_lo), bhi)
                shift = keep[0] - blo
            window = (keep[0] if keep else a, b)
            buf[t] = window
        out.append(Step(t, (a, b), (lo, hi), pad, n, keep, shift, window, held))
    return out


# --- stages -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Stage:
    """Nodes first..last (inclusive, consecutive in the execution order) run in row patches of `rows` rows of
    the stage output."""

    first: int
    last: int
    rows: int

    def to_json(self) -> dict[str, int]:
        return {"first_node": self.first, "last_node": self.last, "rows_per_patch": self.rows}


@dataclass(frozen=True, slots=True)
class StageCost:
    peak: int  # estimated bytes live at the stage's worst step
    extra_macs: int
    extra_calls: int
    moved_bytes: int
    patches: int
    reread_bytes: int = 0  # input bytes the calls read again (halo rows)
    tail_macs: int = 0  # MACs of the extra odd pixels

    @property
    def work(self) -> int:
        return int(max(self.extra_macs, 0) + CALL_COST * self.extra_calls + MOVE_COST * self.moved_bytes
                   + REREAD_COST * self.reread_bytes + TAIL_COST * self.tail_macs)


def _row_bytes(t: Tensor) -> int:
    return t.nbytes // max(t.shape[1], 1)


def _macs_per_row(graph: Graph, index: int) -> int:
    y = graph.tensor(graph.nodes[index].outputs[0])
    return node_macs(graph, index) // max(y.shape[1], 1)


def chains(graph: Graph) -> list[list[int]]:
    """Maximal runs of consecutive nodes a stage may hold: each a spatial op (rows_of) whose output feeds only
    the next node of the run (its input 0) and is no graph output."""
    out: list[list[int]] = []
    cur: list[int] = []
    outputs = set(graph.outputs)
    consumers: dict[str, int] = {}
    for n in graph.nodes:
        for x in n.inputs:
            if x:
                consumers[x] = consumers.get(x, 0) + 1
    for i, node in enumerate(graph.nodes):
        if rows_of(graph, node) is None:
            if len(cur) > 1:
                out.append(cur)
            cur = []
            continue
        if cur:
            prev = graph.nodes[cur[-1]]
            y = prev.outputs[0]
            if not (node.inputs[0] == y and consumers.get(y, 0) == 1 and y not in outputs):
                if len(cur) > 1:
                    out.append(cur)
                cur = []
        cur.append(i)
    if len(cur) > 1:
        out.append(cur)
    return out


@dataclass
class Liveness:
    """Activation bytes live at every step of the layer-by-layer schedule, plus each step's kernel scratch:
    from `base`, a lowering of the graph (its memory plan: reshape aliases, in-place operators, scratch, as
    built), or without one estimated from the graph alone (graph inputs and outputs live in the caller's
    buffers; reshapes alias their input; no scratch)."""

    graph: Graph
    base: Lowered | None = None

    def __post_init__(self) -> None:
        g = self.graph
        n = len(g.nodes)
        self.live = [0] * n
        self.step_bytes = [0] * n
        self.scratch: dict[int, int] = {}
        self.holder: dict[str, int] = {}  # tensor -> bytes of the workspace buffer holding it
        self.at: list[list[tuple[frozenset[str], int]]] = [[] for _ in range(n)]  # (tensors, bytes) per step
        if self.base is not None:
            plan, funcs = self.base.plan, self.base.funcs
            for b in plan.buffers:
                for t in b.tensors:
                    if not t.startswith(("scratch:", "persistent:")):
                        self.holder[t] = _ext(b.size)
            for s, f in enumerate(funcs):
                i = f.node_index
                for b in plan.buffers:
                    if not b.start <= s <= b.end:
                        continue
                    if b.tensors and b.tensors[0] == f"scratch:{f.name}":
                        self.scratch[i] = b.size
                        self.step_bytes[i] += _ext(b.size)
                        continue
                    self.at[i].append((frozenset(b.tensors), _ext(b.size)))
                    self.live[i] += _ext(b.size)
                    self.step_bytes[i] += _ext(b.size)
            return
        from utvm.compiler.kernels import is_alias_op

        root: dict[str, str] = {}
        for node in g.nodes:
            if is_alias_op(node.op) and node.inputs and node.inputs[0] and len(node.outputs) == 1:
                root[node.outputs[0]] = root.get(node.inputs[0], node.inputs[0])
        external = {root.get(t, t) for t in (*g.inputs, *g.outputs)}
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        size: dict[str, int] = {}
        members: dict[str, set[str]] = {}
        for i, node in enumerate(g.nodes):
            for t in (*node.inputs, *node.outputs):
                if not t or g.tensor(t).is_constant:
                    continue
                r = root.get(t, t)
                members.setdefault(r, set()).add(t)
                size[r] = max(size.get(r, 0), g.tensor(t).nbytes)
                first.setdefault(r, i)
                last[r] = max(last.get(r, i), i)
        for r in size:
            if r in external:
                continue
            for t in members[r]:
                self.holder[t] = _ext(size[r])
            for s in range(first[r], last[r] + 1):
                self.at[s].append((frozenset(members[r]), _ext(size[r])))
                self.live[s] += _ext(size[r])
        self.step_bytes = list(self.live)

    def bytes_of(self, tensor: str) -> int:
        """The bytes `tensor` takes in the workspace (0 in the caller's buffers)."""
        return self.holder.get(tensor, 0)

    def across(self, first: int, last: int, own: set[str]) -> int:
        """Most bytes live at one step of [first, last] in buffers holding none of the tensors in `own`."""
        return max((sum(b for ts, b in self.at[s] if not ts & own) for s in range(first, last + 1)), default=0)


def stage_cost(graph: Graph, live: Liveness, stage: Stage) -> StageCost | None:
    """The estimated peak and the overhead of `stage` (None when its row schedule does not exist)."""
    idx = list(range(stage.first, stage.last + 1))
    nodes = [graph.nodes[i] for i in idx]
    geo = [rows_of(graph, n) for n in nodes]
    if any(r is None for r in geo):
        return None
    rows = [r for r in geo if r is not None]
    y = graph.tensor(nodes[-1].outputs[0])
    calls = row_schedule(rows, y.shape[1], stage.rows)
    if calls is None or calls[-1].patch < 2:
        return None
    m = len(nodes)
    rb = [_row_bytes(graph.tensor(n.outputs[0])) for n in nodes]
    cached = [False] * m
    held = [0] * m
    moved = shifts = 0
    computed = [0] * m
    in_rows = [0] * m  # most input rows an operator reads in one call
    reread = tails = 0
    in_rb = [_row_bytes(graph.tensor(n.inputs[0])) for n in nodes]
    width = [graph.tensor(n.outputs[0]).shape[2] for n in nodes]
    per_pixel = [node_macs(graph, i) // max(graph.tensor(graph.nodes[i].outputs[0]).size
                                            // graph.tensor(graph.nodes[i].outputs[0]).shape[3], 1) for i in idx]
    for c in calls:
        computed[c.t] += c.out[1] - c.out[0]
        in_rows[c.t] = max(in_rows[c.t], c.inp[1] - c.inp[0])
        fresh = (c.out[1] - c.out[0]) * rows[c.t].stride
        reread += max(0, c.inp[1] - c.inp[0] - fresh) * in_rb[c.t]
        tails += per_pixel[c.t] * (((c.out[1] - c.out[0]) * width[c.t]) % 2)
        if c.t < m - 1:
            if c.keep is not None:
                cached[c.t] = True
            if c.shift and c.keep is not None:
                shifts += 1
                moved += (c.keep[1] - c.keep[0]) * rb[c.t]
            held[c.t] = max(held[c.t], (c.window[1] - c.window[0]) * rb[c.t])
    for t in range(m):  # the whole-tensor operator has its own odd pixel
        tails -= per_pixel[t] * ((rows[t].out_rows * width[t]) % 2)
    transient = 0
    for c in calls:  # an intermediate no call keeps rows of is a tensor per call: producer to consumer
        v = 0
        if c.t > 0 and not cached[c.t - 1]:
            v += _ext((c.held[1] - c.held[0]) * rb[c.t - 1])
        if c.t < m - 1 and not cached[c.t]:
            v += _ext((c.window[1] - c.window[0]) * rb[c.t])
        transient = max(transient, v)
    buffers = sum(_ext(held[t]) for t in range(m - 1) if cached[t])
    # a kernel's scratch taken as proportional to the rows it reads (planes, im2col rows)
    scratch = max((live.scratch.get(i, 0) * in_rows[t] // max(rows[t].in_rows, 1) for t, i in enumerate(idx)),
                  default=0)
    x, yname = nodes[0].inputs[0], nodes[-1].outputs[0]
    own = {x, yname, *(n.outputs[0] for n in nodes[:-1])}
    peak = (live.across(stage.first, stage.last, own) + live.bytes_of(x) + live.bytes_of(yname) + buffers
            + transient + (_ext(scratch) if scratch else 0))
    extra_macs = sum(computed[t] * _macs_per_row(graph, i) for t, i in enumerate(idx)) - sum(
        node_macs(graph, i) for i in idx)
    return StageCost(peak, extra_macs, len(calls) + shifts - m, moved, calls[-1].patch, reread, max(tails, 0))


def inplace_ok(graph: Graph, index: int, consumers: Mapping[str, int] | None = None) -> bool:
    """Whether depthwise node `index` may write over its input (kernels/depthwise_inplace.py): int8, depth
    multiplier 1, output shape = input shape, constant weights, an input no one else reads that is no graph
    input, an output that is no graph output."""
    node = graph.nodes[index]
    if node.op != "depthwise_conv2d" or not node.inputs or len(node.outputs) != 1:
        return False
    x, y = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0])
    if x.dtype != "int8" or y.dtype != "int8" or tuple(x.shape) != tuple(y.shape) or len(x.shape) != 4:
        return False
    if int(node.attrs.get("depth_multiplier", 1)) != 1 or not graph.tensor(node.inputs[1]).is_constant:
        return False
    if len(node.inputs) > 2 and node.inputs[2] and not graph.tensor(node.inputs[2]).is_constant:
        return False
    if x.name in graph.inputs or y.name in graph.outputs or x.name in graph.outputs:
        return False
    n_readers = (consumers or {}).get(x.name) if consumers else sum(1 for n in graph.nodes if x.name in n.inputs)
    return n_readers == 1


# --- the plan -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """What the rewrite applies: row-patch stages and in-place depthwise nodes, with the estimates."""

    stages: tuple[Stage, ...] = ()
    inplace: tuple[int, ...] = ()  # depthwise node indices
    peak_estimate: int = 0
    extra_macs: int = 0
    extra_calls: int = 0
    moved_bytes: int = 0
    work: int = 0  # MAC-equivalents (the overhead the planner bounds)

    @property
    def empty(self) -> bool:
        return not self.stages and not self.inplace

    def to_json(self, model_macs: int) -> dict[str, object]:
        return {"stages": [s.to_json() for s in self.stages], "inplace_nodes": list(self.inplace),
                "peak_estimate_bytes": self.peak_estimate, "extra_calls": self.extra_calls,
                "moved_bytes": self.moved_bytes, "overhead_mac_equivalents": self.work,
                "overhead": round(self.work / max(model_macs, 1), 4)}


class Planner:
    """The candidates of one graph (stages, in-place depthwise) and the dynamic program that picks a cover
    (module docstring). `base`: a layer-by-layer lowering of `graph` (Liveness)."""

    def __init__(self, graph: Graph, base: Lowered | None = None) -> None:
        self.graph = graph
        self.live = Liveness(graph, base)
        self.model_macs = sum(node_macs(graph, i) for i in range(len(graph.nodes)))
        consumers: dict[str, int] = {}
        for n in graph.nodes:
            for x in n.inputs:
                if x:
                    consumers[x] = consumers.get(x, 0) + 1
        # in-place depthwise: step -> (bytes at that step, work)
        self.inplace: dict[int, tuple[int, int]] = {}  # depthwise node -> (bytes at its step in place, work)
        for i, node in enumerate(graph.nodes):
            if inplace_ok(graph, i, consumers):
                x, w = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
                dil = node.attrs.get("dilation", (1, 1))
                plane = (x.shape[1] + (w.shape[1] - 1) * int(dil[0])) * (x.shape[2] + (w.shape[2] - 1) * int(dil[1]))
                b = self.live.live[i] - self.live.bytes_of(node.inputs[0]) + _ext(plane)
                self.inplace[i] = (b, INPLACE_COST * node_macs(graph, i))
        # stages: first node -> [(last node, rows, cost)]
        self.stages: dict[int, list[tuple[Stage, StageCost]]] = {}
        for chain in chains(graph):
            for a in range(len(chain)):
                for b in range(a + 1, len(chain)):
                    y = graph.tensor(graph.nodes[chain[b]].outputs[0])
                    for r in ROW_CHOICES:
                        if 2 * r > y.shape[1]:
                            break
                        st = Stage(chain[a], chain[b], r)
                        c = stage_cost(graph, self.live, st)
                        if c is not None and c.peak < max(self.live.step_bytes[chain[a]:chain[b] + 1]):
                            self.stages.setdefault(chain[a], []).append((st, c))

    def candidates(self) -> list[int]:
        """Every peak a cover can have, ascending."""
        vals = set(self.live.step_bytes) | {b for b, _w in self.inplace.values()}
        vals |= {c.peak for opts in self.stages.values() for _s, c in opts}
        return sorted(vals)

    def cover(self, target: int) -> Plan | None:
        """The cheapest plan whose estimated peak is at most `target` (None: no such plan)."""
        n = len(self.graph.nodes)
        inf = float("inf")
        best: list[float] = [inf] * (n + 1)
        how: list[tuple[str, object] | None] = [None] * (n + 1)
        best[0] = 0
        for i in range(n):
            if best[i] == inf:
                continue
            if self.live.step_bytes[i] <= target and best[i] < best[i + 1]:
                best[i + 1], how[i + 1] = best[i], ("step", i)
            if i in self.inplace and self.inplace[i][0] <= target:
                v = best[i] + self.inplace[i][1]
                if v < best[i + 1]:
                    best[i + 1], how[i + 1] = v, ("inplace", i)
            for st, c in self.stages.get(i, ()):
                if c.peak <= target and best[i] + c.work < best[st.last + 1]:
                    best[st.last + 1], how[st.last + 1] = best[i] + c.work, ("stage", (st, c))
        if best[n] == inf:
            return None
        stages: list[tuple[Stage, StageCost]] = []
        inplace: list[int] = []
        k = n
        while k > 0:
            kind, val = how[k]  # type: ignore[misc]
            if kind == "stage":
                st, c = val  # type: ignore[misc]
                stages.append((st, c))
                k = st.first
            else:
                if kind == "inplace":
                    inplace.append(int(val))  # type: ignore[arg-type]
                k -= 1
        stages.reverse()
        inplace.reverse()
        peak = self.estimate(stages, inplace)
        return Plan(tuple(s for s, _c in stages), tuple(inplace), peak,
                    sum(c.extra_macs for _s, c in stages), sum(c.extra_calls for _s, c in stages),
                    sum(c.moved_bytes for _s, c in stages),
                    int(sum(c.work for _s, c in stages) + sum(self.inplace[i][1] for i in inplace)))

    def estimate(self, stages: Sequence[tuple[Stage, StageCost]], inplace: Sequence[int]) -> int:
        """The estimated peak of a plan: its stages' peaks and every other step's bytes."""
        inside = set()
        peak = 0
        for st, c in stages:
            inside.update(range(st.first, st.last + 1))
            peak = max(peak, c.peak)
        for i, b in enumerate(self.live.step_bytes):
            if i in inside:
                continue
            if i in inplace:
                b = self.inplace[i][0]
            peak = max(peak, b)
        return peak

    def budget(self, overhead: float) -> float:
        return overhead * self.model_macs

    def smallest(self, overhead: float) -> Plan:
        """The plan of the smallest estimated peak within `overhead` (extra work / model MACs)."""
        values = self.candidates()
        budget = self.budget(overhead)

        def fits(v: int) -> Plan | None:
            p = self.cover(v)
            return p if p is not None and p.work <= budget else None

        lo, hi = 0, len(values) - 1  # the largest value needs no stage: the layer-by-layer plan fits it
        while lo < hi:  # the cheapest cover only gets cheaper as the target grows: bisect the least target
            mid = (lo + hi) // 2
            if fits(values[mid]) is not None:
                hi = mid
            else:
                lo = mid + 1
        return fits(values[lo]) or Plan(peak_estimate=max(self.live.step_bytes, default=0))

    def within(self, limit: int, overhead: float) -> Plan | None:
        """The cheapest plan whose estimated peak is at most `limit` and overhead within `overhead`."""
        p = self.cover(limit)
        return p if p is not None and p.work <= self.budget(overhead) else None

    def below(self, peak: int) -> int | None:
        """The largest candidate peak under `peak` (to tighten a target), or None."""
        values = self.candidates()
        k = bisect.bisect_left(values, peak)
        return values[k - 1] if k > 0 else None


# --- the rewrite --------------------------------------------------------------------------------------------------

class _Names:
    """Fresh names (utvm.support.names.fresh_name) among `used`, which grows with every name given."""

    def __init__(self, used: set[str]) -> None:
        self.used = used

    def __call__(self, base: str) -> str:
        return fresh_name(base, self.used)


def _band(t: Tensor, name: str, rows: int) -> Tensor:
    return Tensor(name, (1, rows, t.shape[2], t.shape[3]), t.dtype, t.quant)


def _with_pad(node: Node, top: int, bottom: int) -> dict[str, object]:
    attrs = dict(node.attrs)
    pad = tuple(attrs.get("padding", (0, 0, 0, 0)))
    attrs["padding"] = (top, pad[1], bottom, pad[3])
    return attrs


def _slice(x: Tensor, out: str, start: int, rows: int, flag: str, name: str) -> Node:
    return Node("slice", (x.name,), (out,), {"begin": (0, start, 0, 0), "size": (1, rows, x.shape[2], x.shape[3]),
                                             flag: True}, name)


def _rewrite_stage(graph: Graph, stage: Stage, names: _Names, node_names: _Names, new: dict[str, Tensor],
                   patches_of: dict[str, list[int]]) -> list[Node]:
    nodes = list(graph.nodes[stage.first:stage.last + 1])
    rows = [rows_of(graph, n) for n in nodes]
    if any(r is None for r in rows):
        raise CompileError(f"patch stage: node {stage.first}..{stage.last} holds an operator a stage cannot")
    y = graph.tensor(nodes[-1].outputs[0])
    calls = row_schedule([r for r in rows if r is not None], y.shape[1], stage.rows)
    if calls is None or calls[-1].patch < 2:
        raise CompileError(f"patch stage: nodes {stage.first}..{stage.last} have no row schedule of "
                           f"{stage.rows} rows per patch")
    n = calls[-1].patch
    m = len(nodes)
    x = graph.tensor(nodes[0].inputs[0])
    outs = [graph.tensor(nd.outputs[0]) for nd in nodes]
    window: list[str] = [""] * m  # the tensor each intermediate's line buffer holds now
    y_parts: list[str] = []
    out: list[Node] = []

    def add(t: Tensor) -> str:
        new[t.name] = t
        return t.name

    def emit(node: Node, k: int) -> None:
        out.append(node)
        patches_of[node.name] = [k, n]

    for c in calls:
        k, t, src = c.patch, c.t, nodes[c.t]
        tag = f"p{k}"
        # the input: rows of the stage input (a view), or of the line buffer of the operator before
        lo, hi = c.inp
        if t == 0:
            whole, base, first = (0, x.shape[1]), x, 0
        else:
            whole, base, first = c.held, new[window[t - 1]], c.held[0]
        if (lo, hi) == whole:
            xin = base.name
        else:
            xin = add(_band(base, names(f"{base.name}:r{k}"), hi - lo))
            emit(_slice(base, xin, lo - first, hi - lo, VIEW, node_names(f"{base.name}:view:{tag}")), k)
        # the output: rows of the stage output (a view), or new rows below what the line buffer keeps
        kept = ""
        if t < m - 1 and c.keep is not None:
            if c.shift:
                kept = add(_band(outs[t], names(f"{outs[t].name}:k{k}"), c.keep[1] - c.keep[0]))
                emit(_slice(new[window[t]], kept, c.shift, c.keep[1] - c.keep[0], SHIFT,
                            node_names(f"{outs[t].name}:shift:{tag}")), k)
            else:
                kept = window[t]
        dst = add(_band(outs[t], names(f"{outs[t].name}:{tag}"), c.out[1] - c.out[0]))
        if t == m - 1:
            y_parts.append(dst)
        emit(Node(src.op, (xin, *src.inputs[1:]), (dst,), _with_pad(src, *c.pad),
                  node_names(f"{src.name or src.op}:{tag}")), k)
        if t < m - 1:
            if kept:
                win = add(_band(outs[t], names(f"{outs[t].name}:w{k}"), c.window[1] - c.window[0]))
                emit(Node("concat", (kept, dst), (win,), {"axis": 1, VIEW: True},
                          node_names(f"{outs[t].name}:window:{tag}")), k)
                window[t] = win
            else:
                window[t] = dst
    emit(Node("concat", tuple(y_parts), (y.name,), {"axis": 1, VIEW: True}, node_names(f"{y.name}:rows")), n)
    return out


def rewrite(graph: Graph, plan: Plan, share: bool = True) -> Graph:
    """`graph` with the plan's stages run in row patches and its in-place depthwise nodes marked (module
    docstring); the same outputs, bit for bit, from ordinary operators. `share` (recorded in the graph's
    metadata, `SHARE_KEY`): the identical operators of a stage may call one C function (lowering, step 6)."""
    if plan.empty:
        return graph
    names = _Names(set(graph.tensors))
    node_names = _Names({n.name for n in graph.nodes})
    new: dict[str, Tensor] = {}
    patches_of: dict[str, list[int]] = {}
    starts = {s.first: s for s in plan.stages}
    nodes: list[Node] = []
    i = 0
    while i < len(graph.nodes):
        if i in starts:
            st = starts[i]
            nodes += _rewrite_stage(graph, st, names, node_names, new, patches_of)
            i = st.last + 1
            continue
        node = graph.nodes[i]
        if i in plan.inplace:
            node = node.replace(attrs={**node.attrs, INPLACE: True})
        nodes.append(node)
        i += 1
    meta = dict(graph.metadata)
    meta[PATCHES_KEY] = {**dict(meta.get(PATCHES_KEY, {})), **patches_of}
    meta[SHARE_KEY] = bool(share)
    return graph.with_nodes(nodes, new.values()).replace(metadata=meta)


def patch_of(graph: Graph, node: Node) -> list[int] | None:
    """[k, n] when `node` is part of patch k of n of a stage, else None."""
    v = dict(graph.metadata.get(PATCHES_KEY, {}) or {}).get(node.name)
    return [int(v[0]), int(v[1])] if v else None


def model_macs(graph: Graph) -> int:
    return sum(node_macs(graph, i) for i in range(len(graph.nodes)))



# --- choosing the plan (utvm compile --memory-limit) ----------------------------------------------------------

#: lower_fit(graph, peak_limit[, max_slowdown=...]) -> Lowered: the driver's lowering (fit.lower_within with the
#: compile's arguments); peak_limit None is the default build's limit (towards the portable peak within
#: `max_slowdown` of the model's work); with a limit and a `max_slowdown`, the fastest schedules that fit it
#: within that budget, or as near as the budget goes (never raising).
LowerFit = Callable[..., Lowered]
#: how many tighter targets `choose` tries when a lowered plan comes out over the limit (kernel scratch and
#: alignment the estimate does not see)
RETRIES = 6


@dataclass
class Choice:
    """The build `choose` picked and what metadata.json reports of it (`report`)."""

    lowered: Lowered
    base: Lowered  # the layer-by-layer build
    plan: Plan
    model_macs: int
    limit: int | str | None
    overhead: float

    def report(self) -> dict[str, object]:
        """metadata.json's modules.<m>.memory additions: the planner's three figures and both timelines."""
        from utvm.compiler.lower import timeline

        lbl = timeline(self.base)
        return {"layer_by_layer_bound_bytes": self.base.plan.lower_bound_bytes,
                "peak_bytes": self.lowered.plan.workspace_bytes,
                "extra_macs": self.plan.extra_macs,
                "timeline": {"layer_by_layer": lbl,
                             "plan": lbl if self.lowered is self.base else timeline(self.lowered)},
                "memory_aware": {"memory_limit": self.limit, "patch_overhead": self.overhead,
                                 "model_macs": self.model_macs, **self.plan.to_json(self.model_macs)}}

    def summary(self) -> str:
        p = self.plan
        what = (f"{len(p.stages)} patch stage{'s' if len(p.stages) != 1 else ''}, {len(p.inplace)} in-place "
                f"depthwise, overhead {100 * p.work / max(self.model_macs, 1):.1f}% of the model's MACs"
                if not p.empty else "layer by layer")
        return (f"memory: layer-by-layer bound {self.base.plan.lower_bound_bytes} bytes, plan peak "
                f"{self.lowered.plan.workspace_bytes} bytes, extra MACs {p.extra_macs} ({what})")


def choose(graph: Graph, lower_fit: LowerFit, limit: int | str | None, overhead: float = DEFAULT_OVERHEAD,
           share: bool = True, progress: Callable[[str], None] | None = None) -> Choice:
    """The build of `graph` for `--memory-limit limit`. None: the default (layer-by-layer) build. Bytes: the
    fastest build whose workspace fits, tried in this order: the default build; the same graph with kernel
    schedules of less scratch (the fit's default budget, then the fastest schedules that fit the limit within
    `overhead` of the model's work by their own estimate, a tuning log's too); the cheapest cover of the limit
    by stages and in-place kernels whose estimated overhead is within `overhead`, lowered the same two ways
    and checked (its target tightened while the real plan comes out over). "min": the smaller workspace of
    the schedules alone and of the smallest cover, each lowered towards the smallest peak within `overhead`.
    A limit nothing reaches raises CompileError naming the smallest peak reachable (what "min" builds, or a
    build tried for the limit when it came out smaller). `lower_fit(graph, peak_limit, max_slowdown=...)`
    lowers (fit.lower_within with the compile's arguments)."""
    say = progress or (lambda _m: None)
    base = lower_fit(graph, None)
    graph = base.graph  # as lowered (constant reshapes folded): the node indices of its operators
    macs = model_macs(graph)
    if limit is None or (isinstance(limit, int) and base.plan.workspace_bytes <= limit):
        return Choice(base, base, Plan(), macs, limit, overhead)  # nothing is faster than the default build
    if limit != "min" and (not isinstance(limit, int) or limit < 1):
        raise CompileError(f"memory limit {limit!r}: a number of bytes >= 1, or 'min'")

    def lowered(g: Graph, first: Lowered | None = None, to: int | None = None) -> Lowered:
        """`g` lowered with the fit's default budget (`first`, when already done); when that is over `to` (always,
        with no `to`), with kernel schedules of less scratch within `overhead`: the fastest that fit `to` (a
        tuning log's too, once the defaults are at their least), else towards the smallest peak."""
        lw = first if first is not None else lower_fit(g, None)
        if to is not None and lw.plan.workspace_bytes <= to:
            return lw
        lean = lower_fit(g, to, max_slowdown=overhead)
        return lean if lean.plan.workspace_bytes < lw.plan.workspace_bytes else lw

    to = limit if isinstance(limit, int) else None
    alone = lowered(graph, base, to)  # kernel schedules only
    if to is not None and alone.plan.workspace_bytes <= to:
        return Choice(alone, base, Plan(), macs, limit, overhead)
    planner = Planner(graph, base)
    say(f"memory-aware plan: {sum(len(v) for v in planner.stages.values())} candidate stages, "
        f"{len(planner.inplace)} in-place depthwise candidates")

    def build(plan: Plan, to: int | None) -> Lowered:
        say(f"memory-aware plan: {len(plan.stages)} stages {[s.to_json() for s in plan.stages]}, in place "
            f"{list(plan.inplace)}: estimated peak {plan.peak_estimate} bytes")
        return lowered(rewrite(graph, plan, share), to=to)

    smallest_plan = planner.smallest(overhead)

    def smallest() -> Choice:
        """What "min" builds: the smaller of the schedules alone and the smallest cover, both towards the
        smallest peak."""
        least = alone if to is None else lowered(graph, base)
        if not smallest_plan.empty:
            lw = build(smallest_plan, None)
            if lw.plan.workspace_bytes < least.plan.workspace_bytes:
                return Choice(lw, base, smallest_plan, macs, limit, overhead)
        return Choice(least, base, Plan(), macs, limit, overhead)

    if to is None:
        return smallest()
    reached = [alone.plan.workspace_bytes]
    target: int | None = to
    for _ in range(RETRIES):
        plan = planner.within(target, overhead) if target is not None else None
        if plan is None:
            break
        lw = build(plan, to)
        reached.append(lw.plan.workspace_bytes)
        if lw.plan.workspace_bytes <= to:
            return Choice(lw, base, plan, macs, limit, overhead)
        target = planner.below(plan.peak_estimate)
    reached.append(smallest().lowered.plan.workspace_bytes)
    raise CompileError(
        f"--memory-limit {limit} bytes cannot be met: the smallest peak reachable is {min(reached)} bytes "
        f"(layer-by-layer bound {base.plan.lower_bound_bytes} bytes; row patches, in-place depthwise and kernel "
        f"schedules within --patch-overhead {100 * overhead:g}% of the model's {macs} MACs)")
