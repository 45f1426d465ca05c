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

  `band` (docs/kernels.md §12.2): 0 holds every plane whole; B > 0 holds the plane rows of B output rows at a
  time (`Geometry.band_rows`), band after band: the rows shared with the previous band moved up by memmove,
  the others copied from the input or zeroed outside it (the padding columns stay zero from the first
  memset), then every output channel over the band's rows. Same plane values at the same offsets, so the same
  sums; the scratch shrinks to the band's rows for the halo moved and each channel's set-up once per band
  (`plane_cost`; the default band is the one of least scratch within BAND_TOLERANCE of the whole plane's cost).

`algo = mve` (Helium vocabularies only: `ctx.isa.mve`; the branch does not exist elsewhere, so other targets'
spaces are unchanged): the NHWC input read in place (no scratch), vectors of channels, of one input channel's
outputs or of a window row's taps, the vector requantization; knobs `lanes`, `px_block`, `mve_oc`,
`ky_unroll`, `share`. See the "Helium (MVE)" section below and docs/kernels.md §11.6.

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

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, define_helper, register
from utvm.compiler.kernels._gemm import MAX_ACCUMULATORS, words_table
from utvm.compiler.kernels._window import Axis, origin_stmt, tap_range
from utvm.compiler.kernels.cemit import block, for_loop, lines, offset_term
from utvm.compiler.kernels.conv import (
    accumulator_bound,
    direct,
    direct_cost,
    direct_default,
    direct_knobs,
    direct_scratch,
    int8_stage,
)
from utvm.compiler.kernels.isa import PortableC
from utvm.compiler.kernels.requant import (
    MveOperands,
    OutputStage,
    Requant,
    clamp_store,
    mve_operands,
    mve_reason,
    mve_requant_helper,
    mve_requant_right_helper,
)
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
#: `band`: output rows whose plane rows are in scratch at a time (0: the whole plane)
BANDS = (0, 1, 2, 4, 8, 16)
BAND = Knob("band", BANDS, "output rows per band of the planes (0: the whole plane in scratch at once)")
#: the default band is the one of least scratch whose estimated cost is within this fraction of the whole plane's
BAND_TOLERANCE = 0.01
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

    def band_rows(self, band: int) -> int:
        """Plane rows a band of `band` output rows reads (0: the whole plane's)."""
        if band == 0:
            return self.plane_h
        return (band - 1) * self.sh + (self.kh - 1) * self.dh + 1

    def band_size(self, band: int) -> int:
        """Elements of one plane of a band, a multiple of 4 (`plane_size` for the whole plane)."""
        if band == 0:
            return self.plane_size()
        return (self.band_rows(band) * self.plane_w() + 3) // 4 * 4

    def band_fills(self, band: int) -> tuple[int, int]:
        """(input rows copied, plane rows zeroed) over all the bands of `band` output rows (`_Plane._bands`)."""
        halo = self.halo(band)
        copied = zeroed = 0
        for oy0 in range(0, self.oh, band):
            bn = min(band, self.oh - oy0)
            r0 = halo if oy0 else 0
            for r in range(r0, self.band_rows(bn)):
                iy = oy0 * self.sh - self.pt + r
                if 0 <= iy < self.h:
                    copied += 1
                else:
                    zeroed += 1
        return copied, zeroed

    def halo(self, band: int) -> int:
        """Plane rows the next band shares with this one (moved, not copied again)."""
        return max(0, self.band_rows(band) - band * self.sh) if band else 0


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

def plane_scratch(g: Geometry, pt: Schedule) -> int:
    """Bytes of scratch a plane point asks for: `c_block` int16 planes of the whole input or of a band."""
    return 2 * pt["c_block"] * g.band_size(pt.get("band", 0))


def plane_cost(g: Geometry, pt: Schedule, simd: bool) -> float:
    """Estimated instructions of one call of a plane point (a static model for ranking points that trade speed
    for scratch; the tuner measures): the blocks' plane and weight loads and multiply-accumulates (from the
    row plans the kernel emits), the requantization and store of each output, the copy into the planes, and
    per band the halo rows moved and each output channel's set-up again."""
    px, ocb, cb, band = pt["px_block"], pt["oc_block"], pt["c_block"], pt.get("band", 0)
    aligned = simd and (px * g.sw) % 2 == 0

    def block_cost(npx: int) -> float:
        loads, macs = row_plan(g.kw, g.dw, g.sw, npx, aligned or not simd)
        if simd:
            words, _ops = weight_words(macs)
            x = (len(loads) + 1) // 2 if aligned else len(loads)
            w = 0 if pt["w_load"] == "reg" else ocb * ((len(words) + 1) // 2)
            row = x + w + len(macs) * ocb
        else:
            row = len({m.px * g.sw + k * g.dw for m in macs for k in (m.lo, m.hi) if k is not None}) + \
                2 * npx * g.kw * ocb
        return g.kh * row + 7 * npx * ocb + 4

    nb, tail = divmod(g.ow, px)
    per_row = nb * block_cost(px) + (block_cost(tail) if tail else 0) + 4
    groups = g.n_out // ocb
    blocks = -(-g.c // cb)
    macs = g.n * groups * g.oh * per_row
    bands = 1 if band == 0 else -(-g.oh // band)
    halo = g.halo(band)
    rows, zeroed = (g.h, 0) if band == 0 else g.band_fills(band)
    per_value = 2 if simd and cb == 4 else 5
    copy = g.n * blocks * (rows * g.w * cb * per_value + zeroed * cb * (g.plane_w() // 8 + 12))
    shift = g.n * blocks * (bands - 1) * cb * (halo * g.plane_w() + 20) if halo else 0
    setup = g.n * bands * groups * (24 + 3 * ocb)
    return float(macs + copy + shift + setup + plane_scratch(g, pt) / 8)


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
             "copy_unroll": copy_default, "w_load": "mem", "no_sched": simd, "band": 0}
    # the planes in bands of output rows where that costs (by the model) no more than BAND_TOLERANCE: the
    # least scratch among those
    whole = plane_cost(g, plane, simd)
    bands = [b for b in BANDS[1:] if b < g.oh
             and plane_cost(g, {**plane, "band": b}, simd) <= whole * (1 + BAND_TOLERANCE)]
    if bands:
        plane["band"] = min(bands, key=lambda b: (plane_scratch(g, {**plane, "band": b}), -b))
    direct_point = {"algo": "direct", **direct_default(p)}
    default = plane if ctx.target.is_cortex_m and plane_bytes <= DEFAULT_SCRATCH else direct_point
    mve = ctx.isa.mve
    if mve and mve_legal(layer, mve_default(layer)) is None:
        default = {**mve_default(layer), "share": ctx.task_count > 1}

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":
            return None
        if pt["algo"] == "mve":
            return mve_legal(layer, pt)
        if pt["px_block"] > g.ow:
            return f"px_block {pt['px_block']} > the {g.ow} output columns"
        if g.m % pt["oc_block"]:
            return f"oc_block {pt['oc_block']} does not divide the depth multiplier {g.m}"
        if pt["px_block"] * pt["oc_block"] > MAX_ACCUMULATORS:
            return f"{pt['px_block']} x {pt['oc_block']} accumulators exceed {MAX_ACCUMULATORS} registers"
        if pt["c_block"] > 1 and g.c < pt["c_block"]:
            return f"c_block {pt['c_block']} > the {g.c} input channels"
        if pt["band"] and pt["band"] >= g.oh:
            return f"band {pt['band']}: the {g.oh} output rows are one band (band 0)"
        if plane_scratch(g, pt) > MAX_SCRATCH:
            return f"{pt['c_block']} planes of {plane_scratch(g, pt) // (2 * pt['c_block'])} int16 values exceed " \
                   f"{MAX_SCRATCH} bytes of scratch"
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

    branches: dict[str, tuple[Knob, ...]] = {
        "direct": direct_knobs(p),
        "plane": (PX_BLOCK, OC_BLOCK, C_BLOCK, requant_knob(), ROW_UNROLL, COPY_UNROLL, W_LOAD, no_sched_knob(),
                  BAND)}
    if mve:  # Helium vectors: a branch only where the vocabulary has them (other targets' spaces unchanged)
        branches["mve"] = (LANES, PX_BLOCK, MVE_OC, KY_UNROLL, SHARE)

    def scratch(pt: Schedule) -> int:
        if pt["algo"] == "plane":
            return plane_scratch(g, pt)
        return direct_scratch(p, layer.stage) if pt["algo"] == "direct" else 0

    def cost(pt: Schedule) -> float:
        if pt["algo"] == "plane":
            return plane_cost(g, pt, simd)
        if pt["algo"] == "direct":
            return direct_cost(p)
        # Helium: about two instructions per four multiply-accumulates (vector loads and VMLA/VMLADAVA), no copy
        return float(g.n * g.oh * g.ow * g.n_out * (g.kh * g.kw / 2 + 4))

    return Space.conditional(
        MVE_ALGO if mve else ALGO, branches,
        default=default, legal=legal, legacy=LEGACY,
        added={**direct_default(p), "copy_unroll": copy_default, "band": 0},
        scratch=scratch, cost=cost, memory_knobs=("algo", "c_block", "band"))


@register("depthwise_conv2d", space=depthwise_space)
def depthwise(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "plane":
        return _Plane(ctx, Layer.of(ctx, ctx.params()), ctx.schedule).code()
    if ctx.schedule.get("algo") == "mve":
        return _Mve(ctx, Layer.of(ctx, ctx.params()), ctx.schedule).code()
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
        self.band = int(s.get("band", 0))
        self.rows = g.band_rows(self.band)  # plane rows in scratch
        self.ps = g.band_size(self.band)
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
        passes = self._pass()
        x, y = ctx.inputs[0], ctx.outputs[0]
        if g.c % cb:
            each = for_loop("j", 0, "cn", passes)
        elif cb > 1:
            each = for_loop("j", 0, cb, passes)
        else:
            each = block("", ["const int32_t j = 0;", passes])
        if self.band:
            chan = self._bands(each)
        else:
            chan = lines(self._copy(), each)
        if g.c % cb:
            chan = lines(f"const int32_t cn = {g.c} - c0 < {cb} ? {g.c} - c0 : {cb};", chan)
        batch = [f"const int8_t* const xb = {x} + b * {g.h * g.w * g.c};",
                 f"int8_t* const yb = {y} + b * {g.oh * g.ow * g.n_out};",
                 block(f"for (int32_t c0 = 0; c0 < {g.c}; c0 += {cb})", chan)]
        return lines(head, for_loop("b", 0, g.n, batch), "return 0;"), scratch

    def _bands(self, each: str) -> str:
        """C of one block of channels in bands of `band` output rows: the band's plane rows (the rows it shares
        with the previous band moved up, the others copied from the input, or zeroed outside it), then every
        output channel over the band's rows (`each`, which reads oy0 and bn)."""
        g, band, rows = self.g, self.band, self.rows
        halo = g.halo(band)
        cn = "cn" if g.c % self.cb else str(self.cb)
        fresh = [f"const int32_t r0 = oy0 > 0 ? {halo} : 0;  /* rows kept from the previous band */"
                 if halo else "const int32_t r0 = 0;"]
        if halo:  # the shared rows: the last `halo` rows of every plane become its first
            move = f"memmove(planes + j * {self.ps}, planes + j * {self.ps} + {(rows - halo) * self.wp}, " \
                   f"{2 * halo * self.wp});"
            fresh.append(block("if (oy0 > 0)", for_loop("j", 0, cn, move)))
        zero = for_loop("j", 0, cn, f"memset(planes + j * {self.ps} + r * {self.wp}, 0, {2 * self.wp});")
        copy_row = block(f"if (iy < 0 || iy >= {g.h})", zero) + " else " + block("", self._copy_row("r"))
        bn = f"const int32_t bn = {g.oh} - oy0 < {band} ? {g.oh} - oy0 : {band};  /* output rows of the band */"
        need = f"(bn - 1) * {g.sh} + {(g.kh - 1) * g.dh + 1}"  # the plane rows bn output rows read
        fill = for_loop("r", "r0", need, [f"const int32_t iy = oy0 * {g.sh} - {g.pt} + r;", copy_row])
        return block(f"for (int32_t oy0 = 0; oy0 < {g.oh}; oy0 += {band})", [bn, *fresh, fill, each])

    # the copy into planes ------------------------------------------------------------------------------------
    def _copy(self) -> str:
        """C filling the whole planes 0..cn-1 (or cb) from input channels c0.. of batch xb (band 0)."""
        g = self.g
        return for_loop("iy", 0, g.h, self._copy_row(f"iy + {g.pt}" if g.pt else "iy"))

    def _copy_row(self, row: str) -> str:
        """C copying input row iy (channels c0.. of batch xb) into plane row `row` of planes 0..cn-1 (or cb)."""
        g = self.g
        if self.cb == 1:
            return self._bytewise("1", row)
        if not self.simd:
            return self._bytewise("cn" if g.c % self.cb else str(self.cb), row)
        words = self._copy_words(row)
        if g.c % self.cb:
            return f"{block(f'if (cn == {self.cb})', words)} else {block('', self._bytewise('cn', row))}"
        return words

    def _bytewise(self, cn: str, row: str) -> str:
        """C filling plane row `row` of planes 0..cn-1 from input row iy value by value."""
        g = self.g
        pixel = [for_loop("j", 0, cn, f"d[j * {self.ps} + ix] = (int16_t)((int32_t)xs[j] + input_offset);"),
                 f"xs += {g.c};"]
        return lines(f"const int8_t* xs = xb + iy * {g.w * g.c} + c0;",
                     f"int16_t* const d = planes + ({row}) * {self.wp} + {g.pl};", for_loop("ix", 0, g.w, pixel))

    def _copy_words(self, row: str) -> str:
        """C filling plane row `row` of the 4 planes from input row iy by words (SXTAB16, PKHBT/PKHTB)."""
        g, v = self.g, self.v
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
                 f"uint8_t* d = (uint8_t*)(void*)(planes + ({row}) * {self.wp} + {g.pl});"]
        if self.s["copy_unroll"]:  # written out: constant offsets
            parts += [block("", pair_words)] * pairs
        else:
            parts.append(for_loop("q", 0, pairs, pair_words))
        if g.w % 2:
            parts.append(block("", last))
        return lines(parts)

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
        out_row = "(oy0 + oy)" if self.band else "oy"
        row: list[str] = [f"const int16_t* r = plane + oy * {g.sh * self.wp};",
                          f"int8_t* yr = yo + {out_row} * {g.ow * g.n_out};"]
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
        out.append(for_loop("oy", 0, "bn" if self.band else g.oh, row))
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


# --- Helium (MVE) -------------------------------------------------------------------------------------------------
# `algo = mve` (vocabularies with `mve`): the NHWC input read in place (no scratch), vectors of int32 or int16
# lanes, the vector requantization of four outputs at once (requant.mve_requant_helper / _right_helper), then the
# output zero point, the clamp and a narrowing store. What a vector's lanes hold (`lanes`):
#
# - "chan" (depth multiplier 1): four channels of a pixel. Per tap, VLDRB.S32 widens four input bytes and four
#   weights; VMUL + VADD accumulate (MVE has no lane-wise multiply-accumulate of two integer vectors). A block of
#   `px_block` pixels loads each weight vector once and each input column once (pixels of a stride-1 row share
#   their columns).
# - "mult": four of the M outputs of one input channel (channel c feeds outputs c*M .. c*M + M-1, adjacent in
#   the output and in each tap's weights): VMLA by the tap's input value as a scalar, one instruction per tap
#   and four outputs.
# - "taps": up to eight taps of a window row as int16 lanes (x - input zero point, in [-255, 255]): a contiguous
#   widening load when the row's taps are adjacent bytes (one channel, no dilation), else a gather with the
#   constant byte offsets of the taps; VMLADAVA sums the eight products with a weight row into one output's
#   scalar accumulator (micro_speech: 8-tap rows, 8 outputs sharing each input row).
#
# Weights are re-laid at compile time (the same bytes, no padding beyond a partial vector) in the order the
# kernel reads them: per block of outputs, tap after tap, so one pointer walks the table. The output columns are
# grouped at compile time into segments whose windows have the same in-bounds taps (`segments`: KWS's left
# column, its three inner columns, its right column); a segment runs blocks of `px_block` pixels with constant
# tap offsets (at most MAX_BORDER_SEGMENTS border classes a side; more take their tap range per pixel at run
# time). Rows whose windows lie inside the input in y take the constant row range (written out with
# `ky_unroll`), the others their run-time range. Windows wholly inside the input start "chan" and "mult" from the
# folded accumulator bias - zp * sum(w) (conv.int8_stage's `init`) and read x as it is, the same integer; the
# others use TFLite's form bias + sum (x - zp) * w over their in-bounds taps ("taps" covers a clipped row by a
# tail-predicated load of its in-bounds taps, zeros in the other lanes). Outputs that do not fill a vector end
# with a predicated block (loads read no byte past a tensor, the store writes only real outputs). Exactness is
# the plane kernel's argument: every product is exact in its lane, VMUL/VADD/VMLA/VMLADAVA wrap instead of
# saturating, and the proven bound keeps every partial sum in int32.

LANES = Knob("lanes", ("chan", "mult", "taps"),
             "vector lanes: 4 channels (depth multiplier 1), 4 outputs of one input channel, or 8 taps of a row")
MVE_OC = Knob("mve_oc", (4, 8), "outputs per block: one or two vectors of 4 (taps: scalar accumulators)")
KY_UNROLL = Knob("ky_unroll", (False, True), "an interior window's rows written out (else a ky loop)")
SHARE = Knob("share", (False, True), "one function per file for every layer of this workload and schedule (its "
             "tables and numbers as parameters): code size for a call per layer")
MVE_ALGO = Knob("algo", ("direct", "plane", "mve"), "conv's scalar kernel, int16 channel planes or Helium vectors")
#: MVE accumulators per block: int32x4 vectors ("chan", "mult") and scalars ("taps")
MVE_VECTOR_ACCS = 4
MVE_SCALAR_ACCS = 8
#: interior windows of up to this many taps have their rows written out by default
MVE_UNROLL_TAPS = 16

# GCC's order for MVE sums: TER moves a chain of VADDs (plain vector `+` in GIMPLE) after every product it adds,
# and the first scheduling pass hoists loads; both keep every product live at once and spill Q registers. With
# both off for the function the accumulations stay where they are written (other compilers ignore it).
define_helper("mve_in_order", """\
#if defined(__GNUC__) && !defined(__clang__)
#define TVM_MVE_IN_ORDER __attribute__((optimize("no-schedule-insns", "no-tree-ter")))
#else
#define TVM_MVE_IN_ORDER
#endif""", "TVM_MVE_IN_ORDER")


# VLDRB.S32 with a post-incremented base: GCC 12 addresses every widening load past 127 bytes from its base with
# an add of its own, so a row of input columns C bytes apart walks one pointer instead (the memory operand orders
# the load after the stores it may depend on; `step`: a literal in [-127, 127]; the widening load's encoding takes a
# low register, r0-r7, as its base).
MVE_LOCAL_HELPERS = {
    "TVM_VLDRB_S32_PI": """\
#define TVM_VLDRB_S32_PI(x, p, step) \\
  __asm__("vldrb.s32 %q0, [%1], #" #step : "=w"(x), "+l"(p) : "m"(*(const int8_t(*)[4])(p)))""",
}


def mve_local(ctx: KernelContext, name: str) -> str:
    """Emit the local helper `name` (MVE_LOCAL_HELPERS) into ctx's file once; returns its name."""
    if name not in ctx.file.names:
        ctx.file.names.add(name)
        ctx.file.decls.insert(0, MVE_LOCAL_HELPERS[name])
    return name


def interior(ax: Axis) -> tuple[int, int]:
    """The outputs [a, b) along `ax` whose every tap lies inside the input ((0, 0) if none do; the origins grow
    with the output index, so they are one range)."""
    inside = [o for o, s in enumerate(ax.origins()) if s >= ax.lo and s + (ax.k - 1) * ax.dilation < ax.hi]
    return (inside[0], inside[-1] + 1) if inside else (0, 0)


def axes(g: Geometry) -> tuple[Axis, Axis]:
    return (Axis(g.oh, 0, g.h, g.kh, g.sh, g.dh, g.pt), Axis(g.ow, 0, g.w, g.kw, g.sw, g.dw, g.pl))


def mve_right_only(st: OutputStage) -> bool:
    """The short vector requantization (every shift <= -1) applies."""
    return max(st.shift) <= -1


def mve_legal(layer: Layer, pt: Schedule) -> str | None:
    """None if MVE point `pt` is legal for `layer`, else why not."""
    g, st = layer.g, layer.stage
    lanes, px, oc = pt["lanes"], pt["px_block"], pt["mve_oc"]
    if lanes == "chan" and g.m != 1:
        return f"lanes chan needs depth multiplier 1 (it is {g.m})"
    if px > g.ow:
        return f"px_block {px} > the {g.ow} output columns"
    if lanes == "chan" and oc > 4 and g.n_out <= 4:
        return f"mve_oc {oc} > the {g.n_out} output channels"
    if lanes != "chan" and oc > 4 and g.m <= 4:
        return f"mve_oc {oc} > the depth multiplier {g.m}"
    if lanes == "taps":
        if px * oc > MVE_SCALAR_ACCS:
            return f"{px} x {oc} scalar accumulators exceed {MVE_SCALAR_ACCS}"
        if (g.kw - 1) * g.dw * g.c > 0xFFFF:
            return "a window row spans more than the 16-bit offsets of a gather"
    elif px * oc // 4 > MVE_VECTOR_ACCS:
        return f"{px} x {oc // 4} vector accumulators exceed {MVE_VECTOR_ACCS}"
    if pt["ky_unroll"] and g.kh == 1:
        return "ky_unroll: one window row, nothing to unroll"
    reason = mve_reason(st.rounding, st.multiplier, st.shift, st.bound, mve_right_only(st))
    return f"the MVE requantization: {reason}" if reason else None


def mve_default(layer: Layer) -> Schedule:
    """The MVE heuristic (measured on QEMU: KWS, micro_speech, a 16x16x32 3x3 layer): channels as lanes for depth
    multiplier 1, taps as lanes for rows of 4 taps or more (micro_speech's 8-tap rows), else outputs of one input
    channel; vector lanes take four pixels per block where a row has them (each weight vector loaded once for
    them, 8-11% fewer instructions than two)."""
    g = layer.g
    lanes = "chan" if g.m == 1 else ("taps" if g.kw >= 4 and (g.kw - 1) * g.dw * g.c <= 0xFFFF else "mult")
    oc = 8 if lanes != "chan" and g.m > 4 else 4
    px = 1 if lanes == "taps" else max(b for b in (1, 2, 4) if b <= g.ow)
    return {"algo": "mve", "lanes": lanes, "px_block": px, "mve_oc": oc,
            "ky_unroll": g.kh > 1 and g.kh * g.kw <= MVE_UNROLL_TAPS}


def _padded(values: Sequence[int] | np.ndarray, n: int) -> np.ndarray:
    """`values` as int64 padded with zeros to a multiple of 4 (a vector of 4 starting inside never reads past)."""
    v = np.zeros(-(-n // 4) * 4, np.int64)
    v[:n] = np.broadcast_to(np.asarray(values, np.int64), (n,))
    return v


@dataclass(frozen=True)
class Block:
    """Outputs first .. first + n - 1 of a group (chan: all outputs; mult, taps: the M of one input channel),
    in `nvec` vectors of 4 (the last one partial when n < 4 * nvec)."""

    first: int
    n: int

    @property
    def nvec(self) -> int:
        return -(-self.n // 4)


def blocks(size: int, per: int, lanes: str) -> list[Block]:
    """A group of `size` outputs in blocks of `per` (the remainder: single vectors, or one block for taps)."""
    full = size // per * per
    out = [Block(j, per) for j in range(0, full, per)]
    if lanes == "taps":
        return out + ([Block(full, size - full)] if size > full else [])
    return out + [Block(j, min(4, size - j)) for j in range(full, size, 4)]


@dataclass(frozen=True)
class Segment:
    """Output columns [start, end) whose windows have the same in-bounds taps [klo, khi) (None: a border
    segment left to the per-pixel form, its taps found at run time)."""

    start: int
    end: int
    klo: int | None
    khi: int | None


#: border column classes (per side) written out with constant taps; more are handled per pixel
MAX_BORDER_SEGMENTS = 2


def segments(ax: Axis) -> list[Segment]:
    """The output columns of `ax` grouped by their windows' in-bounds taps (the origins grow with the output,
    so each side's border classes are consecutive)."""
    runs: list[list[int]] = []
    for o, s in enumerate(ax.origins()):
        klo = 0 if s >= ax.lo else min(ax.k, -(-(ax.lo - s) // ax.dilation))
        khi = max(0, min(ax.k, -(-(ax.hi - s) // ax.dilation)))
        if runs and runs[-1][2:] == [klo, khi]:
            runs[-1][1] = o + 1
        else:
            runs.append([o, o + 1, klo, khi])
    inner = [i for i, r in enumerate(runs) if r[2:] == [0, ax.k]]
    out: list[Segment] = []
    if not inner:
        return [Segment(0, ax.out, None, None)] if len(runs) > 2 * MAX_BORDER_SEGMENTS else [
            Segment(a, b, lo, hi) for a, b, lo, hi in runs]
    first, last = inner[0], inner[-1]
    left, right = runs[:first], runs[last + 1:]
    if len(left) > MAX_BORDER_SEGMENTS:
        left = [[left[0][0], left[-1][1], None, None]]
    if len(right) > MAX_BORDER_SEGMENTS:
        right = [[right[0][0], right[-1][1], None, None]]
    for a, b, lo, hi in [*left, *runs[first:last + 1], *right]:
        out.append(Segment(a, b, lo, hi))
    return out


class _Mve:
    """Emits the MVE kernel of one layer for one schedule (see the section comment above)."""

    def __init__(self, ctx: KernelContext, layer: Layer, s: Schedule) -> None:
        self.ctx, self.layer, self.s = ctx, layer, s
        self.g, self.st = g, _ = layer.g, layer.stage
        self.lanes, self.px, self.ocb, self.ky_unroll = s["lanes"], s["px_block"], s["mve_oc"], s["ky_unroll"]
        self.ay, self.ax = axes(g)
        self.oy_a, self.oy_b = interior(self.ay)
        self.segs = segments(self.ax)
        #: taps: 8-lane chunks of a window row, and whether its taps are adjacent bytes
        self.chunks = -(-g.kw // 8)
        self.contiguous = g.c * g.dw == 1
        self.group = g.n_out if self.lanes == "chan" else g.m
        self.blocks = blocks(self.group, self.ocb, self.lanes)
        self.taps = g.kh * g.kw
        off = 0
        for bk in self.blocks:
            off += self.taps * (bk.n if self.lanes == "taps" else 4 * bk.nvec)
        #: bytes of re-laid weights per group (chan: all outputs; else one input channel's)
        self.group_w = off
        self.pitch = g.dh * g.w * g.c  # bytes between the input rows of two window rows
        self._tables: dict[str, str] = {}
        #: one function per file for every layer of this workload and schedule, the layer's data as parameters
        self.share = bool(s.get("share", False))
        self.used: set[str] = set()

    def table(self, name: str) -> str:
        """The C name of a table of the layer, emitted on first use: "bias", "init" (bias - zp * sum w) or "w"
        (re-laid); in a shared function, the parameter that receives it."""
        if self.share:
            self.used.add(name)
            return {"bias": "bias", "init": "init", "w": "wt"}[name]
        return self.layer_table(name)

    def layer_table(self, name: str) -> str:
        """The layer's own table `name` (emitted once)."""
        if name not in self._tables:
            g = self.g
            if name == "bias":
                bias = self.layer.bias if self.layer.bias is not None else np.zeros(g.n_out, np.int64)
                self._tables[name] = self.ctx.table("int32_t", _padded(bias, g.n_out), "bias")
            elif name == "init":
                assert self.st.init is not None
                self._tables[name] = self.ctx.table("int32_t", _padded(self.st.init, g.n_out), "init")
            else:
                self._tables[name] = self.ctx.table("int8_t", self._weights(), "wdw")
        return self._tables[name]

    def _weights(self) -> np.ndarray:
        """The weights in reading order: per group (chan: one; else per input channel), per block, tap after tap
        (ky, kx) the block's outputs padded to whole vectors; for taps, row after row (ky) each output's kw
        taps (then 8 bytes of padding: a row's 8-lane loads may read past the last row)."""
        g, w = self.g, self.layer.w  # [ky, kx, oc]
        out: list[np.ndarray] = []
        for gi in range(1 if self.lanes == "chan" else g.c):
            base = gi * self.group
            for bk in self.blocks:
                sl = w[:, :, base + bk.first:base + bk.first + bk.n]
                if self.lanes == "taps":
                    out.append(sl.transpose(0, 2, 1).reshape(-1))  # [ky][j][kx]
                else:
                    pad = np.zeros((g.kh, g.kw, 4 * bk.nvec), np.int64)
                    pad[:, :, :bk.n] = sl
                    out.append(pad.reshape(-1))
        if self.lanes == "taps":
            out.append(np.zeros(8, np.int64))
        return np.concatenate(out)

    def code(self) -> KernelCode:
        ctx, g, st = self.ctx, self.g, self.st
        ctx.isa.use_mve()
        right = mve_right_only(st)
        self.rq = (mve_requant_right_helper if right else mve_requant_helper)(ctx, st.rounding)
        layer_ops = mve_operands(ctx, st.multiplier, st.shift, right_only=right, hint="rq")
        rq_names = tuple(f"rq{i}" for i in range(len(layer_ops.terms)))
        self.ops = MveOperands(right, rq_names, layer_ops.per_output) if self.share else layer_ops
        bound = accumulator_bound(ctx, self.layer.p)  # (a CompileError if the accumulator could overflow)
        if self.share:
            self.zp, lo, hi = "output_zp", "act_min", "act_max"
            head = []
        else:
            self.zp, lo, hi = str(st.output_zp) if st.output_zp else "", str(st.act_min), str(st.act_max)
            head = [bound, f"const int32_t input_offset = {-st.input_zp};  /* -input zero point */"]
        head += ["(void)input_offset;", f"const int32x4_t act_lo = vdupq_n_s32({lo});",
                 f"const int32x4_t act_hi = vdupq_n_s32({hi});"]
        if self.lanes == "taps" and not self.contiguous:
            head += [f"const uint16x8_t tap_offsets = vmulq_n_u16(vidupq_n_u16(0, 1), {g.dw * g.c});",
                     "(void)tap_offsets;"]
        elif self.lanes != "taps" and any(bk.n % 4 for bk in self.blocks):
            head.append(f"const mve_pred16_t tail_pred = {ctx.isa.pred32(range(self.group % 4))};")
        rows = self._rows()
        if self.st.init is not None and self.lanes != "taps":
            head.append("/* windows inside the input: the accumulator starts from bias - zp * sum w (x read as "
                        "it is) */")
        x, y = ("x", "y") if self.share else (ctx.inputs[0], ctx.outputs[0])
        batch = [f"const int8_t* const xb = {x} + b * {g.h * g.w * g.c};", "(void)xb;",
                 f"int8_t* const yb = {y} + b * {g.oh * g.ow * g.n_out};", rows]
        core = lines(head, for_loop("b", 0, g.n, batch), "return 0;")
        attrs = ctx.helper("mve_in_order")
        if not self.share:
            return KernelCode(body=core, attributes=attrs)
        # the shared function: every table of the layer, its operands and numbers are parameters
        tables = ["w", "bias"] + (["init"] if self.st.init is not None and self.lanes != "taps" else [])
        ptype = "const int32_t* " if layer_ops.per_output else "int32_t "
        params = ["const int8_t* x", "int8_t* y", *(f"const {'int8_t' if t == 'w' else 'int32_t'}* {self.table(t)}"
                                                   for t in tables),
                  *(f"{ptype}{n}" for n in rq_names), "int32_t input_offset", "int32_t output_zp", "int32_t act_min",
                  "int32_t act_max"]
        unused = [f"(void){self.table(t)};" for t in tables] + ["(void)output_zp;"]
        name = self._shared_name(attrs, tables, layer_ops.per_output)
        if name not in ctx.file.names:
            ctx.file.names.add(name)
            ctx.file.decls.append(f"{attrs} " + block(f"static int32_t {name}({', '.join(params)})", [*unused, core]))
        self.share = False  # the call site passes the layer's own tables
        args = [ctx.inputs[0], ctx.outputs[0], *(self.layer_table(t) for t in tables), *layer_ops.terms,
                str(-st.input_zp), str(st.output_zp), str(st.act_min), str(st.act_max)]
        return KernelCode(body=lines(bound, f"return {name}({', '.join(args)});"))

    def _shared_name(self, attrs: str, tables: list[str], per_output: bool) -> str:
        """The file-scope name of the shared function: a digest of everything its text is made of (vocabulary,
        geometry, schedule, requantization form, which tables it takes), never of the layer's numbers."""
        key = {"isa": self.ctx.isa.name, "attrs": attrs, "geometry": asdict(self.g),
               "schedule": {k: self.s[k] for k in sorted(self.s) if k != "share"}, "rounding": self.st.rounding,
               "right": mve_right_only(self.st), "per_output": per_output, "tables": tables}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
        return f"{self.ctx.file.prefix}_dw_{digest}"

    # the loops over pixels ---------------------------------------------------------------------------------------
    def _rows(self) -> str:
        """The output rows: rows whose windows lie inside the input in y take the constant row range (written
        out with ky_unroll), the others their run-time range ky_lo .. ky_hi."""
        g = self.g
        row = [origin_stmt("iy0", "oy", self.ay), f"int8_t* const yr = yb + oy * {g.ow * g.n_out};"]
        full = "unrolled" if self.ky_unroll else "loop"
        if not self.ay.clips:
            return for_loop("oy", 0, g.oh, [*row, self._row(full)])
        clipped = lines(tap_range("ky_lo", "ky_hi", "iy0", self.ay), "(void)ky_lo;", "(void)ky_hi;",
                        self._row("clipped"))
        if self.ky_unroll and self.oy_b > self.oy_a:
            return for_loop("oy", 0, g.oh, [*row, block(f"if (oy >= {self.oy_a} && oy < {self.oy_b})",
                                                        self._row(full)) + " else " + block("", clipped)])
        return for_loop("oy", 0, g.oh, [*row, clipped])

    def _row(self, rows: str) -> str:
        """One output row, segment by segment (`rows`: "unrolled" / "loop": the kh rows of every window;
        "clipped": rows ky_lo .. ky_hi)."""
        out = []
        for seg in self.segs:
            if seg.klo is None:
                out.append(block(f"for (int32_t ox = {seg.start}; ox < {seg.end}; ++ox)", self._pixels(1, seg, rows)))
                continue
            n = seg.end - seg.start
            px = min(self.px, n)
            full, tail = n // px * px, n % px
            if full == px:
                out.append(block("", [f"const int32_t ox = {seg.start};", self._pixels(px, seg, rows)]))
            else:
                out.append(block(f"for (int32_t ox = {seg.start}; ox < {seg.start + full}; ox += {px})",
                                 self._pixels(px, seg, rows)))
            if tail:
                out.append(block("", [f"const int32_t ox = {seg.start + full};", self._pixels(tail, seg, rows)]))
        return lines(out)

    def _pixels(self, npx: int, seg: Segment, rows: str) -> str:
        """C for `npx` pixels ox .. of output row oy of segment `seg`, every output channel."""
        g = self.g
        out = [f"int8_t* const yo = yr + ox * {g.n_out};"]
        row0 = "iy0" if rows != "clipped" else f"(iy0 + ky_lo{f' * {g.dh}' if g.dh > 1 else ''})"
        if seg.klo is None:
            out += [origin_stmt("ix0", "ox", self.ax), tap_range("kx_lo", "kx_hi", "ix0", self.ax),
                    "const int32_t nkx = kx_hi - kx_lo;"]
            col0 = f"ix0 + kx_lo{f' * {g.dw}' if g.dw > 1 else ''}"
            if self.lanes == "taps":  # the in-bounds taps of each 8-lane chunk of a row (none for nkx <= 8k)
                out += [f"const mve_pred16_t clip_pred{k} = vctp16q((uint32_t)(nkx > {8 * k} ? nkx - {8 * k} : 0));"
                        for k in range(self.chunks)]
        else:
            col0 = f"ox{f' * {g.sw}' if g.sw > 1 else ''}{offset_term(seg.klo * g.dw - g.pl)}"
        # the first in-bounds tap of pixel 0 (row ky_lo or 0, tap klo), as an offset: a window wholly in the
        # padding forms no pointer
        out += [f"const int32_t xoff = ({row0} * {g.w} + {col0}) * {g.c};", "(void)xoff;"]
        wt = self.table("w")
        emit = self._taps_block if self.lanes == "taps" else self._vec_block
        full = [bk for bk in self.blocks if bk.n == self.ocb]
        rest = self.blocks[len(full):]
        if self.lanes == "chan":
            group = [f"const int8_t* wq = {wt};"]
        else:
            group = [f"const int32_t oc0 = ic * {g.m};" if g.m > 1 else "const int32_t oc0 = ic;",
                     f"const int8_t* wq = {wt} + ic * {self.group_w};"]
        if full:
            start = "0" if self.lanes == "chan" else "oc0"
            group.append(block(f"for (int32_t oc = {start}; oc < {start} + {len(full) * self.ocb}; oc += {self.ocb})",
                               emit(npx, full[0], seg, rows)))
        for bk in rest:
            oc = str(bk.first) if self.lanes == "chan" else f"oc0{offset_term(bk.first)}"
            group.append(block("", [f"const int32_t oc = {oc};", emit(npx, bk, seg, rows)]))
        group.append("(void)wq;")
        out.append(block("", group) if self.lanes == "chan" else for_loop("ic", 0, g.c, group))
        return lines(out)

    def _window_rows(self, rows: str, body_of: Callable[[str, str], list[str]], empty: bool) -> str:
        """The window rows of a block: `body_of(x, ky)` (x: the row's input offset from xoff, ky: the C expression
        of the window row) written out, looped over 0 .. kh, or looped over ky_lo .. ky_hi ("clipped")."""
        g = self.g
        if empty:
            return ""
        if rows == "unrolled":
            return lines(block("", body_of(str(ky * self.pitch), str(ky))) for ky in range(g.kh))
        if rows == "loop":
            return for_loop("ky", 0, g.kh, body_of(f"ky * {self.pitch}", "ky"))
        return block("for (int32_t ky = ky_lo; ky < ky_hi; ++ky)", body_of(f"(ky - ky_lo) * {self.pitch}", "ky"))

    def _vec_block(self, npx: int, bk: Block, seg: Segment, rows: str) -> str:
        """C for "chan" / "mult" lanes: `npx` pixels x the outputs oc .. of block `bk` (the weight pointer wq at
        the block's weights, left after them)."""
        g = self.g
        chan = self.lanes == "chan"
        lane0 = "oc" if chan else "ic"
        nvec = bk.nvec
        pred = "tail_pred" if bk.n % 4 else None
        vpred = [pred if v == nvec - 1 else None for v in range(nvec)]
        accs = [[f"a{v}_{p}" for p in range(npx)] for v in range(nvec)]
        inside = rows != "clipped" and seg.klo == 0 and seg.khi == g.kw
        fold = inside and self.st.init is not None
        init = self.table("init") if fold else self.table("bias")
        out = []
        for v in range(nvec):
            first = f"oc{offset_term(4 * v)}"
            load = (f"vldrwq_z_s32(&{init}[{first}], {vpred[v]})" if vpred[v]
                    else f"vldrwq_s32(&{init}[{first}])")
            out.append(f"int32x4_t {accs[v][0]} = {load};")
            out += [f"int32x4_t {a} = {accs[v][0]};" for a in accs[v][1:]]
        step = 4 * nvec  # weight bytes per tap

        def xvec(ptr: str, v: int) -> str:
            e = f"vldrbq_z_s32({ptr}, {vpred[v]})" if vpred[v] else f"vldrbq_s32({ptr})"
            return e if fold else f"vaddq_n_s32({e}, input_offset)"

        def xscalar(ptr: str) -> str:
            return f"(int32_t)*({ptr})" if fold else f"((int32_t)*({ptr}) + input_offset)"

        def wvec(ptr: str, name: str) -> list[str]:
            return [f"const int32x4_t {name}_{v} = vldrbq_s32({ptr}{f' + {4 * v}' if v else ''});"
                    for v in range(nvec)]

        def mac(p: int, v: int, x: str, w: str) -> str:
            a = accs[v][p]
            return f"{a} = vaddq_s32({a}, vmulq_s32({x}, {w}));" if chan else f"{a} = vmlaq_n_s32({a}, {w}, {x});"

        if seg.klo is None:  # one pixel, its taps kx_lo .. kx_hi found at run time
            def generic(xrow: str, ky: str) -> list[str]:
                tap = [f"const int8_t* const xp = xr + kx * {g.dw * g.c};" if g.dw * g.c != 1
                       else "const int8_t* const xp = xr + kx;", *wvec(f"wr + kx * {step}", "w")]
                if chan:
                    tap += [mac(0, v, xvec(f"xp + {4 * v}" if v else "xp", v), f"w_{v}") for v in range(nvec)]
                else:
                    tap += [f"const int32_t xs = {xscalar('xp')};"] + [mac(0, v, "xs", f"w_{v}") for v in range(nvec)]
                return [f"const int8_t* const xr = xb + xoff + {xrow} + {lane0};",
                        f"const int8_t* const wr = wq + ({ky} * {g.kw} + kx_lo) * {step};",
                        block("for (int32_t kx = 0; kx < nkx; ++kx)", tap)]
            out.append(block("if (nkx > 0)", self._window_rows(rows, generic, False)))
        else:
            assert seg.khi is not None
            klo, khi = seg.klo, seg.khi

            def row(xrow: str, ky: str) -> list[str]:
                # the input columns of the row, each loaded once through a pointer walking along the row (post-
                # incremented loads: a constant offset past 127 bytes would cost an add per load)
                body = [f"const int8_t* xr = xb + xoff + {lane0}{'' if xrow == '0' else f' + {xrow}'};",
                        f"const int8_t* const wr = wq + {ky} * {g.kw * step}{offset_term(klo * step)};"]
                cols: dict[int, list[tuple[int, int]]] = {}
                for p in range(npx):
                    for kx in range(klo, khi):
                        cols.setdefault((kx - klo) * g.dw + p * g.sw, []).append((p, kx))
                loaded: set[int] = set()
                order = sorted(cols)
                for i, col in enumerate(order):
                    for _p, kx in cols[col]:
                        if kx not in loaded:  # each weight vector loaded once, at its first use
                            body += wvec(f"wr + {(kx - klo) * step}" if kx > klo else "wr", f"w{kx}")
                            loaded.add(kx)
                    delta = (order[i + 1] - col) * g.c if i + 1 < len(order) else 0
                    if chan and nvec == 1 and not vpred[0] and 0 < delta <= 127:  # the load walks the pointer
                        pi = mve_local(self.ctx, "TVM_VLDRB_S32_PI")
                        body += [f"int32x4_t x{col}_0;", f"{pi}(x{col}_0, xr, {delta});"]
                        if not fold:
                            body.append(f"x{col}_0 = vaddq_n_s32(x{col}_0, input_offset);")
                        delta = 0
                    elif chan:
                        body += [f"const int32x4_t x{col}_{v} = {xvec(f'xr + {4 * v}' if v else 'xr', v)};"
                                 for v in range(nvec)]
                    if chan:
                        body += [mac(p, v, f"x{col}_{v}", f"w{kx}_{v}") for p, kx in cols[col] for v in range(nvec)]
                    else:
                        body.append(f"const int32_t x{col} = {xscalar('xr')};")
                        body += [mac(p, v, f"x{col}", f"w{kx}_{v}") for p, kx in cols[col] for v in range(nvec)]
                    if delta:
                        body.append(f"xr += {delta};")
                return [block("", body)]
            out.append(self._window_rows(rows, row, khi <= klo))
        out.append(f"wq += {self.taps * step};")
        for v in range(nvec):
            first = f"oc{offset_term(4 * v)}"
            decl, ops = self._operands(first, vpred[v], f"q{v}")
            out += decl
            for p in range(npx):
                dst = f"yo + {p * g.n_out} + {first}" if p else f"yo + {first}"
                out += self._store(accs[v][p], ops, dst, vpred[v])
        return lines(out)

    def _operands(self, first: str, pred: str | None, name: str) -> tuple[list[str], str]:
        """(C declaring the requantization operands of outputs first .., the argument list naming them)."""
        if pred and self.ops.per_output:
            exprs = [f"vldrwq_z_s32(&{t}[{first}], {pred})" for t in self.ops.terms]
        else:
            exprs = list(self.ops.vectors(first))
        decl = [f"const int32x4_t {name}_{i} = {e};" for i, e in enumerate(exprs)]
        return decl, ", ".join(f"{name}_{i}" for i in range(len(exprs)))

    def _store(self, acc: str, ops: str, dst: str, pred: str | None) -> list[str]:
        """Requantize int32x4_t `acc` with operands `ops`, add the zero point, clamp, store 4 bytes at dst (pred:
        only its lanes)."""
        out = [f"{acc} = {self.rq}({acc}, {ops});"]
        if self.zp:
            out.append(f"{acc} = vaddq_n_s32({acc}, {self.zp});")
        out.append(f"{acc} = vminq_s32(vmaxq_s32({acc}, act_lo), act_hi);")
        out.append(f"vstrbq_p_s32({dst}, {acc}, {pred});" if pred else f"vstrbq_s32({dst}, {acc});")
        return out

    def _taps_block(self, npx: int, bk: Block, seg: Segment, rows: str) -> str:
        """C for "taps" lanes: `npx` pixels x outputs oc .. oc + n - 1 of input channel ic in scalar accumulators
        (the weight pointer wq at the block's weights, left after them)."""
        g = self.g
        nout = bk.n
        accs = [[f"a{p}_{j}" for j in range(nout)] for p in range(npx)]
        bias = self.table("bias")
        out = [f"int32_t {accs[p][j]} = {bias}[oc{offset_term(j)}];" for p in range(npx) for j in range(nout)]
        row_w = nout * g.kw  # weight bytes per window row of the block
        if seg.klo is None:
            n = None
            preds: list[str | None] = [f"clip_pred{k}" for k in range(self.chunks)]
            chunks = list(range(self.chunks))
            klo = "kx_lo"
        else:
            assert seg.khi is not None
            n = seg.khi - seg.klo
            chunks = [k for k in range(self.chunks) if n > 8 * k]
            preds = [self.ctx.isa.pred8(2 * (n - 8 * k)) if n - 8 * k < 8 else None for k in range(self.chunks)]
            klo = str(seg.klo)

        def xload(ptr: str, pred: str | None) -> tuple[str, str]:
            """(x - zp in int16 lanes, the predicated load it adds to or ""): with `pred` the absent lanes are 0, so
            whatever weight meets them adds nothing."""
            if self.contiguous:
                e = f"vldrbq_z_s16({ptr}, {pred})" if pred else f"vldrbq_s16({ptr})"
            else:
                e = (f"vldrbq_gather_offset_z_s16({ptr}, tap_offsets, {pred})" if pred
                     else f"vldrbq_gather_offset_s16({ptr}, tap_offsets)")
            if pred:
                return f"vaddq_m_n_s16(xz, xz, (int16_t)input_offset, {pred})", e
            return f"vaddq_n_s16({e}, (int16_t)input_offset)", ""

        def row(xrow: str, ky: str) -> list[str]:
            """One window row: x of pixel p, chunk k at xr + p * sw * c + 8k taps; the weights of output j at
            wr + j * kw + 8k (read whole: the lanes past the row meet zeros in x; the table is padded)."""
            t = [f"const int8_t* const xr = xb + xoff + ic{'' if xrow == '0' else f' + {xrow}'};",
                 f"const int8_t* const wr = wq + {ky} * {row_w} + {klo};"]
            for k in chunks:
                chunk = [f"int16x8_t x{p};" for p in range(npx)]
                for p in range(npx):
                    off = p * g.sw * g.c + 8 * k * g.dw * g.c
                    expr, zload = xload(f"xr + {off}" if off else "xr", preds[k])
                    if zload:
                        chunk.append(block("", [f"const int16x8_t xz = {zload};", f"x{p} = {expr};"]))
                    else:
                        chunk.append(f"x{p} = {expr};")
                for j in range(nout):
                    woff = j * g.kw + 8 * k
                    chunk.append(f"const int16x8_t w{j} = vldrbq_s16(wr{f' + {woff}' if woff else ''});")
                    chunk += [f"{accs[p][j]} = vmladavaq_s16({accs[p][j]}, x{p}, w{j});" for p in range(npx)]
                guard = f"if (nkx > {8 * k})" if seg.klo is None and k else ""
                t.append(block(guard, chunk))
            return t

        window = self._window_rows(rows, row, n is not None and n <= 0)
        out.append(block("if (nkx > 0)", window) if seg.klo is None else window)
        out.append(f"wq += {g.kh * row_w};")
        for p in range(npx):
            for q in range(0, nout, 4):
                cnt = min(4, nout - q)
                vec = f"v{p}_{q}"
                four = [accs[p][q + i] if i < cnt else "0" for i in range(4)]
                out.append(f"int32x4_t {vec} = {self.ctx.isa.lanes4(*four)};")
                first = f"oc{offset_term(q)}"
                pred = None
                if cnt < 4:
                    out.append(f"const mve_pred16_t pq{p}_{q} = {self.ctx.isa.pred32(range(cnt))};")
                    pred = f"pq{p}_{q}"
                decl, ops = self._operands(first, pred, f"q{p}_{q}")
                out += decl
                dst = f"yo + {p * g.n_out}{offset_term(q)} + oc" if p or q else "yo + oc"
                out += self._store(vec, ops, dst, pred)
        return lines(out)
