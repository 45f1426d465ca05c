"""TFLite import of the convolution and matrix-product operators: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
FULLY_CONNECTED and BATCH_MATMUL (utvm.ops.conv2d, transpose_conv and dense).

CONV_2D / DEPTHWISE_CONV_2D: SAME/VALID padding made explicit (tflite_padding); groups (depth multiplier)
from the input's and the filter's channels. FULLY_CONNECTED flattens its input to [rows, K] with an
explicit reshape unless keep_num_dims is set; shuffled weights and asymmetric_quantize_inputs (hybrid) are
refused. BATCH_MATMUL without adj_x/adj_y.

TRANSPOSE_CONV: inputs (output_shape, weights OHWI, input NHWC, [bias]); options Padding (SAME/VALID),
StrideH/StrideW and, in newer schemas, FusedActivationFunction (absent: NONE). The output's size is the
output tensor's declared shape, as TFLM reads it (TFLM ignores the output_shape operand; when that operand
is a constant it must agree). Padding is TFLite's `ComputePaddingHeightWidth` with the output size in the
role of the input size: (top, left) = max(0, ((out - 1) * stride + kernel - size) // 2) with
out = ceil(size / stride) (SAME) or (size - kernel + stride) // stride (VALID).
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
    label,
    tflite_padding,
)
from utvm.ir.graph import Tensor


@converter("CONV_2D", "DEPTHWISE_CONV_2D")
def _conv(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 3)
    x, w = imp.tensors[ins[0]], imp.tensors[ins[1]]
    imp.check_hybrid(op, ins[0], ins[1])
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise ModelFormatError(f"{label(op)}: input {x.name!r} and filter {w.name!r} must be rank 4")
    o = op.options
    strides = (int(o["stride_h"]), int(o["stride_w"]))
    dilation = (int(o.get("dilation_h", 1)) or 1, int(o.get("dilation_w", 1)) or 1)
    check_window(op, int(o["padding"]), strides, dilation, (w.shape[1], w.shape[2]), "filter")
    pad = tflite_padding(int(o["padding"]), (x.shape[1], x.shape[2]), (w.shape[1], w.shape[2]), strides, dilation)
    bias = ins[2] if len(ins) > 2 else ""
    act = imp.activation(op)
    if op.code == "DEPTHWISE_CONV_2D":
        m = w.shape[3] // x.shape[3] if x.shape[3] else 0
        imp.emit("depthwise_conv2d", [ins[0], ins[1], bias], outs, strides=strides, dilation=dilation,
                 padding=pad, depth_multiplier=m, activation=act)
    else:
        groups = x.shape[3] // w.shape[3] if w.shape[3] else 0
        imp.emit("conv2d", [ins[0], ins[1], bias], outs, strides=strides, dilation=dilation, padding=pad,
                 groups=groups, activation=act)


@converter("FULLY_CONNECTED")
def _fully_connected(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 3)
    imp.check_hybrid(op, ins[0], ins[1])
    o = op.options
    if int(o.get("weights_format", 0)) != 0:
        raise UnsupportedModelError(f"operator {op.index} (FULLY_CONNECTED): shuffled weights format is not supported")
    if o.get("asymmetric_quantize_inputs"):
        raise UnsupportedModelError(f"operator {op.index} (FULLY_CONNECTED): asymmetric_quantize_inputs (hybrid) "
                                    "is not supported")
    x, w = imp.tensors[ins[0]], imp.tensors[ins[1]]
    if len(w.shape) != 2:
        raise ModelFormatError(f"operator {op.index} (FULLY_CONNECTED): weights {w.name!r} must be rank 2")
    k = w.shape[1]
    src = ins[0]
    if not o.get("keep_num_dims"):
        if k == 0 or x.size % k:
            raise ModelFormatError(f"operator {op.index} (FULLY_CONNECTED): input {x.name!r} of {x.size} elements "
                                   f"is not a multiple of K={k}")
        rows = (x.size // k, k)
        if tuple(x.shape) != rows:
            src = imp.add_tensor(Tensor(f"{x.name}/flatten", rows, x.dtype, x.quant))
            imp.emit("reshape", [ins[0]], [src], shape=rows)
    imp.emit("dense", [src, ins[1], ins[2] if len(ins) > 2 else ""], outs, activation=imp.activation(op))


@converter("BATCH_MATMUL")
def _batch_matmul(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 2, 2)
    if op.options.get("adj_x") or op.options.get("adj_y"):
        raise UnsupportedModelError(f"operator {op.index} (BATCH_MATMUL): adj_x/adj_y are not supported")
    imp.emit("matmul", ins, outs)


def _transpose_conv_pad(mode: int, size: int, kernel: int, stride: int) -> int:
    num = size + stride - 1 if mode == 0 else size - kernel + stride
    out = abs(num) // stride * (1 if num >= 0 else -1)  # C's truncating division
    return max(0, (out - 1) * stride + kernel - size) // 2


@converter("TRANSPOSE_CONV")
def _transpose_conv(imp: Importer, op: RawOp, ins: list[str], outs: list[str]) -> None:
    arity(imp, op, ins, 3, 4)
    o = op.options
    if "Padding" not in o:
        raise ModelFormatError(f"{label(op)} has no builtin options")
    w, x, y = imp.tensors[ins[1]], imp.tensors[ins[2]], imp.tensors[outs[0]]
    imp.check_hybrid(op, ins[2], ins[1])
    if len(x.shape) != 4 or len(w.shape) != 4 or len(y.shape) != 4:
        raise ModelFormatError(f"{label(op)}: input {x.name!r}, filter {w.name!r} and output {y.name!r} must be "
                               "rank 4")
    padding = int(o["Padding"])
    strides = (int(o["StrideH"]), int(o["StrideW"]))
    check_window(op, padding, strides, (1, 1), (w.shape[1], w.shape[2]), "filter")
    shape_t = imp.tensors.get(ins[0])
    if shape_t is not None and shape_t.data is not None:
        declared = tuple(int(v) for v in shape_t.data.ravel())
        if declared != tuple(y.shape):
            raise ModelFormatError(f"{label(op)}: output_shape operand {list(declared)} differs from the output "
                                   f"tensor {y.name!r} shape {list(y.shape)}")
    act = fused_activation(op)
    pad = (_transpose_conv_pad(padding, y.shape[1], w.shape[1], strides[0]),
           _transpose_conv_pad(padding, y.shape[2], w.shape[2], strides[1]))
    bias = ins[3] if len(ins) > 3 else ""
    imp.emit("transpose_conv", [ins[2], ins[1], bias], outs, strides=strides, padding=pad,
             output_shape=tuple(int(d) for d in y.shape), activation=act)
