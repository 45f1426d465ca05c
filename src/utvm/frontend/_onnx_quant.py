"""Quantized ONNX onto utvm's int8 path: QDQ models, QLinearConv / QLinearMatMul, Quantize/DequantizeLinear.

Two steps.

1. `fuse_qdq(model)` rewrites the ONNX graph before import. In a QDQ model (onnxruntime's static
   quantization, `quant_format=QDQ`) every quantized operator sits between DequantizeLinear nodes (its
   inputs; weights and biases are DequantizeLinear of int8 / int32 initializers) and a QuantizeLinear
   (its output). Each such group becomes one quantized node:
     Conv [+ Relu/Clip]          -> utvm.QConv      (QLinearConv's inputs, plus the fused activation)
     MatMul / Gemm [+ Relu/Clip] -> utvm.QGemm      (constant B; Gemm's bias; alpha = beta = 1)
     Add / Mul                   -> utvm.QAdd / utvm.QMul
     GlobalAveragePool           -> utvm.QGlobalAvgPool (an int8 mean over H and W)
     MaxPool, GlobalMaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat
                                 -> the same op on the quantized tensor, when the QuantizeLinear's scale
                                    and zero point equal every input's (pure data movement on the integers)
   A group that does not fit (float weights, a second consumer, different scales where they must be
   equal) is left as it is: DequantizeLinear -> float op -> QuantizeLinear still imports and runs, in
   float32, so every QDQ model imports; the rewrite only moves operators onto the int8 path.
2. The handlers below import QuantizeLinear / DequantizeLinear (activations: `quantize` / `dequantize`
   nodes; of constants: folded), QLinearConv, QLinearMatMul, the QOperator-format contrib ops
   onnxruntime emits (com.microsoft QLinearAdd, QLinearMul, QGemm, QLinearGlobalAveragePool) and the
   fused nodes as utvm's int8 ops with the ONNX scales and zero points as tensor quantization.

uint8 activations (onnxruntime's default activation type) are held as int8 with the zero point moved by
-128: the same real values, bit for bit (`q_u8 - 128 = q_i8`). uint8 weights with zero point 128 become
symmetric int8 weights; other asymmetric weights are refused (utvm's int8 kernels, like TFLite's, take
symmetric weights).

Bit-exactness with onnxruntime: data movement, max pooling and the quantization of model inputs are
exact. Requantizing operators (conv, gemm, add, mul, average pooling) are not: onnxruntime requantizes
with a float multiplication rounded half to even, utvm (like TFLite and TFLM) with a 32-bit fixed-point
multiplier and gemmlowp rounding, so an output may differ by one quantization step (docs/operators.md;
the tests measure it). QuantizeLinear rounds half to even in ONNX and half away from zero in utvm:
they differ only on exact ties.

ConvInteger / MatMulInteger (dynamic quantization: int32 accumulators, activation scales computed at run
time by DynamicQuantizeLinear) are refused with that reason: utvm's int8 path needs static scales.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from utvm.errors import ModelFormatError, UnsupportedModelError
from utvm.frontend._onnx_state import TO_NHWC, Ctx, Importer, Value, contig
from utvm.ir.graph import Quantization

_ACT_OPS = ("Relu", "Clip")
_MOVEMENT = ("MaxPool", "GlobalMaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat")


# ============================================================================ step 1: the graph rewrite
class _Graph:
    def __init__(self, model: Any) -> None:
        g = model.graph
        self.g = g
        self.inits = {t.name: t for t in g.initializer}
        self.producer: dict[str, Any] = {}
        self.consumers: dict[str, list[Any]] = {}
        for n in g.node:
            for o in n.output:
                self.producer[o] = n
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(n)
        self.outputs = {o.name for o in g.output}
        self.consts: dict[str, np.ndarray] = {}
        import onnx.numpy_helper as nh

        for name, t in self.inits.items():
            try:
                self.consts[name] = np.asarray(nh.to_array(t))
            except Exception:  # noqa: BLE001 - a bad initializer is reported by the import itself
                continue
        for n in g.node:
            if n.op_type == "Constant" and n.output and len(n.attribute) == 1 and n.attribute[0].name == "value":
                try:
                    self.consts[n.output[0]] = np.asarray(nh.to_array(n.attribute[0].t))
                except Exception:  # noqa: BLE001
                    continue

    def only_consumer(self, name: str) -> Any | None:
        cons = self.consumers.get(name, [])
        if len(cons) != 1 or name in self.outputs:
            return None
        return cons[0]

    def dq(self, name: str) -> Any | None:
        n = self.producer.get(name)
        return n if n is not None and n.op_type == "DequantizeLinear" and (n.domain or "") in ("", "ai.onnx") else None

    def qparams(self, node: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """The constant (scale, zero point) of a Q/DQ node, or None."""
        s = self.consts.get(node.input[1]) if len(node.input) > 1 else None
        if s is None:
            return None
        zp = self.consts.get(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros((), np.uint8)
        if zp is None:
            return None
        return s, zp


def _same_params(a: tuple[np.ndarray, np.ndarray] | None, b: tuple[np.ndarray, np.ndarray] | None) -> bool:
    return (a is not None and b is not None and a[0].size == 1 and b[0].size == 1 and a[1].dtype == b[1].dtype
            and float(a[0].reshape(())) == float(b[0].reshape(())) and int(a[1].reshape(())) == int(b[1].reshape(())))


def _attr(node: Any, name: str, default: Any) -> Any:
    import onnx

    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def fuse_qdq(model: Any) -> tuple[Any, int]:
    """The model with its QDQ groups rewritten to quantized nodes (a copy); and how many were fused."""
    import onnx

    if not any(n.op_type == "DequantizeLinear" for n in model.graph.node):
        return model, 0
    model = onnx.ModelProto.FromString(model.SerializeToString())
    gr = _Graph(model)
    removed: set[int] = set()
    replace: dict[int, Any] = {}
    fused = 0

    def q_after(out: str) -> tuple[Any, Any | None] | None:
        """The QuantizeLinear consuming `out` (possibly through one Relu/Clip): (q, act)."""
        nxt = gr.only_consumer(out)
        act = None
        if nxt is not None and nxt.op_type in _ACT_OPS:
            act, nxt = nxt, gr.only_consumer(nxt.output[0])
        if nxt is None or nxt.op_type != "QuantizeLinear" or gr.qparams(nxt) is None:
            return None
        if gr.qparams(nxt)[0].size != 1:
            return None
        return nxt, act

    def act_name(act: Any | None) -> str | None:
        if act is None:
            return "none"
        if act.op_type == "Relu":
            return "relu"
        lo = gr.consts.get(act.input[1]) if len(act.input) > 1 and act.input[1] else _attr(act, "min", None)
        hi = gr.consts.get(act.input[2]) if len(act.input) > 2 and act.input[2] else _attr(act, "max", None)
        lo_f = None if lo is None else float(np.asarray(lo).reshape(()))
        hi_f = None if hi is None else float(np.asarray(hi).reshape(()))
        if lo_f == 0.0 and hi_f == 6.0:
            return "relu6"
        if lo_f == 0.0 and hi_f is None:
            return "relu"
        return None

    for idx, node in enumerate(gr.g.node):
        if idx in removed or (node.domain or "") not in ("", "ai.onnx"):
            continue
        op = node.op_type
        if op in ("Conv", "MatMul", "Gemm"):
            if len(node.input) < 2:
                continue
            dx, dw = gr.dq(node.input[0]), gr.dq(node.input[1])
            if dx is None or dw is None or dw.input[0] not in gr.consts or gr.qparams(dx) is None \
                    or gr.qparams(dw) is None or gr.qparams(dx)[0].size != 1:
                continue
            db = gr.dq(node.input[2]) if len(node.input) > 2 and node.input[2] else None
            if len(node.input) > 2 and node.input[2] and (db is None or db.input[0] not in gr.consts
                                                          or gr.consts[db.input[0]].dtype != np.int32):
                continue
            found = q_after(node.output[0])
            if found is None:
                continue
            q, act = found
            act_s = act_name(act)
            if act_s is None:
                continue
            if op == "Gemm" and (float(_attr(node, "alpha", 1.0)) != 1.0 or float(_attr(node, "beta", 1.0)) != 1.0
                                 or int(_attr(node, "transA", 0))):
                continue
            ins = [dx.input[0], dx.input[1], dx.input[2] if len(dx.input) > 2 else "",
                   dw.input[0], dw.input[1], dw.input[2] if len(dw.input) > 2 else "",
                   q.input[1], q.input[2] if len(q.input) > 2 else "",
                   db.input[0] if db is not None else ""]
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            attrs["activation"] = act_s
            attrs["w_axis"] = int(_attr(dw, "axis", 1))
            if op != "Conv":
                attrs["transB"] = int(_attr(node, "transB", 0)) if op == "Gemm" else 0
            new = onnx.helper.make_node("QConv" if op == "Conv" else "QGemm", ins, [q.output[0]],
                                        name=node.name or f"{op}_{idx}", domain="utvm", **attrs)
        elif op in ("Add", "Mul"):
            da, db2 = gr.dq(node.input[0]), gr.dq(node.input[1])
            found = q_after(node.output[0])
            if da is None or db2 is None or found is None or found[1] is not None:
                continue
            if any(gr.qparams(d) is None or gr.qparams(d)[0].size != 1 for d in (da, db2)):
                continue
            q = found[0]
            ins = [da.input[0], da.input[1], da.input[2] if len(da.input) > 2 else "",
                   db2.input[0], db2.input[1], db2.input[2] if len(db2.input) > 2 else "",
                   q.input[1], q.input[2] if len(q.input) > 2 else ""]
            new = onnx.helper.make_node("QAdd" if op == "Add" else "QMul", ins, [q.output[0]],
                                        name=node.name or f"{op}_{idx}", domain="utvm")
        elif op == "GlobalAveragePool":
            dx = gr.dq(node.input[0])
            nxt = gr.only_consumer(node.output[0])
            if dx is None or nxt is None or nxt.op_type != "QuantizeLinear" or gr.qparams(dx) is None \
                    or gr.qparams(dx)[0].size != 1 or gr.qparams(nxt) is None or gr.qparams(nxt)[0].size != 1:
                continue
            q = nxt
            ins = [dx.input[0], dx.input[1], dx.input[2] if len(dx.input) > 2 else "",
                   q.input[1], q.input[2] if len(q.input) > 2 else ""]
            new = onnx.helper.make_node("QGlobalAvgPool", ins, [q.output[0]], name=node.name or f"{op}_{idx}",
                                        domain="utvm")
        elif op in _MOVEMENT:
            data_inputs = list(node.input) if op == "Concat" else [node.input[0]]
            dqs = [gr.dq(i) for i in data_inputs]
            nxt = gr.only_consumer(node.output[0])
            if any(d is None for d in dqs) or nxt is None or nxt.op_type != "QuantizeLinear":
                continue
            qp = gr.qparams(nxt)
            if not all(_same_params(gr.qparams(d), qp) for d in dqs):
                continue
            new = onnx.NodeProto()
            new.CopyFrom(node)
            for k, d in enumerate(dqs):
                new.input[k] = d.input[0]
            del new.output[:]
            new.output.append(nxt.output[0])
            q = nxt
        else:
            continue
        replace[idx] = new
        removed.add(list(gr.g.node).index(q))
        if op in ("Conv", "MatMul", "Gemm") and found[1] is not None:
            removed.add(list(gr.g.node).index(found[1]))
        fused += 1
    if not fused:
        return model, 0
    nodes = [replace.get(i, n) for i, n in enumerate(gr.g.node) if i not in removed]
    # DequantizeLinear nodes nobody reads any more (their consumers were fused)
    while True:
        used = {i for n in nodes for i in n.input} | gr.outputs
        keep = [n for n in nodes if n.op_type != "DequantizeLinear" or any(o in used for o in n.output)]
        if len(keep) == len(nodes):
            break
        nodes = keep
    del gr.g.node[:]
    gr.g.node.extend(nodes)
    if not any(o.domain == "utvm" for o in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid("utvm", 1))
    return model, fused


# ============================================================================ step 2: the handlers
def _params(imp: Importer, ctx: Ctx, i_scale: int, i_zp: int, what: str,
            per_axis: bool = False) -> tuple[np.ndarray, np.ndarray, str]:
    """(scales float64, zero points int64, the integer dtype of the zero point) of a quantized input."""
    s = imp.const_input(ctx, i_scale, f"{what} scale")
    if s is None:
        raise ModelFormatError(f"{ctx.label}: the {what} scale (input {i_scale}) is missing")
    zp = imp.const_input(ctx, i_zp, f"{what} zero point", integer=True) if i_zp < len(ctx.inputs) else None
    zdt = str(zp.dtype) if zp is not None else "uint8"
    s = s.astype(np.float64).reshape(-1)
    zp_a = np.zeros(s.shape, np.int64) if zp is None else zp.astype(np.int64).reshape(-1)
    if not per_axis and (s.size != 1 or zp_a.size != 1):
        raise UnsupportedModelError(f"{ctx.label}: per-axis quantization of the {what} (activations) is not "
                                    "supported; activations are quantized per tensor")
    if np.any(s <= 0) or not np.all(np.isfinite(s)):
        raise ModelFormatError(f"{ctx.label}: the {what} scale must be positive and finite, got {s.tolist()[:8]}")
    if zdt not in ("int8", "uint8"):
        raise UnsupportedModelError(f"{ctx.label}: {what} quantized as {zdt}; the int8 path takes int8 and uint8")
    return s, zp_a, zdt


def _act_quant(s: np.ndarray, zp: np.ndarray, zdt: str) -> Quantization:
    """An activation's quantization as utvm holds it: int8, a uint8 zero point moved by -128."""
    return Quantization((float(np.float32(s[0])),), (int(zp[0]) - (128 if zdt == "uint8" else 0),))


def _int8_of(imp: Importer, ctx: Ctx, v: Value, q: Quantization, layout: str) -> str:
    """The IR tensor of quantized value `v` as int8 carrying `q` (a uint8 graph input is converted)."""
    if v.const is not None:
        data = v.const.astype(np.int16) - (128 if v.dtype == "uint8" else 0)
        data = data.astype(np.int8)
        if layout == "nhwc" and data.ndim == 4:
            data = data.transpose(TO_NHWC)
        name = imp.constant(contig(data), f"{v.name}_q")
        imp.tensors[name] = imp.tensors[name].replace(quant=q)
        return name
    src = imp.nhwc(v, ctx) if layout == "nhwc" and len(v.shape) == 4 else imp.canonical(v, ctx)
    t = imp.tensors[src]
    if t.dtype == "uint8":
        uq = Quantization(q.scale, (q.zero_point[0] + 128,))
        imp.tensors[src] = t.replace(quant=uq)
        name = imp.temp(ctx, "quantize", [src], t.shape, "int8", hint="int8")
        imp.tensors[name] = imp.tensors[name].replace(quant=q)
        return name
    if t.dtype != "int8":
        raise UnsupportedModelError(f"{ctx.label}: input {v.name!r} is {t.dtype}; a quantized operator takes int8 or "
                                    "uint8 tensors")
    _set_quant(imp, v, q, ctx)
    return src


def _set_quant(imp: Importer, v: Value, q: Quantization, ctx: Ctx) -> None:
    """Give the IR forms of int8 value `v` the quantization `q` (from identity), or check they have it."""
    for name in (v.nchw, v.nhwc):
        if name is None:
            continue
        t = imp.tensors[name]
        if t.quant is None or t.quant == Quantization((1.0,), (0,)):
            imp.tensors[name] = t.replace(quant=q)
        elif not _close(t.quant, q):
            raise UnsupportedModelError(
                f"{ctx.label}: {v.name!r} is quantized with scale {t.quant.scale[0]:.9g} zero point "
                f"{t.quant.zero_point[0]} where it is produced, but read with scale {q.scale[0]:.9g} zero point "
                f"{q.zero_point[0]}; a requantization between the two is not supported")


def _close(a: Quantization, b: Quantization) -> bool:
    return a.zero_point == b.zero_point and all(abs(x - y) <= 1e-7 * max(abs(x), abs(y)) for x, y in
                                                zip(a.scale, b.scale, strict=False)) and len(a.scale) == len(b.scale)


def _finish(imp: Importer, ctx: Ctx, v: Value, q: Quantization, zdt: str) -> None:
    """Quantization of a node's output value; a uint8 graph output gets converted back to uint8."""
    _set_quant(imp, v, q, ctx)
    if zdt == "uint8" and v.name in getattr(imp, "graph_output_names", ()):
        raise UnsupportedModelError(f"{ctx.label}: the graph output {v.name!r} is uint8-quantized by a fused "
                                    "operator; export the model with an int8 output or a DequantizeLinear at "
                                    "the end")


def _op_quantize_linear(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    axis = int(ctx.attr("axis", 1))
    s, zp, zdt = _params(imp, ctx, 1, 2, "output", per_axis=x.const is not None)
    if x.const is not None:  # a constant: quantize it now (ONNX: round half to even, saturate)
        shape = [1] * x.const.ndim
        if s.size > 1:
            shape[axis % x.const.ndim] = s.size
        info = np.iinfo(np.dtype(zdt))
        q = np.clip(np.rint(x.const.astype(np.float32) / s.astype(np.float32).reshape(shape)) + zp.reshape(shape),
                    info.min, info.max).astype(zdt)
        imp.define_const(ctx.outputs[0], q)
        return
    if x.dtype != "float32":
        raise UnsupportedModelError(f"{ctx.label}: QuantizeLinear of a {x.dtype} tensor {x.name!r} is not supported")
    quant = _act_quant(s, zp, zdt)
    as_uint8 = zdt == "uint8" and ctx.outputs[0] in getattr(imp, "graph_output_names", ())
    layout = "nhwc" if x.nhwc_only else "nchw"
    src = imp.nhwc(x, ctx) if layout == "nhwc" else imp.canonical(x, ctx)
    dtype = "uint8" if as_uint8 else "int8"
    v = imp.new_node(ctx, "quantize", [src], ctx.outputs[0], x.shape, dtype, {}, layout)
    out = v.nhwc if layout == "nhwc" else v.nchw
    assert out is not None
    imp.tensors[out] = imp.tensors[out].replace(
        quant=Quantization(quant.scale, (int(zp[0]),)) if as_uint8 else quant)


def _op_dequantize_linear(imp: Importer, ctx: Ctx) -> None:
    x = imp.value(ctx, 0)
    assert x is not None
    axis = int(ctx.attr("axis", 1))
    if x.const is not None:  # weights, biases: fold to float (a fused consumer reads the integers itself)
        s = imp.const_input(ctx, 1, "scale")
        zp = imp.const_input(ctx, 2, "zero point", integer=True) if len(ctx.inputs) > 2 else None
        if s is None:
            raise ModelFormatError(f"{ctx.label}: the scale (input 1) is missing")
        shape = [1] * max(x.const.ndim, 1)
        if s.size > 1:
            shape[axis % x.const.ndim] = s.size
        zpv = np.zeros(1, np.int64) if zp is None else zp.astype(np.int64).reshape(shape if zp.size > 1 else (1,))
        data = ((x.const.astype(np.int64).reshape(x.const.shape) - zpv) * s.astype(np.float32).reshape(
            shape if s.size > 1 else (1,))).astype(np.float32)
        imp.define_const(ctx.outputs[0], data.reshape(x.const.shape))
        return
    s, zp, zdt = _params(imp, ctx, 1, 2, "input")
    layout = "nhwc" if x.nhwc_only else "nchw"
    src = imp.nhwc(x, ctx) if layout == "nhwc" else imp.canonical(x, ctx)
    t = imp.tensors[src]
    if t.dtype == "uint8":
        imp.tensors[src] = t.replace(quant=Quantization((float(np.float32(s[0])),), (int(zp[0]),)))
    elif t.dtype == "int8":
        _set_quant(imp, x, _act_quant(s, zp, zdt), ctx)
    else:
        raise UnsupportedModelError(f"{ctx.label}: DequantizeLinear of a {t.dtype} tensor {x.name!r} is not supported")
    imp.new_node(ctx, "dequantize", [src], ctx.outputs[0], x.shape, "float32", {}, layout)


def _weights(imp: Importer, ctx: Ctx, w: np.ndarray, s: np.ndarray, zp: np.ndarray, zdt: str,
             n_out: int, what: str) -> tuple[np.ndarray, tuple[float, ...]]:
    """Symmetric int8 weights and their per-output scales (a per-tensor scale repeated)."""
    zp = zp.reshape(-1)
    if zdt == "uint8":
        if np.any(zp != 128):
            raise UnsupportedModelError(f"{ctx.label}: uint8 {what} with zero point {zp.tolist()[:4]} (not 128) are "
                                        "asymmetric; utvm's int8 kernels take symmetric weights")
        w = (w.astype(np.int16) - 128).astype(np.int8)
    elif np.any(zp != 0):
        raise UnsupportedModelError(f"{ctx.label}: int8 {what} with zero point {zp.tolist()[:4]} are asymmetric; "
                                    "utvm's int8 kernels take symmetric weights (zero point 0)")
    if s.size not in (1, n_out):
        raise ModelFormatError(f"{ctx.label}: {s.size} {what} scales for {n_out} output channels")
    scales = tuple(float(np.float32(v)) for v in np.broadcast_to(s, (n_out,)))
    return w.astype(np.int8), scales


def _op_qconv(imp: Importer, ctx: Ctx) -> None:
    """QLinearConv (x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, [B]) and the fused utvm.QConv (same inputs)."""
    from utvm.frontend._onnx_ops import _check_window, _out_size, _spatial_2d, _spatial_pads

    x, wv = imp.value(ctx, 0), imp.value(ctx, 3)
    assert x is not None and wv is not None
    if wv.const is None:
        raise UnsupportedModelError(f"{ctx.label}: the weights {wv.name!r} must be a constant")
    xs, xzp, xdt = _params(imp, ctx, 1, 2, "input")
    ws, wzp, wdt = _params(imp, ctx, 4, 5, "weight", per_axis=True)
    ys, yzp, ydt = _params(imp, ctx, 6, 7, "output")
    _spatial_2d(ctx, x, "convolution")
    n, c, h, wd = x.shape
    if wv.const.ndim != 4:
        raise ModelFormatError(f"{ctx.label}: weight {wv.name!r} has shape {list(wv.shape)}, expected "
                               "[O, C/group, KH, KW]")
    o, cg, kh, kw = wv.const.shape
    group = int(ctx.attr("group", 1))
    strides = ctx.ints("strides", (1, 1))
    dil = ctx.ints("dilations", (1, 1))
    assert strides is not None and dil is not None
    _check_window(ctx, (kh, kw), strides, dil)
    if group < 1 or c % group or o % group or cg != c // group:
        raise ModelFormatError(f"{ctx.label}: group={group} does not fit input channels {c} and weight "
                               f"{list(wv.shape)}")
    pads = _spatial_pads(ctx, (h, wd), (kh, kw), strides, dil)
    oh = _out_size(h, pads[0], pads[2], (kh - 1) * dil[0] + 1, strides[0], False)
    ow = _out_size(wd, pads[1], pads[3], (kw - 1) * dil[1] + 1, strides[1], False)
    w8, w_scales = _weights(imp, ctx, wv.const, ws, wzp, wdt, o, "weights")
    depthwise = group == c and cg == 1 and group > 1
    perm = (1, 2, 3, 0) if depthwise else (0, 2, 3, 1)
    q_in = _act_quant(xs, xzp, xdt)
    src = _int8_of(imp, ctx, x, q_in, "nhwc")
    w_name = imp.constant(contig(w8.transpose(perm)), f"{wv.name}_{'1hwc' if depthwise else 'ohwi'}")
    imp.tensors[w_name] = imp.tensors[w_name].replace(
        quant=Quantization(w_scales, (0,) * o, 3 if depthwise else 0) if o > 1 else Quantization(w_scales, (0,)))
    inputs = [src, w_name]
    b = imp.value(ctx, 8, required=False)
    if b is not None:
        if b.const is None or b.const.dtype != np.int32 or b.const.shape != (o,):
            raise UnsupportedModelError(f"{ctx.label}: the bias {b.name!r} must be a constant int32 [{o}]")
        b_name = imp.constant(contig(b.const), f"{b.name}_q")
        imp.tensors[b_name] = imp.tensors[b_name].replace(quant=Quantization(
            tuple(q_in.scale[0] * s for s in w_scales), (0,) * o, 0 if o > 1 else None) if o > 1 else
            Quantization((q_in.scale[0] * w_scales[0],), (0,)))
        inputs.append(b_name)
    common = {"strides": tuple(strides), "dilation": tuple(dil), "padding": tuple(pads),
              "activation": str(ctx.attr("activation", "none"))}
    if depthwise:
        op, attrs = "depthwise_conv2d", {**common, "depth_multiplier": o // c}
    else:
        op, attrs = "conv2d", {**common, "groups": group}
    v = imp.new_node(ctx, op, inputs, ctx.outputs[0], (n, o, oh, ow), "int8", attrs, "nhwc")
    _finish(imp, ctx, v, _act_quant(ys, yzp, ydt), ydt)


def _op_qgemm(imp: Importer, ctx: Ctx) -> None:
    """QLinearMatMul (a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp) and utvm.QGemm (the same, + transB, [bias])."""
    a, bv = imp.value(ctx, 0), imp.value(ctx, 3)
    assert a is not None and bv is not None
    if bv.const is None or bv.const.ndim != 2:
        raise UnsupportedModelError(f"{ctx.label}: B {bv.name!r} must be a constant matrix (a MatMul of two "
                                    "activations is not imported quantized)")
    s_a, zp_a, adt = _params(imp, ctx, 1, 2, "A")
    s_b, zp_b, bdt = _params(imp, ctx, 4, 5, "B", per_axis=True)
    s_y, zp_y, ydt = _params(imp, ctx, 6, 7, "output")
    bmat = bv.const.T if int(ctx.attr("transB", 0)) else bv.const  # [K, N]
    k, nout = bmat.shape
    if a.shape[-1] != k:
        raise ModelFormatError(f"{ctx.label}: A {list(a.shape)} and B {list(bmat.shape)} do not multiply")
    w8, w_scales = _weights(imp, ctx, contig(bmat.T), s_b, zp_b, bdt, nout, "B")
    q_in = _act_quant(s_a, zp_a, adt)
    src = _int8_of(imp, ctx, a, q_in, "nchw")
    rows = a.shape
    if len(a.shape) < 2:
        rows = (1, k)
        src = imp.temp(ctx, "reshape", [src], rows, "int8", {"shape": rows}, "rows")
        imp.tensors[src] = imp.tensors[src].replace(quant=q_in)
    w_name = imp.constant(contig(w8), f"{bv.name}_q")
    imp.tensors[w_name] = imp.tensors[w_name].replace(
        quant=Quantization(w_scales, (0,) * nout, 0) if nout > 1 else Quantization(w_scales, (0,)))
    inputs = [src, w_name]
    b = imp.value(ctx, 8, required=False)
    if b is not None:
        if b.const is None or b.const.dtype != np.int32 or b.const.size != nout:
            raise UnsupportedModelError(f"{ctx.label}: the bias {b.name!r} must be a constant int32 [{nout}]")
        b_name = imp.constant(contig(b.const.reshape(nout)), f"{b.name}_q")
        imp.tensors[b_name] = imp.tensors[b_name].replace(quant=Quantization(
            tuple(q_in.scale[0] * s for s in w_scales), (0,) * nout, 0) if nout > 1 else
            Quantization((q_in.scale[0] * w_scales[0],), (0,)))
        inputs.append(b_name)
    out_shape = (*a.shape[:-1], nout) if len(a.shape) >= 2 else (nout,)
    act = str(ctx.attr("activation", "none"))
    if tuple(out_shape) == (*rows[:-1], nout):
        v = imp.new_node(ctx, "dense", inputs, ctx.outputs[0], out_shape, "int8", {"activation": act})
    else:
        d = imp.temp(ctx, "dense", inputs, (*rows[:-1], nout), "int8", {"activation": act}, "dense")
        imp.tensors[d] = imp.tensors[d].replace(quant=_act_quant(s_y, zp_y, ydt))
        v = imp.new_node(ctx, "reshape", [d], ctx.outputs[0], out_shape, "int8", {"shape": tuple(out_shape)})
    _finish(imp, ctx, v, _act_quant(s_y, zp_y, ydt), ydt)


def _op_qbinary(imp: Importer, ctx: Ctx) -> None:
    from utvm.frontend._onnx_ops import _broadcast

    a, b = imp.value(ctx, 0), imp.value(ctx, 3)
    assert a is not None and b is not None
    qa = _act_quant(*_params(imp, ctx, 1, 2, "A"))
    qb = _act_quant(*_params(imp, ctx, 4, 5, "B"))
    s_y, zp_y, ydt = _params(imp, ctx, 6, 7, "output")
    shape = _broadcast(ctx, a, b)
    use_nhwc = len(shape) == 4 and (a.nhwc_only or b.nhwc_only) and all(len(v.shape) == 4 for v in (a, b))
    layout = "nhwc" if use_nhwc else "nchw"
    names = [_int8_of(imp, ctx, a, qa, layout), _int8_of(imp, ctx, b, qb, layout)]
    op = "add" if ctx.op.endswith("Add") else "mul"
    v = imp.new_node(ctx, op, names, ctx.outputs[0], shape, "int8", {"activation": "none"}, layout)
    _finish(imp, ctx, v, _act_quant(s_y, zp_y, ydt), ydt)


def _op_ms_qgemm(imp: Importer, ctx: Ctx) -> None:
    """com.microsoft.QGemm (A, a_s, a_zp, B, b_s, b_zp, [C], y_s, y_zp): utvm.QGemm's inputs reordered."""
    if float(ctx.attr("alpha", 1.0)) != 1.0 or int(ctx.attr("transA", 0)):
        raise UnsupportedModelError(f"{ctx.label}: QGemm with alpha != 1 or transA is not supported")
    if len(ctx.inputs) < 9 or not ctx.inputs[7]:
        raise UnsupportedModelError(f"{ctx.label}: QGemm without y_scale (an int32 output) is not supported")
    ins = list(ctx.inputs) + [""] * (9 - len(ctx.inputs))
    ctx.inputs = ins[:6] + [ins[7], ins[8], ins[6]]
    _op_qgemm(imp, ctx)


def _op_qglobal_avg(imp: Importer, ctx: Ctx) -> None:
    """com.microsoft.QLinearGlobalAveragePool / utvm.QGlobalAvgPool (x, x_s, x_zp, y_s, y_zp): int8 mean
    over H and W (requantizing), NHWC."""
    from utvm.frontend._onnx_ops import _spatial_2d

    x = imp.value(ctx, 0)
    assert x is not None
    if int(ctx.attr("channels_last", 0)):
        raise UnsupportedModelError(f"{ctx.label}: channels_last=1 is not supported")
    q_in = _act_quant(*_params(imp, ctx, 1, 2, "input"))
    s_y, zp_y, ydt = _params(imp, ctx, 3, 4, "output")
    _spatial_2d(ctx, x, "global pooling")
    n, c, _h, _w = x.shape
    src = _int8_of(imp, ctx, x, q_in, "nhwc")
    v = imp.new_node(ctx, "mean", [src], ctx.outputs[0], (n, c, 1, 1), "int8", {"axes": (1, 2), "keepdims": True},
                     "nhwc")
    _finish(imp, ctx, v, _act_quant(s_y, zp_y, ydt), ydt)


_DYNAMIC = ("DynamicQuantizeLinear", "ConvInteger", "MatMulInteger")


def _dynamic_reason(label: str, op: str) -> str:
    what = ("computes activation scales at run time" if op == "DynamicQuantizeLinear" else
            "produces raw int32 accumulators, for dynamic quantization (activation scales computed at run time "
            "by DynamicQuantizeLinear)")
    return (f"{label}: {op} {what}; utvm's int8 path needs static scales and requantizes to int8: quantize the "
            "model statically (onnxruntime.quantization.quantize_static, QDQ or QOperator format)")


def refuse_dynamic(model: Any) -> None:
    """A dynamically quantized model is refused for that reason first (before its other operators)."""
    for index, node in enumerate(model.graph.node):
        if node.op_type in _DYNAMIC and (node.domain or "") in ("", "ai.onnx"):
            label = f"node {index} ({node.op_type} {node.name!r})" if node.name else f"node {index} ({node.op_type})"
            raise UnsupportedModelError(_dynamic_reason(label, node.op_type))


def _refuse_dynamic(imp: Importer, ctx: Ctx) -> None:
    raise UnsupportedModelError(_dynamic_reason(ctx.label, ctx.op))


QUANT_HANDLERS: dict[str, Any] = {
    "QuantizeLinear": _op_quantize_linear,
    "DequantizeLinear": _op_dequantize_linear,
    "QLinearConv": _op_qconv,
    "QLinearMatMul": _op_qgemm,
    "utvm.QConv": _op_qconv,
    "utvm.QGemm": _op_qgemm,
    "utvm.QAdd": _op_qbinary,
    "utvm.QMul": _op_qbinary,
    "utvm.QGlobalAvgPool": _op_qglobal_avg,
    "com.microsoft.QLinearAdd": _op_qbinary,
    "com.microsoft.QLinearMul": _op_qbinary,
    "com.microsoft.QGemm": _op_ms_qgemm,
    "com.microsoft.QLinearGlobalAveragePool": _op_qglobal_avg,
    "ConvInteger": _refuse_dynamic,
    "MatMulInteger": _refuse_dynamic,
    "DynamicQuantizeLinear": _refuse_dynamic,
}


def propagate_quant(tensors: dict[str, Any], nodes: Sequence[Any]) -> None:
    """int8 data movement keeps its input's quantization: layout changes and reshapes the importer made,
    pools and concatenations of quantized values (in place on `tensors`, in node order)."""
    identity = Quantization((1.0,), (0,))
    moving = ("reshape", "transpose", "max_pool2d", "avg_pool2d", "global_avg_pool2d", "concat", "pad", "relu",
              "clip")
    for node in nodes:
        if node.op not in moving or not node.inputs or not node.outputs:
            continue
        src = tensors.get(node.inputs[0])
        dst = tensors.get(node.outputs[0])
        if src is None or dst is None or src.dtype != "int8" or dst.dtype != "int8":
            continue
        if src.quant is not None and src.quant != identity and (dst.quant is None or dst.quant == identity):
            tensors[node.outputs[0]] = dst.replace(quant=src.quant)
