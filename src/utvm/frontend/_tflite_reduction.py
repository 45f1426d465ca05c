"""TFLite import of the reductions (utvm.ops.reduction, utvm.ops.pool): MEAN, REDUCE_MAX, REDUCE_MIN, SUM,
REDUCE_ALL, ARG_MAX, ARG_MIN, CUMSUM, L2_NORMALIZATION and the pools AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D.
Axis operands must be constant int32 tensors (TFLite Micro's requirement; an empty axis list reduces nothing).
"""

from __future__ import annotations

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend._tflite_core import (
    Importer,
    RawOp,
    arity,
    check_window,
    converter,
    fused_activation,
    int32_const,
    label,
    tflite_padding,
)


def _axes(imp: Importer, op: RawOp, ins: list[str]) -> tuple[int, ...]:
    """The constant axis operand (input 1) of a two-input reduction."""
    arity(imp, op, ins, 2, 2)
    return tuple(int(a) for a in int32_const(imp, op, 1, "axis").ravel())


def _axis(imp: Importer, op: RawOp, ins: list[str]) -> int:
    """The one axis of an operator whose axis operand (input 1) must hold exactly one."""
    axes = _axes(imp, op, ins)
    if len(axes) != 1:
        raise ModelFormatError(f"{label(op)}: axis {ins[1]!r} has {len(axes)} elements; it must be one")
    return axes[0]


@converter("MEAN")
def _mean(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    axes = _axes(imp, op, ins)
    imp.emit("mean", [ins[0]], outs, axes=axes, keepdims=bool(op.options.get("keep_dims", False)))


@converter("REDUCE_MAX", "REDUCE_MIN", "SUM", "REDUCE_ALL")
def _reduce(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    axes = _axes(imp, op, ins)
    name = {"REDUCE_MAX": "reduce_max", "REDUCE_MIN": "reduce_min", "SUM": "reduce_sum",
            "REDUCE_ALL": "reduce_all"}[op.code]
    imp.emit(name, [ins[0]], outs, axes=axes, keepdims=bool(op.options.get("KeepDims", False)))


@converter("ARG_MAX", "ARG_MIN")
def _arg(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    axis = _axis(imp, op, ins)
    out = imp.tensors[outs[0]]
    if out.dtype != "int32":
        raise UnsupportedModelError(f"{label(op)}: output {out.name!r} is {out.dtype}; TFLite Micro's "
                                    f"{op.code} writes only int32")
    imp.emit(op.code.lower(), [ins[0]], outs, axis=axis)


@converter("CUMSUM")
def _cumsum(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    imp.emit("cumsum", [ins[0]], outs, axis=_axis(imp, op, ins), exclusive=bool(op.options.get("Exclusive", False)),
             reverse=bool(op.options.get("Reverse", False)))


@converter("L2_NORMALIZATION")
def _l2norm(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    imp.emit("l2_normalization", ins, outs, activation=fused_activation(op))


def _pool_window(imp: Importer, op: RawOp, ins: list[str], keys: tuple[str, str, str, str, str]
                 ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """(pool, strides, padding) of a rank-4 pool, from its options named `keys` (filter h, filter w, stride
    h, stride w, padding: the builtin options of the average/max pools and the L2 pool's spell them
    differently)."""
    arity(imp, op, ins, 1, 1)
    x = imp.tensors[ins[0]]
    if len(x.shape) != 4:
        raise ModelFormatError(f"{label(op)}: input {x.name!r} must be rank 4")
    o = op.options
    fh, fw, sh, sw, padding = (int(o.get(k, 0)) for k in keys)
    pool, strides = (fh, fw), (sh, sw)
    check_window(op, padding, strides, (1, 1), pool, "filter")
    return pool, strides, tflite_padding(padding, (x.shape[1], x.shape[2]), pool, strides, (1, 1))


@converter("AVERAGE_POOL_2D", "MAX_POOL_2D")
def _pool(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    pool, strides, pad = _pool_window(imp, op, ins, ("filter_h", "filter_w", "stride_h", "stride_w", "padding"))
    kind = "avg_pool2d" if op.code == "AVERAGE_POOL_2D" else "max_pool2d"
    extra = {"count_include_pad": False} if kind == "avg_pool2d" else {}
    imp.emit(kind, ins, outs, pool=pool, strides=strides, padding=pad, dilation=(1, 1), ceil_mode=False,
             activation=imp.activation(op), **extra)


@converter("L2_POOL_2D")
def _l2pool(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    pool, strides, pad = _pool_window(imp, op, ins, ("FilterHeight", "FilterWidth", "StrideH", "StrideW", "Padding"))
    imp.emit("l2_pool2d", ins, outs, pool=pool, strides=strides, padding=pad, activation=fused_activation(op))
