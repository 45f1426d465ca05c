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

global_avg_pool2d is the mean over H and W (utvm.compiler.kernels.reduction).

int8 has a conditional space (`algo`): "direct" is the kernel above (no knobs); "cblock" keeps the loop
order but carries `c_block` channels of a pixel through the taps at once (the NHWC input holds them side by
side), a window row's taps written out with constant offsets (`tap_unroll`, where no window clips in x) or
looped. With a 16-bit SIMD vocabulary (`ctx.isa.simd16`) a word of 4 channels is one load: max is SSUB8 +
SEL per tap (an exact per-byte signed max: SSUB8 sets GE[i] when x[i] - m[i] >= 0, SEL takes x[i] there),
the activation clamp is two more SSUB8 + SEL against the replicated bounds; average adds the bytes with
SXTAB16 into two int16 lanes per word (channels 0, 2 and 1, 3). A lane holds the exact sum of at most 256
int8 values (|s| <= 128 * 256 = 32768 only for s = -32768 = 256 * -128, which int16 still holds); windows
of more taps flush the lanes into int32 sums after every window row (a row has at most 256 taps, else
cblock is not offered). The division is the direct kernel's, per channel. Other vocabularies: `c_block`
int32 locals, one load per tap and channel. global_avg_pool2d (int8): the same sums over the whole plane,
then mean's requantization (sum - zp * count, requantized once; `requant`: requant.Requant's "c" or "fast";
the pools offer no "dbl", and max/avg pools have no requantization: only "c").

On Helium vocabularies (`ctx.isa.mve`) the space has a third branch, `algo = mve` (`mve_cv` channel vectors per
step, `tap_unroll`): vector max over 16 int8 channels, exact int32 sums of 4 and TFLite's rounding division
as a multiply-high, the global average's vector requantization (the "Helium (MVE)" section below).

Knob names before issue 20 (`LEGACY`; old tuning logs still apply): pool_cb -> c_block; `tap_unroll` is new
(its default is the code before it: written out for rows of up to UNROLL_TAPS taps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, offset_term, register
from utvm.compiler.kernels._window import Axis, origin_stmt, pos, tap_range
from utvm.compiler.kernels.cemit import block, for_loop, lines
from utvm.compiler.kernels.reduction import mean_kernel
from utvm.compiler.kernels.requant import (
    Requant,
    form_reason,
    mve_operands,
    mve_reason,
    mve_requant_helper,
    mve_requant_right_helper,
)
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space, requant_knob
from utvm.ops.pool import Pool2DParams
from utvm.ops.reduction import MeanParams

FLT_LOWEST = -3.4028234663852886e38

#: taps an int16 lane may sum exactly (256 * -128 = -32768)
LANE_TAPS = 256
#: window rows of up to this many taps are written out by default (`tap_unroll`)
UNROLL_TAPS = 8

ALGO = Knob("algo", ("direct", "cblock"), "per channel, or channels side by side through the taps")
C_BLOCK = Knob("c_block", (4, 8), "channels carried at once (SIMD: words of 4)")
TAP_UNROLL = Knob("tap_unroll", (False, True), "a window row's taps written out with constant offsets")
#: the requantization forms the pools offer (global_avg_pool2d only; max/avg pools: "c")
FORMS = ("c", "fast")
#: knob names of tuning logs written before issue 20 -> their names now
LEGACY = {"pool_cb": "c_block"}


# --- the window, prepared once ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """An int8 pool (or global average) as the cblock kernel sees it."""

    n: int
    h: int
    w: int
    c: int
    oh: int
    ow: int
    kh: int
    kw: int
    dh: int
    dw: int
    ay: Axis
    ax: Axis
    is_max: bool
    #: avg_pool2d with count_include_pad
    incl: bool
    #: global_avg_pool2d (MeanParams: the sums requantized)
    glob: bool
    act_min: int
    act_max: int

    @staticmethod
    def of(p: Pool2DParams | MeanParams) -> Window:
        n, h, w, c = p.input_shape
        if isinstance(p, MeanParams):
            return Window(n, h, w, c, 1, 1, h, w, 1, 1, Axis(1, 0, h, h, 1, 1, 0), Axis(1, 0, w, w, 1, 1, 0),
                          False, False, True, -128, 127)
        _, oh, ow, _ = p.output_shape
        (kh, kw), (dh, dw) = p.pool, p.dilation
        return Window(n, h, w, c, oh, ow, kh, kw, dh, dw, Axis(oh, 0, h, kh, p.strides[0], dh, p.padding[0]),
                      Axis(ow, 0, w, kw, p.strides[1], dw, p.padding[1]), p.op == "max_pool2d",
                      p.op == "avg_pool2d" and p.count_include_pad, False, int(p.act_min), int(p.act_max))

    @property
    def flush(self) -> bool:
        """int16 lanes flushed into the int32 sums after every window row (more taps than a lane sums)."""
        return self.kh * self.kw > LANE_TAPS

    @property
    def tap_unroll_default(self) -> bool:
        return not self.ax.clips and self.kw <= UNROLL_TAPS


def _requant_reason(ctx: KernelContext, p: Pool2DParams | MeanParams, form: str) -> str | None:
    if form == "c":
        return None
    if not isinstance(p, MeanParams):
        return "max/avg pools have no requantization"
    if form not in FORMS:
        return "not offered by the pools"
    return form_reason(form, p.rounding, [p.multiplier], [p.shift], ctx.target)


def pool_space(ctx: KernelContext) -> Space:
    """int8 pools: `algo` direct or cblock (channels side by side through the taps) with `c_block` channels
    at a time, `requant` (global_avg_pool2d's mean requantization) and `tap_unroll`."""
    p = ctx.params()
    if p.dtype != "int8":
        return EMPTY_SPACE
    win = Window.of(p)
    row_taps = win.w if win.glob else win.kw
    lanes_ok = row_taps <= LANE_TAPS or win.is_max
    direct_point: Schedule = {"algo": "direct"}
    default = direct_point
    if ctx.target.is_cortex_m and lanes_ok and win.c >= 4:
        default = {"algo": "cblock", "c_block": 8 if win.c >= 8 and win.c % 8 == 0 else 4,
                   "requant": "fast" if _requant_reason(ctx, p, "fast") is None else "c",
                   "tap_unroll": win.tap_unroll_default}

    mve = ctx.isa.mve
    mve_why = mve_pool_reason(ctx, p, win) if mve else "no MVE"
    if mve and mve_why is None:
        lanes = 16 if win.is_max else 4
        default = {"algo": "mve", "mve_cv": 2 if win.c >= 2 * lanes else 1, "tap_unroll": win.tap_unroll_default}

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":
            return None
        if pt["algo"] == "mve":
            if mve_why:
                return f"the MVE kernel: {mve_why}"
            if pt["mve_cv"] > 1 and win.c <= (16 if win.is_max else 4):
                return f"mve_cv {pt['mve_cv']}: the {win.c} channels fill one vector"
            if pt["tap_unroll"] and win.ax.clips:
                return "tap_unroll: windows clipped in x have no constant taps"
            return None
        if not lanes_ok:
            return f"a window row of {row_taps} taps exceeds the {LANE_TAPS} an int16 lane sums exactly"
        if pt["c_block"] > max(win.c, 4):
            return f"c_block {pt['c_block']} > the {win.c} channels"
        if pt["tap_unroll"] and win.ax.clips:
            return "tap_unroll: windows clipped in x have no constant taps"
        reason = _requant_reason(ctx, p, pt["requant"])
        return f"requant {pt['requant']}: {reason}" if reason else None

    branches: dict[str, tuple[Knob, ...]] = {"direct": (), "cblock": (C_BLOCK, requant_knob(), TAP_UNROLL)}
    if mve:  # Helium vectors: a branch only where the vocabulary has them (other targets' spaces unchanged)
        branches["mve"] = (MVE_CV, TAP_UNROLL)
    return Space.conditional(MVE_ALGO if mve else ALGO, branches, default=default, legal=legal, legacy=LEGACY,
                             added={"tap_unroll": win.tap_unroll_default})


@register("global_avg_pool2d", space=pool_space)
def global_avg_pool2d(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "mve":
        return _mve(ctx, ctx.params(), ctx.schedule)
    if ctx.schedule.get("algo") == "cblock":
        return _cblock(ctx, ctx.params(), ctx.schedule)
    return mean_kernel(ctx, ctx.params())


@register("max_pool2d", "avg_pool2d", space=pool_space)
def pool2d(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "mve":
        return _mve(ctx, ctx.params(), ctx.schedule)
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

    def taps(tap: str) -> str:
        """The window's in-bounds taps around `tap` (which reads the tap as tap_x)."""
        return block("for (int32_t ky = ky_lo; ky < ky_hi; ++ky)",
                     [f"const {t}* const xrow = xb + ({pos('iy0', 'ky', p.dilation[0])}) * {w * c} + ch;",
                      block("for (int32_t kx = kx_lo; kx < kx_hi; ++kx)", tap)])

    tap_x = f"xrow[({pos('ix0', 'kx', p.dilation[1])}) * {c}]"
    if p.op == "max_pool2d":
        pixel = for_loop("ch", 0, c, _max_channel(ctx, p, t, taps, tap_x))
    elif p.dtype in ("int8", "int16"):
        pixel = _avg_int8_pixel(ctx, p, taps, tap_x, ay, ax)
    else:
        pixel = _avg_f32_pixel(ctx, p, taps, tap_x)
    note = ""
    if p.op == "avg_pool2d" and p.dtype in ("int8", "int16"):
        bound = 128 if p.dtype == "int8" else 32768
        note = (f"/* The int32 window sum cannot overflow: |s| <= {bound} * {kh * kw} taps"
                f"{' + |zero point| * taps' if p.count_include_pad else ''}. */")
    out_px = [origin_stmt("ix0", "ox", ax), *ranges_x, f"{t}* const yp = {y} + ((b * {oh} + oy) * {ow} + ox) * {c};",
              pixel]
    rows = [origin_stmt("iy0", "oy", ay), *ranges, for_loop("ox", 0, ow, out_px)]
    body = for_loop("b", 0, n, [f"const {t}* const xb = {x} + b * {h * w * c};", for_loop("oy", 0, oh, rows)])
    return KernelCode(body=lines(note, body, "return 0;"))


def _max_channel(ctx: KernelContext, p: Pool2DParams, t: str, taps: Callable[[str], str], tap_x: str) -> str:
    if p.dtype in ("int8", "int16"):
        init, lo, hi = ("-128" if p.dtype == "int8" else "-32768"), str(int(p.act_min)), str(int(p.act_max))
        clamp = ctx.helper("clamp_i32")
        store = f"yp[ch] = ({t}){clamp}((int32_t)m, {lo}, {hi});"
    else:
        init = c_literal(FLT_LOWEST, "float32")
        clamp = ctx.helper("clamp_f32")
        store = (f"yp[ch] = {clamp}(m, {c_literal(p.act_min, 'float32')}, "
                 f"{c_literal(p.act_max, 'float32')});")
    tap = lines(f"const {t} v = {tap_x};", block("if (v > m)", "m = v;"))
    return lines(f"{t} m = {init};", taps(tap), store)


def _avg_int8_pixel(ctx: KernelContext, p: Pool2DParams, taps: Callable[[str], str], tap_x: str, ay: Axis,
                    ax: Axis) -> str:
    clamp = ctx.helper("clamp_i32")
    lo, hi = int(p.act_min), int(p.act_max)
    full = p.pool[0] * p.pool[1]
    inside = "(ky_hi - ky_lo) * (kx_hi - kx_lo)"
    out = []
    init = "0"
    if p.count_include_pad:
        out.append("const int32_t count = (py_hi - py_lo) * (px_hi - px_lo);")
        if p.zero_point:  # padded taps hold the zero point
            init = f"(count - {inside}) * {p.zero_point}"
    else:
        out.append(f"const int32_t count = {inside};")

    def channel_loop(divisor: str) -> str:
        return for_loop("ch", 0, p.input_shape[3], [
            f"int32_t s = {init};", taps(f"s += (int32_t){tap_x};"),
            f"s = s > 0 ? (s + {divisor} / 2) / {divisor} : (s - {divisor} / 2) / {divisor};",
            f"yp[ch] = ({'int8_t' if p.dtype == 'int8' else 'int16_t'}){clamp}(s, {lo}, {hi});"])

    if not (ay.clips or ax.clips or p.count_include_pad):
        return channel_loop(str(full))  # every window lies inside: one constant divisor
    # Windows fully inside divide by the constant window size; border windows by their count (at least 1).
    out.append("const int32_t n = count > 0 ? count : 1;")
    out.append(f"{block(f'if (n == {full})', channel_loop(str(full)))} else {block('', channel_loop('n'))}")
    return lines(out)


def _avg_f32_pixel(ctx: KernelContext, p: Pool2DParams, taps: Callable[[str], str], tap_x: str) -> str:
    clamp = ctx.helper("clamp_f32")
    lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
    if p.count_include_pad:
        count = "(py_hi - py_lo) * (px_hi - px_lo)"
    else:
        count = "(ky_hi - ky_lo) * (kx_hi - kx_lo)"
    return lines(f"const float inv = 1.0f / (float)({count});",
                 for_loop("ch", 0, p.input_shape[3], ["float s = 0.0f;", taps(f"s += {tap_x};"),
                                                      f"yp[ch] = {clamp}(s * inv, {lo}, {hi});"]))


# --- cblock: channels side by side ----------------------------------------------------------------------------

def _rep(v: int) -> str:
    """A word holding int8 `v` in every byte."""
    return f"0x{(v & 0xFF) * 0x01010101:08x}u"


def _lanes(k: int, op: str) -> str:
    """C: the int32 sums t<4k>.. of word k's lanes (s<k>a: channels 0 and 2, s<k>b: 1 and 3), `op` = or +=."""
    return lines(f"t{4 * k + j} {op} (int16_t)({lane}{shift});" for j, lane, shift in
                 ((0, f"s{k}a", ""), (2, f"s{k}a", " >> 16"), (1, f"s{k}b", ""), (3, f"s{k}b", " >> 16")))


def _cblock(ctx: KernelContext, p: Pool2DParams | MeanParams, s: Schedule) -> KernelCode:
    v = ctx.isa
    simd = v.simd16
    win = Window.of(p)
    n, h, w, c = win.n, win.h, win.w, win.c
    oh, ow, kh, kw, dh, dw, ay, ax = win.oh, win.ow, win.kh, win.kw, win.dh, win.dw, win.ay, win.ax
    is_max, incl, lo, hi = win.is_max, win.incl, win.act_min, win.act_max
    x, y = ctx.inputs[0], ctx.outputs[0]
    ctx.helper("string")
    if simd:
        v.use_simd()
        ctx.helper("dsp_ror8")  # SXTAB16 ror 8
    ranges = [tap_range("ky_lo", "ky_hi", "iy0", ay), tap_range("kx_lo", "kx_hi", "ix0", ax)]
    if isinstance(p, Pool2DParams) and incl:
        top, left, bottom, right = p.padding
        ranges += [tap_range("py_lo", "py_hi", "iy0", ay, -top, h + bottom),
                   tap_range("px_lo", "px_hi", "ix0", ax, -left, w + right)]
    ranges.append("(void)kx_lo;\n(void)kx_hi;")
    flush = win.flush
    rq = Requant(ctx, s["requant"], p.rounding, [p.multiplier], [p.shift]) if isinstance(p, MeanParams) else None
    written_out = s["tap_unroll"]  # a window row with constant offsets

    def finish(t: str, dst: str) -> str:
        """C: channel sum `t` -> the int8 output at `dst` (average or mean)."""
        if isinstance(p, MeanParams):
            assert rq is not None
            return block("", [f"int32_t v = {t}{offset_term(-p.input_zero_point * p.count)};", rq.stmt("v", "0"),
                              f"v = v{offset_term(p.output_zero_point)};",
                              f"{dst} = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));"])
        init = " + init" if incl and p.zero_point else ""
        return block("", [f"const int32_t v = {t}{init};",
                          "const int32_t q = v > 0 ? (v + n / 2) / n : (v - n / 2) / n;",
                          f"{dst} = (int8_t)(q < {lo} ? {lo} : (q > {hi} ? {hi} : q));"])

    def group(width: int, simd: bool) -> str:
        """C for channels ch .. ch + width - 1 of the pixel; simd: words of 4 channels."""
        words = width // 4
        out: list[str] = []
        if simd and is_max:
            out += [f"uint32_t m{k} = 0x80808080u;" for k in range(words)]
            tap = [ln for k in range(words) for ln in (f"uint32_t v{k};", f"memcpy(&v{k}, xp + {4 * k}, 4);",
                                                       f"(void){v.ssub8(f'v{k}', f'm{k}')};",
                                                       f"m{k} = {v.sel(f'v{k}', f'm{k}')};")]
        elif simd:
            out += [f"uint32_t s{k}a = 0u;\nuint32_t s{k}b = 0u;" for k in range(words)]
            out += [f"int32_t t{j}{' = 0' if flush else ''};" for j in range(width)]
            tap = [ln for k in range(words) for ln in (f"uint32_t v{k};", f"memcpy(&v{k}, xp + {4 * k}, 4);",
                                                       f"s{k}a = {v.sxtab16(f's{k}a', f'v{k}')};",
                                                       f"s{k}b = {v.sxtab16_odd(f's{k}b', f'v{k}')};")]
        elif is_max:
            out += [f"int32_t m{j} = -128;" for j in range(width)]
            tap = [f"m{j} = xp[{j}] > m{j} ? xp[{j}] : m{j};" for j in range(width)]
        else:
            out += [f"int32_t t{j} = 0;" for j in range(width)]
            tap = [f"t{j} += xp[{j}];" for j in range(width)]
        if written_out:
            row = lines(block("", [f"const int8_t* const xp = xrow + {kx * dw * c};", *tap]) for kx in range(kw))
        else:
            row = block("for (int32_t kx = kx_lo; kx < kx_hi; ++kx)",
                        [f"const int8_t* const xp = xrow + kx * {dw * c};", *tap])
        if flush and simd and not is_max:
            row = lines(row, *(lines(_lanes(k, "+="), f"s{k}a = 0u;", f"s{k}b = 0u;") for k in range(words)))
        out.append(block("for (int32_t ky = ky_lo; ky < ky_hi; ++ky)",
                         [f"const int8_t* const xrow = xb + ({pos('iy0', 'ky', dh)}) * {w * c} + ix0 * {c} + ch;",
                          row]))
        if simd and is_max:
            for k in range(words):
                if lo > -128:
                    out += [f"(void){v.ssub8(f'm{k}', _rep(lo))};", f"m{k} = {v.sel(f'm{k}', _rep(lo))};"]
                if hi < 127:
                    out += [f"(void){v.ssub8(f'm{k}', _rep(hi))};", f"m{k} = {v.sel(_rep(hi), f'm{k}')};"]
                out.append(f"memcpy(yp + ch + {4 * k}, &m{k}, 4);")
        elif is_max:
            out += [f"yp[ch + {j}] = (int8_t)(m{j} < {lo} ? {lo} : (m{j} > {hi} ? {hi} : m{j}));"
                    for j in range(width)]
        else:
            if simd and not flush:
                out += [_lanes(k, "=") for k in range(words)]
            out += [finish(f"t{j}", f"yp[ch + {j}]") for j in range(width)]
        return lines(out)

    cb = s["c_block"]
    main = c // cb * cb
    parts = []
    if main:
        parts.append(block(f"for (int32_t ch = 0; ch < {main}; ch += {cb})", group(cb, simd)))
    rest = c - main
    words = rest // 4 * 4 if simd else 0
    if words:
        parts.append(block("", [f"const int32_t ch = {main};", group(words, True)]))
    if rest - words:
        parts.append(block("", [f"const int32_t ch = {main + words};", group(rest - words, False)]))
    pixel = []
    if not is_max and not win.glob:
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
    head = []
    if not is_max:
        head.append(f"/* Sums of at most {kh * kw} int8 taps: |s| <= {128 * kh * kw}"
                    f"{' plus |zero point| * taps' if incl else ''}, no int32 overflow"
                    f"{'; the int16 lanes are flushed after every window row' if flush else ''}. */")
        if rq is not None:
            head.append(rq.setup.rstrip("\n"))
    out_px = [origin_stmt("ix0", "ox", ax), *ranges, f"int8_t* const yp = {y} + ((b * {oh} + oy) * {ow} + ox) * {c};",
              *pixel]
    body = for_loop("b", 0, n, [f"const int8_t* const xb = {x} + b * {h * w * c};",
                                for_loop("oy", 0, oh, [origin_stmt("iy0", "oy", ay), for_loop("ox", 0, ow, out_px)])])
    return KernelCode(body=lines(head, body, "return 0;"))


# --- Helium (MVE) -------------------------------------------------------------------------------------------------
# `algo = mve` (vocabularies with `mve`): per pixel, `mve_cv` vectors of channels carried through the window's
# in-bounds taps (the NHWC input holds a pixel's channels side by side), the last vector tail-predicated (VCTP:
# loads read no byte past the tensor, stores write only real channels).
#
# - max: 16 int8 channels per vector; VMAX.S8 per tap from -128 (padding never wins), then the activation clamp
#   (VMAX/VMIN against the bounds) and one store.
# - average: 4 channels per vector, widened by VLDRB.S32 and summed exactly in int32 (|s| <= 128 * taps). TFLite
#   rounds half away from zero: q = sign(s) * floor((|s| + n/2) / n) with C's n/2 (its (s +- n/2) / n truncates
#   towards zero). floor(t / n) is a multiply-high: t' = t * 2^8 and N = n * 2^8 (so every divisor is at least
#   256), M = ceil(2^k / N) < 2^32 with the smallest k >= 32 for which T' * (M * N - 2^k) < 2^k, where T' bounds
#   t'; then floor(t' * M / 2^k) = floor(t' / N) = floor(t / n) for every 0 <= t' <= T' (t' * M / 2^k =
#   t' / N + t' * e / (N * 2^k) with e = M * N - 2^k, and the second term stays below 1 / N, which cannot carry
#   past the next multiple of 1 / N). VMULH.U32 gives t' * M / 2^32, a shift the rest. Windows inside the input
#   take the constants of the full count; clipped windows (and count_include_pad) look theirs up by the count.
# - global average (mean over the plane): the int32 sums, minus zp * count, requantized by the vector MBQM
#   (requant.mve_requant_helper), the output zero point added, saturated to int8.

MVE_ALGO = Knob("algo", ("direct", "cblock", "mve"), "per channel, channels side by side, or Helium vectors")
MVE_CV = Knob("mve_cv", (1, 2), "channel vectors carried through the taps at once")
#: the division by a run-time count takes its constants from a table of this many entries at most
MAX_COUNT_TABLE = 1024
#: the largest window the average's multiply-high division serves (t * 2^8 stays below 2^32)
MAX_AVG_TAPS = 1 << 16


def divide_magic(n: int, tmax: int) -> tuple[int, int]:
    """(M, k) with floor(t / n) == (t * 2^8 * M) >> k for every 0 <= t <= tmax (M < 2^32, k >= 32): see the
    section comment. tmax * 2^8 must stay below 2^32."""
    if n < 1 or (tmax << 8) >= 1 << 32:
        raise ValueError(f"no multiply-high division by {n} for dividends up to {tmax}")
    big_n, top = n << 8, tmax << 8
    k = 32
    while True:
        m = -(-(1 << k) // big_n)
        if m >= 1 << 32:
            raise ValueError(f"no 32-bit multiplier divides by {n} exactly up to {tmax}")
        if top * (m * big_n - (1 << k)) < 1 << k:
            return m, k
        k += 1


def _mve_avg_counts(win: Window, p: Pool2DParams) -> set[int]:
    """The divisors the windows of an average pool use (its count, at least 1)."""
    counts = set()
    for oy in range(win.oh):
        for ox in range(win.ow):
            ny = _taps_in(win.ay, oy, win.ay.lo, win.ay.hi)
            nx = _taps_in(win.ax, ox, win.ax.lo, win.ax.hi)
            if win.incl:
                top, left, bottom, right = p.padding
                ny = _taps_in(win.ay, oy, -top, win.h + bottom)
                nx = _taps_in(win.ax, ox, -left, win.w + right)
            counts.add(max(ny * nx, 1))
    return counts


def _taps_in(ax: Axis, o: int, lo: int, hi: int) -> int:
    """Taps of output `o`'s window along `ax` inside [lo, hi)."""
    s = o * ax.stride - ax.pad
    return sum(1 for t in range(ax.k) if lo <= s + t * ax.dilation < hi)


def mve_pool_reason(ctx: KernelContext, p: Pool2DParams | MeanParams, win: Window) -> str | None:
    """None if the MVE kernel serves this pool, else why not."""
    if isinstance(p, MeanParams):
        return mve_reason(p.rounding, [p.multiplier], [p.shift], 255 * p.count, p.shift <= -1)
    if not win.is_max and win.kh * win.kw > MAX_AVG_TAPS:
        return f"a window of {win.kh * win.kw} taps exceeds the {MAX_AVG_TAPS} the average's division serves"
    if not win.is_max and (win.incl or win.ay.clips or win.ax.clips) and win.kh * win.kw >= MAX_COUNT_TABLE:
        return f"windows clipped to run-time counts of up to {win.kh * win.kw} taps (a table of {MAX_COUNT_TABLE})"
    return None


def _mve(ctx: KernelContext, p: Pool2DParams | MeanParams, s: Schedule) -> KernelCode:
    v = ctx.isa
    v.use_mve()
    win = Window.of(p)
    n, h, w, c = win.n, win.h, win.w, win.c
    oh, ow, kh, kw, dh, dw, ay, ax = win.oh, win.ow, win.kh, win.kw, win.dh, win.dw, win.ay, win.ax
    x, y = ctx.inputs[0], ctx.outputs[0]
    lanes = 16 if win.is_max else 4
    cv = s["mve_cv"]
    head: list[str] = []
    pixel: list[str] = [origin_stmt("ix0", "ox", ax), tap_range("kx_lo", "kx_hi", "ix0", ax), "(void)kx_lo;",
                        "(void)kx_hi;", f"int8_t* const yp = yb + (oy * {ow} + ox) * {c};"]
    incl = isinstance(p, Pool2DParams) and win.incl
    if incl:
        assert isinstance(p, Pool2DParams)
        pixel += [tap_range("px_lo", "px_hi", "ix0", ax, -p.padding[1], w + p.padding[3]), "(void)px_lo;",
                  "(void)px_hi;"]
    if win.is_max:
        if win.act_min > -128:
            head.append(f"const int8x16_t act_lo = vdupq_n_s8({win.act_min});")
        if win.act_max < 127:
            head.append(f"const int8x16_t act_hi = vdupq_n_s8({win.act_max});")
    elif win.glob:
        assert isinstance(p, MeanParams)
        right_only = p.shift <= -1
        fn = (mve_requant_right_helper if right_only else mve_requant_helper)(ctx, p.rounding)
        ops = mve_operands(ctx, [p.multiplier], [p.shift], right_only=right_only, hint="rq")
        head += [f"/* Sums of {p.count} int8 values: |s - zp * n| <= {255 * p.count} < 2^31. */",
                 "const int32x4_t act_lo = vdupq_n_s32(-128);", "const int32x4_t act_hi = vdupq_n_s32(127);"]
    else:
        assert isinstance(p, Pool2DParams)
        counts = _mve_avg_counts(win, p)
        tmax = 128 * kh * kw + (abs(p.zero_point) * kh * kw if incl else 0) + kh * kw // 2
        head += [f"/* Sums of at most {kh * kw} int8 taps{' (and the zero point of the padded ones)' if incl else ''}"
                 f": |s| <= {tmax - kh * kw // 2}, no int32 overflow; division by the count as a multiply-high. */",
                 f"const int32x4_t act_lo = vdupq_n_s32({win.act_min});",
                 f"const int32x4_t act_hi = vdupq_n_s32({win.act_max});"]
        if len(counts) == 1:
            (cnt,) = counts
            m, k = divide_magic(cnt, tmax)
            pixel += [f"const int32_t n = {cnt};", f"const uint32_t magic = {m}u;"]
            shift = f"vshrq_n_u32(q, {k - 32})" if k > 32 else "q"
        else:
            top_n = max(counts)
            ms = [divide_magic(max(i, 1), tmax) for i in range(top_n + 1)]
            tm = ctx.table("uint32_t", [m for m, _ in ms], "div_m")
            tk = ctx.table("int32_t", [32 - k for _, k in ms], "div_k")
            inside = "(ky_hi - ky_lo) * (kx_hi - kx_lo)"
            if incl:
                pixel += ["const int32_t n = (py_hi - py_lo) * (px_hi - px_lo);"]
            else:
                pixel += [f"const int32_t n = {inside} > 0 ? {inside} : 1;"]
            pixel += [f"const uint32_t magic = {tm}[n];", f"const int32x4_t kshift = vdupq_n_s32({tk}[n]);"]
            shift = "vshlq_u32(q, kshift)"
        if incl:
            pixel.append(f"const int32_t init = (n - (ky_hi - ky_lo) * (kx_hi - kx_lo)) * {p.zero_point};")

    def vec_block(nv: int, pred: str | None) -> str:
        """C for channels ch .. ch + nv * lanes - 1 (pred: the last vector's lanes)."""
        preds = [pred if i == nv - 1 else None for i in range(nv)]
        out: list[str] = []
        for i in range(nv):
            if win.is_max:
                out.append(f"int8x16_t a{i} = vdupq_n_s8(-128);")
            else:
                out.append(f"int32x4_t a{i} = vdupq_n_s32({'init' if incl else '0'});")

        def tap(xp: str) -> list[str]:
            res = []
            for i in range(nv):
                ptr = f"{xp} + {lanes * i}" if i else xp
                if win.is_max:
                    ld = f"vldrbq_z_s8({ptr}, {preds[i]})" if preds[i] else f"vldrbq_s8({ptr})"
                    res.append(f"a{i} = vmaxq_s8(a{i}, {ld});")
                else:
                    ld = f"vldrbq_z_s32({ptr}, {preds[i]})" if preds[i] else f"vldrbq_s32({ptr})"
                    res.append(f"a{i} = vaddq_s32(a{i}, {ld});")
            return res

        if s["tap_unroll"]:
            row = lines(block("", tap(f"xrow + {kx * dw * c}" if kx else "xrow")) for kx in range(kw))
        else:
            row = block("for (int32_t kx = kx_lo; kx < kx_hi; ++kx)", tap(f"xrow + kx * {dw * c}"))
        out.append(block("for (int32_t ky = ky_lo; ky < ky_hi; ++ky)",
                         [f"const int8_t* const xrow = xb + (({pos('iy0', 'ky', dh)}) * {w} + ix0) * {c} + ch;",
                          row]))
        for i in range(nv):
            a, dst = f"a{i}", f"yp + ch + {lanes * i}" if i else "yp + ch"
            if win.is_max:
                if win.act_min > -128:
                    out.append(f"{a} = vmaxq_s8({a}, act_lo);")
                if win.act_max < 127:
                    out.append(f"{a} = vminq_s8({a}, act_hi);")
                out.append(f"vstrbq_p_s8({dst}, {a}, {preds[i]});" if preds[i] else f"vstrbq_s8({dst}, {a});")
                continue
            if win.glob:
                assert isinstance(p, MeanParams)
                out += [f"{a} = vaddq_n_s32({a}, {-p.input_zero_point * p.count});" if p.input_zero_point else "",
                        f"{a} = {ops.call(fn, a, '0')};",
                        f"{a} = vaddq_n_s32({a}, {p.output_zero_point});" if p.output_zero_point else ""]
            else:
                out.append(block("", [
                    f"const int32x4_t sgn = vshrq_n_s32({a}, 31);",
                    f"uint32x4_t q = vshlq_n_u32(vreinterpretq_u32_s32(vabsq_s32({a})), 8);",
                    "q = vaddq_n_u32(q, (uint32_t)(n / 2) << 8);",
                    "q = vmulhq_u32(q, vdupq_n_u32(magic));",
                    f"q = {shift};",
                    f"{a} = vsubq_s32(veorq_s32(vreinterpretq_s32_u32(q), sgn), sgn);"]))
            out.append(f"{a} = vminq_s32(vmaxq_s32({a}, act_lo), act_hi);")
            out.append(f"vstrbq_p_s32({dst}, {a}, {preds[i]});" if preds[i] else f"vstrbq_s32({dst}, {a});")
        return lines(out)

    per = lanes * cv
    full = c // per * per
    chans = []
    if full:
        chans.append(block(f"for (int32_t ch = 0; ch < {full}; ch += {per})", vec_block(cv, None)))
    for r in range(full, c, lanes):
        rem = min(lanes, c - r)
        pred = None
        if rem < lanes:
            pred_c = v.pred8(rem) if win.is_max else v.pred32(range(rem))
            chans.append(f"const mve_pred16_t tail = {pred_c};")
            pred = "tail"
        chans.append(block("", [f"const int32_t ch = {r};", vec_block(1, pred)]))
    pixel += chans
    rows = [origin_stmt("iy0", "oy", ay), tap_range("ky_lo", "ky_hi", "iy0", ay)]
    if incl:
        assert isinstance(p, Pool2DParams)
        rows += [tap_range("py_lo", "py_hi", "iy0", ay, -p.padding[0], h + p.padding[2]), "(void)py_lo;",
                 "(void)py_hi;"]
    body = for_loop("b", 0, n, [f"const int8_t* const xb = {x} + b * {h * w * c};",
                                f"int8_t* const yb = {y} + b * {oh * ow * c};",
                                for_loop("oy", 0, oh, [*rows, for_loop("ox", 0, ow, pixel)])])
    return KernelCode(body=lines(head, body, "return 0;"), attributes=ctx.helper("mve_in_order"))
