"""Operator definitions: one module per op family, each with shape inference and numpy reference semantics.

This file is the contract between the frontends (which produce these ops), the reference interpreter and
the C code generator. Layout is NHWC everywhere (the ONNX frontend converts). Tensors are float32, or int8
with per-tensor activations / per-channel (axis 0 of OHWI, axis 3 of 1HW(C*M)) weights and int32 biases, or
int16 activations (16x8: int8 weights, int64/int32 biases), plus bool/int32/int64/uint32/uint64 where
TFLite Micro's kernels take them. Every op belongs to one family module (FAMILY_MODULES below), which
declares its ops in `OPS`; the ops listed below are documented here, the other families
(unary, movement, gather, transpose_conv, recurrent, signal; `custom`, user operators; and the rest of
binary and reduction) document their ops, dtypes and attributes in their own module docstrings, and
docs/operators.md maps every TFLite operator to them. Stateful ops define `state_spec` (utvm.ir.interp).

Canonical ops and their attributes (every attribute is always present after import; frontends fill
defaults). Inputs in brackets are optional ("" in Node.inputs when absent):

  conv2d            (x[N,H,W,C], w[O,KH,KW,C/groups], [bias[O]])
                    strides=(sh,sw) dilation=(dh,dw) padding=(top,left,bottom,right) groups=int activation=str
  depthwise_conv2d  (x[N,H,W,C], w[1,KH,KW,C*M], [bias[C*M]])
                    strides dilation padding depth_multiplier=int activation
  dense             (x[..., K], w[O,K], [bias[O]])  activation          (TFLite FULLY_CONNECTED, ONNX Gemm/MatMul
                                                                         with a constant right operand)
  matmul            (a[..., M, K], b[..., K, N])  numpy matmul semantics (int8: TFLite BATCH_MATMUL)
  max_pool2d        (x[N,H,W,C])  pool=(kh,kw) strides padding dilation=(dh,dw) ceil_mode=bool activation
  avg_pool2d        (x[N,H,W,C])  pool strides padding dilation ceil_mode count_include_pad=bool activation
  global_avg_pool2d (x[N,H,W,C]) -> [N,1,1,C]
  mean              (x)  axes=(..) keepdims=bool                          (utvm.ops.reduction)
  add, sub, mul     (a, b)  numpy broadcasting; activation                (utvm.ops.binary)
  relu, relu6, logistic, tanh, clip(min=float, max=float)   (x)
  softmax           (x)  axis=int beta=float
  reshape           (x, [shape const])  shape=(..)   (a pure alias of the data; no copy)
  transpose         (x)  perm=(..)
  concat            (x0, x1, ...)  axis=int
  pad               (x, [pads const])  pads=((before,after),...) value=float|int (in the tensor's domain: for
                    int8 the quantized value, e.g. the output zero point)
  quantize          (x float32 | int8 | uint8) -> int8 | uint8 (the output tensor's type; requantizes
                    integer inputs; with dequantize the only ops computing on uint8, for converters' uint8 model I/O)
  dequantize        (x int8 | uint8) -> float32
  batch_norm        (x, scale, bias, mean, var) epsilon=float  (folded into conv by a pass when possible)

Activation strings: "none", "relu", "relu6", "relu_n1_to_1", "tanh", "sign_bit" (TFLite's fused
activation names, lower case). Quantized ops clamp to the activation range in the output's quantized domain
(utvm.ops._quant.activation_range_quantized). "tanh" and "sign_bit" are accepted as names but rejected by
every op's infer (TFLite's kernels silently ignore them, so no model relies on them).

int8 details every module documents in its own docstring: per-tensor activations, symmetric (zero point 0)
weights per tensor or per output channel, int32 biases; `pad`'s `value` is in the tensor's own domain (the
quantized integer for int8, e.g. the output zero point); int8 data-movement ops (pools, transpose, concat,
pad) need identical input and output quantization; `global_avg_pool2d` int8 is `mean` over axes (1, 2);
logistic/tanh/softmax int8 outputs have TFLite's fixed scales (1/256 zp -128, 1/128 zp 0, 1/256 zp -128).

Module interface (each family, docs/architecture.md §12.8): an attrs dataclass (`attrs_of(node)`), `infer(node,
graph) -> [(shape, dtype), ...]` raising GraphError naming the node, `prepare(node, graph, rounding) ->
<Family>Params` (a frozen dataclass holding everything a kernel needs besides the tensor data: shapes,
padding, zero points, per-channel multipliers and shifts, clamp range, and `rounding`, the rounding that
this kernel uses, already resolved from the compile mode by utvm.ops._quant.kernel_rounding), and
`reference(params, *arrays)`, the numpy definition, reading only params and the input arrays (absent
optional inputs are None; trailing ones are dropped).

Rounding modes (utvm.ops._quant): "single" reproduces ai-edge-litert's reference kernels (measured: only
FULLY_CONNECTED rounds once there, every other kernel uses gemmlowp double rounding); "double" is TFLM
(double rounding everywhere).
"""

from __future__ import annotations

import importlib
from types import ModuleType

ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1", "tanh", "sign_bit")

# Every module under utvm.ops that defines ops: each declares `OPS = ("abs", ...)`, the canonical ops it
# defines (infer/prepare/reference dispatch on node.op inside the module).
FAMILY_MODULES: tuple[str, ...] = ("conv2d", "dense", "pool", "reduction", "binary", "activation", "softmax",
                                   "shape", "pad", "quantize", "batch_norm", "unary", "movement", "gather",
                                   "transpose_conv", "recurrent", "signal", "custom")


#: op name -> the module under utvm.ops that defines infer/prepare/reference for it
OP_MODULES: dict[str, str] = {}


def op_module(op: str) -> ModuleType:
    """The module that defines `op`; UnsupportedOperatorError-free: callers check `op in OP_MODULES`."""
    return importlib.import_module(f"utvm.ops.{OP_MODULES[op]}")


# Built last: the families import utvm.ir, which imports OP_MODULES and op_module from here.
for _family in FAMILY_MODULES:
    for _op in importlib.import_module(f"utvm.ops.{_family}").OPS:
        if _op in OP_MODULES:
            raise RuntimeError(f"op {_op!r} is defined by both utvm.ops.{OP_MODULES[_op]} and utvm.ops.{_family}")
        OP_MODULES[_op] = _family
