"""TFLite import of the one-input operators: the activations (utvm.ops.activation: LOGISTIC, TANH, RELU, RELU6;
RELU_N1_TO_1 and RELU_0_TO_1 as `clip`), SOFTMAX, QUANTIZE/DEQUANTIZE and the unary family (utvm.ops.unary)."""

from __future__ import annotations

import math

from utvm.errors import ModelFormatError
from utvm.frontend._tflite_core import Importer, RawOp, arity, converter

_SIMPLE = {"ABS": "abs", "NEG": "neg", "CEIL": "ceil", "FLOOR": "floor", "ROUND": "round", "SQRT": "sqrt",
           "RSQRT": "rsqrt", "SQUARE": "square", "EXP": "exp", "LOG": "log", "SIN": "sin", "COS": "cos",
           "ELU": "elu", "HARD_SWISH": "hard_swish", "LOGICAL_NOT": "logical_not", "ZEROS_LIKE": "zeros_like",
           "LOG_SOFTMAX": "log_softmax", "QUANTIZE": "quantize", "DEQUANTIZE": "dequantize",
           "LOGISTIC": "logistic", "TANH": "tanh", "RELU": "relu", "RELU6": "relu6"}
#: the bounded ReLUs as `clip` (min, max)
_CLIPS = {"RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}


@converter(*_SIMPLE)
def _simple(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    imp.emit(_SIMPLE[op.code], ins, outs)


@converter(*_CLIPS)
def _clip(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    lo, hi = _CLIPS[op.code]
    imp.emit("clip", ins, outs, min=lo, max=hi)


@converter("SOFTMAX")
def _softmax(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    imp.emit("softmax", ins, outs, axis=-1, beta=float(op.options.get("beta", 1.0)))


@converter("LEAKY_RELU")
def _leaky_relu(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    alpha = float(op.options.get("Alpha", 0.0))
    if not math.isfinite(alpha):
        raise ModelFormatError(f"operator {op.index} (LEAKY_RELU) has alpha {alpha}; it must be finite")
    imp.emit("leaky_relu", ins, outs, alpha=alpha)


@converter("PRELU")
def _prelu(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    imp.emit("prelu", ins, outs)


@converter("CAST")
def _cast(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 1, 1)
    imp.emit("cast", ins, outs, to=imp.tensors[outs[0]].dtype)
