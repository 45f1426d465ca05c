"""Schedule spaces: the choices a kernel can make, and the workload key that names a tuning task.

A kernel that has choices registers a *space function* beside its emitter (docs/architecture.md §11):

    @register("conv2d", space=conv_space)
    def conv(ctx: KernelContext) -> KernelCode:
        s = ctx.schedule               # {"px_block": 2, "oc_block": 2, ...}: one point, complete
        ...

    def conv_space(ctx: KernelContext) -> Space:
        return Space(
            (Knob("px_block", (1, 2, 4), "output pixels per register block"),
             Knob("oc_block", (1, 2), "output channels per register block")),
            default={"px_block": 2, "oc_block": 2},        # the heuristic: fast without tuning
            legal=lambda p: None if ... else "why not")    # None when the point is legal

Every point of a space computes the same output bits as every other (integer reassociation only); the
space only changes speed, code size and the scratch buffer the kernel asks for. A *schedule* is a plain dict
knob -> value (JSON-serialisable values: int, str, bool). The *workload* of a node is what makes two nodes
one tuning task: op, shapes, dtypes, attributes, the quantization class and the target; `task_key(workload)`
is its stable string (the same on every machine and run).

A space tells, without emitting any C, the scratch bytes of a point (`Space.scratch`, equal to the
`KernelCode.scratch_bytes` the kernel returns for it) and an estimate of its instructions (`Space.cost`, a
static model for ranking points that trade speed for scratch; None when the kernel has none);
`memory_knobs` names the knobs that change the scratch, and `Space.leaner` lists the points that differ from
a point in those knobs only (what utvm.compiler.fit chooses among when a model's workspace must shrink).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from utvm.errors import CompileError

Schedule = dict[str, Any]


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[Any, ...]
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise CompileError(f"knob {self.name!r} has no values")
        for v in self.values:
            if not isinstance(v, int | str | bool):
                raise CompileError(f"knob {self.name!r}: value {v!r} is not an int, str or bool")


def _always_legal(_point: Schedule) -> str | None:
    return None


def _no_scratch(_point: Schedule) -> int:
    return 0


@dataclass(frozen=True, slots=True)
class Option:
    """A point of a space with its scratch bytes and estimated cost (`Space.leaner`)."""

    point: Schedule
    scratch: int
    cost: float


@dataclass(frozen=True)
class Space:
    """The knobs of one kernel for one workload, their default point and a legality test.

    A space is flat (every point names every knob: the cross product) or *conditional*: the first knob
    selects a branch (`branches`: selector value -> names of the other knobs that exist in that branch), so
    an algorithm's point names only the knobs that change its code (`conditional` builds one). `legacy`
    maps knob names a space used before (old tuning logs) to their names now: `normalize` reads old points.
    """

    knobs: tuple[Knob, ...]
    default: Schedule = field(default_factory=dict)
    #: None when a point is legal, else a one-line reason (alignment, register pressure, a shape the
    #: variant cannot handle); every illegal point is skipped by the tuner and refused when forced.
    legal: Callable[[Schedule], str | None] = _always_legal
    #: selector value -> the knobs (beyond the selector, the first knob) its points name; empty: flat
    branches: Mapping[Any, tuple[str, ...]] = field(default_factory=dict)
    #: old knob name -> its name now (points of old tuning logs; see `normalize`)
    legacy: Mapping[str, str] = field(default_factory=dict)
    #: knobs added since points were first written -> the value that gives the code those points had
    #: (a constant that became a knob); `normalize` fills them into a point that lacks them
    added: Mapping[str, Any] = field(default_factory=dict)
    #: bytes of scratch a legal point asks for (exactly the kernel's KernelCode.scratch_bytes), without emitting
    scratch: Callable[[Schedule], int] = _no_scratch
    #: estimated instructions of one call of a legal point (a static model: only its ranking of points is
    #: meant); None when the kernel has no model
    cost: Callable[[Schedule], float] | None = None
    #: the knobs (the selector included, for a conditional space) whose values change the scratch
    memory_knobs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise CompileError(f"duplicate knob names in {names}")
        if self.branches:
            selector = self.knobs[0]
            if set(self.branches) != set(selector.values):
                raise CompileError(f"the branches of {selector.name!r} must be exactly its values "
                                   f"{list(selector.values)}")
            for value, members in self.branches.items():
                unknown = sorted(set(members) - set(names[1:]))
                if unknown:
                    raise CompileError(f"branch {selector.name}={value!r} names unknown knobs {unknown}")
        unknown_memory = sorted(set(self.memory_knobs) - set(names))
        if unknown_memory:
            raise CompileError(f"memory knobs {unknown_memory} are not knobs of the space")
        reason = self.check(self.default)
        if reason:
            raise CompileError(f"the default schedule {self.default} is not legal: {reason}")

    @staticmethod
    def conditional(selector: Knob, branches: Mapping[Any, Sequence[Knob]], shared: Sequence[Knob] = (),
                    default: Schedule | None = None, legal: Callable[[Schedule], str | None] = _always_legal,
                    legacy: Mapping[str, str] | None = None, added: Mapping[str, Any] | None = None,
                    scratch: Callable[[Schedule], int] = _no_scratch,
                    cost: Callable[[Schedule], float] | None = None, memory_knobs: Sequence[str] = ()) -> Space:
        """A space whose `selector` (e.g. `algo`) chooses a sub-space: `branches[value]` are the knobs that
        exist for that value, `shared` the knobs every branch has (listed first after the selector). A knob
        object may appear in several branches (one definition, e.g. `requant`)."""
        knobs: list[Knob] = [selector, *shared]
        for branch in branches.values():
            for k in branch:
                if all(k.name != have.name for have in knobs):
                    knobs.append(k)
                elif next(have for have in knobs if have.name == k.name) != k:
                    raise CompileError(f"knob {k.name!r} is defined differently in two branches")
        shared_names = tuple(k.name for k in shared)
        return Space(tuple(knobs), dict(default or {}), legal,
                     {v: shared_names + tuple(k.name for k in branches[v]) for v in selector.values},
                     dict(legacy or {}), dict(added or {}), scratch, cost, tuple(memory_knobs))

    def _branch(self, value: Any) -> tuple[Knob, ...]:
        """The knobs besides the selector that the selector's `value` has (none for a value it lacks)."""
        members = self.branches.get(value, ())
        return tuple(k for k in self.knobs[1:] if k.name in members)

    def _active(self, point: Mapping[str, Any]) -> tuple[Knob, ...]:
        """The knobs a point of this space names: every knob (flat) or the selector and its branch."""
        if not self.branches:
            return self.knobs
        return (self.knobs[0], *self._branch(point.get(self.knobs[0].name)))

    def _sub_spaces(self) -> list[tuple[Any, tuple[Knob, ...]]]:
        """(selector value, the knobs of its branch) per branch; (None, every knob) for a flat space."""
        if not self.branches:
            return [(None, self.knobs)]
        return [(v, self._branch(v)) for v in self.knobs[0].values]

    @property
    def size(self) -> int:
        """Points in the cross product of each branch (legal or not)."""
        return sum(math.prod(len(k.values) for k in ks) for _v, ks in self._sub_spaces())

    def point(self, index: int) -> Schedule:
        """The point at `index` (branch by branch; in a branch, mixed radix, first knob slowest)."""
        for value, ks in self._sub_spaces():
            n = math.prod(len(k.values) for k in ks)
            if index < n:
                out: Schedule = {}
                for k in reversed(ks):
                    index, r = divmod(index, len(k.values))
                    out[k.name] = k.values[r]
                head = {} if value is None else {self.knobs[0].name: value}
                return {**head, **{k.name: out[k.name] for k in ks}}
            index -= n
        raise IndexError("schedule point index out of range")

    def points(self) -> Iterator[Schedule]:
        """Every legal point, in `point` order."""
        for i in range(self.size):
            p = self.point(i)
            if self.legal(p) is None:
                yield p

    def normalize(self, point: Mapping[str, Any]) -> Schedule:
        """`point` as this space names it: knobs renamed since (`legacy`) take their new names, and in a
        conditional space the knobs another branch owns are dropped when the point's selector is known
        (an old flat point's "off" values, which never changed the code), and a knob added since (`added`)
        that the point lacks takes the value that gives the code it had. What is left is for `check`."""
        out = {self.legacy.get(k, k): v for k, v in point.items()}
        if self.branches and out.get(self.knobs[0].name) in self.branches:
            keep = {k.name for k in self._active(out)}
            known = {k.name for k in self.knobs}
            out = {k: v for k, v in out.items() if k in keep or k not in known}
        if self.added and out:
            active = {k.name for k in self._active(out)}
            out.update({k: v for k, v in self.added.items() if k in active and k not in out})
        return out

    def check(self, point: Mapping[str, Any]) -> str | None:
        """None if `point` names every knob of its branch with one of its values and is legal; else why
        not."""
        if self.branches:
            sel = self.knobs[0]
            if sel.name not in point:
                return f"knob {sel.name!r} is missing"
            if point[sel.name] not in sel.values or type(point[sel.name]) is not type(sel.values[0]):
                return f"knob {sel.name!r} = {point[sel.name]!r} is not one of {list(sel.values)}"
        active = self._active(point)
        names = {k.name for k in active}
        extra = sorted(set(point) - names)
        if extra:
            where = f" for {self.knobs[0].name}={point[self.knobs[0].name]!r}" if self.branches else ""
            return f"unknown knob(s) {', '.join(extra)}{where}"
        for k in active:
            if k.name not in point:
                return f"knob {k.name!r} is missing"
            if point[k.name] not in k.values or type(point[k.name]) is not type(k.values[0]):
                return f"knob {k.name!r} = {point[k.name]!r} is not one of {list(k.values)}"
        return self.legal(dict(point))

    def leaner(self, point: Mapping[str, Any]) -> list[Option]:
        """The legal points that differ from `point` in the memory knobs (`memory_knobs`) only, with their
        scratch and estimated cost (0 without a cost model), `point` itself included when legal; fastest first,
        then least scratch, then nearest the default. A knob outside the memory knobs keeps `point`'s value;
        in another branch (the selector is a memory knob) a knob `point` does not name takes the default's
        value, else the value `added` gives, else its first; a combination that is illegal so takes the
        default's values for every knob it can (e.g. the registers of an asm form). Empty for a space without
        memory knobs."""
        if not self.memory_knobs:
            return []
        base = self.normalize(point)
        memory = set(self.memory_knobs)
        prefer = {**self.added, **self.default}
        out: dict[str, tuple[tuple[float, int, int], Option]] = {}
        for value, knobs in self._sub_spaces():
            if value is not None and self.knobs[0].name not in memory and value != base.get(self.knobs[0].name):
                continue
            head = {} if value is None else {self.knobs[0].name: value}
            varying = [k for k in knobs if k.name in memory]
            fixed = [k for k in knobs if k.name not in memory]
            for combo in itertools.product(*(k.values for k in varying)):
                mem = dict(zip((k.name for k in varying), combo, strict=True))
                for source in (base, prefer):
                    p = {**head, **{k.name: source.get(k.name, prefer.get(k.name, k.values[0])) for k in fixed},
                         **mem}
                    p = {**head, **{k.name: p[k.name] for k in knobs}}
                    if self.check(p) is None:
                        break
                else:
                    continue
                key = json.dumps(p, sort_keys=True)
                if key in out:
                    continue
                cost = float(self.cost(p)) if self.cost is not None else 0.0
                near = sum(prefer.get(k) != v for k, v in p.items())
                opt = Option(p, int(self.scratch(p)), cost)
                out[key] = ((cost, opt.scratch, near), opt)
        return [o for _k, o in sorted(out.values(), key=lambda t: t[0])]

    def features(self, point: Mapping[str, Any]) -> list[float]:
        """Numbers describing a point (one per knob value: one-hot for strings and bools, the value for
        ints; zeros for a knob the point's branch does not have), for learned cost models."""
        out: list[float] = []
        for k in self.knobs:
            v = point.get(k.name)
            if all(isinstance(x, int) and not isinstance(x, bool) for x in k.values):
                out.append(0.0 if v is None else float(v))
            else:
                out += [1.0 if v == x and k.name in point else 0.0 for x in k.values]
        return out

    def describe(self) -> str:
        if not self.branches:
            return ", ".join(f"{k.name} in {list(k.values)}" for k in self.knobs)
        sel = self.knobs[0]
        parts = []
        for value, ks in self._sub_spaces():
            inner = ", ".join(f"{k.name} in {list(k.values)}" for k in ks)
            parts.append(f"{sel.name}={value}" + (f": {inner}" if inner else ""))
        return "; ".join(parts)


# --- knobs several kernel families share (one definition each) ------------------------------------------

#: every exact requantization form (utvm.compiler.kernels.requant); a kernel's legality says which apply
REQUANT_FORMS: tuple[str, ...] = ("c", "fast", "dbl")


def requant_knob() -> Knob:
    return Knob("requant", REQUANT_FORMS,
                "requantization: the shared C helper, the shortest exact form, or the doubled-accumulator SMMULR form")


def no_sched_knob() -> Knob:
    return Knob("no_sched", (False, True), "GCC's pre-register-allocation instruction scheduler off for this operator")


def unroll_knob(values: Sequence[int], doc: str = "loop iterations written out per step") -> Knob:
    return Knob("unroll", tuple(int(v) for v in values), doc)


EMPTY_SPACE = Space(())


def canonical(obj: Any) -> Any:
    """`obj` with tuples as lists, numpy scalars as Python numbers and dict keys sorted (JSON-stable)."""
    if isinstance(obj, Mapping):
        return {str(k): canonical(obj[k]) for k in sorted(obj, key=str)}
    if isinstance(obj, list | tuple):
        return [canonical(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalar
        return canonical(obj.item())
    if isinstance(obj, float) and obj.is_integer():
        return obj
    return obj


def task_key(workload: Mapping[str, Any]) -> str:
    """The stable name of a workload: `<op>:<16 hex digits of the SHA-256 of its canonical JSON>`."""
    text = json.dumps(canonical(workload), sort_keys=True, separators=(",", ":"))
    return f"{workload['op']}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def describe_workload(workload: Mapping[str, Any]) -> str:
    """One readable line: op, input and output shapes, the interesting attributes (and a fused
    activation, so conv and conv+relu of one shape read apart). Absent optional inputs are skipped."""
    def tensors(key: str) -> list[Mapping[str, Any]]:
        return [t for t in workload.get(key) or () if isinstance(t, Mapping)]

    ins = " ".join("x".join(map(str, t.get("shape", ()))) + f"/{t.get('dtype', '?')}" for t in tensors("inputs"))
    outs = " ".join("x".join(map(str, t.get("shape", ()))) for t in tensors("outputs"))
    attrs = workload.get("attrs") or {}
    shown = {k: v for k, v in attrs.items() if k in ("strides", "padding", "dilation", "groups", "kernel",
                                                        "depth_multiplier", "pool", "pool_size")}
    extra = " ".join(f"{k}={v}" for k, v in shown.items())
    act = attrs.get("activation")
    if act not in (None, "none"):
        extra += f" +{act}"
    return f"{workload.get('op', '?')} {ins} -> {outs}" + (f" {extra.strip()}" if extra.strip() else "")
