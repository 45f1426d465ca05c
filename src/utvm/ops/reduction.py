"""The reduction op family (see utvm.ops for the module interface): mean, the other reductions over axes,
arg max/min, cumulative sum, L2 normalization and L2 pooling, with TFLite Micro's semantics.

  mean                   (x) axes=(..) keepdims=bool      float32, int8, int16 (TFLite MEAN, ONNX ReduceMean;
                                                          also the mean behind global_avg_pool2d, utvm.ops.pool)
  reduce_max, reduce_min (x) axes=(..) keepdims=bool      float32, int8 (input and output share scale and
                                                          zero point: TFLM checks it; raw values compared)
  reduce_sum             (x) axes=(..) keepdims=bool      float32, int8, int16
  reduce_all             (x) axes=(..) keepdims=bool      bool (logical and; an empty reduction is true)
  arg_max, arg_min       (x) axis=int -> int32            float32, int8; the first index of the extreme
                                                          value (ties: the lowest index); output rank - 1
  cumsum                 (x) axis=int exclusive=bool reverse=bool        float32, int8
  l2_normalization       (x) activation="none"            float32, int8; along the last axis, rank <= 4
  l2_pool2d              (x[N,H,W,C]) pool strides padding activation    float32

Axes may be negative and repeat (resolved modulo the rank, duplicates dropped); an empty axis list reduces
nothing (the output is the input, requantized for mean and reduce_sum). Empty reductions (a reduced axis of
extent 0) give TFLM's values: the identity of max/min (float lowest/max, -128/127), 0.0 for a float sum and
raw 0 (not the output zero point) for an integer sum or mean.

Integer semantics (TFLM's reference kernels, tensorflow/lite/kernels/internal/reference):

* mean int8/int16 (TFLite `reference_ops::QuantizedMeanOrSum` as LiteRT's reference MEAN runs it): with
  n = number of reduced elements and (m, e) = QuantizeMultiplier(double(s_in) / double(s_out)), the 1/n is
  folded into the multiplier once:

      k  = min(floor(log2 n), 32, 31 + e)
      m' = (m << k) / n   (integer division),   e' = e - k
      y  = clamp(MultiplyByQuantizedMultiplier(sum(x) - zp_in * n, m', e') + zp_out) to the dtype's range

  TFLite Micro computes MEAN the same way (int16 included; measured against its interpreter, also when
  input and output share scale and zero point, for TFLM's 4D H/W case and for any number of axes). Float:
  the mean in double, rounded to float32.
* reduce_sum int8/int16 (QuantizedMeanOrSum with compute_sum): with (m, e) = QuantizeMultiplier(double(s_in)
  / double(s_out)) and n reduced elements, y = clamp(MultiplyByQuantizedMultiplier(sum(x) - zp_in * n, m, e)
  + zp_out) to the dtype's range. The int32 sum wraps (TFLM's AddTensorValuesWithExpectedOverflow).
* cumsum int8 (reference_ops::CumSum, ArithmeticParams): every input is scaled as y = MBQM((x - zp_in) *
  2^20, m_in, e_in) with (m_in, e_in) = QuantizeMultiplier(0.5); the running int32 sum starts NOT at 0 but at
  MBQM(-zp_in * 2^20, m_in, e_in) (TFLM's quirk, reproduced); each output is MBQM(acc, m_out, e_out) + zp_out
  saturated to int8, with (m_out, e_out) = QuantizeMultiplier(2 s_in / (2^20 s_out)). exclusive writes the
  sum before adding the element; reverse runs from the end of the axis.
* l2_normalization int8 (reference_integer_ops::L2Normalization): per row acc = sum (x - zp)^2 (int32);
  (m, s) = GetInvSqrtQuantizedMultiplierExp(acc, -1) (gemmlowp Newton-Raphson, `_quant.inv_sqrt_multiplier_exp`);
  y = clamp(MBQM(x - zp, m, s + 7), -128, 127): the output is read as scale 1/128, zero point 0 whatever the
  output tensor says (TFLM checks nothing there). Float: x / max(sqrt(sum x^2), 1e-6).
* l2_pool2d: sqrt(sum of the squares of the taps inside the input / their count), then the activation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node, Tensor
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("mean", "reduce_max", "reduce_min", "reduce_sum", "reduce_all", "arg_max", "arg_min",
                        "cumsum", "l2_normalization", "l2_pool2d")

_REDUCE = ("reduce_max", "reduce_min", "reduce_sum", "reduce_all")
_ARG = ("arg_max", "arg_min")
_DTYPES: dict[str, tuple[str, ...]] = {
    "mean": ("float32", "int8", "int16"),
    "reduce_max": ("float32", "int8"), "reduce_min": ("float32", "int8"), "reduce_sum": ("float32", "int8", "int16"),
    "reduce_all": ("bool",),
    "arg_max": ("float32", "int8"), "arg_min": ("float32", "int8"), "cumsum": ("float32", "int8"),
    "l2_normalization": ("float32", "int8"), "l2_pool2d": ("float32",)}
#: TFLM's CumSum scales inputs by 2^20 before summing
CUMSUM_LEFT_SHIFT = 20
L2_EPSILON = np.float32(1e-6)


@dataclass(frozen=True)
class _OverAxes:
    """A reduction of `axes` (non-negative, sorted, unique) of `input_shape` into `output_shape` (`keepdims`
    keeps them as 1s); `count` elements per output. Integer: zero points, and the requantization's
    (multiplier, shift)."""

    op: str
    dtype: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    axes: tuple[int, ...]
    keepdims: bool
    count: int
    rounding: str
    input_zero_point: int = 0
    output_zero_point: int = 0
    multiplier: int = 0
    shift: int = 0


@dataclass(frozen=True)
class MeanParams(_OverAxes):
    """mean, and global_avg_pool2d (`op`): int8/int16's multiplier/shift already include the division by
    `count` (see the module docstring)."""


@dataclass(frozen=True)
class ReduceParams(_OverAxes):
    """reduce_max/min/sum/all. int reduce_sum: the (multiplier, shift) of s_in / s_out."""


@dataclass(frozen=True)
class ArgParams:
    """arg_max/arg_min along `axis`: the input seen as [outer, depth, inner]."""

    op: str
    dtype: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    axis: int
    outer: int
    depth: int
    inner: int


@dataclass(frozen=True)
class CumsumParams:
    """cumsum along `axis` of the input seen as [outer, depth, inner]. int8: the module docstring's
    constants (`init` is the running sum's starting value)."""

    dtype: str
    shape: tuple[int, ...]
    axis: int
    exclusive: bool
    reverse: bool
    outer: int
    depth: int
    inner: int
    input_zero_point: int = 0
    output_zero_point: int = 0
    input_multiplier: int = 0
    input_shift: int = 0
    output_multiplier: int = 0
    output_shift: int = 0
    init: int = 0
    rounding: str = "double"


@dataclass(frozen=True)
class L2NormParams:
    """l2_normalization of `rows` rows of `depth` elements (the last axis)."""

    dtype: str
    shape: tuple[int, ...]
    rows: int
    depth: int
    input_zero_point: int = 0
    rounding: str = "double"


@dataclass(frozen=True)
class L2PoolParams:
    """l2_pool2d over NHWC: window `pool`, `strides`, explicit `padding` (top, left, bottom, right)."""

    dtype: str
    input_shape: tuple[int, int, int, int]
    output_shape: tuple[int, int, int, int]
    pool: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    activation: str
    act_min: float
    act_max: float


Params = MeanParams | ReduceParams | ArgParams | CumsumParams | L2NormParams | L2PoolParams


# --- shape helpers --------------------------------------------------------------------------------------------
def resolve_axes(node: Node, graph: Graph, rank: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for a in axes:
        if not -rank <= int(a) < rank:
            raise c.fail(node, graph, f"axis {a} is out of range for rank {rank}")
        out.append(int(a) % rank)
    return tuple(sorted(set(out)))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _axes_attr(node: Node) -> tuple[int, ...]:
    """The `axes` attribute; mean's as ints first (as its messages have always shown them)."""
    axes = tuple(node.attrs.get("axes", ()))
    return tuple(int(a) for a in axes) if node.op == "mean" else axes


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    """Elements per output of a reduction over `axes` (1 for none)."""
    return int(np.prod([shape[a] for a in axes], dtype=np.int64)) if axes else 1


def _sum_requantization(node: Node, graph: Graph, x: Tensor, y: Tensor, rounding: str) -> tuple[int, int, int, int]:
    """(zp_in, zp_out, m, e) of an integer sum's requantization: (m, e) = QuantizeMultiplier(s_in / s_out)."""
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    m, e = _quant.quantize_multiplier(s_in / s_out, rounding)
    return zp_in, zp_out, m, e


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    return (int(np.prod(shape[:axis], dtype=np.int64)), int(shape[axis]),
            int(np.prod(shape[axis + 1:], dtype=np.int64)))


def _axis(node: Node, graph: Graph, rank: int) -> int:
    a = int(node.attrs.get("axis", 0))
    if not -rank <= a < rank:
        raise c.fail(node, graph, f"axis {a} is out of range for rank {rank}")
    return a % rank


def _window(node: Node, graph: Graph) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    a = node.attrs
    pool = tuple(int(v) for v in a.get("pool", (1, 1)))
    strides = tuple(int(v) for v in a.get("strides", (1, 1)))
    padding = tuple(int(v) for v in a.get("padding", (0, 0, 0, 0)))
    if len(pool) != 2 or len(strides) != 2 or len(padding) != 4:
        raise c.fail(node, graph, "pool/strides need 2 values and padding 4")
    if min(pool) < 1 or min(strides) < 1 or min(padding) < 0:
        raise c.fail(node, graph, f"bad pool {pool} / strides {strides} / padding {padding}")
    return pool, strides, padding  # type: ignore[return-value]


# --- infer ------------------------------------------------------------------------------------------------------
def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, (1, 2) if node.op == "mean" else 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, _DTYPES[node.op], "input")
    rank = len(x.shape)
    if node.op == "mean" or node.op in _REDUCE:
        axes = resolve_axes(node, graph, rank, _axes_attr(node))
        return [(reduced_shape(tuple(x.shape), axes, bool(node.attrs.get("keepdims", False))), x.dtype)]
    if node.op in _ARG:
        if rank < 1:
            raise c.fail(node, graph, f"input {x.name!r} must have rank >= 1")
        axis = _axis(node, graph, rank)
        if x.shape[axis] == 0:
            raise c.fail(node, graph, f"axis {axis} of {x.name!r} is empty: there is no extreme to index")
        return [(tuple(d for i, d in enumerate(x.shape) if i != axis), "int32")]
    if node.op == "cumsum":
        if rank < 1:
            raise c.fail(node, graph, f"input {x.name!r} must have rank >= 1")
        _axis(node, graph, rank)
        return [(tuple(x.shape), x.dtype)]
    if node.op == "l2_normalization":
        if not 1 <= rank <= 4:
            raise c.fail(node, graph, f"input {x.name!r} has rank {rank}; TFLite Micro's L2_NORMALIZATION takes "
                                      "rank 1 to 4")
        if c.activation(node, graph) != "none":
            raise c.fail(node, graph, "a fused activation is not supported (TFLite Micro requires NONE)")
        return [(tuple(x.shape), x.dtype)]
    # l2_pool2d
    if rank != 4:
        raise c.fail(node, graph, f"input {x.name!r} must be NHWC (rank 4), got shape {list(x.shape)}")
    c.activation(node, graph)
    pool, strides, padding = _window(node, graph)
    n, h, w, ch = x.shape
    oh = c.out_size(h, padding[0], padding[2], pool[0], strides[0], 1)
    ow = c.out_size(w, padding[1], padding[3], pool[1], strides[1], 1)
    if oh < 1 or ow < 1:
        raise c.fail(node, graph, f"pool window {pool} does not fit input {h}x{w} with padding {padding}")
    return [((n, oh, ow, ch), x.dtype)]


# --- prepare ----------------------------------------------------------------------------------------------------
def prepare_mean(node: Node, graph: Graph, axes: tuple[int, ...], keepdims: bool, rounding: str) -> MeanParams:
    """The mean of input 0 over `axes` (also global_avg_pool2d's, over (1, 2) with keepdims)."""
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    c.check_dtype(node, graph, x, _DTYPES["mean"], "input")
    shape = tuple(x.shape)
    axes = resolve_axes(node, graph, len(shape), axes)
    count = _count(shape, axes)
    base = dict(op=node.op, dtype=x.dtype, input_shape=shape, output_shape=reduced_shape(shape, axes, keepdims),
                axes=axes, keepdims=keepdims, count=count, rounding=rounding)
    if x.dtype == "float32":
        return MeanParams(**base)
    zp_in, zp_out, m, e = _sum_requantization(node, graph, x, y, rounding)
    if count > 0:  # the 1/count folded into the multiplier
        k = min(count.bit_length() - 1, 32, 31 + e)
        m = (m << k) // count
        e -= k
    return MeanParams(**base, input_zero_point=zp_in, output_zero_point=zp_out, multiplier=int(m), shift=int(e))


def prepare(node: Node, graph: Graph, rounding: str = "single") -> Params:
    ((oshape, _odt),) = infer(node, graph)
    if node.op == "mean":
        return prepare_mean(node, graph, _axes_attr(node), bool(node.attrs.get("keepdims", False)), rounding)
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    shape = tuple(x.shape)
    if node.op in _REDUCE:
        axes = resolve_axes(node, graph, len(shape), tuple(node.attrs.get("axes", ())))
        base = dict(op=node.op, dtype=x.dtype, input_shape=shape, output_shape=oshape, axes=axes,
                    keepdims=bool(node.attrs.get("keepdims", False)), count=_count(shape, axes), rounding=rounding)
        if x.dtype in ("float32", "bool"):
            return ReduceParams(**base)
        if node.op != "reduce_sum":
            _, zp = c.same_quant(node, graph, x, y)
            return ReduceParams(**base, input_zero_point=zp, output_zero_point=zp)
        zp_in, zp_out, m, e = _sum_requantization(node, graph, x, y, rounding)
        return ReduceParams(**base, input_zero_point=zp_in, output_zero_point=zp_out, multiplier=m, shift=e)
    if node.op in _ARG:
        axis = _axis(node, graph, len(shape))
        return ArgParams(node.op, x.dtype, shape, oshape, axis, *_split(shape, axis))
    if node.op == "cumsum":
        axis = _axis(node, graph, len(shape))
        base = dict(dtype=x.dtype, shape=shape, axis=axis, exclusive=bool(node.attrs.get("exclusive", False)),
                    reverse=bool(node.attrs.get("reverse", False)))
        outer, depth, inner = _split(shape, axis)
        if x.dtype == "float32":
            return CumsumParams(**base, outer=outer, depth=depth, inner=inner)
        s_in, zp_in = c.per_tensor(node, graph, x, "input")
        s_out, zp_out = c.per_tensor(node, graph, y, "output")
        twice = 2 * s_in
        m_in, e_in = _quant.quantize_multiplier(s_in / twice, rounding)
        m_out, e_out = _quant.quantize_multiplier(twice / ((1 << CUMSUM_LEFT_SHIFT) * s_out), rounding)
        if e_in > 0 or e_out > 0:
            raise c.fail(node, graph, f"int8 cumsum needs s_in / s_out < 2^19 (scales {s_in:.9g}, {s_out:.9g})")
        init = int(_quant.multiply_by_quantized_multiplier((-zp_in) << CUMSUM_LEFT_SHIFT, m_in, e_in, rounding))
        return CumsumParams(**base, outer=outer, depth=depth, inner=inner, input_zero_point=zp_in,
                            output_zero_point=zp_out, input_multiplier=m_in, input_shift=e_in,
                            output_multiplier=m_out, output_shift=e_out, init=init, rounding=rounding)
    if node.op == "l2_normalization":
        depth = shape[-1]
        rows = int(np.prod(shape[:-1], dtype=np.int64))
        zp = 0
        if x.dtype == "int8":
            _, zp = c.per_tensor(node, graph, x, "input")
            c.per_tensor(node, graph, y, "output")
        return L2NormParams(x.dtype, shape, rows, depth, zp, rounding)
    pool, strides, padding = _window(node, graph)
    lo, hi = c.act_range(node, graph, y)
    return L2PoolParams(x.dtype, shape, oshape, pool, strides, padding, c.activation(node, graph),  # type: ignore[arg-type]
                        float(lo), float(hi))


# --- reference --------------------------------------------------------------------------------------------------
def reference(p: Params, x: np.ndarray, *_unused: np.ndarray) -> np.ndarray:
    if isinstance(p, MeanParams):
        return _mean(p, x)
    if isinstance(p, ReduceParams):
        return _reduce(p, x)
    if isinstance(p, ArgParams):
        v = x.reshape(p.outer, p.depth, p.inner)
        best, idx = v[:, 0, :], np.zeros((p.outer, p.inner), dtype=np.int32)
        for d in range(1, p.depth):  # TFLM's strict comparison: the first extreme wins, a NaN never does
            better = v[:, d, :] > best if p.op == "arg_max" else v[:, d, :] < best
            best, idx = np.where(better, v[:, d, :], best), np.where(better, np.int32(d), idx)
        return idx.astype(np.int32).reshape(p.output_shape)
    if isinstance(p, CumsumParams):
        return _cumsum(p, x)
    if isinstance(p, L2NormParams):
        return _l2norm(p, x)
    return _l2pool(p, x)


def _reduce(p: ReduceParams, x: np.ndarray) -> np.ndarray:
    axes = p.axes
    if p.op == "reduce_all":
        return np.logical_and.reduce(x, axis=axes, keepdims=p.keepdims).astype(np.bool_).reshape(p.output_shape)
    if p.op in ("reduce_max", "reduce_min"):
        if not axes:
            return x.copy().reshape(p.output_shape)
        if p.op == "reduce_max":
            init = np.finfo(np.float32).min if p.dtype == "float32" else np.iinfo(np.int8).min
            y = np.fmax.reduce(x, axis=axes, keepdims=p.keepdims, initial=init)  # NaN never wins, as in TFLM
        else:
            init = np.finfo(np.float32).max if p.dtype == "float32" else np.iinfo(np.int8).max
            y = np.fmin.reduce(x, axis=axes, keepdims=p.keepdims, initial=init)
        return np.asarray(y, dtype=x.dtype).reshape(p.output_shape)
    if p.dtype == "float32":
        y = x.astype(np.float64).sum(axis=axes, keepdims=p.keepdims) if axes else x.astype(np.float64)
        return np.asarray(y, dtype=np.float32).reshape(p.output_shape)
    return _requantized_sum(p, x, wrap=True)


def _mean(p: MeanParams, x: np.ndarray) -> np.ndarray:
    if p.dtype == "float32":
        y = x.astype(np.float64).mean(axis=p.axes, keepdims=p.keepdims) if p.axes else x.astype(np.float64)
        return y.astype(np.float32).reshape(p.output_shape)
    return _requantized_sum(p, x, wrap=False)


def _requantized_sum(p: MeanParams | ReduceParams, x: np.ndarray, wrap: bool) -> np.ndarray:
    """clamp(MBQM(sum(x) - zp_in * count, m, e) + zp_out) of an int8/int16 mean or reduce_sum; `wrap`: the
    int32 sum wraps (reduce_sum: TFLM's AddTensorValuesWithExpectedOverflow; a mean's sum never overflows
    in a compiled kernel)."""
    if p.count == 0:  # TFLM returns before requantizing: raw zeros, not the output zero point
        return np.zeros(p.output_shape, dtype=p.dtype)
    s = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keepdims) if p.axes else x.astype(np.int64)
    acc = _quant.wrap32(_quant.wrap32(s) - p.input_zero_point * p.count) if wrap else s - p.input_zero_point * p.count
    info = np.iinfo(np.dtype(p.dtype))
    y = _quant.multiply_by_quantized_multiplier(acc, p.multiplier, p.shift, p.rounding) + p.output_zero_point
    return np.clip(y, info.min, info.max).astype(p.dtype).reshape(p.output_shape)


def _cumsum(p: CumsumParams, x: np.ndarray) -> np.ndarray:
    v = x.reshape(p.outer, p.depth, p.inner)
    if p.reverse:
        v = v[:, ::-1, :]
    if p.dtype == "float32":
        acc = np.zeros((p.outer, p.inner), dtype=np.float32)
        out = np.empty(v.shape, dtype=np.float32)
        for d in range(p.depth):  # float32 running sum, in TFLM's order
            if p.exclusive:
                out[:, d, :] = acc
                acc = (acc + v[:, d, :]).astype(np.float32)
            else:
                acc = (acc + v[:, d, :]).astype(np.float32)
                out[:, d, :] = acc
    else:
        shifted = (v.astype(np.int64) - p.input_zero_point) << CUMSUM_LEFT_SHIFT
        scaled = _quant.multiply_by_quantized_multiplier(shifted, p.input_multiplier, p.input_shift, p.rounding)
        incl = _quant.wrap32(p.init + np.cumsum(scaled, axis=1))
        acc = incl - scaled if p.exclusive else incl
        acc = _quant.wrap32(acc)
        y = _quant.multiply_by_quantized_multiplier(acc, p.output_multiplier, p.output_shift, p.rounding)
        out = np.clip(y + p.output_zero_point, -128, 127).astype(np.int8)
    if p.reverse:
        out = out[:, ::-1, :]
    return np.ascontiguousarray(out).reshape(p.shape)


def _l2norm(p: L2NormParams, x: np.ndarray) -> np.ndarray:
    rows = x.reshape(p.rows, p.depth)
    if p.dtype == "float32":
        out = np.empty_like(rows)
        for r in range(p.rows):  # float32 sum of squares in order, as TFLM
            s = np.float32(0.0)
            for v in rows[r]:
                s = np.float32(s + np.float32(v * v))
            norm = max(np.float32(np.sqrt(s)), L2_EPSILON)
            out[r] = (rows[r] / norm).astype(np.float32)
        return out.reshape(p.shape)
    d = rows.astype(np.int64) - p.input_zero_point
    acc = _quant.wrap32((d * d).sum(axis=1))
    out = np.empty(d.shape, dtype=np.int8)
    for r in range(p.rows):
        m, s = (int(v) for v in _quant.inv_sqrt_multiplier_exp(int(acc[r])))
        y = _quant.multiply_by_quantized_multiplier(d[r], m, s + 7, p.rounding)
        out[r] = np.clip(y, -128, 127)
    return out.reshape(p.shape)


def _l2pool(p: L2PoolParams, x: np.ndarray) -> np.ndarray:
    n, oh, ow, ch = p.output_shape
    h, w = p.input_shape[1], p.input_shape[2]
    out = np.empty(p.output_shape, dtype=np.float32)
    top, left = p.padding[0], p.padding[1]
    for oy in range(oh):
        y0 = oy * p.strides[0] - top
        ys = slice(max(0, y0), min(h, y0 + p.pool[0]))
        for ox in range(ow):
            x0 = ox * p.strides[1] - left
            xs = slice(max(0, x0), min(w, x0 + p.pool[1]))
            win = x[:, ys, xs, :].astype(np.float32)
            count = win.shape[1] * win.shape[2]
            sq = np.zeros((n, ch), dtype=np.float32)
            for iy in range(win.shape[1]):  # float32 in TFLM's tap order
                for ix in range(win.shape[2]):
                    sq = (sq + win[:, iy, ix, :] * win[:, iy, ix, :]).astype(np.float32)
            out[:, oy, ox, :] = np.sqrt(sq / np.float32(max(count, 1))).astype(np.float32)
    return c.clamp_float(out, p.act_min, p.act_max)
