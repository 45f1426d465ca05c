"""conv2d (with groups) and depthwise_conv2d on NHWC tensors; float32 and int8 (utvm.ops.conv2d).

int8 is TFLite's ConvPerChannel / DepthwiseConvPerChannel: an int32 accumulator of (x - input_zp) * w over
the taps inside the input (padding taps are skipped, i.e. they hold the input zero point), plus the bias,
requantized per output channel with the op's rounding, plus the output zero point, clamped to the fused
activation's range. Float sums in float and adds the bias last, clamped to the activation range.

int16 activations with int8 weights ("16x8", `_int16`): a plain C path of its own (no schedule space, no
SIMD): the products x * w (int32) summed in an int64 accumulator, plus the bias; with an int64 bias (or none)
requantized by TFLite's int64 MultiplyByQuantizedMultiplier (helper "conv16_requant64", defined here), with
an int32 bias wrapped to int32 and requantized by the usual int32 helper; no zero point in the arithmetic
(TFLM's int16 kernels ignore them); clamped to the activation range and stored as int16.

Loop shape (TFLM reference order): batch, output row, output column, then output channel; the taps that
fall inside the input are computed once per row / column (`_window.tap_range`), so the inner loops carry no
bounds tests. conv2d's innermost loop runs over the input channels of a group (contiguous in both the input
and the OHWI weights). depthwise_conv2d accumulates all output channels of a pixel at once in `scratch`
(contiguous in the input and the 1HW(C*M) weights), then requantizes them.
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import (
    KernelCode,
    KernelContext,
    c_literal,
    define_helper,
    multipliers_pm,
    offset_term,
    register,
)
from utvm.compiler.kernels._dot import dot_offsets, dot_run
from utvm.compiler.kernels._gemm import (
    Requant,
    Window,
    gemm_default,
    gemm_kernel_body,
    gemm_knobs,
    gemm_legal,
    pad4,
)
from utvm.compiler.kernels._window import Axis, origin_stmt, pos, tap_range
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops.conv2d import Conv2DParams

INT32_MAX = (1 << 31) - 1

# TFLite's MultiplyByQuantizedMultiplier(int64_t x, int32_t multiplier, int shift) (the int16 x int8 kernels'):
# "double" is the default build (TFLM): the multiplier reduced to 16 bits, one rounding; "single" is
# TFLITE_SINGLE_ROUNDING. Products and sums in uint64 (wrap-around instead of signed overflow), the final
# arithmetic shift and the int32 truncation as TFLite's C++ does them.
define_helper("conv16_requant64:double", """\
static inline int32_t tvm_conv16_requant64_double(int64_t x, int32_t multiplier, int32_t shift) {
  const int64_t reduced = multiplier < 0x7FFF0000 ? (int64_t)((multiplier + (1 << 15)) >> 16) : 0x7FFF;
  const int32_t total_shift = 15 - shift;
  const uint64_t v = (uint64_t)x * (uint64_t)reduced + ((uint64_t)1 << (total_shift - 1));
  return (int32_t)((int64_t)v >> total_shift);
}""", "tvm_conv16_requant64_double")
define_helper("conv16_requant64:single", """\
static inline int32_t tvm_conv16_requant64_single(int64_t x, int32_t multiplier, int32_t shift) {
  const int32_t total_shift = 31 - shift;
  const uint64_t v = (uint64_t)x * (uint64_t)(int64_t)multiplier + ((uint64_t)1 << (total_shift - 1));
  return (int32_t)((int64_t)v >> total_shift);
}""", "tvm_conv16_requant64_single")


def requant_int16_stmts(ctx: KernelContext, rounding: str, acc_bits: int, acc: str, mult: str, shift: str,
                        zero_point: int, lo: int, hi: int, dst: str) -> str:
    """The 16x8 epilogue on the int64 accumulator `acc` (bias already added): requantize (int64 MBQM, or the
    int32 one on the wrapped int32 accumulator for acc_bits 32), add the output zero point, clamp, store."""
    clamp = ctx.helper("clamp_i32")
    if acc_bits == 32:
        rq = ctx.helper("requant", rounding)
        scaled = f"{rq}((int32_t)(uint32_t)(uint64_t){acc}, {mult}, {shift})"
    else:
        rq = ctx.helper(f"conv16_requant64:{rounding}")
        scaled = f"{rq}({acc}, {mult}, {shift})"
    return f"{dst} = (int16_t){clamp}({scaled}{offset_term(zero_point)}, {int(lo)}, {int(hi)});"


def _gemm_able(ctx: KernelContext, p: Conv2DParams) -> bool:
    """int8 conv2d of one group with constant weights (and bias): the im2col + GEMM form applies."""
    if p.op != "conv2d" or p.dtype != "int8" or p.groups != 1:
        return False
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    return w_t is not None and w_t.data is not None and (not p.has_bias or (b_t is not None and b_t.data is not None))


def _window(p: Conv2DParams) -> Window:
    _, h, w, c = p.input_shape
    kh, kw = p.kernel
    return Window(h, w, c, kh, kw, p.strides[0], p.strides[1], p.dilation[0], p.dilation[1], p.padding[0],
                  p.padding[1])


def conv_space(ctx: KernelContext) -> Space:
    """int8 conv2d: `algo` direct (the scalar kernel: weight sums folded, interior/border split) or gemm
    (im2col + GEMM, SIMD on DSP targets; utvm.compiler.kernels._gemm) with the GEMM's knobs."""
    p: Conv2DParams = ctx.params()
    if not _gemm_able(ctx, p):
        return EMPTY_SPACE
    kq = pad4(_window(p).k) // 4
    _, oh, ow, n = p.output_shape
    fast = Requant.fast_reason(p.rounding, p.multiplier, p.shift, ctx.target)
    gemm = gemm_default(ctx.target, kq, n, oh * ow, fast)
    default = {"algo": "gemm" if ctx.target.dsp else "direct", **gemm}

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":  # one point: the GEMM's knobs do not apply
            return None if all(pt[k] == v for k, v in gemm.items()) else "the direct kernel has no GEMM knobs"
        return gemm_legal(pt, oh * ow, fast)

    return Space((Knob("algo", ("direct", "gemm"), "scalar direct convolution or im2col + GEMM"),
                  *gemm_knobs(ctx.target, kq)), default, legal)


@register("conv2d", space=conv_space)
def conv(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "gemm":
        return _conv_gemm(ctx, ctx.params())
    return direct(ctx)


def direct(ctx: KernelContext) -> KernelCode:
    """The scalar kernels of conv2d and depthwise_conv2d (float32 and int8): the weight sums folded at
    compile time for interior windows (`_fast_int8`), TFLite's loop form otherwise."""
    p: Conv2DParams = ctx.params()
    if p.dtype == "int16":
        return _int16(ctx, p)
    if p.dtype not in ("float32", "int8"):
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    if p.dtype == "int8":
        fast = _fast_int8(ctx, p)
        if fast is not None:
            return fast
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
    tables = getattr(ctx, "_conv_requant_tables", None)  # one pair per kernel, however many epilogues
    if tables is None:
        tables = (ctx.table("int32_t", p.multiplier, "multiplier"), ctx.table("int32_t", p.shift, "shift"))
        ctx._conv_requant_tables = tables  # type: ignore[attr-defined]
    return tables[0] + f"[{index}]", tables[1] + f"[{index}]"


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


def accumulator_bound(ctx: KernelContext, p: Conv2DParams) -> str:
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


def _epilogue_int8(ctx: KernelContext, p: Conv2DParams, acc: str, oc: str, dst: str, add_bias: bool = True) -> str:
    rq = ctx.helper("requant_pm" if multipliers_pm(p.multiplier) else "requant", p.rounding)
    clamp = ctx.helper("clamp_i32")
    mult, shift = _requant_terms(ctx, p, oc)
    bias = f"{acc} += {ctx.inputs[2]}[{oc}];\n" if p.has_bias and add_bias else ""
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


_T = {"int8": "int8_t", "float32": "float", "int16": "int16_t"}
_IN, _OUT = "@IN@", "@OUT@"


def _finish(ctx: KernelContext, body: str) -> str:
    return body.replace(_IN, ctx.inputs[0]).replace(_OUT, ctx.outputs[0])


# --- conv2d ----------------------------------------------------------------------------------------------------

def _conv_gemm(ctx: KernelContext, p: Conv2DParams) -> KernelCode:
    n_out = p.output_shape[3]
    w_t = ctx.in_tensor(1)
    assert w_t is not None and w_t.data is not None
    bound = accumulator_bound(ctx, p)  # raises when the int32 accumulator could overflow
    n, _, _, _ = p.input_shape
    _, oh, ow, _ = p.output_shape
    body, scratch, attrs = gemm_kernel_body(
        ctx, ctx.schedule, _window(p), n, oh, ow, w_t.data.reshape(n_out, -1),
        ctx.inputs[2] if p.has_bias else None, p.rounding, p.multiplier, p.shift, p.input_zero_point,
        p.output_zero_point, int(p.act_min), int(p.act_max), ctx.inputs[0], ctx.outputs[0], bound + "\n",
        per_channel=w_t.quant is not None and w_t.quant.per_channel and len(w_t.quant.scale) > 1)
    return KernelCode(body=body, scratch_bytes=scratch, attributes=attrs)


def _conv2d(ctx: KernelContext, p: Conv2DParams) -> KernelCode:
    ay, ax = _axes(p)
    if p.dtype == "int8":
        comment = _params_int8(p) + accumulator_bound(ctx, p) + "\n"
    else:
        comment = _params_f32(p)
    body = comment + _pixel_loops(p, ay, ax, _conv2d_inner(ctx, p)) + "\nreturn 0;"
    return KernelCode(body=_finish(ctx, body))


def _conv2d_inner(ctx: KernelContext, p: Conv2DParams) -> str:
    """Per output channel over the in-bounds taps (TFLite's form: the input offset inside the product)."""
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kh, kw = p.kernel
    g = p.groups
    cg, og = c // g, n_out // g
    wts = ctx.inputs[1]
    t = _T[p.dtype]
    if p.dtype == "int8":
        acc_decl = "int32_t acc = 0;"
        mac = "acc += ((int32_t)xp[ic] + input_offset) * (int32_t)wp[ic];"
        epilogue = _epilogue_int8(ctx, p, "acc", "oc", "yp[oc]")
    else:
        acc_decl = "float acc = 0.0f;"
        mac = "acc += xp[ic] * wp[ic];"
        epilogue = _epilogue_f32(ctx, p, "acc", "oc", "yp[oc]")
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
        return f"for (int32_t oc = 0; oc < {n_out}; ++oc) {{\n{_indent(per_channel, 1)}\n}}"
    return (f"for (int32_t gi = 0; gi < {g}; ++gi) {{\n"
            f"  for (int32_t oj = 0; oj < {og}; ++oj) {{\n"
            f"    const int32_t oc = gi * {og} + oj;\n{_indent(per_channel, 2)}\n  }}\n}}")


# --- int16 x int8 ---------------------------------------------------------------------------------------------

def _int16(ctx: KernelContext, p: Conv2DParams) -> KernelCode:
    """conv2d (with groups) and depthwise_conv2d on int16 activations: TFLM's loops, int64 accumulators."""
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kh, kw = p.kernel
    ay, ax = _axes(p)
    wts = ctx.inputs[1]
    mult, shift = _requant_terms(ctx, p, "oc")
    bias = f"acc += (int64_t){ctx.inputs[2]}[oc];\n" if p.has_bias else ""
    consts = ""
    if len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1:
        consts = (f"const int32_t output_multiplier = {p.multiplier[0]};\n"
                  f"const int32_t output_shift = {p.shift[0]};\n")
    if p.op == "depthwise_conv2d":
        m = p.depth_multiplier
        store = requant_int16_stmts(ctx, p.rounding, p.acc_bits, "acc", mult, shift, p.output_zero_point,
                                    int(p.act_min), int(p.act_max), "yp[oc]")
        inner = f"""\
for (int32_t oc = 0; oc < {n_out}; ++oc) {{
  sums[oc] = 0;
}}
for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
  const int16_t* const xrow = xb + ({pos("iy0", "ky", p.dilation[0])}) * {w * c};
  for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
    const int16_t* const xp = xrow + ({pos("ix0", "kx", p.dilation[1])}) * {c};
    const int8_t* const wp = {wts} + (ky * {kw} + kx) * {n_out};
    for (int32_t oc = 0; oc < {n_out}; ++oc) {{
      sums[oc] += (int64_t)((int32_t)xp[oc / {m}] * (int32_t)wp[oc]);
    }}
  }}
}}
for (int32_t oc = 0; oc < {n_out}; ++oc) {{
  int64_t acc = sums[oc];
{_indent(bias + store, 1)}
}}"""
        body = (consts + f"/* int64 accumulators of the {n_out} output channels of one pixel. */\n"
                f"int64_t* const sums = (int64_t*)(void*){ctx.scratch};\n"
                + _pixel_loops(p, ay, ax, inner) + "\nreturn 0;")
        return KernelCode(body=_finish(ctx, body), scratch_bytes=8 * n_out)
    g = p.groups
    cg, og = c // g, n_out // g
    store = requant_int16_stmts(ctx, p.rounding, p.acc_bits, "acc", mult, shift, p.output_zero_point,
                                int(p.act_min), int(p.act_max), "yp[oc]")
    group_in = f" + (oc / {og}) * {cg}" if g > 1 else ""
    inner = f"""\
for (int32_t oc = 0; oc < {n_out}; ++oc) {{
  const int8_t* const wo = {wts} + oc * {kh * kw * cg};
  int64_t acc = 0;
  for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
    const int16_t* const xrow = xb + ({pos("iy0", "ky", p.dilation[0])}) * {w * c}{group_in};
    for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
      const int16_t* const xp = xrow + ({pos("ix0", "kx", p.dilation[1])}) * {c};
      const int8_t* const wp = wo + (ky * {kw} + kx) * {cg};
      for (int32_t ic = 0; ic < {cg}; ++ic) {{
        acc += (int64_t)((int32_t)xp[ic] * (int32_t)wp[ic]);
      }}
    }}
  }}
{_indent(bias + store, 1)}
}}"""
    body = consts + _pixel_loops(p, ay, ax, inner) + "\nreturn 0;"
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
        comment = _params_int8(p) + accumulator_bound(ctx, p) + "\n"
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


# --- int8 fast path: weight sums folded into a per-channel initial value ---------------------------------------
#
# With constant weights (and bias), acc = bias + sum_taps (x + input_offset) * w splits into
# sum_taps x * w + (bias + input_offset * sum_taps w). When the whole window is inside the input (the
# interior), the second term is one compile-time constant per output channel (`acc_init`), so the inner loop
# is a plain int8 dot product, unrolled by its compile-time length. Windows that clip at the padded borders
# count only their in-bounds taps: there the original form (the input offset inside the product, bias first)
# is used unchanged. Both compute the same integer, so the output bits do not depend on the path.
# No int32 overflow: the interior partial sums are bounded by 128 * sum|w| and `acc_init` by
# |bias| + 128 * sum|w| (both checked below, else the generic kernel is used), and the final
# sum + acc_init is the true accumulator, bounded by `accumulator_bound`.

def _fast_int8(ctx: KernelContext, p: Conv2DParams) -> KernelCode | None:
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    if w_t is None or w_t.data is None or (p.has_bias and (b_t is None or b_t.data is None)):
        return None
    n_out = p.output_shape[3]
    w64 = w_t.data.astype(np.int64)
    per_oc = w64.reshape(n_out, -1) if p.op == "conv2d" else w64.reshape(-1, n_out).T
    wsum, wabs = per_oc.sum(axis=1), np.abs(per_oc).sum(axis=1)
    bias = b_t.data.astype(np.int64).reshape(-1) if b_t is not None and b_t.data is not None else 0
    init = bias + (-p.input_zero_point) * wsum
    if 128 * int(wabs.max(initial=0)) > INT32_MAX or int(np.abs(init).max(initial=0)) > INT32_MAX:
        return None
    bound = accumulator_bound(ctx, p)  # raises when the accumulator itself could overflow
    init_tab = ctx.table("int32_t", init, "acc_init")
    ay, ax = _axes(p)
    multi = p.op == "depthwise_conv2d" and 1 < p.depth_multiplier <= MAX_REGISTER_MULTIPLIER
    if p.op == "conv2d":
        fast = _conv2d_fast_inner(ctx, p, init_tab)
    elif multi:
        fast = _depthwise_multi_inner(ctx, p, init_tab)
    else:
        fast = _depthwise_fast_inner(ctx, p, init_tab)
    kh, kw = p.kernel
    conds = []
    for lo_name, hi_name, k, a in (("ky_lo", "ky_hi", kh, ay), ("kx_lo", "kx_hi", kw, ax)):
        if a.clips_low:
            conds.append(f"{lo_name} == 0")
        if a.clips_high:
            conds.append(f"{hi_name} == {k}")
    if conds:
        if p.op == "conv2d":
            border = _conv2d_inner(ctx, p)
        else:
            border = _depthwise_multi_inner(ctx, p, None) if multi else _depthwise_border_inner(ctx, p)
        inner = (f"if ({' && '.join(conds)}) {{\n  /* interior: the whole window is inside the input */\n"
                 f"{_indent(fast, 1)}\n}} else {{\n  /* border: only the in-bounds taps count */\n"
                 f"{_indent(border, 1)}\n}}")
    else:  # no window ever clips: the tap ranges and the input offset are not needed
        inner = "(void)ky_lo;\n(void)ky_hi;\n(void)kx_lo;\n(void)kx_hi;\n" + fast
    note = ("/* Interior windows: acc = sum x * w + acc_init[oc], acc_init = bias + input_offset * sum w "
            "(compile time). */\n")
    unused = "" if conds else "(void)input_offset;\n"
    body = _params_int8(p) + unused + bound + "\n" + note + _pixel_loops(p, ay, ax, inner) + "\nreturn 0;"
    return KernelCode(body=_finish(ctx, body))


def _conv2d_fast_inner(ctx: KernelContext, p: Conv2DParams, init_tab: str) -> str:
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kh, kw = p.kernel
    dh, dw = p.dilation
    g = p.groups
    cg, og = c // g, n_out // g
    wts = ctx.inputs[1]
    group_in = f" + gi * {cg}" if g > 1 else ""
    lines = [f"const int8_t* const wo = {wts} + oc * {kh * kw * cg};", "int32_t acc = 0;"]
    merged = g == 1 and dw == 1  # one window row: kw * c contiguous values in the input and the weights

    def row(ky: str) -> list[str]:
        xr = f"xw + {ky} * {dh * w * c}{group_in}" if ky != "0" else f"xw{group_in}"
        wr = f"wo + {ky} * {kw * cg}" if ky != "0" else "wo"
        out = [f"const int8_t* const xr = {xr};", f"const int8_t* const wr = {wr};"]
        if merged:
            out.append(dot_run("acc", "xr", "wr", kw * c))
        else:
            for kx in range(kw):
                out.append(dot_run("acc", f"(xr + {kx * dw * c})", f"(wr + {kx * cg})", cg))
        return out

    if kh == 1:
        lines += ["{", _indent("\n".join(row("0")), 1), "}"]
    else:
        lines += [f"for (int32_t ky = 0; ky < {kh}; ++ky) {{", _indent("\n".join(row("ky")), 1), "}"]
    lines.append(f"acc += {init_tab}[oc];")
    lines.append(_epilogue_int8(ctx, p, "acc", "oc", "yp[oc]", add_bias=False))
    per_channel = "\n".join(lines)
    head = "const int8_t* const xw = xb + (iy0 * " + str(w) + " + ix0) * " + str(c) + ";\n"
    if g == 1:
        return head + f"for (int32_t oc = 0; oc < {n_out}; ++oc) {{\n{_indent(per_channel, 1)}\n}}"
    return head + (f"for (int32_t gi = 0; gi < {g}; ++gi) {{\n"
                   f"  for (int32_t oj = 0; oj < {og}; ++oj) {{\n"
                   f"    const int32_t oc = gi * {og} + oj;\n{_indent(per_channel, 2)}\n  }}\n}}")


def _depthwise_fast_inner(ctx: KernelContext, p: Conv2DParams, init_tab: str) -> str:
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kh, kw = p.kernel
    dh, dw = p.dilation
    m = p.depth_multiplier
    wts = ctx.inputs[1]
    ic = "oc" if m == 1 else f"oc / {m}"
    lines = [f"const int8_t* const xc = xw + {ic};", f"const int8_t* const wc = {wts} + oc;", "int32_t acc = 0;"]
    if kh * kw <= 32:
        offs = [((ky * dh * w + kx * dw) * c, (ky * kw + kx) * n_out) for ky in range(kh) for kx in range(kw)]
        lines.append(dot_offsets("acc", "xc", "wc", offs))
    else:
        lines.append(f"""\
for (int32_t ky = 0; ky < {kh}; ++ky) {{
  for (int32_t kx = 0; kx < {kw}; ++kx) {{
    acc += (int32_t)xc[(ky * {dh * w} + kx * {dw}) * {c}] * wc[(ky * {kw} + kx) * {n_out}];
  }}
}}""")
    lines.append(f"acc += {init_tab}[oc];")
    lines.append(_epilogue_int8(ctx, p, "acc", "oc", "yp[oc]", add_bias=False))
    return (f"const int8_t* const xw = xb + (iy0 * {w} + ix0) * {c};\n"
            f"for (int32_t oc = 0; oc < {n_out}; ++oc) {{\n{_indent(chr(10).join(lines), 1)}\n}}")


def _depthwise_border_inner(ctx: KernelContext, p: Conv2DParams) -> str:
    """Per output channel over the in-bounds taps, the input offset in the product (TFLite's form)."""
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kw = p.kernel[1]
    m = p.depth_multiplier
    wts = ctx.inputs[1]
    ic = "oc" if m == 1 else f"oc / {m}"
    epilogue = _epilogue_int8(ctx, p, "acc", "oc", "yp[oc]")
    return f"""\
for (int32_t oc = 0; oc < {n_out}; ++oc) {{
  const int8_t* const xc = xb + {ic};
  const int8_t* const wc = {wts} + oc;
  int32_t acc = 0;
  for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
    const int8_t* const xr = xc + ({pos("iy0", "ky", p.dilation[0])}) * {w * c};
    const int8_t* const wr = wc + ky * {kw * n_out};
    for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
      acc += ((int32_t)xr[({pos("ix0", "kx", p.dilation[1])}) * {c}] + input_offset) * wr[kx * {n_out}];
    }}
  }}
{_indent(epilogue, 1)}
}}"""


MAX_REGISTER_MULTIPLIER = 16  # depthwise: up to this many outputs per input channel accumulate in locals


def _depthwise_multi_inner(ctx: KernelContext, p: Conv2DParams, init_tab: str | None) -> str:
    """depth_multiplier m > 1: per input channel, each tap's input value is loaded once and multiplied into
    m local accumulators (output channels ic * m .. ic * m + m - 1, contiguous in the weights). With
    `init_tab` the whole window (interior: acc = sum x * w + acc_init); without it the in-bounds taps of a
    border window in TFLite's form ((x + input_offset) * w, then the bias)."""
    _, _, w, c = p.input_shape
    n_out = p.output_shape[3]
    kh, kw = p.kernel
    dh, dw = p.dilation
    m = p.depth_multiplier
    wts = ctx.inputs[1]
    accs = [f"acc{j}" for j in range(m)]

    def tap(xexpr: str, wexpr: str) -> list[str]:
        return ["{", f"  const int32_t xv = {xexpr};", f"  const int8_t* const wt = {wexpr};",
                *(f"  {a} += xv * wt[{j}];" for j, a in enumerate(accs)), "}"]

    lines = [f"const int8_t* const wc = {wts} + ic * {m};"]
    lines += [f"int32_t {a} = 0;" for a in accs]
    if init_tab is not None:
        lines.insert(0, "const int8_t* const xc = xw + ic;")
        if kh * kw <= 32:
            for ky in range(kh):
                for kx in range(kw):
                    lines += tap(f"(int32_t)xc[{(ky * dh * w + kx * dw) * c}]", f"wc + {(ky * kw + kx) * n_out}")
        else:
            lines += [f"for (int32_t ky = 0; ky < {kh}; ++ky) {{",
                      f"  for (int32_t kx = 0; kx < {kw}; ++kx) {{",
                      *("    " + ln for ln in tap(f"(int32_t)xc[(ky * {dh * w} + kx * {dw}) * {c}]",
                                                  f"wc + (ky * {kw} + kx) * {n_out}")),
                      "  }", "}"]
        head = f"const int8_t* const xw = xb + (iy0 * {w} + ix0) * {c};\n"
    else:
        lines.insert(0, "const int8_t* const xc = xb + ic;")
        lines += ["for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {",
                  f"  const int8_t* const xr = xc + ({pos('iy0', 'ky', dh)}) * {w * c};",
                  "  for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {",
                  *("    " + ln for ln in tap(f"(int32_t)xr[({pos('ix0', 'kx', dw)}) * {c}] + input_offset",
                                              f"wc + (ky * {kw} + kx) * {n_out}")),
                  "  }", "}"]
        head = ""
    for j, a in enumerate(accs):
        epi = _epilogue_int8(ctx, p, a, "oc", "yp[oc]", add_bias=init_tab is None)
        init = f"{a} += {init_tab}[oc];\n" if init_tab is not None else ""
        lines += ["{", f"  const int32_t oc = ic * {m} + {j};", _indent(init + epi, 1), "}"]
    return head + f"for (int32_t ic = 0; ic < {c}; ++ic) {{\n{_indent(chr(10).join(lines), 1)}\n}}"
