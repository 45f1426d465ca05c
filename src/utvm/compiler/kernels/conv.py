"""conv2d (with groups) and depthwise_conv2d on NHWC tensors; float32 and int8 (utvm.ops.conv2d).

int8 is TFLite's ConvPerChannel / DepthwiseConvPerChannel: an int32 accumulator of (x - input_zp) * w over
the taps inside the input (padding taps are skipped, i.e. they hold the input zero point), plus the bias,
requantized per output channel with the op's rounding, plus the output zero point, clamped to the fused
activation's range. Float sums in float and adds the bias last, clamped to the activation range.

Loop shape (TFLM reference order): batch, output row, output column, then output channel; the taps that
fall inside the input are computed once per row / column (`_window.tap_range`), so the inner loops carry no
bounds tests. conv2d's innermost loop runs over the input channels of a group (contiguous in both the input
and the OHWI weights). depthwise_conv2d accumulates all output channels of a pixel at once in `scratch`
(contiguous in the input and the 1HW(C*M) weights), then requantizes them.
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, register
from utvm.compiler.kernels._window import Axis, origin_stmt, pos, tap_range
from utvm.ops.conv2d import Conv2DParams

INT32_MAX = (1 << 31) - 1


@register("conv2d", "depthwise_conv2d")
def conv(ctx: KernelContext) -> KernelCode:
    p: Conv2DParams = ctx.params()
    if p.dtype not in ("float32", "int8"):
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    if p.op == "depthwise_conv2d":
        return _depthwise(ctx, p)
    return _conv2d(ctx, p)


# --- shared pieces -------------------------------------------------------------------------------------------

def _axes(p: Conv2DParams) -> tuple[Axis, Axis]:
    _, h, w, _ = p.input_shape
    _, oh, ow, _ = p.output_shape
    kh, kw = p.kernel
    return (Axis(oh, 0, h, kh, p.strides[0], p.dilation[0], p.padding[0]),
            Axis(ow, 0, w, kw, p.strides[1], p.dilation[1], p.padding[1]))


def _requant_terms(ctx: KernelContext, p: Conv2DParams, index: str) -> tuple[str, str]:
    """C expressions of the multiplier and shift of output channel `index` (the const locals of
    `_params_int8` when uniform, tables otherwise)."""
    if len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1:
        return "output_multiplier", "output_shift"
    return (ctx.table("int32_t", p.multiplier, "multiplier") + f"[{index}]",
            ctx.table("int32_t", p.shift, "shift") + f"[{index}]")


def _params_int8(p: Conv2DParams) -> str:
    """The baked-in parameters as const locals (TFLM style); the C compiler folds them."""
    lines = [f"const int32_t input_offset = {-p.input_zero_point};  /* -input zero point */",
             f"const int32_t output_offset = {p.output_zero_point};",
             f"const int32_t act_min = {int(p.act_min)};",
             f"const int32_t act_max = {int(p.act_max)};"]
    if len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1:
        lines += [f"const int32_t output_multiplier = {p.multiplier[0]};",
                  f"const int32_t output_shift = {p.shift[0]};"]
    return "\n".join(lines) + "\n"


def _params_f32(p: Conv2DParams) -> str:
    return (f"const float act_min = {c_literal(p.act_min, 'float32')};\n"
            f"const float act_max = {c_literal(p.act_max, 'float32')};\n")


def _accumulator_bound(ctx: KernelContext, p: Conv2DParams) -> str:
    """A comment proving the int32 accumulator cannot overflow (from the actual weights and biases when they
    are constants); a CompileError when it could."""
    xmax = max(127 - p.input_zero_point, 128 + p.input_zero_point)  # largest |x - input_zp|
    n_out = p.output_shape[3]
    w_t = ctx.in_tensor(1)
    if w_t is not None and w_t.data is not None:
        wa = np.abs(w_t.data.astype(np.int64))
        per_oc = wa.reshape(n_out, -1).sum(axis=1) if p.op == "conv2d" else wa.reshape(-1, n_out).sum(axis=0)
        where = "the sum of |w| of each output channel"
    else:
        taps = int(np.prod(p.weight_shape)) // n_out
        per_oc = np.full(n_out, 128 * taps, dtype=np.int64)
        where = f"128 * {taps} taps (run-time weights)"
    bound = xmax * per_oc
    b_t = ctx.in_tensor(2) if p.has_bias else None
    bias_note = ""
    if b_t is not None and b_t.data is not None:
        bound = bound + np.abs(b_t.data.astype(np.int64))
        bias_note = " + |bias|"
    elif p.has_bias:
        bias_note = " (+ a run-time bias, which TFLite bounds the same way)"
    worst = int(bound.max()) if bound.size else 0
    if worst > INT32_MAX:
        raise ctx.error(f"the int32 accumulator could overflow: |x - zp| <= {xmax} times {where}{bias_note} "
                        f"reaches {worst} > 2^31 - 1")
    return (f"/* The int32 accumulator cannot overflow: |acc| <= {xmax} * ({where}){bias_note} <= {worst} "
            f"< 2^31. */")


def _epilogue_int8(ctx: KernelContext, p: Conv2DParams, acc: str, oc: str, dst: str) -> str:
    rq = ctx.helper("requant", p.rounding)
    clamp = ctx.helper("clamp_i32")
    mult, shift = _requant_terms(ctx, p, oc)
    bias = f"{acc} += {ctx.inputs[2]}[{oc}];\n" if p.has_bias else ""
    return (f"{bias}{acc} = {rq}({acc}, {mult}, {shift}) + output_offset;\n"
            f"{dst} = (int8_t){clamp}({acc}, act_min, act_max);")


def _epilogue_f32(ctx: KernelContext, p: Conv2DParams, acc: str, oc: str, dst: str) -> str:
    clamp = ctx.helper("clamp_f32")
    bias = f" + {ctx.inputs[2]}[{oc}]" if p.has_bias else ""
    return f"{dst} = {clamp}({acc}{bias}, act_min, act_max);"


def _indent(text: str, levels: int) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())


def _pixel_loops(p: Conv2DParams, ay: Axis, ax: Axis, inner: str) -> str:
    """batch / output row / output column loops with the tap ranges, around `inner` (which may use xb,
    iy0, ky_lo, ky_hi, ix0, kx_lo, kx_hi and yp, the output pixel)."""
    n, h, w, c = p.input_shape
    _, oh, ow, oc = p.output_shape
    return f"""\
for (int32_t b = 0; b < {n}; ++b) {{
  const {_T[p.dtype]}* const xb = {_IN} + b * {h * w * c};
  for (int32_t oy = 0; oy < {oh}; ++oy) {{
    {origin_stmt("iy0", "oy", ay)}
{_indent(tap_range("ky_lo", "ky_hi", "iy0", ay), 2)}
    for (int32_t ox = 0; ox < {ow}; ++ox) {{
      {origin_stmt("ix0", "ox", ax)}
{_indent(tap_range("kx_lo", "kx_hi", "ix0", ax), 3)}
      {_T[p.dtype]}* const yp = {_OUT} + ((b * {oh} + oy) * {ow} + ox) * {oc};
{_indent(inner, 3)}
    }}
  }}
}}"""


_T = {"int8": "int8_t", "float32": "float"}
_IN, _OUT = "@IN@", "@OUT@"


def _finish(ctx: KernelContext, body: str) -> str:
    return body.replace(_IN, ctx.inputs[0]).replace(_OUT, ctx.outputs[0])


# --- conv2d ----------------------------------------------------------------------------------------------------

def _conv2d(ctx: KernelContext, p: Conv2DParams) -> KernelCode:
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kh, kw = p.kernel
    g = p.groups
    cg, og = c // g, n_out // g
    ay, ax = _axes(p)
    wts = ctx.inputs[1]
    t = _T[p.dtype]
    if p.dtype == "int8":
        acc_decl = "int32_t acc = 0;"
        mac = "acc += ((int32_t)xp[ic] + input_offset) * (int32_t)wp[ic];"
        epilogue = _epilogue_int8(ctx, p, "acc", "oc", "yp[oc]")
        comment = _params_int8(p) + _accumulator_bound(ctx, p) + "\n"
    else:
        acc_decl = "float acc = 0.0f;"
        mac = "acc += xp[ic] * wp[ic];"
        epilogue = _epilogue_f32(ctx, p, "acc", "oc", "yp[oc]")
        comment = _params_f32(p)
    group_in = " + gi * " + str(cg) if g > 1 else ""
    per_channel = f"""\
const {t}* const wo = {wts} + oc * {kh * kw * cg};
{acc_decl}
for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
  const {t}* const xrow = xb + ({pos("iy0", "ky", p.dilation[0])}) * {w * c}{group_in};
  for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
    const {t}* const xp = xrow + ({pos("ix0", "kx", p.dilation[1])}) * {c};
    const {t}* const wp = wo + (ky * {kw} + kx) * {cg};
    for (int32_t ic = 0; ic < {cg}; ++ic) {{
      {mac}
    }}
  }}
}}
{epilogue}"""
    if g == 1:
        inner = f"for (int32_t oc = 0; oc < {n_out}; ++oc) {{\n{_indent(per_channel, 1)}\n}}"
    else:
        inner = (f"for (int32_t gi = 0; gi < {g}; ++gi) {{\n"
                 f"  for (int32_t oj = 0; oj < {og}; ++oj) {{\n"
                 f"    const int32_t oc = gi * {og} + oj;\n{_indent(per_channel, 2)}\n  }}\n}}")
    body = comment + _pixel_loops(p, ay, ax, inner) + "\nreturn 0;"
    return KernelCode(body=_finish(ctx, body))


# --- depthwise_conv2d ------------------------------------------------------------------------------------------

def _depthwise(ctx: KernelContext, p: Conv2DParams) -> KernelCode:
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kw = p.kernel[1]
    m = p.depth_multiplier
    ay, ax = _axes(p)
    wts = ctx.inputs[1]
    t = _T[p.dtype]
    if p.dtype == "int8":
        acc_t, zero = "int32_t", "0"
        xv = "(int32_t)xp[ic] + input_offset"
        wv = "(int32_t)wp"
        epilogue = _epilogue_int8(ctx, p, "v", "oc", "yp[oc]")
        comment = _params_int8(p) + _accumulator_bound(ctx, p) + "\n"
    else:
        acc_t, zero = "float", "0.0f"
        xv, wv = "xp[ic]", "wp"
        epilogue = _epilogue_f32(ctx, p, "v", "oc", "yp[oc]")
        comment = _params_f32(p)
    if m == 1:
        mac = f"for (int32_t ic = 0; ic < {c}; ++ic) {{\n  acc[ic] += ({xv}) * {wv}[ic];\n}}"
    else:
        mac = (f"for (int32_t ic = 0; ic < {c}; ++ic) {{\n"
               f"  const {acc_t} xv = {xv};\n"
               f"  for (int32_t mi = 0; mi < {m}; ++mi) {{\n"
               f"    acc[ic * {m} + mi] += xv * {wv}[ic * {m} + mi];\n  }}\n}}")
    inner = f"""\
for (int32_t oc = 0; oc < {n_out}; ++oc) {{
  acc[oc] = {zero};
}}
for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
  const {t}* const xrow = xb + ({pos("iy0", "ky", p.dilation[0])}) * {w * c};
  for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
    const {t}* const xp = xrow + ({pos("ix0", "kx", p.dilation[1])}) * {c};
    const {t}* const wp = {wts} + (ky * {kw} + kx) * {n_out};
{_indent(mac, 2)}
  }}
}}
for (int32_t oc = 0; oc < {n_out}; ++oc) {{
  {acc_t} v = acc[oc];
{_indent(epilogue, 1)}
}}"""
    body = (comment + f"/* Accumulators of the {n_out} output channels of one pixel. */\n"
            f"{acc_t}* const acc = ({acc_t}*)(void*){ctx.scratch};\n"
            + _pixel_loops(p, ay, ax, inner) + "\nreturn 0;")
    return KernelCode(body=_finish(ctx, body), scratch_bytes=4 * n_out)
