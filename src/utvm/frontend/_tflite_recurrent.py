"""TFLite import of the recurrent operator family (utvm.ops.recurrent): SVDF, UNIDIRECTIONAL_SEQUENCE_LSTM.

Their variable inputs (is_variable: SVDF's activation_state, LSTM's output and cell state) become node
state: the input is dropped from the node and its dtype and quantization are recorded as attributes; the
op keeps the state across runs (utvm.ops.recurrent, KernelCode.persistent_bytes).
"""

from __future__ import annotations

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend._tflite_core import VARIABLE_STATE_OPS, Importer, RawOp, converter, fused_activation, label

VARIABLE_STATE_OPS.update({"SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM"})


def _variable(imp: Importer, op: RawOp, k: int, what: str) -> str:
    """The name of input k, which must be a variable tensor (the op's state)."""
    if k >= len(op.inputs) or op.inputs[k] < 0:
        raise ModelFormatError(f"{label(op)}: {what} (input {k}) is missing")
    raw = imp.raw.tensors[op.inputs[k]]
    name = imp.names[op.inputs[k]]
    if not raw.is_variable:
        raise UnsupportedModelError(f"{label(op)}: {what} {name!r} (input {k}) must be a variable tensor "
                                    "(is_variable), as TFLite Micro requires")
    # Each node keeps its own state: a variable shared by two operators (one state for both) is refused.
    owners: dict[str, int] = imp.__dict__.setdefault("_recurrent_variables", {})
    if owners.setdefault(name, op.index) != op.index:
        raise UnsupportedModelError(f"{label(op)}: variable {name!r} is also the state of operator "
                                    f"{owners[name]}; state shared between operators is not supported")
    return name


def _state_attrs(imp: Importer, name: str, prefix: str) -> dict[str, object]:
    t = imp.tensors[name]
    q = t.quant
    return {f"{prefix}_dtype": t.dtype, f"{prefix}_shape": tuple(int(d) for d in t.shape),
            f"{prefix}_scale": float(q.scale[0]) if q is not None else 0.0,
            f"{prefix}_zero_point": int(q.zero_point[0]) if q is not None else 0}


@converter("SVDF")
def _svdf(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    if len(ins) != 5 or len(outs) != 1:
        raise ModelFormatError(f"{label(op)}: SVDF takes 5 inputs (input, weights_feature, weights_time, bias, "
                               f"activation_state) and 1 output, got {len(ins)} and {len(outs)}")
    state = _variable(imp, op, 4, "activation_state")
    x, wf, wt = ins[0], ins[1], ins[2]
    if imp.tensors[x].dtype == "float32" and imp.tensors[wf].dtype in ("int8", "uint8"):
        imp.check_hybrid(op, x, wf)
    attrs = _state_attrs(imp, state, "state")
    st_shape = attrs.pop("state_shape")
    tx, twt = imp.tensors[x], imp.tensors[wt]
    if len(tx.shape) == 2 and len(twt.shape) == 2 and st_shape != (tx.shape[0], twt.shape[0] * twt.shape[1]):
        raise ModelFormatError(f"{label(op)}: activation_state {state!r} has shape {list(st_shape)}, expected "
                               f"[{tx.shape[0]}, {twt.shape[0] * twt.shape[1]}] (batch, filters x memory)")
    imp.emit("svdf", [x, wf, wt, ins[3]], outs, rank=int(op.options.get("Rank", 0)),
             activation=fused_activation(op, refuse=False), **attrs)


_LSTM_VARIANTS = {9: "cell_to_input_weights (peephole)", 10: "cell_to_forget_weights (peephole)",
                  11: "cell_to_output_weights (peephole)", 16: "projection_weights", 17: "projection_bias",
                  20: "input_layer_norm_coefficients", 21: "forget_layer_norm_coefficients",
                  22: "cell_layer_norm_coefficients", 23: "output_layer_norm_coefficients"}
_LSTM_REQUIRED = {1: "input_to_input_weights (an LSTM without it is CIFG)", 2: "input_to_forget_weights",
                  3: "input_to_cell_weights", 4: "input_to_output_weights", 5: "recurrent_to_input_weights",
                  6: "recurrent_to_forget_weights", 7: "recurrent_to_cell_weights",
                  8: "recurrent_to_output_weights", 12: "input_gate_bias", 13: "forget_gate_bias",
                  14: "cell_gate_bias", 15: "output_gate_bias"}


@converter("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _lstm(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    if len(ins) != 24 or len(outs) != 1:
        raise ModelFormatError(f"{label(op)}: UNIDIRECTIONAL_SEQUENCE_LSTM takes 24 inputs and 1 output (as TFLite "
                               f"Micro requires), got {len(ins)} and {len(outs)}")
    for k, what in _LSTM_VARIANTS.items():
        if ins[k]:
            raise UnsupportedModelError(f"{label(op)}: input {k}, {what} {ins[k]!r}, is present: LSTM variants "
                                        "(peephole, projection, layer normalization) are not supported (nor by "
                                        "TFLite Micro's LSTM)")
    for k, what in _LSTM_REQUIRED.items():
        if not ins[k]:
            raise UnsupportedModelError(f"{label(op)}: input {k}, {what}, is missing: TFLite Micro's LSTM needs "
                                        "every input and recurrent weight and gate bias")
    hidden = _variable(imp, op, 18, "output_state")
    cell = _variable(imp, op, 19, "cell_state")
    h, cst = _state_attrs(imp, hidden, "hidden"), _state_attrs(imp, cell, "cell")
    x = imp.tensors[ins[0]]
    units = imp.tensors[ins[2]].shape[0] if len(imp.tensors[ins[2]].shape) == 2 else 0
    time_major = bool(op.options.get("TimeMajor", False))
    if len(x.shape) == 3:
        batch = x.shape[1] if time_major else x.shape[0]
        for name, attrs in ((hidden, h), (cell, cst)):
            shape = attrs.pop(f"{'hidden' if attrs is h else 'cell'}_shape")
            n = 1
            for d in shape:
                n *= int(d)
            if n != batch * units:
                raise ModelFormatError(f"{label(op)}: state {name!r} has shape {list(shape)}: {n} elements, "
                                       f"expected batch x units = {batch * units}")
    else:
        h.pop("hidden_shape")
        cst.pop("cell_shape")
    if imp.tensors[ins[0]].dtype == "float32" and imp.tensors[ins[2]].dtype in ("int8", "uint8"):
        imp.check_hybrid(op, ins[0], ins[2])
    imp.emit("lstm", [ins[0], *ins[1:9], *ins[12:16]], outs, time_major=time_major,
             activation=fused_activation(op, refuse=False), cell_clip=float(op.options.get("CellClip", 0.0)),
             **h, **cst)
