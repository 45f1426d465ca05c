"""TFLite import of the unary operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations

import math

from utvm.errors import ModelFormatError
from utvm.frontend.tflite import _arity, _Importer, _RawOp, converter

_SIMPLE = {"ABS": "abs", "NEG": "neg", "CEIL": "ceil", "FLOOR": "floor", "ROUND": "round", "SQRT": "sqrt",
           "RSQRT": "rsqrt", "SQUARE": "square", "EXP": "exp", "LOG": "log", "SIN": "sin", "COS": "cos",
           "ELU": "elu", "HARD_SWISH": "hard_swish", "LOGICAL_NOT": "logical_not", "ZEROS_LIKE": "zeros_like",
           "LOG_SOFTMAX": "log_softmax"}


@converter(*_SIMPLE)
def _simple(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    imp.emit(_SIMPLE[op.code], ins, outs)


@converter("LEAKY_RELU")
def _leaky_relu(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    alpha = float(op.options.get("Alpha", 0.0))
    if not math.isfinite(alpha):
        raise ModelFormatError(f"operator {op.index} (LEAKY_RELU) has alpha {alpha}; it must be finite")
    imp.emit("leaky_relu", ins, outs, alpha=alpha)


@converter("PRELU")
def _prelu(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    imp.emit("prelu", ins, outs)


@converter("CAST")
def _cast(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 1, 1)
    imp.emit("cast", ins, outs, to=imp.tensors[outs[0]].dtype)
