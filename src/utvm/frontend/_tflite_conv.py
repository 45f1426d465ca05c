"""TFLite import of the conv operator family (registered into utvm.frontend.tflite with `converter`).

TRANSPOSE_CONV: inputs (output_shape, weights OHWI, input NHWC, [bias]); options Padding (SAME/VALID),
StrideH/StrideW and, in newer schemas, FusedActivationFunction (absent: NONE). The output's size is the
output tensor's declared shape, as TFLM reads it (TFLM ignores the output_shape operand; when that operand
is a constant it must agree). Padding is TFLite's `ComputePaddingHeightWidth` with the output size in the
role of the input size: (top, left) = max(0, ((out - 1) * stride + kernel - size) // 2) with
out = ceil(size / stride) (SAME) or (size - kernel + stride) // stride (VALID).
"""

from __future__ import annotations

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend.tflite import _ACTIVATIONS, _arity, _Importer, _RawOp, converter


def _transpose_conv_pad(mode: int, size: int, kernel: int, stride: int) -> int:
    num = size + stride - 1 if mode == 0 else size - kernel + stride
    out = abs(num) // stride * (1 if num >= 0 else -1)  # C's truncating division
    return max(0, (out - 1) * stride + kernel - size) // 2


@converter("TRANSPOSE_CONV")
def _transpose_conv(imp: _Importer, op: _RawOp, ins: list[str], outs: list[str]) -> None:
    _arity(imp, op, ins, 3, 4)
    label = f"operator {op.index} (TRANSPOSE_CONV)"
    o = op.options
    if "Padding" not in o:
        raise ModelFormatError(f"{label} has no builtin options")
    w, x, y = imp.tensors[ins[1]], imp.tensors[ins[2]], imp.tensors[outs[0]]
    imp.check_hybrid(op, ins[2], ins[1])
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        raise ModelFormatError(f"{label}: input {x.name!r}, filter {w.name!r} and output {y.name!r} must be rank 4")
    padding = int(o["Padding"])
    strides = (int(o["StrideH"]), int(o["StrideW"]))
    if padding not in (0, 1):
        raise ModelFormatError(f"{label} has unknown padding {padding} (0: SAME, 1: VALID)")
    if min(strides) < 1:
        raise ModelFormatError(f"{label} has strides {list(strides)}; strides must be >= 1")
    if min(w.shape[1:3]) < 1:
        raise ModelFormatError(f"{label}: the filter is {w.shape[1]}x{w.shape[2]}; it must be at least 1x1")
    shape_t = imp.tensors.get(ins[0])
    if shape_t is not None and shape_t.data is not None:
        declared = tuple(int(v) for v in shape_t.data.ravel())
        if declared != tuple(y.shape):
            raise ModelFormatError(f"{label}: output_shape operand {list(declared)} differs from the output "
                                   f"tensor {y.name!r} shape {list(y.shape)}")
    act = _ACTIVATIONS.get(int(o.get("FusedActivationFunction", 0)))
    if act is None:
        raise ModelFormatError(f"{label} has unknown fused activation {o.get('FusedActivationFunction')}")
    if act in ("tanh", "sign_bit"):
        raise UnsupportedModelError(f"{label}: fused activation {act.upper()} is not supported (supported: NONE, "
                                    "RELU, RELU6, RELU_N1_TO_1)")
    pad = (_transpose_conv_pad(padding, y.shape[1], w.shape[1], strides[0]),
           _transpose_conv_pad(padding, y.shape[2], w.shape[2], strides[1]))
    bias = ins[3] if len(ins) > 3 else ""
    imp.emit("transpose_conv", [ins[2], ins[1], bias], outs, strides=strides, padding=pad,
             output_shape=tuple(int(d) for d in y.shape), activation=act)
