"""TFLite import of the reduce operator family (registered into utvm.frontend.tflite with `converter`):
REDUCE_MAX, REDUCE_MIN, SUM, REDUCE_ALL, ARG_MAX, ARG_MIN, CUMSUM, L2_NORMALIZATION, L2_POOL_2D (MEAN and the
average/max pools are converted in utvm.frontend.tflite)."""

from __future__ import annotations

import numpy as np

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend.tflite import (
    _ACTIVATIONS,
    _arity,
    _check_window,
    _Importer,
    _RawOp,
    converter,
    tflite_padding,
)


def _label(op: _RawOp) -> str:
    return f"operator {op.index} ({op.code})"


def _int32_const(imp: _Importer, op: _RawOp, k: int, what: str) -> np.ndarray:
    """Constant input k, which TFLite Micro requires to be int32."""
    t = imp.tensors[imp.tname(op.inputs[k], what)]
    if not np.issubdtype(np.dtype(t.dtype), np.integer):
        return imp.const_ints(op.inputs[k], what)  # a ModelFormatError naming the non-integer tensor
    if t.dtype != "int32":
        raise UnsupportedModelError(f"{_label(op)}: {what} {t.name!r} is {t.dtype}; TFLite Micro takes only int32")
    if t.size == 0:  # an empty axis list has no data to store
        return np.zeros((0,), np.int32)
    return imp.const_ints(op.inputs[k], what)


def _activation(op: _RawOp) -> str:
    code = int(op.options.get("FusedActivationFunction", 0))
    act = _ACTIVATIONS.get(code)
    if act is None:
        raise ModelFormatError(f"{_label(op)} has unknown fused activation {code}")
    if act in ("tanh", "sign_bit"):
        raise UnsupportedModelError(f"{_label(op)}: fused activation {act.upper()} is not supported (supported: "
                                    "NONE, RELU, RELU6, RELU_N1_TO_1)")
    return act


@converter("REDUCE_MAX", "REDUCE_MIN", "SUM", "REDUCE_ALL")
def _reduce(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    axes = tuple(int(a) for a in _int32_const(imp, op, 1, "axis").ravel())
    name = {"REDUCE_MAX": "reduce_max", "REDUCE_MIN": "reduce_min", "SUM": "reduce_sum",
            "REDUCE_ALL": "reduce_all"}[op.code]
    imp.emit(name, [ins[0]], outs, axes=axes, keepdims=bool(op.options.get("KeepDims", False)))


@converter("ARG_MAX", "ARG_MIN")
def _arg(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    axis = _int32_const(imp, op, 1, "axis").ravel()
    if axis.size != 1:
        raise ModelFormatError(f"{_label(op)}: axis {ins[1]!r} has {axis.size} elements; it must be one")
    out = imp.tensors[outs[0]]
    if out.dtype != "int32":
        raise UnsupportedModelError(f"{_label(op)}: output {out.name!r} is {out.dtype}; TFLite Micro's "
                                    f"{op.code} writes only int32")
    imp.emit(op.code.lower(), [ins[0]], outs, axis=int(axis[0]))


@converter("CUMSUM")
def _cumsum(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    axis = _int32_const(imp, op, 1, "axis").ravel()
    if axis.size != 1:
        raise ModelFormatError(f"{_label(op)}: axis {ins[1]!r} has {axis.size} elements; it must be one")
    imp.emit("cumsum", [ins[0]], outs, axis=int(axis[0]), exclusive=bool(op.options.get("Exclusive", False)),
             reverse=bool(op.options.get("Reverse", False)))


@converter("L2_NORMALIZATION")
def _l2norm(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    imp.emit("l2_normalization", ins, outs, activation=_activation(op))


@converter("L2_POOL_2D")
def _l2pool(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    x = imp.tensors[ins[0]]
    if len(x.shape) != 4:
        raise ModelFormatError(f"{_label(op)}: input {x.name!r} must be rank 4")
    o = op.options
    pool = (int(o.get("FilterHeight", 0)), int(o.get("FilterWidth", 0)))
    strides = (int(o.get("StrideH", 0)), int(o.get("StrideW", 0)))
    _check_window(op, int(o.get("Padding", 0)), strides, (1, 1), pool, "filter")
    pad = tflite_padding(int(o.get("Padding", 0)), (x.shape[1], x.shape[2]), pool, strides, (1, 1))
    imp.emit("l2_pool2d", ins, outs, pool=pool, strides=strides, padding=pad, activation=_activation(op))
