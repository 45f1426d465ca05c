"""max_pool2d, avg_pool2d and global_avg_pool2d on NHWC tensors; float32, int8 and int16 (utvm.ops.pool).

The taps of each window that fall inside the input are computed once per output row / column
(`_window.tap_range`); the loops are batch, output row, output column, channel, taps (TFLM's order).

max: the largest tap (padding never wins), clamped to the activation range. int8 starts from -128, float
from -FLT_MAX: a window without a tap gives the clamp's lower bound, as the reference's -inf does.

avg: the sum of the taps (int32 for int8: |sum| <= 128 * taps) divided by the count of taps inside the
input (or inside the explicitly padded input with count_include_pad, the padded taps adding the zero
point for int8 and 0 for float). int8 rounds half away from zero: (s + n/2) / n for s > 0, else
(s - n/2) / n (C division truncates). The division is by the compile-time constant window size for
every window that lies fully inside (a loop split), by the run-time count only at the borders. Float
multiplies by 1/count. int16 (direct kernel only) is int8's code in the int16 range: max starts from
-32768, the average's int32 sum holds |s| <= 32768 * taps.

global_avg_pool2d is the mean over H and W (utvm.compiler.kernels.reduce).

int8 has a space (`algo`): "direct" is the kernel above; "cblock" keeps the loop order but carries
`pool_cb` channels of a pixel through the taps at once (the NHWC input holds them side by side). On DSP
targets a word of 4 channels is one load: max is SSUB8 + SEL per tap (an exact per-byte signed max: SSUB8
sets GE[i] when x[i] - m[i] >= 0, SEL takes x[i] there), the activation clamp is two more SSUB8 + SEL
against the replicated bounds; average adds the bytes with SXTAB16 into two int16 lanes per word (channels
0, 2 and 1, 3). A lane holds the exact sum of at most 256 int8 values (|s| <= 128 * 256 = 32768 only for
s = -32768 = 256 * -128, which int16 still holds); windows of more taps flush the lanes into int32 sums
after every window row (a row has at most 256 taps, else cblock is not offered). The division is the
direct kernel's, per channel. Portable targets: `pool_cb` int32 locals, one load per tap and channel.
global_avg_pool2d (int8): the same sums over the whole plane, then mean's requantization
(utvm.compiler.kernels.reduce: sum - zp * count, requantized once; _gemm.Requant's exact forms).
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, offset_term, register
from utvm.compiler.kernels._gemm import Requant
from utvm.compiler.kernels._window import Axis, origin_stmt, pos, tap_range
from utvm.compiler.kernels.reduce import mean_kernel
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops.pool import Pool2DParams
from utvm.ops.reduce import MeanParams

FLT_LOWEST = -3.4028234663852886e38


#: taps an int16 lane may sum exactly (256 * -128 = -32768)
LANE_TAPS = 256


def pool_space(ctx: KernelContext) -> Space:
    """int8 pools: `algo` direct or cblock (channels side by side through the taps), `pool_cb` channels at
    a time, `requant` (global_avg_pool2d's mean requantization)."""
    p = ctx.params()
    if p.dtype != "int8":
        return EMPTY_SPACE
    if isinstance(p, Pool2DParams):
        row_taps, fast = p.pool[1], "no requantization"
    else:
        row_taps = p.input_shape[2]
        fast = Requant.fast_reason(p.rounding, [p.multiplier], [p.shift], ctx.target)
    lanes_ok = row_taps <= LANE_TAPS or (isinstance(p, Pool2DParams) and p.op == "max_pool2d")
    c = p.input_shape[3]
    off = {"algo": "direct", "pool_cb": 4, "requant": "c"}
    default = off
    if ctx.target.is_cortex_m and lanes_ok and c >= 4:
        default = {"algo": "cblock", "pool_cb": 8 if c >= 8 and c % 8 == 0 else 4,
                   "requant": "fast" if fast is None else "c"}

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":
            return None if pt == off else "the direct kernel has no cblock knobs"
        if not lanes_ok:
            return f"a window row of {row_taps} taps exceeds the {LANE_TAPS} an int16 lane sums exactly"
        if pt["pool_cb"] > max(c, 4):
            return f"pool_cb {pt['pool_cb']} > the {c} channels"
        if pt["requant"] == "fast" and fast is not None:
            return f"requant fast: {fast}"
        return None

    return Space((Knob("algo", ("direct", "cblock"), "per channel, or channels side by side through the taps"),
                  Knob("pool_cb", (4, 8), "channels carried at once (DSP: words of 4)"),
                  Knob("requant", ("c", "fast"), "global average: the shared helper or the gemm's fast form")),
                 default, legal)


@register("global_avg_pool2d", space=pool_space)
def global_avg_pool2d(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "cblock":
        return _cblock(ctx, ctx.params(), ctx.schedule)
    return mean_kernel(ctx, ctx.params())


@register("max_pool2d", "avg_pool2d", space=pool_space)
def pool2d(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "cblock":
        return _cblock(ctx, ctx.params(), ctx.schedule)
    p: Pool2DParams = ctx.params()
    if p.dtype not in ("float32", "int8", "int16"):
        raise ctx.error(f"no {p.op} kernel for dtype {p.dtype}")
    if p.dtype == "int16" and p.op == "avg_pool2d" and p.pool[0] * p.pool[1] > 65535:
        raise ctx.error(f"an int16 average over {p.pool[0] * p.pool[1]} taps could overflow the int32 sum")
    n, h, w, c = p.input_shape
    _, oh, ow, _ = p.output_shape
    kh, kw = p.pool
    top, left, bottom, right = p.padding
    ay = Axis(oh, 0, h, kh, p.strides[0], p.dilation[0], top)
    ax = Axis(ow, 0, w, kw, p.strides[1], p.dilation[1], left)
    x, y = ctx.inputs[0], ctx.outputs[0]
    t = {"int8": "int8_t", "int16": "int16_t"}.get(p.dtype, "float")
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
    elif p.dtype in ("int8", "int16"):
        pixel = _avg_int8_pixel(ctx, p, taps, tap_x, ay, ax)
    else:
        pixel = _avg_f32_pixel(ctx, p, taps, tap_x)
    note = ""
    if p.op == "avg_pool2d" and p.dtype in ("int8", "int16"):
        bound = 128 if p.dtype == "int8" else 32768
        note = (f"/* The int32 window sum cannot overflow: |s| <= {bound} * {kh * kw} taps"
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
    if p.dtype in ("int8", "int16"):
        init, lo, hi = ("-128" if p.dtype == "int8" else "-32768"), str(int(p.act_min)), str(int(p.act_max))
        clamp = ctx.helper("clamp_i32")
        store = f"yp[ch] = ({t}){clamp}((int32_t)m, {lo}, {hi});"
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
  yp[ch] = ({"int8_t" if p.dtype == "int8" else "int16_t"}){clamp}(s, {lo}, {hi});
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


# --- cblock: channels side by side ----------------------------------------------------------------------------

def _rep(v: int) -> str:
    """A word holding int8 `v` in every byte."""
    return f"0x{(v & 0xFF) * 0x01010101:08x}u"


def _lanes(k: int, op: str) -> str:
    """C: the int32 sums t<4k>.. of word k's lanes (s<k>a: channels 0 and 2, s<k>b: 1 and 3), `op` = or +=."""
    return "\n".join(f"t{4 * k + j} {op} (int16_t)({lane}{shift});" for j, lane, shift in
                     ((0, f"s{k}a", ""), (2, f"s{k}a", " >> 16"), (1, f"s{k}b", ""), (3, f"s{k}b", " >> 16")))


def _cblock(ctx: KernelContext, p: Pool2DParams | MeanParams, s: Schedule) -> KernelCode:
    dsp = ctx.target.dsp
    glob = isinstance(p, MeanParams)
    n, h, w, c = p.input_shape
    if isinstance(p, MeanParams):
        is_max, incl = False, False
        oh = ow = 1
        kh, kw, dh, dw = h, w, 1, 1
        ay, ax = Axis(1, 0, h, h, 1, 1, 0), Axis(1, 0, w, w, 1, 1, 0)
        lo, hi = -128, 127
    else:
        is_max, incl = p.op == "max_pool2d", p.op == "avg_pool2d" and p.count_include_pad
        _, oh, ow, _ = p.output_shape
        (kh, kw), (dh, dw) = p.pool, p.dilation
        ay = Axis(oh, 0, h, kh, p.strides[0], dh, p.padding[0])
        ax = Axis(ow, 0, w, kw, p.strides[1], dw, p.padding[1])
        lo, hi = int(p.act_min), int(p.act_max)
    x, y = ctx.inputs[0], ctx.outputs[0]
    ctx.helper("string")
    if dsp:
        ctx.require_dsp()
        ctx.helper("dsp_ror8")
    ranges = [tap_range("ky_lo", "ky_hi", "iy0", ay), tap_range("kx_lo", "kx_hi", "ix0", ax)]
    if incl:
        top, left, bottom, right = p.padding
        ranges += [tap_range("py_lo", "py_hi", "iy0", ay, -top, h + bottom),
                   tap_range("px_lo", "px_hi", "ix0", ax, -left, w + right)]
    ranges.append("(void)kx_lo;\n(void)kx_hi;")
    flush = kh * kw > LANE_TAPS  # int16 lanes flushed into the int32 sums after every window row
    rq = Requant(ctx, s["requant"], p.rounding, [p.multiplier], [p.shift]) if isinstance(p, MeanParams) else None
    written_out = not ax.clips and kw <= 8  # a window row with constant offsets

    def finish(t: str, dst: str) -> str:
        """C: channel sum `t` -> the int8 output at `dst` (average or mean)."""
        if isinstance(p, MeanParams):
            assert rq is not None
            return (f"{{\n  int32_t v = {t}{offset_term(-p.input_zero_point * p.count)};\n"
                    f"{_indent(rq.stmt('v', '0'), 1)}\n  v = v{offset_term(p.output_zero_point)};\n"
                    f"  {dst} = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));\n}}")
        init = " + init" if incl and p.zero_point else ""
        return (f"{{\n  const int32_t v = {t}{init};\n"
                f"  const int32_t q = v > 0 ? (v + n / 2) / n : (v - n / 2) / n;\n"
                f"  {dst} = (int8_t)(q < {lo} ? {lo} : (q > {hi} ? {hi} : q));\n}}")

    def group(width: int, simd: bool) -> str:
        """C for channels ch .. ch + width - 1 of the pixel; simd: words of 4 channels (DSP)."""
        words = width // 4
        lines: list[str] = []
        if simd and is_max:
            lines += [f"uint32_t m{k} = 0x80808080u;" for k in range(words)]
            tap = [ln for k in range(words) for ln in (f"uint32_t v{k};", f"memcpy(&v{k}, xp + {4 * k}, 4);",
                                                       f"(void)__ssub8(v{k}, m{k});", f"m{k} = __sel(v{k}, m{k});")]
        elif simd:
            lines += [f"uint32_t s{k}a = 0u;\nuint32_t s{k}b = 0u;" for k in range(words)]
            lines += [f"int32_t t{j}{' = 0' if flush else ''};" for j in range(width)]
            tap = [ln for k in range(words) for ln in (f"uint32_t v{k};", f"memcpy(&v{k}, xp + {4 * k}, 4);",
                                                       f"s{k}a = __sxtab16(s{k}a, v{k});",
                                                       f"s{k}b = tvm_sxtab16_ror8(s{k}b, v{k});")]
        elif is_max:
            lines += [f"int32_t m{j} = -128;" for j in range(width)]
            tap = [f"m{j} = xp[{j}] > m{j} ? xp[{j}] : m{j};" for j in range(width)]
        else:
            lines += [f"int32_t t{j} = 0;" for j in range(width)]
            tap = [f"t{j} += xp[{j}];" for j in range(width)]
        tap_c = "\n".join(tap)
        if written_out:
            row = "\n".join(f"{{\n  const int8_t* const xp = xrow + {kx * dw * c};\n{_indent(tap_c, 1)}\n}}"
                            for kx in range(kw))
        else:
            row = (f"for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{\n"
                   f"  const int8_t* const xp = xrow + kx * {dw * c};\n{_indent(tap_c, 1)}\n}}")
        if flush and simd and not is_max:
            row += "\n" + "\n".join(_lanes(k, "+=") + f"\ns{k}a = 0u;\ns{k}b = 0u;" for k in range(words))
        lines.append(f"for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{\n"
                     f"  const int8_t* const xrow = xb + ({pos('iy0', 'ky', dh)}) * {w * c} + ix0 * {c} + ch;\n"
                     f"{_indent(row, 1)}\n}}")
        if simd and is_max:
            for k in range(words):
                if lo > -128:
                    lines += [f"(void)__ssub8(m{k}, {_rep(lo)});", f"m{k} = __sel(m{k}, {_rep(lo)});"]
                if hi < 127:
                    lines += [f"(void)__ssub8(m{k}, {_rep(hi)});", f"m{k} = __sel({_rep(hi)}, m{k});"]
                lines.append(f"memcpy(yp + ch + {4 * k}, &m{k}, 4);")
        elif is_max:
            lines += [f"yp[ch + {j}] = (int8_t)(m{j} < {lo} ? {lo} : (m{j} > {hi} ? {hi} : m{j}));"
                      for j in range(width)]
        else:
            if simd and not flush:
                lines += [_lanes(k, "=") for k in range(words)]
            lines += [finish(f"t{j}", f"yp[ch + {j}]") for j in range(width)]
        return "\n".join(lines)

    cb = s["pool_cb"]
    main = c // cb * cb
    parts = []
    if main:
        parts.append(f"for (int32_t ch = 0; ch < {main}; ch += {cb}) {{\n{_indent(group(cb, dsp), 1)}\n}}")
    rest = c - main
    words = rest // 4 * 4 if dsp else 0
    if words:
        parts.append(f"{{\n  const int32_t ch = {main};\n{_indent(group(words, True), 1)}\n}}")
    if rest - words:
        parts.append(f"{{\n  const int32_t ch = {main + words};\n{_indent(group(rest - words, False), 1)}\n}}")
    pixel = []
    if not is_max and not glob:
        full = kh * kw
        if incl:
            pixel += ["const int32_t count = (py_hi - py_lo) * (px_hi - px_lo);",
                      "const int32_t init = (count - (ky_hi - ky_lo) * (kx_hi - kx_lo)) * "
                      f"{p.zero_point};", "(void)init;"]
        elif ay.clips or ax.clips:
            pixel.append("const int32_t count = (ky_hi - ky_lo) * (kx_hi - kx_lo);")
        else:
            pixel.append(f"const int32_t count = {full};")
        pixel.append("const int32_t n = count > 0 ? count : 1;")
    pixel += parts
    head = ""
    if not is_max:
        head = (f"/* Sums of at most {kh * kw} int8 taps: |s| <= {128 * kh * kw}"
                f"{' plus |zero point| * taps' if incl else ''}, no int32 overflow"
                f"{'; the int16 lanes are flushed after every window row' if flush else ''}. */\n")
        if rq is not None and rq.setup:
            head += rq.setup
    body = head + f"""\
for (int32_t b = 0; b < {n}; ++b) {{
  const int8_t* const xb = {x} + b * {h * w * c};
  for (int32_t oy = 0; oy < {oh}; ++oy) {{
    {origin_stmt("iy0", "oy", ay)}
    for (int32_t ox = 0; ox < {ow}; ++ox) {{
      {origin_stmt("ix0", "ox", ax)}
{_indent(chr(10).join(ranges), 3)}
      int8_t* const yp = {y} + ((b * {oh} + oy) * {ow} + ox) * {c};
{_indent(chr(10).join(pixel), 3)}
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body)
