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
space only changes speed and code size. A *schedule* is a plain dict knob -> value (JSON-serialisable
values: int, str, bool). The *workload* of a node is what makes two nodes one tuning task: op, shapes,
dtypes, attributes, the quantization class and the target; `task_key(workload)` is its stable string
(the same on every machine and run).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator, Mapping
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


@dataclass(frozen=True)
class Space:
    """The knobs of one kernel for one workload, their default point and a legality test."""

    knobs: tuple[Knob, ...]
    default: Schedule = field(default_factory=dict)
    #: None when a point is legal, else a one-line reason (alignment, register pressure, a shape the
    #: variant cannot handle); every illegal point is skipped by the tuner and refused when forced.
    legal: Callable[[Schedule], str | None] = _always_legal

    def __post_init__(self) -> None:
        names = [k.name for k in self.knobs]
        if len(set(names)) != len(names):
            raise CompileError(f"duplicate knob names in {names}")
        reason = self.check(self.default)
        if reason:
            raise CompileError(f"the default schedule {self.default} is not legal: {reason}")

    @property
    def size(self) -> int:
        """Points in the cross product (legal or not)."""
        return math.prod(len(k.values) for k in self.knobs)

    def point(self, index: int) -> Schedule:
        """The point at `index` of the cross product (mixed radix, first knob slowest)."""
        out: Schedule = {}
        for k in reversed(self.knobs):
            index, r = divmod(index, len(k.values))
            out[k.name] = k.values[r]
        return {k.name: out[k.name] for k in self.knobs}

    def points(self) -> Iterator[Schedule]:
        """Every legal point, in cross-product order."""
        for i in range(self.size):
            p = self.point(i)
            if self.legal(p) is None:
                yield p

    def check(self, point: Mapping[str, Any]) -> str | None:
        """None if `point` names every knob with one of its values and is legal; else why not."""
        names = {k.name for k in self.knobs}
        extra = sorted(set(point) - names)
        if extra:
            return f"unknown knob(s) {', '.join(extra)}"
        for k in self.knobs:
            if k.name not in point:
                return f"knob {k.name!r} is missing"
            if point[k.name] not in k.values or type(point[k.name]) is not type(k.values[0]):
                return f"knob {k.name!r} = {point[k.name]!r} is not one of {list(k.values)}"
        return self.legal(dict(point))

    def features(self, point: Mapping[str, Any]) -> list[float]:
        """Numbers describing a point (one per knob value: one-hot for strings and bools, the value for
        ints), for learned cost models."""
        out: list[float] = []
        for k in self.knobs:
            v = point[k.name]
            if all(isinstance(x, int) and not isinstance(x, bool) for x in k.values):
                out.append(float(v))
            else:
                out += [1.0 if v == x else 0.0 for x in k.values]
        return out

    def describe(self) -> str:
        return ", ".join(f"{k.name} in {list(k.values)}" for k in self.knobs)


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
