"""ONNX op handlers: each maps one ONNX node onto canonical utvm ops (see `utvm.ops`), layout-aware.

A handler reads its inputs as `Value`s, checks dtypes and attributes (errors name the node), chooses the
layout it computes in and emits IR nodes through the `Importer`. `try_fold` evaluates shape and arithmetic
ops whose inputs are all constants at import time instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend._onnx_state import (
    ELEM_TYPES,
    TO_NCHW,
    TO_NHWC,
    Ctx,
    Importer,
    Value,
    contig,
    elem_type_name,
    refuse_external,
    to_array,
)
from utvm.ir.graph import Node

_FLOAT = ("float32",)
_MOVABLE = ("float32", "int8")  # data movement: int8 tensors carry the identity quantization
_FLT_MAX = float(np.finfo(np.float32).max)


# ================================================================================================ helpers
def _check_dtype(ctx: Ctx, v: Value, allowed: Sequence[str]) -> None:
    if v.dtype not in allowed:
        why = ""
        if v.dtype in ("int8", "uint8", "int16", "int32", "int64") and allowed == _FLOAT:
            why = " (integer arithmetic on unquantized tensors is not supported; ONNX import is float32)"
        raise UnsupportedModelError(
            f"{ctx.label}: tensor {v.name!r} has dtype {v.dtype}; {ctx.op} supports "
            f"{', '.join(allowed)}{why}")


def _axis(ctx: Ctx, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:  # a rank-0 tensor has no axis
        raise ModelFormatError(f"{ctx.label}: axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _broadcast(ctx: Ctx, *vals: Value) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(v.shape for v in vals)))
    except ValueError:
        shapes = ", ".join(f"{v.name!r} {list(v.shape)}" for v in vals)
        raise ModelFormatError(f"{ctx.label}: input shapes do not broadcast: {shapes}") from None


def _same_pads(in_size: int, k_eff: int, stride: int, lower: bool) -> tuple[int, int]:
    out = -(-in_size // stride)
    total = max(0, (out - 1) * stride + k_eff - in_size)
    small, big = total // 2, total - total // 2
    return (big, small) if lower else (small, big)


def _spatial_pads(ctx: Ctx, in_hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int]) -> list[int]:
    """ONNX padding of a 2-D conv/pool as [top, left, bottom, right]."""
    auto = ctx.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        hp = _same_pads(in_hw[0], (kernel[0] - 1) * dilations[0] + 1, strides[0], auto == "SAME_LOWER")
        wp = _same_pads(in_hw[1], (kernel[1] - 1) * dilations[1] + 1, strides[1], auto == "SAME_LOWER")
        return [hp[0], wp[0], hp[1], wp[1]]
    if auto == "VALID":
        return [0, 0, 0, 0]
    if auto != "NOTSET":
        raise ModelFormatError(f"{ctx.label}: unknown auto_pad {auto!r}")
    pads = ctx.ints("pads", (0, 0, 0, 0))
    assert pads is not None
    if len(pads) != 4 or min(pads) < 0:
        raise ModelFormatError(f"{ctx.label}: pads {list(pads)} must be 4 non-negative values for a 2-D op")
    return list(pads)


def _out_size(in_size: int, pad_b: int, pad_e: int, k_eff: int, stride: int, ceil_mode: bool) -> int:
    span = in_size + pad_b + pad_e - k_eff
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= in_size + pad_b:  # the last window would start in the end padding
        out -= 1
    return out


def _check_window(ctx: Ctx, kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]) -> None:
    """kernel_shape, strides and dilations of a 2-D conv/pool: two values each, all at least 1."""
    if len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2:
        raise ModelFormatError(f"{ctx.label}: kernel_shape {list(kernel)}, strides {list(strides)} and dilations "
                               f"{list(dilations)} must have 2 values each for a 2-D op")
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1:
        raise ModelFormatError(f"{ctx.label}: kernel_shape {list(kernel)}, strides {list(strides)} and dilations "
                               f"{list(dilations)} must be at least 1")


def _spatial_2d(ctx: Ctx, x: Value, kind: str) -> None:
    if len(x.shape) != 4:
        raise UnsupportedModelError(
            f"{ctx.label}: only 2-D {kind} is supported (input {x.name!r} has shape {list(x.shape)}, "
            "need rank 4)")


# ================================================================================================ op handlers
Handler = Callable[[Importer, Ctx], None]


def _unary(ir_op: str, allowed: Sequence[str] = _FLOAT, **attrs: Any) -> Handler:
    def handler(imp: Importer, ctx: Ctx) -> None:
        x = imp.value(ctx, 0)
        assert x is not None
        _check_dtype(ctx, x, allowed)
        layout = "nhwc" if x.nhwc is not None else "nchw"
        src = x.nhwc if layout == "nhwc" else imp.canonical(x, ctx)
        assert src is not None
        imp.new_node(ctx, ir_op, [src], ctx.outputs[0], x.shape, x.dtype, attrs, layout)
    return handler


def _operand_nhwc(imp: Importer, ctx: Ctx, v: Value) -> str:
    """`v` as an operand of a 4-D NHWC elementwise op (constants are broadcast to rank 4 first)."""
    if v.const is not None and len(v.shape) != 4:
        if v.const.size == 1:
            return imp.canonical(v, ctx)
        data = v.const.reshape((1,) * (4 - len(v.shape)) + v.shape).transpose(TO_NHWC)
        return imp.constant(contig(data), f"{v.name}_nhwc")
    return imp.nhwc(v, ctx)


def _elementwise(imp: Importer, ctx: Ctx, ir_op: str, vals: Sequence[Value], out: str,
                 attrs: Mapping[str, Any] | None = None) -> Value:
    for v in vals:
        _check_dtype(ctx, v, _FLOAT)
    shape = _broadcast(ctx, *vals)
    use_nhwc = (len(shape) == 4 and any(v.nhwc_only for v in vals)
                and all(v.const is not None or len(v.shape) == 4 for v in vals))
    if use_nhwc:
        names = [_operand_nhwc(imp, ctx, v) for v in vals]
    else:
        names = [imp.canonical(v, ctx) for v in vals]
    return imp.new_node(ctx, ir_op, names, out, shape, vals[0].dtype, dict(attrs or {}),
                        "nhwc" if use_nhwc else "nchw")


def _binary(ir_op: str) -> Handler:
    def handler(imp: Importer, ctx: Ctx) -> None:
        a, b = imp.value(ctx, 0), imp.value(ctx, 1)
        assert a is not None and b is not None
        _elementwise(imp, ctx, ir_op, [a, b], ctx.outputs[0], {"activation": "none"})
    return handler


def _op_sum(imp: Importer, ctx: Ctx) -> None:
    """Sum and Mean of any number of broadcast inputs: a chain of adds (Mean: then times 1/n)."""
    vals = [v for v in (imp.value(ctx, i, required=False) for i in range(len(ctx.inputs))) if v is not None]
    if not vals:
        raise ModelFormatError(f"{ctx.label}: needs at least one input")
    for v in vals:
        _check_dtype(ctx, v, _FLOAT)
    if len(vals) == 1:
        imp.values[ctx.outputs[0]] = vals[0]
        return
    mean = ctx.op == "Mean"
    acc = vals[0]
    for k, v in enumerate(vals[1:], start=1):
        last = k == len(vals) - 1 and not mean
        out = ctx.outputs[0] if last else imp.fresh(f"{ctx.outputs[0]}_partial{k}")
        acc = _elementwise(imp, ctx, "add", [acc, v], out, {"activation": "none"})
    if mean:
        inv = Value(imp.fresh(f"{ctx.outputs[0]}_inv_n"), (), "float32",
                    const=np.array(1.0 / len(vals), dtype=np.float32))
        _elementwise(imp, ctx, "mul", [acc, inv], ctx.outputs[0], {"activation": "none"})


def _op_alias(imp: Importer, ctx: Ctx) -> None:
    """Identity, and Dropout in inference mode: the output is the input."""
    x = imp.value(ctx, 0)
    assert x is not None
    if ctx.op == "Dropout":
        training = imp.value(ctx, 2, required=False)
        if training is not None and (training.const is None or bool(np.asarray(training.const).any())):
            raise UnsupportedModelError(f"{ctx.label}: training_mode dropout is not supported "
                                        "(inference only)")
        if len(ctx.outputs) > 1 and ctx.outputs[1]:
            raise UnsupportedModelError(f"{ctx.label}: the Dropout mask output {ctx.outputs[1]!r} is not "
                                        "supported")
    imp.values[ctx.outputs[0]] = x


def _op_clip(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, ("float32", "int8"))
    if x.dtype == "float32":
        lo_default, hi_default = -_FLT_MAX, _FLT_MAX
    else:
        info = np.iinfo(np.dtype(x.dtype))
        lo_default, hi_default = float(info.min), float(info.max)
    if ctx.opset < 11:
        lo = float(ctx.attr("min", lo_default))
        hi = float(ctx.attr("max", hi_default))
    else:
        lo_c, hi_c = imp.const_input(ctx, 1, "min"), imp.const_input(ctx, 2, "max")
        for c, what in ((lo_c, "min"), (hi_c, "max")):
            if c is not None and c.size != 1:
                raise ModelFormatError(f"{ctx.label}: {what} must be a scalar, got shape {list(c.shape)}")
        lo = float(lo_c.reshape(())) if lo_c is not None else lo_default
        hi = float(hi_c.reshape(())) if hi_c is not None else hi_default
    lo = min(lo, hi)  # ONNX: min > max clamps everything to max
    _unary("clip", ("float32", "int8"), min=lo, max=hi)(imp, ctx)


def _op_conv(imp: Importer, ctx: Ctx) -> None:
    x, w, b = imp.value(ctx, 0), imp.value(ctx, 1), imp.value(ctx, 2, required=False)
    assert x is not None and w is not None
    for v in (x, w) + ((b,) if b is not None else ()):
        _check_dtype(ctx, v, _FLOAT)
    _spatial_2d(ctx, x, "convolution")
    n, c, h, wd = x.shape
    if len(w.shape) != 4:
        raise ModelFormatError(f"{ctx.label}: weight {w.name!r} has shape {list(w.shape)}, expected "
                               "[O, C/group, KH, KW]")
    o, cg, kh, kw = w.shape
    group = int(ctx.attr("group", 1))
    kernel = ctx.ints("kernel_shape", (kh, kw))
    strides = ctx.ints("strides", (1, 1))
    dil = ctx.ints("dilations", (1, 1))
    assert kernel is not None and strides is not None and dil is not None
    if tuple(kernel) != (kh, kw) or len(strides) != 2 or len(dil) != 2:
        raise ModelFormatError(f"{ctx.label}: kernel_shape/strides/dilations do not match the 2-D weight "
                               f"{w.name!r} {list(w.shape)}")
    _check_window(ctx, kernel, strides, dil)
    if group < 1 or c % group or o % group or cg != c // group:
        raise ModelFormatError(f"{ctx.label}: group={group} does not fit input channels {c} and weight "
                               f"{w.name!r} {list(w.shape)}")
    if b is not None and b.shape != (o,):
        raise ModelFormatError(f"{ctx.label}: bias {b.name!r} has shape {list(b.shape)}, expected [{o}]")
    pads = _spatial_pads(ctx, (h, wd), (kh, kw), strides, dil)
    oh = _out_size(h, pads[0], pads[2], (kh - 1) * dil[0] + 1, strides[0], False)
    ow = _out_size(wd, pads[1], pads[3], (kw - 1) * dil[1] + 1, strides[1], False)
    common = {"strides": tuple(strides), "dilation": tuple(dil), "padding": tuple(pads)}
    depthwise = group == c and cg == 1 and group > 1
    perm = (1, 2, 3, 0) if depthwise else (0, 2, 3, 1)  # OIHW -> 1HW(C*M) / OHWI
    w_shape = tuple(w.shape[p] for p in perm)
    w_hint = f"{w.name}_{'1hwc' if depthwise else 'ohwi'}"
    if w.const is not None:
        w_ir = imp.constant(contig(w.const.transpose(perm)), w_hint)
    else:
        w_ir = imp.transpose(ctx, imp.canonical(w, ctx), imp.fresh(w_hint), w_shape, w.dtype, perm, "/weight")
    inputs = [imp.nhwc(x, ctx), w_ir] + ([imp.canonical(b, ctx)] if b is not None else [])
    if depthwise:
        attrs = {**common, "depth_multiplier": o // c, "activation": "none"}
        op = "depthwise_conv2d"
    else:
        attrs = {**common, "groups": group, "activation": "none"}
        op = "conv2d"
    imp.new_node(ctx, op, inputs, ctx.outputs[0], (n, o, oh, ow), x.dtype, attrs, "nhwc")


def _op_pool(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    is_max = ctx.op == "MaxPool"
    _check_dtype(ctx, x, _MOVABLE if is_max else _FLOAT)
    _spatial_2d(ctx, x, "pooling")
    if is_max and len(ctx.outputs) > 1 and ctx.outputs[1]:
        raise UnsupportedModelError(f"{ctx.label}: the MaxPool Indices output {ctx.outputs[1]!r} is not "
                                    "supported")
    n, c, h, w = x.shape
    kernel = ctx.ints("kernel_shape")
    if kernel is None or len(kernel) != 2:
        raise ModelFormatError(f"{ctx.label}: kernel_shape must have 2 values, got {kernel}")
    strides = ctx.ints("strides", (1, 1))
    dil = ctx.ints("dilations", (1, 1))
    assert strides is not None and dil is not None
    _check_window(ctx, kernel, strides, dil)
    pads = _spatial_pads(ctx, (h, w), kernel, strides, dil)
    keff = [(kernel[i] - 1) * dil[i] + 1 for i in range(2)]
    ceil_mode = bool(ctx.attr("ceil_mode", 0)) and ctx.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID")
    out = [_out_size((h, w)[i], pads[i], pads[i + 2], keff[i], strides[i], ceil_mode) for i in range(2)]
    # ceil_mode as extra end padding that no window counts: exact for max and for count_include_pad=0.
    extra = [max(0, (out[i] - 1) * strides[i] + keff[i] - ((h, w)[i] + pads[i] + pads[i + 2]))
             for i in range(2)]
    count_pad = bool(ctx.attr("count_include_pad", 0))
    src = imp.nhwc(x, ctx)
    if count_pad and any(extra):  # the explicit pads count, the ceil extension does not: pad with zeros first
        padded = (n, h + pads[0] + pads[2], w + pads[1] + pads[3], c)
        pad_pairs = ((0, 0), (pads[0], pads[2]), (pads[1], pads[3]), (0, 0))
        src = imp.temp(ctx, "pad", [src], padded, x.dtype, {"pads": pad_pairs, "value": 0.0}, "pad")
        pads, count_pad = [0, 0, 0, 0], False
    padding = (pads[0], pads[1], pads[2] + extra[0], pads[3] + extra[1])
    attrs: dict[str, Any] = {"pool": tuple(kernel), "strides": tuple(strides), "padding": padding,
                             "dilation": tuple(dil), "ceil_mode": False, "activation": "none"}
    if not is_max:
        attrs["count_include_pad"] = count_pad
    imp.new_node(ctx, "max_pool2d" if is_max else "avg_pool2d", [src], ctx.outputs[0], (n, c, out[0], out[1]),
                 x.dtype, attrs, "nhwc")


def _op_global_pool(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    is_max = ctx.op == "GlobalMaxPool"
    _check_dtype(ctx, x, _MOVABLE if is_max else _FLOAT)
    _spatial_2d(ctx, x, "global pooling")
    n, c, h, w = x.shape
    if is_max:
        attrs = {"pool": (h, w), "strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1),
                 "ceil_mode": False, "activation": "none"}
        imp.new_node(ctx, "max_pool2d", [imp.nhwc(x, ctx)], ctx.outputs[0], (n, c, 1, 1), x.dtype, attrs,
                     "nhwc")
    else:
        imp.new_node(ctx, "global_avg_pool2d", [imp.nhwc(x, ctx)], ctx.outputs[0], (n, c, 1, 1), x.dtype, {},
                     "nhwc")


def _op_batch_norm(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    params = [imp.value(ctx, i) for i in range(1, 5)]
    assert x is not None
    if int(ctx.attr("training_mode", 0)) or any(o for o in ctx.outputs[1:]) and ctx.opset >= 14:
        raise UnsupportedModelError(f"{ctx.label}: training-mode BatchNormalization is not supported")
    if not int(ctx.attr("spatial", 1)):
        raise UnsupportedModelError(f"{ctx.label}: BatchNormalization with spatial=0 is not supported")
    _check_dtype(ctx, x, _FLOAT)
    if len(x.shape) < 2:
        raise ModelFormatError(f"{ctx.label}: input {x.name!r} has rank {len(x.shape)}; need at least [N, C]")
    c = x.shape[1]
    names = []
    for v in params:
        assert v is not None
        _check_dtype(ctx, v, _FLOAT)
        if v.shape != (c,):
            raise ModelFormatError(f"{ctx.label}: {v.name!r} has shape {list(v.shape)}, expected [{c}]")
        names.append(imp.canonical(v, ctx))
    attrs = {"epsilon": float(ctx.attr("epsilon", 1e-5))}
    rank = len(x.shape)
    if rank == 4:
        inputs = [imp.nhwc(x, ctx), *names]
        imp.new_node(ctx, "batch_norm", inputs, ctx.outputs[0], x.shape, x.dtype, attrs, "nhwc")
    elif rank == 2:
        inputs = [imp.canonical(x, ctx), *names]
        imp.new_node(ctx, "batch_norm", inputs, ctx.outputs[0], x.shape, x.dtype, attrs)
    else:  # channels last for the op, then back
        fwd = (0,) + tuple(range(2, rank)) + (1,)
        inv = tuple(int(i) for i in np.argsort(fwd))
        last = tuple(x.shape[p] for p in fwd)
        t = imp.temp(ctx, "transpose", [imp.canonical(x, ctx)], last, x.dtype, {"perm": fwd}, "channels_last")
        bn = imp.temp(ctx, "batch_norm", [t] + names, last, x.dtype, attrs, "bn")
        imp.new_node(ctx, "transpose", [bn], ctx.outputs[0], x.shape, x.dtype, {"perm": inv})


def _reshape_to(imp: Importer, ctx: Ctx, x: Value, shape: Sequence[int]) -> None:
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != math.prod(x.shape):
        raise ModelFormatError(f"{ctx.label}: cannot reshape {x.name!r} {list(x.shape)} to {list(shape)}")
    imp.new_node(ctx, "reshape", [imp.canonical(x, ctx)], ctx.outputs[0], shape, x.dtype, {"shape": shape})


def _reshape_shape(ctx: Ctx, in_shape: Sequence[int], spec: np.ndarray, allowzero: bool) -> tuple[int, ...]:
    spec_l = [int(s) for s in spec.reshape(-1)]
    out: list[int] = []
    for i, s in enumerate(spec_l):
        if s == 0 and not allowzero:
            if i >= len(in_shape):
                raise ModelFormatError(f"{ctx.label}: shape {spec_l} copies dim {i} of a "
                                       f"rank-{len(in_shape)} input")
            out.append(int(in_shape[i]))
        else:
            out.append(s)
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ModelFormatError(f"{ctx.label}: invalid target shape {spec_l}")
    total = math.prod(in_shape)
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or total % known:
            raise ModelFormatError(f"{ctx.label}: cannot reshape {list(in_shape)} to {spec_l}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ModelFormatError(f"{ctx.label}: cannot reshape {list(in_shape)} to {spec_l}")
    return tuple(out)


def _op_reshape(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _MOVABLE)
    if ctx.opset < 5:
        spec: np.ndarray | None = np.array(ctx.ints("shape", ()), dtype=np.int64)
    else:
        spec = imp.const_input(ctx, 1, "shape", integer=True)
    if spec is None:
        raise ModelFormatError(f"{ctx.label}: Reshape needs a shape")
    _reshape_to(imp, ctx, x, _reshape_shape(ctx, x.shape, spec, bool(ctx.attr("allowzero", 0))))


def _op_flatten(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _MOVABLE)
    rank = len(x.shape)
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise ModelFormatError(f"{ctx.label}: axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    _reshape_to(imp, ctx, x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))


def _axes_input(imp: Importer, ctx: Ctx, opset_moved: int) -> tuple[int, ...] | None:
    if ctx.opset < opset_moved:
        return ctx.ints("axes")
    axes = imp.const_input(ctx, 1, "axes", integer=True)
    return None if axes is None else tuple(int(a) for a in axes.reshape(-1))


def _op_squeeze(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _MOVABLE)
    axes = _axes_input(imp, ctx, 13)
    rank = len(x.shape)
    if axes is None:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        drop = {_axis(ctx, a, rank) for a in axes}
    if any(x.shape[a] != 1 for a in drop):
        raise ModelFormatError(f"{ctx.label}: cannot squeeze axes {sorted(drop)} of {list(x.shape)}")
    _reshape_to(imp, ctx, x, [d for i, d in enumerate(x.shape) if i not in drop])


def _op_unsqueeze(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _MOVABLE)
    axes = _axes_input(imp, ctx, 13)
    if axes is None:
        raise ModelFormatError(f"{ctx.label}: Unsqueeze needs axes")
    rank = len(x.shape) + len(axes)
    ins = {_axis(ctx, a, rank) for a in axes}
    if len(ins) != len(axes):
        raise ModelFormatError(f"{ctx.label}: repeated axes {list(axes)}")
    dims = iter(x.shape)
    _reshape_to(imp, ctx, x, [1 if i in ins else next(dims) for i in range(rank)])


def _op_transpose(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _MOVABLE)
    rank = len(x.shape)
    perm = ctx.ints("perm", tuple(reversed(range(rank))))
    assert perm is not None
    if sorted(perm) != list(range(rank)):
        raise ModelFormatError(f"{ctx.label}: perm {list(perm)} is not a permutation of {rank} axes")
    out_shape = tuple(x.shape[p] for p in perm)
    if x.nhwc_only:  # compose with the NHWC -> NCHW transpose instead of emitting both
        assert x.nhwc is not None
        imp.new_node(ctx, "transpose", [x.nhwc], ctx.outputs[0], out_shape, x.dtype,
                     {"perm": tuple(TO_NCHW[p] for p in perm)})
    else:
        imp.new_node(ctx, "transpose", [imp.canonical(x, ctx)], ctx.outputs[0], out_shape, x.dtype,
                     {"perm": tuple(perm)})


def _op_concat(imp: Importer, ctx: Ctx) -> None:
    vals = [v for v in (imp.value(ctx, i, required=False) for i in range(len(ctx.inputs))) if v is not None]
    if not vals:
        raise ModelFormatError(f"{ctx.label}: Concat needs at least one input")
    for v in vals:
        _check_dtype(ctx, v, _MOVABLE)
        if v.dtype != vals[0].dtype or len(v.shape) != len(vals[0].shape):
            raise ModelFormatError(f"{ctx.label}: inputs {vals[0].name!r} and {v.name!r} differ in dtype "
                                   "or rank")
    rank = len(vals[0].shape)
    if rank == 0:
        raise ModelFormatError(f"{ctx.label}: cannot concatenate rank-0 tensors ({vals[0].name!r})")
    axis = _axis(ctx, int(ctx.attr("axis", 0)), rank)
    for v in vals:
        if any(d != e for i, (d, e) in enumerate(zip(v.shape, vals[0].shape, strict=True)) if i != axis):
            raise ModelFormatError(f"{ctx.label}: input {v.name!r} {list(v.shape)} does not match "
                                   f"{list(vals[0].shape)} outside axis {axis}")
    shape = list(vals[0].shape)
    shape[axis] = sum(v.shape[axis] for v in vals)
    if (rank == 4 and any(v.nhwc_only for v in vals)
            and all(v.nhwc is not None or v.const is not None for v in vals)):
        names = [imp.nhwc(v, ctx) for v in vals]
        attrs = {"axis": TO_NHWC.index(axis)}
        imp.new_node(ctx, "concat", names, ctx.outputs[0], shape, vals[0].dtype, attrs, "nhwc")
    else:
        names = [imp.canonical(v, ctx) for v in vals]
        imp.new_node(ctx, "concat", names, ctx.outputs[0], shape, vals[0].dtype, {"axis": axis})


def _op_softmax(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _FLOAT)
    rank = len(x.shape)
    if ctx.opset >= 13:
        axis = _axis(ctx, int(ctx.attr("axis", -1)), rank)
        if x.nhwc_only:
            imp.new_node(ctx, "softmax", [imp.nhwc(x, ctx)], ctx.outputs[0], x.shape, x.dtype,
                         {"axis": TO_NHWC.index(axis), "beta": 1.0}, "nhwc")
        else:
            imp.new_node(ctx, "softmax", [imp.canonical(x, ctx)], ctx.outputs[0], x.shape, x.dtype,
                         {"axis": axis, "beta": 1.0})
        return
    # opset < 13: coerce to 2-D [prod(shape[:axis]), prod(shape[axis:])] and normalise each row
    raw = int(ctx.attr("axis", 1))
    if not -rank <= raw <= rank:
        raise ModelFormatError(f"{ctx.label}: axis {raw} is out of range for rank {rank}")
    axis = raw + rank if raw < 0 else raw
    src = imp.canonical(x, ctx)
    if axis >= rank - 1:  # rows are the last axis already (axis == rank: every row has one element)
        if axis == rank:
            flat = (math.prod(x.shape), 1)
            t = imp.temp(ctx, "reshape", [src], flat, x.dtype, {"shape": flat}, "rows")
            s = imp.temp(ctx, "softmax", [t], flat, x.dtype, {"axis": 1, "beta": 1.0}, "softmax")
            imp.new_node(ctx, "reshape", [s], ctx.outputs[0], x.shape, x.dtype, {"shape": x.shape})
        else:
            imp.new_node(ctx, "softmax", [src], ctx.outputs[0], x.shape, x.dtype,
                         {"axis": rank - 1, "beta": 1.0})
        return
    flat = (math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))
    t = imp.temp(ctx, "reshape", [src], flat, x.dtype, {"shape": flat}, "rows")
    s = imp.temp(ctx, "softmax", [t], flat, x.dtype, {"axis": 1, "beta": 1.0}, "softmax")
    imp.new_node(ctx, "reshape", [s], ctx.outputs[0], x.shape, x.dtype, {"shape": x.shape})


def _matmul_shape(ctx: Ctx, a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if not a or not b or a2[-1] != b2[-2]:
        raise ModelFormatError(f"{ctx.label}: cannot multiply shapes {list(a)} and {list(b)}")
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise ModelFormatError(f"{ctx.label}: batch dims of {list(a)} and {list(b)} do not broadcast"
                               ) from None
    out = (*batch, a2[-2], b2[-1])
    if len(b) == 1:
        out = out[:-1]
    if len(a) == 1:
        out = out[:-2] + out[-1:] if len(b) != 1 else out[:-1]
    return tuple(int(d) for d in out)


def _dense(imp: Importer, ctx: Ctx, x: Value, w: np.ndarray, bias: np.ndarray | None, out: str,
           out_shape: Sequence[int]) -> Value:
    """x[..., K] @ w[O, K].T (+ bias[O]) as a dense node writing ONNX value `out` of shape `out_shape`."""
    k = w.shape[1]
    src = imp.canonical(x, ctx)
    inputs = [src, imp.constant(contig(w.astype(np.float32)), f"{out}_weight")]
    if bias is not None:
        inputs.append(imp.constant(contig(bias.astype(np.float32)), f"{out}_bias"))
    x_shape = x.shape
    if len(x_shape) < 2:  # dense wants [..., K] with a batch
        x_shape = (1, k)
        inputs[0] = imp.temp(ctx, "reshape", [src], x_shape, x.dtype, {"shape": x_shape}, "rows")
    dense_shape = (*x_shape[:-1], w.shape[0])
    if tuple(dense_shape) == tuple(out_shape):
        return imp.new_node(ctx, "dense", inputs, out, out_shape, x.dtype, {"activation": "none"})
    d = imp.temp(ctx, "dense", inputs, dense_shape, x.dtype, {"activation": "none"}, "dense")
    v, ir = imp.define(out, out_shape, x.dtype)
    name = (ctx.name or f"{ctx.op}_{ctx.index}") + "/reshape"
    imp.nodes.append(Node("reshape", (d,), (ir,), {"shape": tuple(out_shape)}, name))
    return v


def _op_matmul(imp: Importer, ctx: Ctx) -> None:
    a, b = imp.value(ctx, 0), imp.value(ctx, 1)
    assert a is not None and b is not None
    _check_dtype(ctx, a, _FLOAT)
    _check_dtype(ctx, b, _FLOAT)
    shape = _matmul_shape(ctx, a.shape, b.shape)
    if b.const is not None and len(b.shape) in (1, 2):
        w = b.const.reshape(b.shape[0], math.prod(b.shape[1:])).T  # [N, K] (no -1: b may be empty)
        _dense(imp, ctx, a, w, None, ctx.outputs[0], shape)
        return
    inputs = [imp.canonical(a, ctx), imp.canonical(b, ctx)]
    imp.new_node(ctx, "matmul", inputs, ctx.outputs[0], shape, a.dtype)


def _op_gemm(imp: Importer, ctx: Ctx) -> None:
    a, b, c = imp.value(ctx, 0), imp.value(ctx, 1), imp.value(ctx, 2, required=False)
    assert a is not None and b is not None
    for v in (a, b) + ((c,) if c is not None else ()):
        _check_dtype(ctx, v, _FLOAT)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    ta, tb = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ModelFormatError(f"{ctx.label}: Gemm needs 2-D A and B, got {list(a.shape)} and "
                               f"{list(b.shape)}")
    m, k = a.shape[::-1] if ta else a.shape
    kb, n = b.shape[::-1] if tb else b.shape
    if k != kb:
        raise ModelFormatError(f"{ctx.label}: A {list(a.shape)} and B {list(b.shape)} do not multiply "
                               f"(transA={int(ta)}, transB={int(tb)})")
    if c is not None:
        try:
            np.broadcast_shapes(c.shape, (m, n))
        except ValueError:
            raise ModelFormatError(f"{ctx.label}: C {c.name!r} {list(c.shape)} does not broadcast to "
                                   f"[{m}, {n}]") from None
    out = ctx.outputs[0]
    has_c = c is not None and beta != 0.0
    if ta:
        a_t = imp.temp(ctx, "transpose", [imp.canonical(a, ctx)], (m, k), a.dtype, {"perm": (1, 0)}, "a_t")
        a = Value(a_t, (m, k), a.dtype, nchw=a_t)
    y_name = out if not has_c else imp.fresh(f"{out}_ab")
    bias_vec: np.ndarray | None = None
    c_rest: Value | None = c if has_c else None
    if b.const is not None:
        w = (b.const if tb else b.const.T) * np.float32(alpha)
        if has_c and c is not None and c.const is not None and c.const.size in (1, n) and (
                c.const.ndim < 2 or c.const.shape[0] == 1):
            bias_vec = np.broadcast_to(c.const.reshape(-1) * np.float32(beta), (n,)).astype(np.float32)
            y_name, c_rest = out, None
        y = _dense(imp, ctx, a, contig(w.astype(np.float32)), bias_vec, y_name, (m, n))
    else:
        b_src = imp.canonical(b, ctx)
        if tb:
            b_src = imp.temp(ctx, "transpose", [b_src], (k, n), b.dtype, {"perm": (1, 0)}, "b_t")
        if alpha != 1.0:
            ab = imp.temp(ctx, "matmul", [imp.canonical(a, ctx), b_src], (m, n), a.dtype, hint="matmul")
            alpha_c = imp.constant(np.array(alpha, dtype=np.float32), f"{out}_alpha")
            y = imp.new_node(ctx, "mul", [ab, alpha_c], y_name, (m, n), a.dtype, {"activation": "none"})
        else:
            y = imp.new_node(ctx, "matmul", [imp.canonical(a, ctx), b_src], y_name, (m, n), a.dtype)
    if c_rest is None:
        return
    if beta != 1.0:
        if c_rest.const is not None:
            c_rest = Value(f"{c_rest.name}_scaled", c_rest.shape, c_rest.dtype,
                            const=(c_rest.const * np.float32(beta)).astype(np.float32))
        else:
            beta_c = imp.constant(np.array(beta, dtype=np.float32), f"{out}_beta")
            scaled = imp.temp(ctx, "mul", [imp.canonical(c_rest, ctx), beta_c], c_rest.shape, c_rest.dtype,
                              {"activation": "none"}, "beta_c")
            c_rest = Value(scaled, c_rest.shape, c_rest.dtype, nchw=scaled)
    imp.new_node(ctx, "add", [imp.canonical(y, ctx), imp.canonical(c_rest, ctx)], out, (m, n), a.dtype,
                 {"activation": "none"})


def _op_pad(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _FLOAT)
    mode = ctx.attr("mode", "constant")
    if mode != "constant":
        raise UnsupportedModelError(f"{ctx.label}: Pad mode {mode!r} is not supported (only 'constant')")
    rank = len(x.shape)
    if ctx.opset < 11:
        pads_l = list(ctx.ints("pads", ()) or ())
        value = float(ctx.attr("value", 0.0))
        axes = list(range(rank))
    else:
        p = imp.const_input(ctx, 1, "pads", integer=True)
        if p is None:
            raise ModelFormatError(f"{ctx.label}: Pad needs pads")
        pads_l = [int(v) for v in p.reshape(-1)]
        cv = imp.const_input(ctx, 2, "constant_value")
        value = float(cv.reshape(())) if cv is not None and cv.size == 1 else 0.0
        ax = imp.const_input(ctx, 3, "axes", integer=True)
        axes = list(range(rank)) if ax is None else [_axis(ctx, int(a), rank) for a in ax.reshape(-1)]
    if len(pads_l) != 2 * len(axes):
        raise ModelFormatError(f"{ctx.label}: pads {pads_l} must have 2 values per padded axis "
                               f"({len(axes)} axes)")
    if min(pads_l, default=0) < 0:
        raise UnsupportedModelError(f"{ctx.label}: negative pads {pads_l} (cropping) are not supported")
    pairs = [(0, 0)] * rank
    for i, a in enumerate(axes):
        pairs[a] = (pads_l[i], pads_l[i + len(axes)])
    shape = tuple(d + b + e for d, (b, e) in zip(x.shape, pairs, strict=True))
    if rank == 4 and x.nhwc_only:
        nhwc_pairs = tuple(pairs[p] for p in TO_NHWC)
        imp.new_node(ctx, "pad", [imp.nhwc(x, ctx)], ctx.outputs[0], shape, x.dtype,
                     {"pads": nhwc_pairs, "value": value}, "nhwc")
    else:
        imp.new_node(ctx, "pad", [imp.canonical(x, ctx)], ctx.outputs[0], shape, x.dtype,
                     {"pads": tuple(pairs), "value": value})


def _op_reduce_mean(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    _check_dtype(ctx, x, _FLOAT)
    rank = len(x.shape)
    axes_raw = _axes_input(imp, ctx, 18)
    keepdims = bool(ctx.attr("keepdims", 1))
    if not axes_raw:
        if ctx.opset >= 18 and int(ctx.attr("noop_with_empty_axes", 0)):
            imp.values[ctx.outputs[0]] = x
            return
        axes = tuple(range(rank))
    else:
        axes = tuple(sorted({_axis(ctx, a, rank) for a in axes_raw}))
    shape = tuple((1 if i in axes else d) for i, d in enumerate(x.shape) if keepdims or i not in axes)
    if rank == 4 and x.nhwc_only:
        nhwc_axes = tuple(sorted(TO_NHWC.index(a) for a in axes))
        kept_nhwc = [a for a in TO_NHWC if a not in axes]
        if keepdims or kept_nhwc == sorted(kept_nhwc):
            attrs = {"axes": nhwc_axes, "keepdims": keepdims}
            imp.new_node(ctx, "mean", [imp.nhwc(x, ctx)], ctx.outputs[0], shape, x.dtype, attrs,
                         "nhwc" if keepdims else "nchw")
            return
    imp.new_node(ctx, "mean", [imp.canonical(x, ctx)], ctx.outputs[0], shape, x.dtype,
                 {"axes": axes, "keepdims": keepdims})


def _op_constant(imp: Importer, ctx: Ctx) -> None:
    a = ctx.attrs
    if "value" in a:
        t = a["value"]
        if t.data_type not in ELEM_TYPES:
            raise UnsupportedModelError(f"{ctx.label}: Constant value has unsupported element type "
                                        f"{elem_type_name(t.data_type)}")
        refuse_external(t, f"{ctx.label}: Constant value")
        imp.account(ctx.outputs[0], tuple(t.dims), ELEM_TYPES[t.data_type])  # before decoding it
        imp.define_const(ctx.outputs[0], to_array(t, f"{ctx.label}: Constant value"), counted=True)
        return
    elif "value_float" in a:
        data = np.array(a["value_float"], dtype=np.float32)
    elif "value_floats" in a:
        data = np.array(a["value_floats"], dtype=np.float32)
    elif "value_int" in a:
        data = np.array(a["value_int"], dtype=np.int64)
    elif "value_ints" in a:
        data = np.array(a["value_ints"], dtype=np.int64)
    else:
        raise UnsupportedModelError(f"{ctx.label}: Constant with attributes {sorted(a)} is not supported")
    imp.define_const(ctx.outputs[0], np.asarray(data))


HANDLERS: dict[str, Handler] = {
    "Add": _binary("add"),
    "AveragePool": _op_pool,
    "BatchNormalization": _op_batch_norm,
    "Clip": _op_clip,
    "Concat": _op_concat,
    "Constant": _op_constant,
    "Conv": _op_conv,
    "Dropout": _op_alias,
    "Flatten": _op_flatten,
    "Gemm": _op_gemm,
    "GlobalAveragePool": _op_global_pool,
    "GlobalMaxPool": _op_global_pool,
    "Identity": _op_alias,
    "MatMul": _op_matmul,
    "MaxPool": _op_pool,
    "Mean": _op_sum,
    "Mul": _binary("mul"),
    "Pad": _op_pad,
    "ReduceMean": _op_reduce_mean,
    "Relu": _unary("relu"),
    "Reshape": _op_reshape,
    "Sigmoid": _unary("logistic"),
    "Softmax": _op_softmax,
    "Squeeze": _op_squeeze,
    "Sub": _binary("sub"),
    "Sum": _op_sum,
    "Tanh": _unary("tanh"),
    "Transpose": _op_transpose,
    "Unsqueeze": _op_unsqueeze,
}

def _quantized_handlers() -> dict[str, Handler]:
    from utvm.frontend._onnx_quant import QUANT_HANDLERS

    return QUANT_HANDLERS


HANDLERS.update(_quantized_handlers())
# utvm.* are the quantized nodes utvm's own QDQ rewrite makes (utvm.frontend._onnx_quant), not user ops
SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(h for h in HANDLERS if not h.startswith("utvm.")))


# ========================================================================================== constant folding
def _fold_reshape(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
    spec = xs[1] if ctx.opset >= 5 else np.array(ctx.ints("shape", ()), dtype=np.int64)
    return xs[0].reshape(_reshape_shape(ctx, xs[0].shape, spec, bool(ctx.attr("allowzero", 0))))


def _fold_transpose(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
    perm = ctx.ints("perm", tuple(reversed(range(xs[0].ndim))))
    return contig(xs[0].transpose(perm))


def _fold_concat(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(xs, axis=_axis(ctx, int(ctx.attr("axis", 0)), xs[0].ndim))


def _fold_unsqueeze(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
    axes = ctx.ints("axes") if ctx.opset < 13 else tuple(int(a) for a in xs[1].reshape(-1))
    rank = xs[0].ndim + len(axes or ())
    return np.expand_dims(xs[0], tuple(_axis(ctx, a, rank) for a in axes or ()))  # numpy: int overflow


def _fold_squeeze(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
    if ctx.opset < 13:
        axes = ctx.ints("axes")
    else:
        axes = tuple(int(a) for a in xs[1].reshape(-1)) if len(xs) > 1 else None
    if axes is not None:
        axes = tuple(_axis(ctx, a, xs[0].ndim) for a in axes)
    return np.squeeze(xs[0], axis=axes)


def _fold_flatten(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
    rank = xs[0].ndim
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis <= rank:
        raise ModelFormatError(f"{ctx.label}: axis {axis} is out of range for rank {rank}")
    axis = axis + rank if axis < 0 else axis
    # both extents explicit: numpy cannot infer a -1 for an empty array
    return xs[0].reshape(math.prod(xs[0].shape[:axis]), math.prod(xs[0].shape[axis:]))


def _fold_arith(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def fold(imp: Importer, ctx: Ctx, xs: list[np.ndarray]) -> np.ndarray:
        if any(x.dtype != np.float32 for x in xs):  # integer constant arithmetic: leave to the op check
            raise _NoFold
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return np.asarray(out, dtype=np.float32)
    return fold


class _NoFold(Exception):
    pass


_FOLDERS: dict[str, Callable[[Importer, Ctx, list[np.ndarray]], np.ndarray]] = {
    "Reshape": _fold_reshape,
    "Transpose": _fold_transpose,
    "Concat": _fold_concat,
    "Unsqueeze": _fold_unsqueeze,
    "Squeeze": _fold_squeeze,
    "Flatten": _fold_flatten,
    "Identity": lambda imp, ctx, xs: xs[0],
    "Add": _fold_arith(np.add),
    "Sub": _fold_arith(np.subtract),
    "Mul": _fold_arith(np.multiply),
    "Sum": _fold_arith(np.add),
}


# folds whose result is checked against utvm.limits before numpy makes it: those that can be larger than
# every input, and Reshape (a target like [0, 2**62] is empty, but no shape the generated C can index)
_CHECKED_FIRST = ("Add", "Sub", "Mul", "Sum", "Concat", "Reshape")


def _fold_shape(ctx: Ctx, xs: list[np.ndarray]) -> tuple[int, ...] | None:
    """The shape a checked-first fold will produce (None: let the folder report the inconsistency)."""
    try:
        if ctx.op == "Concat":
            if xs[0].ndim == 0:
                return None  # numpy refuses to concatenate scalars, naming the problem
            axis = _axis(ctx, int(ctx.attr("axis", 0)), xs[0].ndim)
            shape = list(xs[0].shape)
            shape[axis] = sum(int(x.shape[axis]) if x.ndim == xs[0].ndim else 0 for x in xs)
            return tuple(shape)
        if ctx.op == "Reshape":
            spec = xs[1] if ctx.opset >= 5 else np.array(ctx.ints("shape", ()), dtype=np.int64)
            return _reshape_shape(ctx, xs[0].shape, spec, bool(ctx.attr("allowzero", 0)))
        return tuple(int(d) for d in np.broadcast_shapes(*(x.shape for x in xs)))
    except (ValueError, IndexError, TypeError, OverflowError):
        return None


def try_fold(imp: Importer, ctx: Ctx) -> bool:
    folder = _FOLDERS.get(ctx.op)
    if folder is None or len(ctx.outputs) != 1:
        return False
    vals = [imp.values.get(n) if n else None for n in ctx.inputs]
    if not vals or any(v is None or v.const is None for v in vals):
        return False
    xs = [v.const for v in vals if v is not None and v.const is not None]
    moved = {"Reshape": 5, "Unsqueeze": 13, "Squeeze": 13}  # the opset from which input 1 holds shape/axes
    if ctx.op in moved and ctx.opset >= moved[ctx.op] and len(xs) > 1 and xs[1].dtype.kind not in "iu":
        raise ModelFormatError(f"{ctx.label}: input 1 ({'shape' if ctx.op == 'Reshape' else 'axes'}) "
                               f"{ctx.inputs[1]!r} must be an integer tensor, not {xs[1].dtype}")
    counted = False
    if ctx.op in _CHECKED_FIRST:  # check the result's size before numpy computes it
        if ctx.op in ("Add", "Sub", "Mul", "Sum") and any(x.dtype != np.float32 for x in xs):
            return False  # integer constant arithmetic: leave to the op check
        if ctx.op == "Concat" and any(x.dtype != xs[0].dtype for x in xs):
            return False  # mixed dtypes: the op check names them
        shape = _fold_shape(ctx, xs)
        if shape is not None:
            imp.account(ctx.outputs[0], shape, str(xs[0].dtype))
            counted = True
    try:
        data = folder(imp, ctx, xs)
    except _NoFold:
        return False
    except (ValueError, IndexError, TypeError) as exc:
        raise ModelFormatError(f"{ctx.label}: cannot evaluate on its constant inputs: {exc}") from None
    data = np.asarray(data)
    if counted and ctx.op == "Concat" and data.shape != shape:
        raise ModelFormatError(f"{ctx.label}: concatenation of constants came out {list(data.shape)}, "
                               f"expected {list(shape)}")
    imp.define_const(ctx.outputs[0], data, counted=counted)
    return True

