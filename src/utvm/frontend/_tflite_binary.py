"""TFLite import of the binary operator family (registered into utvm.frontend.tflite with `converter`)."""

from __future__ import annotations

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend.tflite import _ACTIVATIONS, _arity, _Importer, _RawOp, converter

_PLAIN = {
    "MAXIMUM": "maximum", "MINIMUM": "minimum", "FLOOR_DIV": "floor_div", "FLOOR_MOD": "floor_mod",
    "SQUARED_DIFFERENCE": "squared_difference", "EQUAL": "equal", "NOT_EQUAL": "not_equal",
    "GREATER": "greater", "GREATER_EQUAL": "greater_equal", "LESS": "less", "LESS_EQUAL": "less_equal",
    "LOGICAL_AND": "logical_and", "LOGICAL_OR": "logical_or",
}


@converter(*_PLAIN)
def _plain(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    imp.emit(_PLAIN[op.code], ins, outs)


@converter("DIV")
def _div(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 2, 2)
    code = int(op.options.get("FusedActivationFunction", 0))
    act = _ACTIVATIONS.get(code)
    if act is None:
        raise ModelFormatError(f"operator {op.index} (DIV) has unknown fused activation {code}")
    if act in ("tanh", "sign_bit"):
        raise UnsupportedModelError(f"operator {op.index} (DIV): fused activation {act.upper()} is not supported "
                                    "(supported: NONE, RELU, RELU6, RELU_N1_TO_1)")
    imp.emit("div", ins, outs, activation=act)


@converter("SELECT_V2")
def _select(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 3, 3)
    imp.emit("select", ins, outs)


@converter("ADD_N")
def _add_n(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    if len(ins) < 2 or not all(ins):
        raise ModelFormatError(f"operator {op.index} (ADD_N) needs at least 2 present inputs, got {len(ins)}")
    imp.emit("add_n", ins, outs)
