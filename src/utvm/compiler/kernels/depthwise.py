"""depthwise_conv2d on NHWC tensors (utvm.ops.conv2d): float32 and int8.

The scalar kernels live in utvm.compiler.kernels.conv (`direct`), shared with conv2d: float32 always uses
them, and so does int8 with run-time weights. int8 with constant weights (and bias) has a conditional space
(`algo` selects the branch; a point names only the knobs of its branch):

`algo = direct`: the scalar kernel (weight sums folded for interior windows, TFLite's form at the borders),
with conv's direct knobs (`conv.direct_knobs`: `taps`, `m_regs`).

`algo = plane`: channel planes. A block of `c_block` input channels is copied from the NHWC input into int16
planes, one per channel, with the input offset added (x - input_zero_point, in [-255, 255]) and the
padding left at 0: plane[r][c] = x[r - pad_top][c - pad_left] - zp inside the input, 0 outside, which is
exactly TFLite's "padding taps are skipped". An output pixel (oy, ox) of that channel is then
sum over (ky, kx) of plane[oy * sh + ky * dh][ox * sw + kx * dw] * w[ky][kx] with no bounds test at all.
One output channel sweeps its whole plane (output rows, then `px_block` pixels per block, the blocks of a
row written out with `row_unroll`), its weights, bias and requantization operands loaded once (`w_load =
reg`: weights in locals) or its weights loaded where used (`mem`: LDRD pairs, no spills). Channel c of the
input feeds output channels c * M .. c * M + M - 1 (depth multiplier M): `oc_block` of them share every load
of the plane.

  16-bit SIMD vocabularies (`ctx.isa.simd16`: SMLAD and friends through <arm_acle.h>): the copy widens a
  word of 4 channels with SXTAB16 (the offset added in the same instruction) and PKHBT/PKHTB pairs two
  pixels of a channel into one word of each plane (`c_block = 4`; the word pairs of an input row written
  out with constant offsets, `copy_unroll`, or looped). The sums read words of two adjacent int16 plane
  values. A block's first column is even whenever `px_block * sw` is (the plane's rows are an even number
  of values long and word-aligned), so every word is an aligned (x[2i], x[2i+1]) pair, shared by all
  pixels of the block: a pixel whose taps k, k+1 fall on one word uses SMLAD with the compile-time word
  (w[k], w[k+1]); a pixel whose tap falls on one half only uses SMLAxy with a weight word holding that tap
  in either half. For stride 1 and two pixels this is the 2-pixel input sharing of docs/kernels.md §6.2: a
  3x3 row of two pixels is one LDRD, two SMLAD and two single MACs, with two weight words per row. Aligned
  words and adjacent weight words are loaded in pairs by an LDRD asm (GCC rarely pairs them itself), each
  just before its first use. With `px_block * sw` odd (one pixel, odd stride) the words are loaded
  unaligned at each pixel's taps.
  Other vocabularies (host, Cortex-M0/M3): the same planes and blocks in plain C (each plane value loaded
  once per block, one multiply-accumulate per tap).

  Ideas: TinyEngine's HWC -> CHW copy padded with the zero point (depthwiseTemplate.py), CMSIS-NN's
  arm_depthwise_conv_s8_opt (int16 copy, tap pairs for SMLAD); written here.

Knob names before issue 20 (`LEGACY`; old tuning logs still apply): dw_px -> px_block, dw_oc -> oc_block,
dw_cb -> c_block, dw_wload -> w_load, unroll (a bool) -> row_unroll; `copy_unroll` is new (its default is
the code before it).

Exactness: the int32 accumulator is bias + sum over taps of (x - zp) * w, the integer TFLite computes (the
padding taps are zeros); integer addition is associative and SMLAD/SMLAxy wrap instead of saturating, so
the order does not matter as long as no partial sum leaves int32, which the proven bound
|acc| <= max|x - zp| * sum|w| + |bias| < 2^31 (requant.acc_bound, conv's `accumulator_bound` comment)
rules out for every partial sum. Requantization (`requant`): requant.Requant's exact forms; "dbl" (DSP,
double rounding) accumulates 2 * acc instead (the weights and the bias are doubled at compile time, so it
costs nothing; legal when 2 * bound < 2^31) and computes gemmlowp's SaturatingRoundingDoublingHighMul(acc, m)
as SMMULR(2 * acc, m) with the output zero point folded in (requant.dbl_requant_helper): four instructions
instead of six plus an add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, register
from utvm.compiler.kernels._gemm import MAX_ACCUMULATORS, words_table
from utvm.compiler.kernels.cemit import block, for_loop, lines
from utvm.compiler.kernels.conv import accumulator_bound, direct, direct_default, direct_knobs, int8_stage
from utvm.compiler.kernels.isa import PortableC
from utvm.compiler.kernels.requant import OutputStage, Requant, clamp_store
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space, no_sched_knob, requant_knob
from utvm.ops.conv2d import Conv2DParams

#: pixel blocks of one output row that `row_unroll` may write out, and word pairs of an input row that
#: `copy_unroll` may (both are written out by default up to this many)
MAX_UNROLL_BLOCKS = 8
#: scratch (bytes) the default point may take for its planes; no point takes more than MAX_SCRATCH
DEFAULT_SCRATCH = 16 << 10
MAX_SCRATCH = 1 << 20

ALGO = Knob("algo", ("direct", "plane"), "conv's scalar kernel or int16 channel planes")
PX_BLOCK = Knob("px_block", (1, 2, 4), "output pixels of a row per block (sharing the plane's loads)")
OC_BLOCK = Knob("oc_block", (1, 2, 4), "output channels of one input channel per block (depth multiplier > 1)")
C_BLOCK = Knob("c_block", (1, 4), "input channels copied into planes at a time (4: one word of the input)")
ROW_UNROLL = Knob("row_unroll", (False, True), "the pixel blocks of an output row written out")
COPY_UNROLL = Knob("copy_unroll", (False, True),
                   "the SIMD copy of 4 channels: the word pairs of an input row written out (constant offsets)")
W_LOAD = Knob("w_load", ("reg", "mem"), "weights held in locals for a whole plane, or loaded where used")
#: knob names of tuning logs written before issue 20 -> their names now
LEGACY = {"dw_px": "px_block", "dw_oc": "oc_block", "dw_cb": "c_block", "dw_wload": "w_load", "unroll": "row_unroll"}


def _pairs(items: Sequence[tuple[str, int]]) -> list[list[tuple[str, int]]]:
    """(name, byte offset) words grouped into LDRD pairs (adjacent offsets up to 1020) and singles."""
    todo = sorted(items, key=lambda t: t[1])
    out, i = [], 0
    while i < len(todo):
        if i + 1 < len(todo) and todo[i + 1][1] == todo[i][1] + 4 and 0 <= todo[i][1] <= 1020:
            out.append([todo[i], todo[i + 1]])
            i += 2
        else:
            out.append([todo[i]])
            i += 1
    return out


def word_loads(items: Sequence[tuple[str, int]], base: str, single: str, ldrd: str) -> list[str]:
    """C declaring uint32_t locals (name, byte offset from `base`, 4-byte aligned): LDRD pairs where two
    offsets are adjacent (`ldrd`: the name of the TVM_LDRD local helper), single loads otherwise (`single`(p)
    of an int16_t pointer, or a uint32_t index when `single` is "")."""
    out: list[str] = []
    for group in _pairs(items):
        if len(group) == 2:
            (a, off), (b, _) = group
            out += [f"uint32_t {a};", f"uint32_t {b};", f"{ldrd}({a}, {b}, {base}, {off});"]
        else:
            ((a, off),) = group
            out.append(f"const uint32_t {a} = {single}({base} + {off // 2});" if single
                       else f"const uint32_t {a} = {base}[{off // 4}];")
    return out


# --- the layer, prepared once ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Geometry:
    """One depthwise layer as the plane kernel sees it."""

    n: int
    h: int
    w: int
    c: int
    m: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    oh: int
    ow: int

    @staticmethod
    def of(p: Conv2DParams) -> Geometry:
        n, h, w, c = p.input_shape
        _, oh, ow, _ = p.output_shape
        kh, kw = p.kernel
        return Geometry(n, h, w, c, p.depth_multiplier, kh, kw, p.strides[0], p.strides[1], p.dilation[0],
                        p.dilation[1], p.padding[0], p.padding[1], oh, ow)

    @property
    def n_out(self) -> int:
        return self.c * self.m

    @property
    def plane_h(self) -> int:
        return max(self.pt + self.h, (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1)

    def plane_w(self) -> int:
        """Row pitch (even): the input with its left padding, and every tap of every pixel plus the half-word
        a word load may read past the last one."""
        wp = max(self.pl + self.w, (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 2)
        return wp + (wp & 1)

    def plane_size(self) -> int:
        """Elements per plane, a multiple of 4 (so every plane starts 8-byte aligned)."""
        return (self.plane_h * self.plane_w() + 3) // 4 * 4

    @property
    def copy_pairs(self) -> int:
        """Word pairs (two pixels of 4 channels) of one input row in the SIMD copy."""
        return self.w // 2


@dataclass(frozen=True, eq=False)
class Layer:
    """An int8 depthwise layer with constant weights, prepared once (TFLM's OpData): its geometry, weights
    [ky, kx, oc] and bias as int64, and the output stage (conv.int8_stage: requantization operands, zero
    points, activation range, the accumulator bound)."""

    p: Conv2DParams
    g: Geometry
    w: np.ndarray
    bias: np.ndarray | None
    stage: OutputStage

    @staticmethod
    def of(ctx: KernelContext, p: Conv2DParams) -> Layer:
        g = Geometry.of(p)
        w_t = ctx.in_tensor(1)
        assert w_t is not None and w_t.data is not None
        w = w_t.data.astype(np.int64).reshape(g.kh, g.kw, g.n_out)
        b_t = ctx.in_tensor(2) if p.has_bias else None
        bias = b_t.data.astype(np.int64).reshape(-1) if b_t is not None and b_t.data is not None else None
        return Layer(p, g, w, bias, int8_stage(ctx, p))


# --- the space ------------------------------------------------------------------------------------------------

def _applies(ctx: KernelContext, p: Conv2DParams) -> bool:
    if p.op != "depthwise_conv2d" or p.dtype != "int8":
        return False
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    return w_t is not None and w_t.data is not None and (not p.has_bias or (b_t is not None and b_t.data is not None))


def depthwise_space(ctx: KernelContext) -> Space:
    """int8 depthwise_conv2d with constant weights: `algo` direct (conv's scalar kernel, its direct knobs) or
    plane (int16 channel planes, SIMD with a 16-bit SIMD vocabulary) with its knobs; see the module
    docstring."""
    p: Conv2DParams = ctx.params()
    if not _applies(ctx, p):
        return EMPTY_SPACE
    layer = Layer.of(ctx, p)
    g = layer.g
    simd = ctx.isa.simd16
    blocks = lambda pt: (g.ow + pt["px_block"] - 1) // pt["px_block"]  # noqa: E731
    best_rq = next(f for f in ("dbl", "fast", "c") if layer.stage.form_reason(f, ctx.target) is None)
    # the copy's word pairs: written out up to MAX_UNROLL_BLOCKS (the code before `copy_unroll` existed)
    copy_default = g.copy_pairs <= MAX_UNROLL_BLOCKS
    copy_applies = lambda pt: simd and pt["c_block"] == 4 and g.copy_pairs > 0  # noqa: E731
    # measured on QEMU (KWS 3x3 stride 1, micro_speech 10x8 stride 2 x 8): two pixels share the loads of
    # a stride-1 row on DSP targets; otherwise four pixels; the copy of 4 channels by words pays on DSP only.
    # Unrolling a row's blocks saves a loop (about 1%) for code that grows with the taps: only small rows
    # (micro_speech's 10x8 rows unrolled cost 3.9 KB, +36% of the firmware's code, for 1%).
    px = 4 if (g.sw > 1 or not simd) and g.ow >= 4 else (2 if g.ow >= 2 else 1)
    oc = max(o for o in (1, 2, 4) if g.m % o == 0 and o * px <= 4)
    nb = (g.ow + px - 1) // px
    plane_bytes = 2 * g.plane_size()
    cb = 4 if simd and g.c >= 4 and 4 * plane_bytes <= DEFAULT_SCRATCH else 1
    plane = {"algo": "plane", "px_block": px, "oc_block": oc, "c_block": cb, "requant": best_rq,
             "row_unroll": 1 < nb <= MAX_UNROLL_BLOCKS and nb * g.kh * g.kw * px <= 256,
             "copy_unroll": copy_default, "w_load": "mem", "no_sched": simd}
    direct_point = {"algo": "direct", **direct_default(p)}
    default = plane if ctx.target.is_cortex_m and plane_bytes <= DEFAULT_SCRATCH else direct_point

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":
            return None
        if pt["px_block"] > g.ow:
            return f"px_block {pt['px_block']} > the {g.ow} output columns"
        if g.m % pt["oc_block"]:
            return f"oc_block {pt['oc_block']} does not divide the depth multiplier {g.m}"
        if pt["px_block"] * pt["oc_block"] > MAX_ACCUMULATORS:
            return f"{pt['px_block']} x {pt['oc_block']} accumulators exceed {MAX_ACCUMULATORS} registers"
        if pt["c_block"] > 1 and g.c < pt["c_block"]:
            return f"c_block {pt['c_block']} > the {g.c} input channels"
        if pt["c_block"] * plane_bytes > MAX_SCRATCH:
            return f"{pt['c_block']} planes of {plane_bytes} bytes exceed {MAX_SCRATCH} bytes of scratch"
        if pt["row_unroll"] and blocks(pt) > MAX_UNROLL_BLOCKS:
            return f"{blocks(pt)} blocks per row exceed {MAX_UNROLL_BLOCKS} to unroll"
        if pt["row_unroll"] and blocks(pt) == 1:
            return "one block per row: nothing to unroll"
        if not copy_applies(pt) and pt["copy_unroll"] != copy_default:
            return "copy_unroll: the copy has no word pairs here (only its default value is a point)"
        if copy_applies(pt) and pt["copy_unroll"] and g.copy_pairs > MAX_UNROLL_BLOCKS:
            return f"{g.copy_pairs} word pairs per input row exceed {MAX_UNROLL_BLOCKS} to unroll"
        reason = layer.stage.form_reason(pt["requant"], ctx.target)
        return f"requant {pt['requant']}: {reason}" if reason else None

    return Space.conditional(
        ALGO, {"direct": direct_knobs(p),
               "plane": (PX_BLOCK, OC_BLOCK, C_BLOCK, requant_knob(), ROW_UNROLL, COPY_UNROLL, W_LOAD,
                         no_sched_knob())},
        default=default, legal=legal, legacy=LEGACY,
        added={**direct_default(p), "copy_unroll": copy_default})


@register("depthwise_conv2d", space=depthwise_space)
def depthwise(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "plane":
        return _Plane(ctx, Layer.of(ctx, ctx.params()), ctx.schedule).code()
    return direct(ctx)


# --- the plane kernel ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mac:
    """One multiply-accumulate instruction of a block row: pixel `px` += word `load` (an index into the row's
    loads) times taps `lo` / `hi` (None: that half of the word is not one of the pixel's taps)."""

    px: int
    load: int
    lo: int | None
    hi: int | None


def row_plan(kw: int, dw: int, sw: int, px: int, aligned: bool) -> tuple[list[int], list[Mac]]:
    """Word loads (column offsets from the block's first column) and MACs of one kernel row for a block of
    `px` pixels. Aligned: words at even columns, shared by every pixel. Unaligned: each pixel's own words,
    pairing adjacent taps."""
    loads: list[int] = []
    macs: list[Mac] = []
    if aligned:
        cols: dict[int, dict[int, list[int | None]]] = {}
        for p in range(px):
            for k in range(kw):
                col = p * sw + k * dw
                slot = cols.setdefault(col & ~1, {}).setdefault(p, [None, None])
                slot[col & 1] = k
        for col in sorted(cols):
            loads.append(col)
            for p, (lo, hi) in sorted(cols[col].items()):
                macs.append(Mac(p, len(loads) - 1, lo, hi))
        return loads, macs
    for p in range(px):
        k = 0
        while k < kw:
            col = p * sw + k * dw
            if col not in loads:
                loads.append(col)
            pair = dw == 1 and k + 1 < kw
            macs.append(Mac(p, loads.index(col), k, k + 1 if pair else None))
            k += 2 if pair else 1
    return loads, macs


def weight_words(macs: Sequence[Mac], have: Sequence[tuple[int | None, int | None]] = ()
                 ) -> tuple[list[tuple[int | None, int | None]], list[tuple[int, str]]]:
    """The weight words (tap in the low half, tap in the high half) one kernel row needs, and per MAC
    (word index, instruction): "smlad" for a pair, else "smlaXY" with X the half of the plane word and Y the
    half of the weight word holding the tap. Words of `have` (another block's) come first and are reused."""
    words: list[tuple[int | None, int | None]] = list(have)
    for m in macs:
        if m.lo is not None and m.hi is not None and (m.lo, m.hi) not in words:
            words.append((m.lo, m.hi))
    ops: list[tuple[int, str]] = []
    for m in macs:
        if m.lo is not None and m.hi is not None:
            ops.append((words.index((m.lo, m.hi)), "smlad"))
            continue
        tap, x_half = (m.lo, "b") if m.lo is not None else (m.hi, "t")
        found = next(((i, "b" if wd[0] == tap else "t") for i, wd in enumerate(words) if tap in wd), None)
        if found is None:
            words.append((tap, None))
            found = (len(words) - 1, "b")
        ops.append((found[0], f"smla{x_half}{found[1]}"))
    return words, ops


class _Plane:
    """Emits the plane kernel of one layer for one schedule."""

    def __init__(self, ctx: KernelContext, layer: Layer, s: Schedule) -> None:
        self.ctx, self.layer, self.p, self.s = ctx, layer, layer.p, s
        self.g = g = layer.g
        self.v: PortableC = ctx.isa
        self.simd = self.v.simd16
        self.px, self.ocb, self.cb = s["px_block"], s["oc_block"], s["c_block"]
        self.hoist = s["w_load"] == "reg"
        self.wp = g.plane_w()
        self.ps = g.plane_size()
        self.aligned = self.simd and (self.px * g.sw) % 2 == 0
        self.dbl = s["requant"] == "dbl"
        scale = 2 if self.dbl else 1
        self.w = layer.w * scale  # [ky, kx, oc]
        self.bias = layer.bias * scale if layer.bias is not None else None

    # plans per block width (the row's tail block may be narrower)
    def plan(self, px: int) -> tuple[list[int], list[Mac], list[tuple[int | None, int | None]], list[tuple[int, str]]]:
        """(loads, MACs, weight words, per MAC (word, instruction)) of a kernel row for a block of px pixels;
        the tail block reuses the main block's words."""
        g = self.g
        loads, macs = row_plan(g.kw, g.dw, g.sw, px, self.aligned or not self.simd)
        have: list[tuple[int | None, int | None]] = []
        if px != self.px:
            have = self.plan(self.px)[2]
        words, ops = weight_words(macs, have)
        return loads, macs, words, ops

    def code(self) -> KernelCode:
        body, scratch = self.body()
        attrs = self.ctx.helper("no_sched") if self.s["no_sched"] else ""
        return KernelCode(body=body, scratch_bytes=scratch, attributes=attrs)

    def body(self) -> tuple[str, int]:
        ctx, p, g, v = self.ctx, self.p, self.g, self.v
        ctx.helper("string")
        self.opaque = v.local("TVM_OPAQUE_PTR") if not self.hoist else ""
        if self.simd:
            v.use_simd()
            ctx.helper("dsp_ror8")  # the copy's SXTAB16 ror 8
            v.local("tvm_pkhbt16")
            v.local("tvm_ld16x2")
            self.ldrd = v.local("TVM_LDRD")
        bound = accumulator_bound(ctx, p)
        main_px = self.px
        tail_px = g.ow % self.px
        # weight tables: per output channel, the main block's words then the tail block's (per kernel row)
        layouts = {}
        for px in {main_px, tail_px} - {0}:
            layouts[px] = self.plan(px)
        self.word_index: dict[tuple[int, int, int], int] = {}  # (block px, ky, word) -> word in a channel
        per_oc: list[tuple[int | None, int | None, int]] = []  # (lo tap, hi tap, ky)
        for px in sorted(layouts):
            words = layouts[px][2]
            for ky in range(g.kh):
                for i, wd in enumerate(words):
                    key = (wd[0], wd[1], ky)
                    if key not in per_oc:
                        per_oc.append(key)
                    self.word_index[(px, ky, i)] = per_oc.index(key)
        self.nw = len(per_oc)
        if self.simd:
            table = np.zeros((g.n_out, self.nw), np.int64)
            for k, (lo, hi, ky) in enumerate(per_oc):
                lo_v = self.w[ky, lo, :] if lo is not None else 0
                hi_v = self.w[ky, hi, :] if hi is not None else 0
                table[:, k] = (np.asarray(lo_v) & 0xFFFF) | ((np.asarray(hi_v) & 0xFFFF) << 16)
            self.wt = words_table(ctx, table.astype(np.uint32), "wdw")
        else:
            # portable: one int16 weight per tap (ky, kx) and channel
            self.nw = g.kh * g.kw
            self.wt = ctx.table("int16_t", self.w.reshape(-1, g.n_out).T, "wdw")
        self.bt = ctx.table("int32_t", self.bias, "bias") if self.bias is not None else None
        st = self.layer.stage
        self.rq = Requant(ctx, self.s["requant"], st.rounding, st.multiplier, st.shift, zero_point=st.output_zp,
                          bound=st.bound)
        head = [bound, f"const int32_t input_offset = {-st.input_zp};  /* -input zero point */"]
        if self.simd:
            head.append("const uint32_t input_offset2 = ((uint32_t)input_offset & 0xFFFFu) * 0x10001u;"
                        "  /* in both int16 lanes */")
            head.append("(void)input_offset2;")
        if self.dbl:
            head.append("/* requant dbl: the weights and the bias are doubled (2 * bound < 2^31). */")
        head.append("int16_t* const planes = (int16_t*)(void*)scratch;")
        scratch = 2 * self.ps * self.cb
        head.append(f"memset(scratch, 0, {scratch});  /* the padding of every plane */")
        head.append(self.rq.setup.rstrip("\n"))
        cb = self.cb
        copy = self._copy()
        passes = self._pass()
        x, y = ctx.inputs[0], ctx.outputs[0]
        if g.c % cb:
            chan = lines(f"const int32_t cn = {g.c} - c0 < {cb} ? {g.c} - c0 : {cb};", copy,
                         for_loop("j", 0, "cn", passes))
        elif cb > 1:
            chan = lines(copy, for_loop("j", 0, cb, passes))
        else:
            chan = lines(copy, block("", ["const int32_t j = 0;", passes]))
        batch = [f"const int8_t* const xb = {x} + b * {g.h * g.w * g.c};",
                 f"int8_t* const yb = {y} + b * {g.oh * g.ow * g.n_out};",
                 block(f"for (int32_t c0 = 0; c0 < {g.c}; c0 += {cb})", chan)]
        return lines(head, for_loop("b", 0, g.n, batch), "return 0;"), scratch

    # the copy into planes ------------------------------------------------------------------------------------
    def _row0(self) -> str:
        g = self.g
        return f"(iy + {g.pt}) * {self.wp} + {g.pl}" if g.pt else f"iy * {self.wp} + {g.pl}"

    def _bytewise(self, cn: str) -> str:
        """C filling planes 0..cn-1 value by value."""
        g = self.g
        pixel = [for_loop("j", 0, cn, f"d[j * {self.ps} + ix] = (int16_t)((int32_t)xs[j] + input_offset);"),
                 f"xs += {g.c};"]
        return for_loop("iy", 0, g.h, [f"const int8_t* xs = xb + iy * {g.w * g.c} + c0;",
                                       f"int16_t* const d = planes + {self._row0()};", for_loop("ix", 0, g.w, pixel)])

    def _copy(self) -> str:
        """C filling planes 0..cn-1 (or cb) from input channels c0.. of batch xb."""
        g, v = self.g, self.v
        if self.cb == 1:
            return self._bytewise("1")
        if not self.simd:
            return self._bytewise("cn" if g.c % self.cb else str(self.cb))
        pb = 2 * self.ps  # bytes between planes
        pair_words = lines(
            "uint32_t p0;", "uint32_t p1;", "memcpy(&p0, xs, 4);", f"memcpy(&p1, xs + {g.c}, 4);",
            f"xs += {2 * g.c};",
            block("", [f"const uint32_t a0 = {v.sxtab16('input_offset2', 'p0')};",
                       f"const uint32_t a1 = {v.sxtab16('input_offset2', 'p1')};",
                       f"const uint32_t b0 = {v.sxtab16_odd('input_offset2', 'p0')};",
                       f"const uint32_t b1 = {v.sxtab16_odd('input_offset2', 'p1')};",
                       f"const uint32_t v0 = {v.pkhbt16('a0', 'a1')};",
                       f"const uint32_t v1 = {v.pkhbt16('b0', 'b1')};",
                       f"const uint32_t v2 = {v.pkhtb16('a1', 'a0')};",
                       f"const uint32_t v3 = {v.pkhtb16('b1', 'b0')};",
                       "memcpy(d, &v0, 4);", f"memcpy(d + {pb}, &v1, 4);", f"memcpy(d + {2 * pb}, &v2, 4);",
                       f"memcpy(d + {3 * pb}, &v3, 4);"]),
            "d += 4;")
        last = lines(
            "uint32_t p0;", "memcpy(&p0, xs, 4);",
            block("", [f"const uint32_t a0 = {v.sxtab16('input_offset2', 'p0')};",
                       f"const uint32_t b0 = {v.sxtab16_odd('input_offset2', 'p0')};",
                       "const uint16_t v0 = (uint16_t)a0;", "const uint16_t v1 = (uint16_t)b0;",
                       "const uint16_t v2 = (uint16_t)(a0 >> 16);", "const uint16_t v3 = (uint16_t)(b0 >> 16);",
                       "memcpy(d, &v0, 2);", f"memcpy(d + {pb}, &v1, 2);", f"memcpy(d + {2 * pb}, &v2, 2);",
                       f"memcpy(d + {3 * pb}, &v3, 2);"]))
        pairs = g.copy_pairs
        parts = [f"const int8_t* xs = xb + iy * {g.w * g.c} + c0;",
                 f"uint8_t* d = (uint8_t*)(void*)(planes + {self._row0()});"]
        if self.s["copy_unroll"]:  # written out: constant offsets
            parts += [block("", pair_words)] * pairs
        else:
            parts.append(for_loop("q", 0, pairs, pair_words))
        if g.w % 2:
            parts.append(block("", last))
        words = for_loop("iy", 0, g.h, parts)
        if g.c % self.cb:
            return f"{block(f'if (cn == {self.cb})', words)} else {block('', self._bytewise('cn'))}"
        return words

    # one input channel's output channels ----------------------------------------------------------------------
    def _pass(self) -> str:
        """C computing every output channel of input channel ic = c0 + j from plane j."""
        g = self.g
        ocb = self.ocb
        out = ["const int32_t ic = c0 + j;", f"const int16_t* const plane = planes + j * {self.ps};"]
        inner = self._channels()
        if g.m == ocb:
            out.append(block("", [f"const int32_t oc = ic{f' * {g.m}' if g.m > 1 else ''};", inner]))
        else:
            out.append(block(f"for (int32_t oc = ic * {g.m}; oc < ic * {g.m} + {g.m}; oc += {ocb})", inner))
        return lines(out)

    def _weight(self, o: int, k: int) -> str:
        if self.hoist:
            return f"w{o}_{k}"
        return f"v{o * self.nw + k}" if self.simd else f"wb[{o * self.nw + k}]"

    def _channels(self) -> str:
        """C for output channels oc .. oc + oc_block - 1 over the whole plane."""
        g, ocb = self.g, self.ocb
        wtype = "uint32_t" if self.simd else "int16_t"
        out = [f"const {wtype}* const wq = {self.wt} + oc * {self.nw};"]
        if self.hoist and self.simd:
            out += word_loads([(f"w{o}_{k}", 4 * (o * self.nw + k)) for o in range(ocb) for k in range(self.nw)],
                              "wq", "", self.ldrd)
        elif self.hoist:
            out += [f"const int32_t w{o}_{k} = wq[{o * self.nw + k}];" for o in range(ocb) for k in range(self.nw)]
        for o in range(ocb):
            ch = f"oc + {o}" if o else "oc"
            out.append(f"const int32_t bias{o} = {self.bt}[{ch}];" if self.bt else f"const int32_t bias{o} = 0;")
            if self.dbl:  # the dbl form's operands loaded once per channel
                out += self.rq.hoist(str(o), ch)
        out.append("int8_t* const yo = yb + oc;")
        nb, tail = g.ow // self.px, g.ow % self.px
        row: list[str] = [f"const int16_t* r = plane + oy * {g.sh * self.wp};",
                          f"int8_t* yr = yo + oy * {g.ow * g.n_out};"]
        step_r, step_y = self.px * g.sw, self.px * g.n_out
        if self.s["row_unroll"] or nb == 1:
            for i in range(nb):
                row.append(self._block(self.px, i * step_r, i * step_y))
            if tail:
                row.append(self._block(tail, nb * step_r, nb * step_y))
        else:
            row.append(for_loop("q", 0, nb, [self._block(self.px, 0, 0), f"r += {step_r};", f"yr += {step_y};"]))
            if tail:
                row.append(self._block(tail, 0, 0))
        row += ["(void)r;", "(void)yr;"]
        out.append(for_loop("oy", 0, g.oh, row))
        return lines(out)

    def _simd_row(self, px: int, ky: int, row_off: int, loads: list[int], macs: list[Mac],
                  ops: list[tuple[int, str]], accs: list[list[str]]) -> list[str]:
        """C for one kernel row of a SIMD block: the plane words (x<i>) and, with w_load mem, the weight words
        (v<k>) loaded in LDRD pairs just before their first use, MACs grouped by the load they wait for (few
        live registers: GCC's scheduler is often off for this code)."""
        v = self.v
        todo = []  # (load index, table word, instruction, accumulator)
        for m, (wi, op) in zip(macs, ops, strict=True):
            for o in range(self.ocb):
                todo.append((m.load, o * self.nw + self.word_index[(px, ky, wi)], op, accs[o][m.px]))
        x_items = [(f"x{i}", 2 * (row_off + col)) for i, col in enumerate(loads)]
        if self.aligned:
            x_groups = _pairs(x_items)
        else:
            x_groups = [[it] for it in x_items]
        if self.hoist:
            todo.sort(key=lambda t: t[0])
            w_groups: list[list[tuple[str, int]]] = []
        else:
            todo.sort(key=lambda t: (t[1] // 2, t[0]))
            w_groups = _pairs([(f"v{k}", 4 * k) for k in sorted({t[1] for t in todo})])
        out: list[str] = []
        done: set[str] = set()

        def need(name: str, groups: list[list[tuple[str, int]]], base: str, single: str) -> None:
            if name in done:
                return
            group = next(gr for gr in groups if any(n == name for n, _ in gr))
            out.extend(word_loads(group, base, single, self.ldrd))
            done.update(n for n, _ in group)

        for load, k, op, a in todo:
            need(f"x{load}", x_groups, "rb", "tvm_ld16x2a" if self.aligned else "tvm_ld16x2")
            if not self.hoist:
                need(f"v{k}", w_groups, "wb", "")
            wv = f"w{k // self.nw}_{k % self.nw}" if self.hoist else f"v{k}"
            mac = v.smlad(f"x{load}", wv, a) if op == "smlad" else v.smlaxy(op[4:], f"x{load}", wv, a)
            out.append(f"{a} = {mac};")
        return out

    def _block(self, px: int, col_off: int, y_off: int) -> str:
        """C for `px` pixels x oc_block channels whose window starts `col_off` values after the plane pointer
        r (int16_t*), stored at yr + y_off."""
        g, ocb, st = self.g, self.ocb, self.layer.stage
        loads, macs, _words, ops = self.plan(px)
        accs = [[f"a{o}_{j}" for j in range(px)] for o in range(ocb)]
        out = ["const int16_t* const rb = r;"]
        if not self.hoist:
            wtype = "uint32_t" if self.simd else "int16_t"
            out += [f"const {wtype}* wb = wq;", f"{self.opaque}(wb);"]
        for o in range(ocb):
            out += [f"int32_t {accs[o][j]} = bias{o};" for j in range(px)]
        for ky in range(g.kh):
            row_off = ky * g.dh * self.wp + col_off
            rl = []
            if self.simd:
                rl += self._simd_row(px, ky, row_off, loads, macs, ops, accs)
            else:
                cols = sorted({m.px * g.sw + kx * g.dw for m in macs for kx in (m.lo, m.hi) if kx is not None})
                for col in cols:
                    rl.append(f"const int32_t x{col} = rb[{row_off + col}];")
                for j in range(px):
                    for kx in range(g.kw):
                        col = j * g.sw + kx * g.dw
                        for o in range(ocb):
                            wv = self._weight(o, ky * g.kw + kx)
                            rl.append(f"{accs[o][j]} += x{col} * {wv};")
            out.append(block("", rl))
        zp = 0 if self.rq.folds_zero_point else st.output_zp
        sat = self.v if self.simd else None  # SSAT #8 with the zero point (the SIMD vocabularies)
        for o in range(ocb):
            for j in range(px):
                a = accs[o][j]
                out.append(self.rq.stmt(a, f"oc + {o}" if o else "oc", str(o) if self.dbl else None))
                out.append(clamp_store(a, zp, st.act_min, st.act_max, f"yr[{y_off + j * g.n_out + o}]", sat))
        return block("", out)
