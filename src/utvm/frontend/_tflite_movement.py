"""TFLite import of the data-movement operators: RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, CONCATENATION, PAD
and PADV2 (utvm.ops.shape, utvm.ops.pad) and the movement family (utvm.ops.movement).

RESHAPE/SQUEEZE/EXPAND_DIMS become `reshape` to the stored output shape; PAD pads int8 with the output zero
point (other types with 0), PADV2 with its constant; a fused activation on CONCATENATION is refused.

Index-like inputs (begin/end/strides, sizes, axes, shapes, paddings) must be constant tensors: they become
attributes, and a runtime one is refused naming the tensor (shapes are static in utvm). The exceptions
are DYNAMIC_UPDATE_SLICE's start indices, read at run time as TFLite Micro does. FILL's value may be
computed at run time; its dims must be constant and equal to the declared output shape (TFLite Micro
checks them at allocation and fails on computed dims).

SHAPE and BROADCAST_ARGS compute constants: they are folded into constant tensors at import (a graph
output that is a constant is copied into the caller's buffer by the generated code). Any other movement
operator whose inputs are all constant and whose output is a small integer tensor (shape arithmetic:
SHAPE -> STRIDED_SLICE -> PACK ...) is folded too.

TFLite Micro quirks imported as TFLite Micro reads them (with a warning): STRIDED_SLICE's ellipsis_mask,
new_axis_mask and offset are ignored by TFLite Micro's kernel (the declared output shape must still match).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from utvm.errors import GraphError, ModelFormatError, UnsupportedModelError
from utvm.frontend._tflite_core import Importer, RawOp, arity, converter, label, tflm_dtypes
from utvm.ir.graph import Graph, Node
from utvm.ir.interp import run_reference
from utvm.ir.verify import verify

#: TFLite Micro's rank limits per operator (its kernels refuse larger ranks)
_MAX_RANK = {"STRIDED_SLICE": 4, "SLICE": 5, "BROADCAST_TO": 5, "DYNAMIC_UPDATE_SLICE": 6, "REVERSE_V2": 6}
_FOLD_MAX_ELEMENTS = 64


def _ints(imp: Importer, op: RawOp, k: int, what: str, dtypes: tuple[str, ...] = ("int32", "int64")) -> list[int]:
    """A constant integer input as a flat list; refused when it is computed at run time."""
    if k >= len(op.inputs) or op.inputs[k] < 0:
        raise ModelFormatError(f"{label(op)}: the {what} input (input {k}) is absent")
    name = imp.tname(op.inputs[k], what)
    t = imp.tensors[name]
    if t.data is None:
        raise UnsupportedModelError(f"{label(op)}: {what} {name!r} is computed at run time; it must be a constant "
                                    "tensor (shapes are static in utvm)")
    if t.dtype not in dtypes:
        raise UnsupportedModelError(f"{label(op)}: {what} {name!r} is {t.dtype}; TFLite Micro reads it as "
                                    f"{' or '.join(dtypes)}")
    return [int(v) for v in np.asarray(imp.const_ints(op.inputs[k], what)).ravel()]


def _rank(imp: Importer, op: RawOp, name: str) -> int:
    rank = len(imp.tensors[name].shape)
    limit = _MAX_RANK.get(op.code)
    if limit is not None and rank > limit:
        raise UnsupportedModelError(f"{label(op)}: tensor {name!r} has rank {rank}; TFLite Micro's {op.code} "
                                    f"supports rank <= {limit}")
    return rank


def _emit(imp: Importer, op: RawOp, op_name: str, ins: list[str], outs: list[str], **attrs: Any) -> None:
    """Emit a node, or fold it into constants when every input is a constant and the outputs are small
    integer tensors (shape arithmetic)."""
    ts = [imp.tensors[n] for n in ins if n]
    youts = [imp.tensors[n] for n in outs]
    if (ts and all(t.data is not None for t in ts) and all(t.dtype in ("int32", "int64") for t in youts)
            and sum(t.size for t in youts) <= _FOLD_MAX_ELEMENTS):
        node = Node(op_name, tuple(ins), tuple(outs), attrs, outs[0])
        tensors = {t.name: t for t in ts + youts}
        g = Graph(tensors, (node,), (), tuple(outs), "fold")
        try:
            verify(g)
            values = run_reference(g, {})
        except GraphError as exc:
            raise UnsupportedModelError(f"{label(op)} on constants cannot be folded: {exc}") from exc
        for n in outs:
            imp.tensors[n] = imp.tensors[n].replace(data=np.asarray(values[n]))
        return
    imp.emit(op_name, ins, outs, **attrs)


@converter("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _reshape(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 2)
    if op.code == "EXPAND_DIMS":  # TFLite Micro's EXPAND_DIMS copies float32, int8 and int16 only
        tflm_dtypes(imp, op, ins[0], ("float32", "int8", "int16", "uint8"))
    imp.emit("reshape", [ins[0]], outs, shape=tuple(imp.tensors[outs[0]].shape))


@converter("TRANSPOSE")
def _transpose(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    tflm_dtypes(imp, op, ins[0], ("float32", "int8", "int16", "uint8"))
    perm = tuple(int(p) for p in imp.const_ints(op.inputs[1], "perm").ravel())
    imp.emit("transpose", [ins[0]], outs, perm=perm)


@converter("CONCATENATION")
def _concat(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    if not ins:
        raise ModelFormatError(f"operator {op.index} (CONCATENATION) has no inputs")
    if imp.activation(op) != "none":
        raise UnsupportedModelError(f"operator {op.index} (CONCATENATION): a fused activation on concatenation "
                                    "is not supported")
    imp.emit("concat", ins, outs, axis=int(op.options.get("axis", 0)))


@converter("PAD", "PADV2")
def _pad(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 3)
    pads = imp.const_ints(op.inputs[1], "paddings")
    x = imp.tensors[ins[0]]
    if pads.shape != (len(x.shape), 2):
        raise ModelFormatError(f"{label(op)}: paddings shape {list(pads.shape)} does not fit input rank {len(x.shape)}")
    y = imp.tensors[outs[0]]
    value: float | int = 0.0
    if len(ins) > 2 and ins[2]:
        values = imp.const(op.inputs[2], "constant_values")
        if values.size != 1:
            raise ModelFormatError(f"{label(op)}: constant_values {ins[2]!r} has {values.size} elements; it must be "
                                   "a scalar")
        value = values.ravel()[0].item()
    elif y.dtype in ("int8", "uint8"):  # TFLite Micro pads the other types with 0
        value = y.quant.zero_point[0] if y.quant is not None else 0
    imp.emit("pad", [ins[0]], outs, pads=tuple((int(a), int(b)) for a, b in pads), value=value)


@converter("STRIDED_SLICE")
def _strided_slice(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 4, 4)
    rank = _rank(imp, op, ins[0])
    begin = _ints(imp, op, 1, "begin", ("int32",))
    end = _ints(imp, op, 2, "end", ("int32",))
    strides = _ints(imp, op, 3, "strides", ("int32",))
    for what, v in (("begin", begin), ("end", end), ("strides", strides)):
        if len(v) != rank:
            raise UnsupportedModelError(f"{label(op)}: {what} has {len(v)} entries for the rank-{rank} input "
                                        f"{ins[0]!r}; TFLite Micro needs one per axis")
    o = op.options
    ignored = [k for k in ("EllipsisMask", "NewAxisMask", "Offset") if o.get(k)]
    if ignored:
        imp.warn(f"{label(op)}: {', '.join(ignored)} set; TFLite Micro's STRIDED_SLICE ignores "
                 f"{'it' if len(ignored) == 1 else 'them'}, and so does the import")
    _emit(imp, op, "strided_slice", [ins[0]], outs, begin=tuple(begin), end=tuple(end), strides=tuple(strides),
          begin_mask=int(o.get("BeginMask", 0)), end_mask=int(o.get("EndMask", 0)),
          shrink_axis_mask=int(o.get("ShrinkAxisMask", 0)))


@converter("SLICE")
def _slice(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 3, 3)
    _rank(imp, op, ins[0])
    if imp.tensors[ins[1]].dtype != imp.tensors[ins[2]].dtype:
        raise UnsupportedModelError(f"{label(op)}: begin {ins[1]!r} and size {ins[2]!r} must have one type")
    _emit(imp, op, "slice", [ins[0]], outs, begin=tuple(_ints(imp, op, 1, "begin")),
          size=tuple(_ints(imp, op, 2, "size")))


def _axis_const(imp: Importer, op: RawOp, k: int) -> int:
    axis = _ints(imp, op, k, "axis", ("int32",))
    if len(axis) != 1:
        raise ModelFormatError(f"{label(op)}: axis {_input_name(imp, op, k)!r} has {len(axis)} elements; expected 1")
    return axis[0]


def _input_name(imp: Importer, op: RawOp, k: int) -> str:
    return imp.names.get(op.inputs[k], f"input {k}")


def _normalized(op: RawOp, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ModelFormatError(f"{label(op)}: axis {axis} is out of range for rank {rank}")
    return axis % rank


@converter("SPLIT", "SPLIT_V")
def _split(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    n = int(op.options.get("NumSplits", len(outs)))
    if n != len(outs):
        raise ModelFormatError(f"{label(op)}: num_splits {n} but the operator has {len(outs)} outputs")
    if op.code == "SPLIT":
        arity(imp, op, ins, 2, 2)
        x, axis = ins[1], _axis_const(imp, op, 0)
        rank = len(imp.tensors[x].shape)
        axis = _normalized(op, axis, rank)
        dim = imp.tensors[x].shape[axis]
        if dim % n:
            raise ModelFormatError(f"{label(op)}: axis {axis} of {x!r} ({dim}) does not split into {n} equal parts")
        sizes = [dim // n] * n
    else:
        arity(imp, op, ins, 3, 3)
        x, axis = ins[0], _axis_const(imp, op, 2)
        rank = len(imp.tensors[x].shape)
        axis = _normalized(op, axis, rank)
        dim = imp.tensors[x].shape[axis]
        sizes = _ints(imp, op, 1, "size_splits")
        if len(sizes) != n:
            raise ModelFormatError(f"{label(op)}: size_splits has {len(sizes)} entries for {n} outputs")
        if sizes.count(-1) > 1:
            raise ModelFormatError(f"{label(op)}: size_splits {sizes} has more than one -1")
        if -1 in sizes:
            sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    _emit(imp, op, "split", [x], outs, axis=axis, sizes=tuple(sizes))


@converter("PACK")
def _pack(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    if not ins or any(not x for x in ins):
        raise ModelFormatError(f"{label(op)} has a missing input")
    n = int(op.options.get("ValuesCount", len(ins)))
    if n != len(ins):
        raise ModelFormatError(f"{label(op)}: values_count {n} but the operator has {len(ins)} inputs")
    _emit(imp, op, "pack", ins, outs, axis=int(op.options.get("Axis", 0)))


@converter("UNPACK")
def _unpack(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    n = int(op.options.get("Num", len(outs)))
    if n != len(outs):
        raise ModelFormatError(f"{label(op)}: num {n} but the operator has {len(outs)} outputs")
    _emit(imp, op, "unpack", ins, outs, axis=int(op.options.get("Axis", 0)))


@converter("REVERSE_V2")
def _reverse(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    rank = _rank(imp, op, ins[0])
    axes = sorted(_normalized(op, a, rank) for a in _ints(imp, op, 1, "axis", ("int32",)))
    if any(b != a + 1 for a, b in zip(axes, axes[1:], strict=False)):
        raise UnsupportedModelError(f"{label(op)}: axes {axes} are not contiguous; TFLite Micro's REVERSE_V2 "
                                    "reverses contiguous axes only")
    _emit(imp, op, "reverse", [ins[0]], outs, axes=tuple(axes))


@converter("MIRROR_PAD")
def _mirror_pad(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    rank = len(imp.tensors[ins[0]].shape)
    pads = _ints(imp, op, 1, "paddings")
    if len(pads) != 2 * rank or tuple(imp.tensors[ins[1]].shape) != (rank, 2):
        raise ModelFormatError(f"{label(op)}: paddings {ins[1]!r} of shape {list(imp.tensors[ins[1]].shape)} do "
                               f"not fit the rank-{rank} input")
    mode = int(op.options.get("Mode", 0))
    if mode not in (0, 1):
        raise ModelFormatError(f"{label(op)}: unknown mirror padding mode {mode} (0: REFLECT, 1: SYMMETRIC)")
    _emit(imp, op, "mirror_pad", [ins[0]], outs, pads=tuple((pads[2 * d], pads[2 * d + 1]) for d in range(rank)),
          mode="reflect" if mode == 0 else "symmetric")


@converter("DYNAMIC_UPDATE_SLICE")
def _dynamic_update_slice(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 3, 3)
    x, u = imp.tensors[ins[0]], imp.tensors[ins[1]]
    if x.size != u.size:  # TFLite Micro copies the update whole when the sizes agree, whatever the rank
        _rank(imp, op, ins[0])
    _emit(imp, op, "dynamic_update_slice", ins, outs)


@converter("BROADCAST_TO")
def _broadcast_to(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    _rank(imp, op, ins[0])
    shape = _ints(imp, op, 1, "shape")
    if len(shape) > _MAX_RANK["BROADCAST_TO"]:
        raise UnsupportedModelError(f"{label(op)}: target shape {shape} has rank {len(shape)}; TFLite Micro's "
                                    "BROADCAST_TO supports rank <= 5")
    _emit(imp, op, "broadcast_to", [ins[0]], outs, shape=tuple(shape))


@converter("FILL")
def _fill(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    y, v = imp.tensors[outs[0]], imp.tensors[ins[1]]
    if v.shape != ():
        raise UnsupportedModelError(f"{label(op)}: value {ins[1]!r} has shape {list(v.shape)}; TFLite Micro's FILL "
                                    "needs a scalar")
    if v.dtype != y.dtype:
        raise ModelFormatError(f"{label(op)}: value {ins[1]!r} is {v.dtype}, output {outs[0]!r} is {y.dtype}")
    want = _ints(imp, op, 0, "dims", ("int8", "int16", "int32", "int64"))
    if tuple(want) != tuple(y.shape):
        raise ModelFormatError(f"{label(op)}: dims {want} do not match the output {outs[0]!r} of shape "
                               f"{list(y.shape)}")
    imp.emit("fill", [ins[1]], outs, shape=tuple(y.shape))


@converter("SHAPE")
def _shape(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    x, y = imp.tensors[ins[0]], imp.tensors[outs[0]]
    if y.dtype != "int32":
        raise UnsupportedModelError(f"{label(op)}: output {outs[0]!r} is {y.dtype}; TFLite Micro's SHAPE "
                                    "produces int32 only")
    if tuple(y.shape) != (len(x.shape),):
        raise ModelFormatError(f"{label(op)}: output {outs[0]!r} has shape {list(y.shape)}; the shape of the "
                               f"rank-{len(x.shape)} input needs [{len(x.shape)}]")
    imp.tensors[outs[0]] = y.replace(data=np.asarray(x.shape, dtype=np.int32).reshape(y.shape))


@converter("BROADCAST_ARGS")
def _broadcast_args(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    y = imp.tensors[outs[0]]
    types = {imp.tensors[ins[0]].dtype, imp.tensors[ins[1]].dtype, y.dtype}
    if len(types) != 1 or y.dtype not in ("int32", "int64"):
        raise UnsupportedModelError(f"{label(op)}: shapes and output must all be int32 or all int64 "
                                    f"(got {sorted(types)})")
    a, b = _ints(imp, op, 0, "shape"), _ints(imp, op, 1, "shape")
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    if any(p != q and 1 not in (p, q) for p, q in zip(a, b, strict=True)):
        raise ModelFormatError(f"{label(op)}: shapes {a} and {b} do not broadcast")
    out = [q if p == 1 else p for p, q in zip(a, b, strict=True)]
    if tuple(y.shape) != (n,):
        raise ModelFormatError(f"{label(op)}: output {outs[0]!r} has shape {list(y.shape)}; expected [{n}]")
    imp.tensors[outs[0]] = y.replace(data=np.asarray(out, dtype=y.dtype))
