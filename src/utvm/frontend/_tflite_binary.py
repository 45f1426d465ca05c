"""TFLite import of the binary operator family (utvm.ops.binary): ADD, SUB, MUL, DIV, the comparisons and
logical operators, MAXIMUM/MINIMUM, FLOOR_DIV/FLOOR_MOD, SQUARED_DIFFERENCE, SELECT_V2 and ADD_N."""

from __future__ import annotations

from utvm.errors import ModelFormatError
from utvm.frontend._tflite_core import Importer, RawOp, arity, converter, fused_activation


@converter("ADD", "SUB", "MUL")
def _arith(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    imp.emit(op.code.lower(), ins, outs, activation=imp.activation(op))


_PLAIN = {
    "MAXIMUM": "maximum", "MINIMUM": "minimum", "FLOOR_DIV": "floor_div", "FLOOR_MOD": "floor_mod",
    "SQUARED_DIFFERENCE": "squared_difference", "EQUAL": "equal", "NOT_EQUAL": "not_equal",
    "GREATER": "greater", "GREATER_EQUAL": "greater_equal", "LESS": "less", "LESS_EQUAL": "less_equal",
    "LOGICAL_AND": "logical_and", "LOGICAL_OR": "logical_or",
}


@converter(*_PLAIN)
def _plain(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    imp.emit(_PLAIN[op.code], ins, outs)


@converter("DIV")
def _div(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    imp.emit("div", ins, outs, activation=fused_activation(op))


@converter("SELECT_V2")
def _select(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 3, 3)
    imp.emit("select", ins, outs)


@converter("ADD_N")
def _add_n(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    if len(ins) < 2 or not all(ins):
        raise ModelFormatError(f"operator {op.index} (ADD_N) needs at least 2 present inputs, got {len(ins)}")
    imp.emit("add_n", ins, outs)
