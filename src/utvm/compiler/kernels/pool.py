"""max_pool2d, avg_pool2d and global_avg_pool2d on NHWC tensors; float32 and int8 (utvm.ops.pool).

The taps of each window that fall inside the input are computed once per output row / column
(`_window.tap_range`); the loops are batch, output row, output column, channel, taps (TFLM's order).

max: the largest tap (padding never wins), clamped to the activation range. int8 starts from -128, float
from -FLT_MAX: a window without a tap gives the clamp's lower bound, as the reference's -inf does.

avg: the sum of the taps (int32 for int8: |sum| <= 128 * taps) divided by the count of taps inside the
input (or inside the explicitly padded input with count_include_pad, the padded taps adding the zero
point for int8 and 0 for float). int8 rounds half away from zero: (s + n/2) / n for s > 0, else
(s - n/2) / n (C division truncates). The division is by the compile-time constant window size for
every window that lies fully inside (a loop split), by the run-time count only at the borders. Float
multiplies by 1/count.

global_avg_pool2d is the mean over H and W (utvm.compiler.kernels.reduce).
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, register
from utvm.compiler.kernels._window import Axis, origin_stmt, pos, tap_range
from utvm.compiler.kernels.reduce import mean_kernel
from utvm.ops.pool import Pool2DParams

FLT_LOWEST = -3.4028234663852886e38


@register("global_avg_pool2d")
def global_avg_pool2d(ctx: KernelContext) -> KernelCode:
    return mean_kernel(ctx, ctx.params())


@register("max_pool2d", "avg_pool2d")
def pool2d(ctx: KernelContext) -> KernelCode:
    p: Pool2DParams = ctx.params()
    if p.dtype not in ("float32", "int8"):
        raise ctx.error(f"no {p.op} kernel for dtype {p.dtype}")
    n, h, w, c = p.input_shape
    _, oh, ow, _ = p.output_shape
    kh, kw = p.pool
    top, left, bottom, right = p.padding
    ay = Axis(oh, 0, h, kh, p.strides[0], p.dilation[0], top)
    ax = Axis(ow, 0, w, kw, p.strides[1], p.dilation[1], left)
    x, y = ctx.inputs[0], ctx.outputs[0]
    t = "int8_t" if p.dtype == "int8" else "float"
    ranges = [tap_range("ky_lo", "ky_hi", "iy0", ay)]
    ranges_x = [tap_range("kx_lo", "kx_hi", "ix0", ax)]
    if p.op == "avg_pool2d" and p.count_include_pad:
        ranges.append(tap_range("py_lo", "py_hi", "iy0", ay, -top, h + bottom))
        ranges_x.append(tap_range("px_lo", "px_hi", "ix0", ax, -left, w + right))
    taps = f"""\
for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
  const {t}* const xrow = xb + ({pos("iy0", "ky", p.dilation[0])}) * {w * c} + ch;
  for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
    @TAP@
  }}
}}"""
    tap_x = f"xrow[({pos('ix0', 'kx', p.dilation[1])}) * {c}]"
    if p.op == "max_pool2d":
        per_channel = _max_channel(ctx, p, t, taps, tap_x)
        pixel = f"for (int32_t ch = 0; ch < {c}; ++ch) {{\n{_indent(per_channel, 1)}\n}}"
    elif p.dtype == "int8":
        pixel = _avg_int8_pixel(ctx, p, taps, tap_x, ay, ax)
    else:
        pixel = _avg_f32_pixel(ctx, p, taps, tap_x)
    note = ""
    if p.op == "avg_pool2d" and p.dtype == "int8":
        note = (f"/* The int32 window sum cannot overflow: |s| <= 128 * {kh * kw} taps"
                f"{' + |zero point| * taps' if p.count_include_pad else ''}. */\n")
    body = note + f"""\
for (int32_t b = 0; b < {n}; ++b) {{
  const {t}* const xb = {x} + b * {h * w * c};
  for (int32_t oy = 0; oy < {oh}; ++oy) {{
    {origin_stmt("iy0", "oy", ay)}
{_indent(chr(10).join(ranges), 2)}
    for (int32_t ox = 0; ox < {ow}; ++ox) {{
      {origin_stmt("ix0", "ox", ax)}
{_indent(chr(10).join(ranges_x), 3)}
      {t}* const yp = {y} + ((b * {oh} + oy) * {ow} + ox) * {c};
{_indent(pixel, 3)}
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body)


def _indent(text: str, levels: int) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())


def _max_channel(ctx: KernelContext, p: Pool2DParams, t: str, taps: str, tap_x: str) -> str:
    if p.dtype == "int8":
        init, lo, hi = "-128", str(int(p.act_min)), str(int(p.act_max))
        clamp = ctx.helper("clamp_i32")
        store = f"yp[ch] = (int8_t){clamp}((int32_t)m, {lo}, {hi});"
    else:
        init = c_literal(FLT_LOWEST, "float32")
        clamp = ctx.helper("clamp_f32")
        store = (f"yp[ch] = {clamp}(m, {c_literal(p.act_min, 'float32')}, "
                 f"{c_literal(p.act_max, 'float32')});")
    tap = f"const {t} v = {tap_x};\n    if (v > m) {{\n      m = v;\n    }}"
    return f"{t} m = {init};\n{taps.replace('@TAP@', tap)}\n{store}"


def _avg_int8_pixel(ctx: KernelContext, p: Pool2DParams, taps: str, tap_x: str, ay: Axis, ax: Axis) -> str:
    clamp = ctx.helper("clamp_i32")
    lo, hi = int(p.act_min), int(p.act_max)
    full = p.pool[0] * p.pool[1]
    inside = "(ky_hi - ky_lo) * (kx_hi - kx_lo)"
    lines = []
    init = "0"
    if p.count_include_pad:
        lines.append("const int32_t count = (py_hi - py_lo) * (px_hi - px_lo);")
        if p.zero_point:  # padded taps hold the zero point
            init = f"(count - {inside}) * {p.zero_point}"
    else:
        lines.append(f"const int32_t count = {inside};")

    def channel_loop(divisor: str) -> str:
        return f"""\
for (int32_t ch = 0; ch < {p.input_shape[3]}; ++ch) {{
  int32_t s = {init};
{_indent(taps.replace('@TAP@', f's += (int32_t){tap_x};'), 1)}
  s = s > 0 ? (s + {divisor} / 2) / {divisor} : (s - {divisor} / 2) / {divisor};
  yp[ch] = (int8_t){clamp}(s, {lo}, {hi});
}}"""

    if not (ay.clips or ax.clips or p.count_include_pad):
        return channel_loop(str(full))  # every window lies inside: one constant divisor
    # Windows fully inside divide by the constant window size; border windows by their count (at least 1).
    lines.append("const int32_t n = count > 0 ? count : 1;")
    lines.append(f"if (n == {full}) {{\n{_indent(channel_loop(str(full)), 1)}\n}} else {{\n"
                 f"{_indent(channel_loop('n'), 1)}\n}}")
    return "\n".join(lines)


def _avg_f32_pixel(ctx: KernelContext, p: Pool2DParams, taps: str, tap_x: str) -> str:
    clamp = ctx.helper("clamp_f32")
    lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
    if p.count_include_pad:
        count = "(py_hi - py_lo) * (px_hi - px_lo)"
    else:
        count = "(ky_hi - ky_lo) * (kx_hi - kx_lo)"
    return f"""\
const float inv = 1.0f / (float)({count});
for (int32_t ch = 0; ch < {p.input_shape[3]}; ++ch) {{
  float s = 0.0f;
{_indent(taps.replace('@TAP@', f's += {tap_x};'), 1)}
  yp[ch] = {clamp}(s * inv, {lo}, {hi});
}}"""
