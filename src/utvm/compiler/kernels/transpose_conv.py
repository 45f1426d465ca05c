"""C kernels of the transpose_conv op family (utvm.ops.transpose_conv).

float32 is TFLite's reference loop form, a scatter: for every input pixel and input channel, each filter tap
that lands inside the output adds x * w to the output pixel's accumulators of all output channels, straight
into the output in TFLite's order (batch, input row, input column, input channel, tap row, tap column, output
channel), so its sums round as TFLM's do; then the bias and the clamp.

int8 (x - input_zp, int32 accumulators) and int16 (no zero points, int64 accumulators, TFLite's int64
requantization) gather instead: per output pixel, the taps whose input pixel exists (oy + pad_top - ky a
multiple of the stride, inside the input; likewise x) add x * w to the pixel's accumulators of all output
channels (in scratch: one pixel's, 4 or 8 bytes per output channel, where the scatter held the whole output's:
docs/kernels.md §12), which are then requantized and stored. The same integer terms in another order: the
sums are exact (integer addition is associative and no partial sum exceeds the proven bound).
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, float_clamp_stmt, offset_term, register
from utvm.compiler.kernels.cemit import INT32_MAX, block, for_loop, lines
from utvm.compiler.kernels.requant import acc_bound, c_helper, operand_terms, requant_int16_stmts, x_abs_max
from utvm.ops.transpose_conv import TransposeConvParams


def _int8_bound(ctx: KernelContext, p: TransposeConvParams) -> str:
    """A comment proving the int32 accumulators cannot overflow (CompileError when they could)."""
    _, _, _, c = p.input_shape
    _, kh, kw, _ = p.weight_shape
    taps = math.ceil(kh / p.strides[0]) * math.ceil(kw / p.strides[1]) * c  # contributions per output element
    xmax = x_abs_max(p.input_zero_point)
    w_t = ctx.in_tensor(1)
    wmax = int(np.abs(w_t.data.astype(np.int64)).max(initial=0)) if w_t is not None and w_t.data is not None else 128
    b_t = ctx.in_tensor(2) if p.has_bias else None
    bmax = int(np.abs(b_t.data.astype(np.int64)).max(initial=0)) if b_t is not None and b_t.data is not None else 0
    worst = acc_bound(xmax, wmax * taps, bmax)  # every output sums at most `taps` products |x - zp| * |w|
    if worst > INT32_MAX or (p.has_bias and (b_t is None or b_t.data is None) and xmax * wmax * taps > 2**30):
        raise ctx.error(f"the int32 accumulator could overflow: {taps} contributions of at most {xmax} * {wmax} "
                        f"(+ bias) reach {worst}")
    return (f"/* The int32 accumulators cannot overflow: at most {taps} contributions of |x - zp| * |w| <= "
            f"{xmax} * {wmax}, plus |bias| <= {bmax}: {worst} < 2^31. */\n")


def _dims(p: TransposeConvParams) -> tuple[int, ...]:
    """(n, h, w, c, o, kh, kw, oh, ow, sh, sw, top, left): the input (NHWC), the weights (O, KH, KW, C), the
    output's height and width, the strides and the top / left padding."""
    n, h, w, c = p.input_shape
    o, kh, kw, _ = p.weight_shape
    return (n, h, w, c, o, kh, kw, p.output_shape[1], p.output_shape[2], *p.strides, *p.padding)


@register("transpose_conv")
def transpose_conv(ctx: KernelContext) -> KernelCode:
    p: TransposeConvParams = ctx.params()
    if p.dtype != "float32":
        return _gather(ctx, p)
    n, h, w, c, o, kh, kw, oh, ow, sh, sw, top, left = _dims(p)
    x, wts, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    size = n * oh * ow * o
    tap_x = for_loop("kx", 0, kw, [
        f"const int32_t ox = ix * {sw} - {left} + kx;", block(f"if (ox < 0 || ox >= {ow})", "continue;"),
        f"float* const ap = {y} + ((b * {oh} + oy) * {ow} + ox) * {o};",
        f"const float* const wp = {wts} + (ky * {kw} + kx) * {c} + ic;",
        for_loop("oc", 0, o, f"ap[oc] += xv * wp[oc * {kh * kw * c}];")])
    tap_y = for_loop("ky", 0, kh, [f"const int32_t oy = iy * {sh} - {top} + ky;",
                                   block(f"if (oy < 0 || oy >= {oh})", "continue;"), tap_x])
    scatter = lines(for_loop("i", 0, size, f"{y}[i] = 0;"), for_loop("b", 0, n, for_loop("iy", 0, h, for_loop(
        "ix", 0, w, for_loop("ic", 0, c, [f"const int32_t xi = ((b * {h} + iy) * {w} + ix) * {c} + ic;",
                                          f"const float xv = {x}[xi];", tap_y])))))
    v_add = f"v += {ctx.inputs[2]}[oc];\n" if p.has_bias else ""
    epi = f"float v = {y}[i];\n{v_add}{float_clamp_stmt('v', p.activation)}\n{y}[i] = v;"
    epilogue = for_loop("i", 0, size, lines(f"const int32_t oc = i % {o};" if p.has_bias else "", epi))
    return KernelCode(body=scatter + "\n" + epilogue + "\nreturn 0;", scratch_bytes=0)


def _gather(ctx: KernelContext, p: TransposeConvParams) -> KernelCode:
    """int8 / int16: per output pixel, the accumulators of its output channels (`acc`, in scratch: 4 or 8 bytes
    per output channel) summed over the taps whose input pixel exists, then requantized into the pixel's
    outputs."""
    n, h, w, c, o, kh, kw, oh, ow, sh, sw, top, left = _dims(p)
    x, wts, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    acc_t, scratch = ("int32_t", 4 * o) if p.dtype == "int8" else ("int64_t", 8 * o)
    head = (_int8_bound(ctx, p) if p.dtype == "int8" else "") + \
        f"{acc_t}* const acc = ({acc_t}*)(void*){ctx.scratch};\n"
    x_load = f"(int32_t){x}[xi + ic]{offset_term(-p.input_zero_point)}"
    mac = f"acc[oc] += ({acc_t})(xv * (int32_t)wp[oc * {kh * kw * c} + ic]);"
    tap_x = for_loop("kx", 0, kw, [
        f"const int32_t u = ox + {left} - kx;", block(f"if (u < 0 || u % {sw} != 0 || u / {sw} >= {w})", "continue;"),
        f"const int32_t xi = ((b * {h} + iy) * {w} + u / {sw}) * {c};",
        f"const int8_t* const wp = {wts} + (ky * {kw} + kx) * {c};",
        for_loop("ic", 0, c, [f"const int32_t xv = {x_load};", for_loop("oc", 0, o, mac)])])
    tap_y = for_loop("ky", 0, kh, [
        f"const int32_t t = oy + {top} - ky;", block(f"if (t < 0 || t % {sh} != 0 || t / {sh} >= {h})", "continue;"),
        f"const int32_t iy = t / {sh};", tap_x])
    mult, shift = operand_terms(ctx, p.multiplier, p.shift, "oc")
    b_add = f"v += {ctx.inputs[2]}[oc];\n" if p.has_bias else ""
    dst = f"{y}[((b * {oh} + oy) * {ow} + ox) * {o} + oc]"
    if p.dtype == "int16":
        epi = (f"int64_t v = acc[oc];\n{b_add}"
               + requant_int16_stmts(ctx, p.rounding, 64, "v", mult, shift, p.output_zero_point,
                                     int(p.act_min), int(p.act_max), dst))
    else:
        rq = c_helper(ctx, p.rounding, p.multiplier)
        clamp = ctx.helper("clamp_i32")
        epi = (f"int32_t v = acc[oc];\n{b_add}"
               f"v = {rq}(v, {mult}, {shift}){offset_term(p.output_zero_point)};\n"
               f"{dst} = (int8_t){clamp}(v, {int(p.act_min)}, {int(p.act_max)});")
    pixel = [for_loop("oc", 0, o, "acc[oc] = 0;"), tap_y, for_loop("oc", 0, o, epi)]
    body = for_loop("b", 0, n, for_loop("oy", 0, oh, for_loop("ox", 0, ow, pixel)))
    return KernelCode(body=head + body + "\nreturn 0;", scratch_bytes=scratch)
