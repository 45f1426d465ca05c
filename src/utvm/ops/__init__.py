"""Operator definitions: one module per op family, each with shape inference and numpy reference semantics.

This file is the contract between the frontends (which produce these ops), the reference interpreter and
the C code generator. Layout is NHWC everywhere (the ONNX frontend converts). Tensors are float32, or int8
with per-tensor activations / per-channel (axis 0 of OHWI, axis 3 of 1HW(C*M)) weights and int32 biases.

Canonical ops and their attributes (every attribute is always present after import; frontends fill
defaults). Inputs in brackets are optional ("" in Node.inputs when absent):

  conv2d            (x[N,H,W,C], w[O,KH,KW,C/groups], [bias[O]])
                    strides=(sh,sw) dilation=(dh,dw) padding=(top,left,bottom,right) groups=int activation=str
  depthwise_conv2d  (x[N,H,W,C], w[1,KH,KW,C*M], [bias[C*M]])
                    strides dilation padding depth_multiplier=int activation
  dense             (x[..., K], w[O,K], [bias[O]])  activation          (TFLite FULLY_CONNECTED, ONNX Gemm/MatMul
                                                                         with a constant right operand)
  matmul            (a[..., M, K], b[..., K, N])  numpy matmul semantics (float only)
  max_pool2d        (x[N,H,W,C])  pool=(kh,kw) strides padding dilation=(dh,dw) ceil_mode=bool activation
  avg_pool2d        (x[N,H,W,C])  pool strides padding dilation ceil_mode count_include_pad=bool activation
  global_avg_pool2d (x[N,H,W,C]) -> [N,1,1,C]
  mean              (x)  axes=(..) keepdims=bool
  add, sub, mul     (a, b)  numpy broadcasting; activation
  relu, relu6, logistic, tanh, clip(min=float, max=float)   (x)
  softmax           (x)  axis=int beta=float
  reshape           (x, [shape const])  shape=(..)   (a pure alias of the data; no copy)
  transpose         (x)  perm=(..)
  concat            (x0, x1, ...)  axis=int
  pad               (x, [pads const])  pads=((before,after),...) value=float|int (the real value for int8: the
                    output zero point)
  quantize          (x float32 | int8) -> int8    (requantizes when the input is int8)
  dequantize        (x int8) -> float32
  batch_norm        (x, scale, bias, mean, var) epsilon=float  (folded into conv by a pass when possible)

Activation strings: "none", "relu", "relu6", "relu_n1_to_1", "tanh", "sign_bit" (TFLite's fused
activation names, lower case). Quantized ops clamp to the activation range in the output's quantized domain.

Fused operators produced by passes keep the base op name and gain attributes (see utvm.compiler.passes).
"""

from __future__ import annotations

import importlib
from types import ModuleType

# op name -> module under utvm.ops that defines infer/prepare/reference for it
OP_MODULES: dict[str, str] = {
    "conv2d": "conv2d",
    "depthwise_conv2d": "conv2d",
    "dense": "dense",
    "matmul": "dense",
    "max_pool2d": "pool",
    "avg_pool2d": "pool",
    "global_avg_pool2d": "pool",
    "mean": "reduce",
    "add": "elementwise",
    "sub": "elementwise",
    "mul": "elementwise",
    "relu": "activation",
    "relu6": "activation",
    "logistic": "activation",
    "tanh": "activation",
    "clip": "activation",
    "softmax": "softmax",
    "reshape": "shape",
    "transpose": "shape",
    "concat": "shape",
    "pad": "pad",
    "quantize": "quantize",
    "dequantize": "quantize",
    "batch_norm": "batch_norm",
}

ACTIVATIONS = ("none", "relu", "relu6", "relu_n1_to_1", "tanh", "sign_bit")


def op_module(op: str) -> ModuleType:
    """The module that defines `op`; UnsupportedOperatorError-free: callers check `op in OP_MODULES`."""
    return importlib.import_module(f"utvm.ops.{OP_MODULES[op]}")
