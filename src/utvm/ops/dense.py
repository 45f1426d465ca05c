"""dense (TFLite FULLY_CONNECTED, ONNX Gemm / MatMul with a constant right operand) and matmul.

dense (x[..., K], w[O, K], [bias[O]]) -> y[..., O]. int8 semantics are TFLite's
`reference_integer_ops::FullyConnected` (per-tensor weights) and `FullyConnectedPerChannel`:

    acc[o] = bias[o] + sum_k (x[k] - input_zero_point) * (w[o, k] - weight_zero_point)       (int32)
    y[o]   = clamp(MultiplyByQuantizedMultiplier(acc, multiplier[o], shift[o]) + output_zero_point, act)

Per-tensor weights: one multiplier from QuantizeMultiplier(double(s_in) * double(s_w) / double(s_out));
per-channel weights (axis 0): one per output row, as for conv2d.

matmul (a[..., M, K], b[..., K, N]) follows numpy's matmul broadcasting. int8 is TFLite's BATCH_MATMUL:
acc = sum (a - a_zp) * (b - b_zp), one per-tensor multiplier QuantizeMultiplier(s_a * s_b / s_out) and no
activation (the output range clamps). int16 (TFLM's BatchMatMul<int16_t, int64_t>): zero points must be 0
(TFLM refuses others), an int64 accumulator and the int64 MultiplyByQuantizedMultiplier.

int16 dense ("16x8", TFLM's integer FullyConnected on int16): int8 weights (per tensor, with a zero point, or
per channel), bias int64 or int32, and unlike int16 conv the zero points ARE used:

    acc[o] = bias[o] + sum_k (x[k] - input_zero_point) * (w[o, k] - weight_zero_point)
    y[o]   = clamp(MBQM(acc[o], multiplier[o], shift[o]) + output_zero_point, act)

with an int64 accumulator and TFLite's int64 MultiplyByQuantizedMultiplier for an int64 bias (or none), an
int32 (wrapping) accumulator and the int32 MBQM for an int32 bias (utvm.ops.conv2d.requantize_int16).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("dense", "matmul")


@dataclass(frozen=True)
class DenseAttrs:
    activation: str = "none"


@dataclass(frozen=True)
class MatmulAttrs:
    pass


@dataclass(frozen=True)
class DenseParams:
    """What a dense / matmul kernel needs besides the data.

    dense: `batch` rows of `k` inputs (every leading dimension flattened), `units` outputs per row.
    matmul: `a_shape`/`b_shape`/`output_shape` (numpy broadcasting over the leading dims).
    int8: zero points of the input(s) and output (the kernel subtracts input zero points and adds the
    output one), `weight_zero_point` (dense weights / matmul's b), `multiplier`/`shift` (length `units` for
    dense — per-tensor scales repeated — and length 1 for matmul), clamp range `act_min`/`act_max`.
    """

    op: str
    dtype: str
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    batch: int
    k: int
    units: int
    has_bias: bool
    activation: str
    act_min: float | int
    act_max: float | int
    input_zero_point: int = 0
    weight_zero_point: int = 0
    output_zero_point: int = 0
    multiplier: tuple[int, ...] = ()
    shift: tuple[int, ...] = ()
    rounding: str = "single"
    #: int16 only: 64 (int64 accumulator and bias, int64 MBQM) or 32 (int32 bias and accumulator)
    acc_bits: int = 32


def attrs_of(node: Node) -> DenseAttrs | MatmulAttrs:
    return MatmulAttrs() if node.op == "matmul" else DenseAttrs(node.attrs.get("activation", "none"))


def _matmul_shape(node: Node, graph: Graph, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if len(a) < 1 or len(b) < 1:
        raise c.fail(node, graph, "matmul operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise c.fail(node, graph, f"matmul inner dimensions differ: {list(a)} x {list(b)}")
    try:
        lead = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise c.fail(node, graph, f"matmul batch dimensions do not broadcast: {list(a)} x {list(b)}") from None
    shape = (*lead, a2[-2], b2[-1])
    if len(a) == 1:
        shape = (*shape[:-2], shape[-1])
    if len(b) == 1:
        shape = shape[:-1]
    return tuple(int(d) for d in shape)


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    if node.op == "matmul":
        c.check_count(node, graph, 2)
        a, b = c.req(node, graph, 0), c.req(node, graph, 1)
        c.check_dtype(node, graph, a, ("float32", "int8", "int16"), "input")
        if b.dtype != a.dtype:
            raise c.fail(node, graph, f"operands {a.name!r} ({a.dtype}) and {b.name!r} ({b.dtype}) differ in dtype")
        if a.dtype == "int16":
            y = graph.tensors.get(node.outputs[0]) if node.outputs else None
            zps = [int(t.quant.zero_point[0]) for t in (a, b, y) if t is not None and t.quant is not None]
            if any(zps):
                raise c.fail(node, graph, f"int16 matmul needs zero points 0 (TFLM's BATCH_MATMUL refuses others); "
                                          f"got {zps}")
        return [(_matmul_shape(node, graph, a.shape, b.shape), a.dtype)]
    c.check_count(node, graph, (2, 3))
    x, w = c.req(node, graph, 0), c.req(node, graph, 1)
    bias = c.inp(node, graph, 2, optional=True)
    c.activation(node, graph)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    if len(w.shape) != 2:
        raise c.fail(node, graph, f"weights {w.name!r} must be [units, K], got shape {list(w.shape)}")
    if len(x.shape) < 1 or x.shape[-1] != w.shape[1]:
        raise c.fail(node, graph, f"input {x.name!r} shape {list(x.shape)} does not end in K={w.shape[1]} "
                                  f"of weights {w.name!r}")
    if bias is not None and tuple(bias.shape) != (w.shape[0],):
        raise c.fail(node, graph, f"bias {bias.name!r} shape {list(bias.shape)} must be [{w.shape[0]}]")
    if x.dtype == "float32":
        if w.dtype != "float32":
            raise c.fail(node, graph, f"float32 input with {w.dtype} weights {w.name!r} (a hybrid model): "
                                      "hybrid int8-weight/float-activation layers are not supported")
        if bias is not None:
            c.check_dtype(node, graph, bias, ("float32",), "bias")
    else:
        c.check_dtype(node, graph, w, ("int8",), "weights")
        if bias is not None:
            c.check_dtype(node, graph, bias, ("int32", "int64") if x.dtype == "int16" else ("int32",), "bias")
    return [((*x.shape[:-1], w.shape[0]), x.dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> DenseParams:
    ((oshape, dtype),) = infer(node, graph)
    a, b = c.req(node, graph, 0), c.req(node, graph, 1)
    y = c.out(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    if node.op == "matmul":
        a2 = a.shape if len(a.shape) > 1 else (1, *a.shape)
        b2 = b.shape if len(b.shape) > 1 else (*b.shape, 1)
        base = dict(op="matmul", dtype=dtype, a_shape=tuple(a.shape), b_shape=tuple(b.shape), output_shape=oshape,
                    batch=int(np.prod(oshape[:-2])) if len(oshape) > 2 else 1, k=int(a2[-1]), units=int(b2[-1]),
                    has_bias=False, activation="none", rounding=rounding)
        if dtype == "float32":
            lo, hi = _quant.activation_range_float("none")
            return DenseParams(**base, act_min=lo, act_max=hi)
        s_a, zp_a = c.per_tensor(node, graph, a, "input a")
        s_b, zp_b = c.per_tensor(node, graph, b, "input b")
        s_o, zp_o = c.per_tensor(node, graph, y, "output")
        m, s = _quant.quantize_multiplier(s_a * s_b / s_o, rounding)
        lo, hi = _quant.activation_range_quantized("none", s_o, zp_o, dtype)
        return DenseParams(**base, act_min=lo, act_max=hi, input_zero_point=zp_a, weight_zero_point=zp_b,
                           output_zero_point=zp_o, multiplier=(m,), shift=(s,), acc_bits=64 if dtype == "int16" else 32)
    bias = c.inp(node, graph, 2, optional=True)
    k, units = b.shape[1], b.shape[0]
    act = c.activation(node, graph)
    lo, hi = c.act_range(node, graph, y)
    base = dict(op="dense", dtype=dtype, a_shape=tuple(a.shape), b_shape=tuple(b.shape), output_shape=oshape,
                batch=int(np.prod(a.shape[:-1])), k=int(k), units=int(units), has_bias=bias is not None,
                activation=act, act_min=lo, act_max=hi, rounding=rounding)
    if dtype == "float32":
        return DenseParams(**base)
    s_in, zp_in = c.per_tensor(node, graph, a, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    mult, shift = c.weight_multipliers(node, graph, b, 0, int(units), s_in, s_out, rounding)
    wq = b.quant
    if len(wq.scale) > 1 and any(int(z) != 0 for z in wq.zero_point):
        raise c.fail(node, graph, f"per-channel weights {b.name!r} must have zero point 0")
    wzp = 0 if len(wq.scale) > 1 else int(wq.zero_point[0])
    return DenseParams(**base, input_zero_point=zp_in, weight_zero_point=wzp, output_zero_point=zp_out,
                       multiplier=c.ints(mult), shift=c.ints(shift),
                       acc_bits=32 if bias is not None and bias.dtype == "int32" else 64 if dtype == "int16" else 32)


def reference(p: DenseParams, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    af = a.astype(np.float64) - p.input_zero_point
    bf = b.astype(np.float64) - p.weight_zero_point
    if p.op == "matmul":
        acc = np.matmul(af, bf)
    else:
        acc = (af.reshape(p.batch, p.k) @ bf.T).reshape(p.output_shape)
    if p.dtype == "int16":
        from utvm.ops.conv2d import requantize_int16

        acc = np.rint(acc).astype(np.int64) + (bias.astype(np.int64) if bias is not None else 0)
        return requantize_int16(acc, p.acc_bits, np.asarray(p.multiplier, np.int64), np.asarray(p.shift, np.int64),
                                p.rounding, p.output_zero_point, int(p.act_min), int(p.act_max))
    return c.finish_accumulator(p, acc, bias)
