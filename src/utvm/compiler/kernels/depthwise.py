"""depthwise_conv2d on NHWC tensors (utvm.ops.conv2d): float32 and int8.

The scalar kernels live in utvm.compiler.kernels.conv (`direct`), shared with conv2d: float32 always uses
them, and so does int8 with run-time weights. int8 with constant weights (and bias) has a space:

`algo = direct`: the scalar kernel (weight sums folded for interior windows, TFLite's form at the borders).

`algo = plane`: channel planes. A block of `dw_cb` input channels is copied from the NHWC input into int16
planes, one per channel, with the input offset added (x - input_zero_point, in [-255, 255]) and the
padding left at 0: plane[r][c] = x[r - pad_top][c - pad_left] - zp inside the input, 0 outside, which is
exactly TFLite's "padding taps are skipped". An output pixel (oy, ox) of that channel is then
sum over (ky, kx) of plane[oy * sh + ky * dh][ox * sw + kx * dw] * w[ky][kx] with no bounds test at all.
One output channel sweeps its whole plane (output rows, then `dw_px` pixels per block, the blocks of a row
written out with `unroll`), its weights, bias and requantization operands loaded once (`dw_wload = reg`:
weights in locals) or its weights loaded where used (`mem`: LDRD pairs, no spills). Channel c of the input
feeds output channels c * M .. c * M + M - 1 (depth multiplier M): `dw_oc` of them share every load of the
plane.

  DSP targets (SMLAD and friends through <arm_acle.h>): the copy widens a word of 4 channels with SXTAB16
  (the offset added in the same instruction) and PKHBT/PKHTB pairs two pixels of a channel into one word
  of each plane (`dw_cb = 4`). The sums read words of two adjacent int16 plane values. A block's first
  column is even whenever `dw_px * sw` is (the plane's rows are an even number of values long and
  word-aligned), so every word is an aligned (x[2i], x[2i+1]) pair, shared by all pixels of the block: a
  pixel whose taps k, k+1 fall on one word uses SMLAD with the compile-time word (w[k], w[k+1]); a pixel
  whose tap falls on one half only uses SMLAxy with a weight word holding that tap in either half. For
  stride 1 and two pixels this is the 2-pixel input sharing of docs/kernels.md §6.2: a 3x3 row of two pixels is
  one LDRD, two SMLAD and two single MACs, with two weight words per row. Aligned words and adjacent
  weight words are loaded in pairs by an LDRD asm (GCC rarely pairs them itself), each just before its
  first use. With `dw_px * sw` odd (one pixel, odd stride) the words are loaded unaligned at each pixel's
  taps.
  Portable targets (host, Cortex-M0/M3): the same planes and blocks in plain C (each plane value loaded
  once per block, one multiply-accumulate per tap).

  Ideas: TinyEngine's HWC -> CHW copy padded with the zero point (depthwiseTemplate.py), CMSIS-NN's
  arm_depthwise_conv_s8_opt (int16 copy, tap pairs for SMLAD); written here.

Exactness: the int32 accumulator is bias + sum over taps of (x - zp) * w, the integer TFLite computes (the
padding taps are zeros); integer addition is associative and SMLAD/SMLAxy wrap instead of saturating, so
the order does not matter as long as no partial sum leaves int32, which the proven bound
|acc| <= max|x - zp| * sum|w| + |bias| < 2^31 (conv's `accumulator_bound`, emitted as a comment) rules
out for every partial sum. Requantization (`requant`): "c" and "fast" are _gemm.Requant's exact forms;
"dbl" (DSP, double rounding) accumulates 2 * acc instead (the weights and the bias are doubled at compile
time, so it costs nothing; legal when 2 * bound < 2^31) and computes gemmlowp's
SaturatingRoundingDoublingHighMul(acc, m) = floor((acc * m + 2^30) / 2^31) as SMMULR(2 * acc, m) =
floor((2 * acc * m + 2^31) / 2^32) (the same number, m != INT32_MIN), then RoundingDivideByPOT by n >= 1
as the "requant:double_asm" helper does (the carry of ASRS is bit n - 1), folding the output zero point into
its last ADC (or SBC #(-zp - 1) for zp < 0, which adds zp + carry): four instructions instead of six plus
an add.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, register
from utvm.compiler.kernels._gemm import MAX_ACCUMULATORS, Requant, store_stmt, words_table
from utvm.compiler.kernels.conv import accumulator_bound, direct
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops.conv2d import Conv2DParams

INT32_MAX = (1 << 31) - 1
#: pixel blocks of one output row that `unroll` may write out
MAX_UNROLL_BLOCKS = 8
#: scratch (bytes) the default point may take for its planes; no point takes more than MAX_SCRATCH
DEFAULT_SCRATCH = 16 << 10
MAX_SCRATCH = 1 << 20


def _indent(text: str, levels: int = 1) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())


# --- local C helpers (emitted once per file, beside the tables) --------------------------------------------

_LOCAL_HELPERS: dict[str, str] = {
    # PKHBT / PKHTB with a 16-bit shift: the low halves (a.lo, b.lo) / high halves (b.hi, a.hi) of two words.
    # GCC does not form them from C; non-volatile asm, so it may still move or drop them.
    "tvm_pkhbt16": """\
static inline uint32_t tvm_pkhbt16(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
static inline uint32_t tvm_pkhtb16(uint32_t a, uint32_t b) {
  uint32_t r;
  __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(a), "r"(b));
  return r;
}""",
    # An optimisation barrier on a pointer: loads through it are not loop-invariant, so GCC loads the
    # weights where they are used (LDRD pairs) instead of hoisting them into registers it then spills.
    "TVM_OPAQUE_PTR": """\
#if defined(__GNUC__)
#define TVM_OPAQUE_PTR(p) __asm__ __volatile__("" : "+r"(p))
#else
#define TVM_OPAQUE_PTR(p) ((void)(p))
#endif""",
    # LDRD of two words at a constant byte offset (GCC seldom pairs the loads of this code itself). The
    # memory operand (8 chars: it aliases every store) orders it after the writes it depends on.
    "TVM_LDRD": """\
#define TVM_LDRD(lo, hi, p, off) \\
  __asm__("ldrd %0, %1, [%2, #" #off "]" : "=r"(lo), "=r"(hi) \\
          : "r"(p), "m"(*(const char(*)[8])((const char*)(p) + (off))))""",
    # A word of two int16 plane values; `a`: the address is known to be 4-byte aligned.
    "tvm_ld16x2": """\
static inline uint32_t tvm_ld16x2(const int16_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static inline uint32_t tvm_ld16x2a(const int16_t* p) {
  uint32_t v;
#if defined(__GNUC__)
  memcpy(&v, __builtin_assume_aligned(p, 4), 4);
#else
  memcpy(&v, p, 4);
#endif
  return v;
}""",
}


def local_helper(ctx: KernelContext, name: str) -> str:
    """Emit the local helper `name` into the file once (its name is reserved in the file's namespace)."""
    if name not in ctx.file.names:
        ctx.file.names.add(name)
        ctx.file.decls.insert(0, _LOCAL_HELPERS[name])
    return name


def dbl_requant_helper(ctx: KernelContext, zp: int) -> str:
    """The name of `int32_t f(int32_t acc2, int32_t m, int32_t n)`: requant(acc, m, -n) + zp for acc2 = 2 * acc
    (gemmlowp double rounding; m in [0, 2^31), n >= 1, |acc2| < 2^31; see the module docstring)."""
    name = f"tvm_rq2_zp{zp}" if zp >= 0 else f"tvm_rq2_zpm{-zp}"
    last = f"adc %0, %0, #{zp}" if zp >= 0 else f"sbc %0, %0, #{-zp - 1}"
    if name not in ctx.file.names:
        ctx.file.names.add(name)
        ctx.file.decls.insert(0, f"""\
/* 2*acc -> gemmlowp requant(acc, m, -n) {'+' if zp >= 0 else '-'} {abs(zp)}: SMMULR is
   SaturatingRoundingDoublingHighMul (m != INT32_MIN), then RoundingDivideByPOT (n >= 1; the carry of ASRS is
   bit n - 1), the zero point in the last add. */
static inline int32_t {name}(int32_t acc2, int32_t m, int32_t n) {{
  int32_t r;
  __asm__("smmulr %0, %1, %2\\n\\t"
          "add %0, %0, %0, asr #31\\n\\t"
          "asrs %0, %0, %3\\n\\t"
          "{last}"
          : "=&r"(r)
          : "r"(acc2), "r"(m), "r"(n)
          : "cc");
  return r;
}}""")
    return name


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


def word_loads(items: Sequence[tuple[str, int]], base: str, single: str) -> list[str]:
    """C declaring uint32_t locals (name, byte offset from `base`, 4-byte aligned): LDRD pairs where two
    offsets are adjacent (TVM_LDRD), single loads otherwise (`single`(p) of an int16_t pointer, or a
    uint32_t index when `single` is "")."""
    out: list[str] = []
    for group in _pairs(items):
        if len(group) == 2:
            (a, off), (b, _) = group
            out += [f"uint32_t {a};", f"uint32_t {b};", f"TVM_LDRD({a}, {b}, {base}, {off});"]
        else:
            ((a, off),) = group
            out.append(f"const uint32_t {a} = {single}({base} + {off // 2});" if single
                       else f"const uint32_t {a} = {base}[{off // 4}];")
    return out


def clamp_store(v: str, zp: int, lo: int, hi: int, dst: str, dsp: bool) -> str:
    """C: int32 `v` plus the output zero point, clamped to [lo, hi] (within int8), stored at `dst`. DSP
    targets saturate with SSAT #8 first (one instruction; exact: the clamp range lies inside it)."""
    if not dsp:
        return store_stmt(v, zp, lo, hi, dst)
    out = [f"{v} = __ssat({v}{f' + {zp}' if zp > 0 else (f' - {-zp}' if zp < 0 else '')}, 8);"]
    if lo > -128:
        out.append(f"{v} = {v} < {lo} ? {lo} : {v};")
    if hi < 127:
        out.append(f"{v} = {v} > {hi} ? {hi} : {v};")
    return "\n".join(out + [f"{dst} = (int8_t){v};"])


# --- geometry -----------------------------------------------------------------------------------------------

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


# --- the space ------------------------------------------------------------------------------------------------

def _applies(ctx: KernelContext, p: Conv2DParams) -> bool:
    if p.op != "depthwise_conv2d" or p.dtype != "int8":
        return False
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    return w_t is not None and w_t.data is not None and (not p.has_bias or (b_t is not None and b_t.data is not None))


def _bound(ctx: KernelContext, p: Conv2DParams) -> int:
    """max over output channels of max|x - zp| * sum|w| + |bias|."""
    xmax = max(127 - p.input_zero_point, 128 + p.input_zero_point)
    w_t = ctx.in_tensor(1)
    assert w_t is not None and w_t.data is not None
    per_oc = np.abs(w_t.data.astype(np.int64)).reshape(-1, p.output_shape[3]).sum(axis=0) * xmax
    b_t = ctx.in_tensor(2) if p.has_bias else None
    if b_t is not None and b_t.data is not None:
        per_oc = per_oc + np.abs(b_t.data.astype(np.int64))
    return int(per_oc.max(initial=0))


def dbl_reason(ctx: KernelContext, p: Conv2DParams, bound: int) -> str | None:
    """None when the doubled-accumulator SMMULR requantization ("dbl") is exact and available; else why not."""
    if not ctx.target.dsp:
        return f"{ctx.target.name} has no SMMULR (DSP extension)"
    if p.rounding != "double":
        return "it implements double rounding only"
    if max(p.shift) > -1:
        return "a left or zero shift (it needs a right shift of at least 1)"
    if min(p.multiplier) < 0:
        return "a negative multiplier"
    if 2 * bound > INT32_MAX:
        return f"2 * the accumulator bound {bound} does not fit int32"
    return None


def depthwise_space(ctx: KernelContext) -> Space:
    """int8 depthwise_conv2d with constant weights: `algo` direct (conv's scalar kernel) or plane (int16
    channel planes, SIMD on DSP targets) with its knobs; see the module docstring."""
    p: Conv2DParams = ctx.params()
    if not _applies(ctx, p):
        return EMPTY_SPACE
    g = Geometry.of(p)
    dsp = ctx.target.dsp
    bound = _bound(ctx, p)
    fast = Requant.fast_reason(p.rounding, p.multiplier, p.shift, ctx.target)
    dbl = dbl_reason(ctx, p, bound)
    requants = ("c", "fast", "dbl") if dsp else ("c", "fast")
    knobs = (
        Knob("algo", ("direct", "plane"), "conv's scalar kernel or int16 channel planes"),
        Knob("dw_px", (1, 2, 4), "output pixels of a row per block (sharing the plane's loads)"),
        Knob("dw_oc", (1, 2, 4), "output channels of one input channel per block (depth multiplier > 1)"),
        Knob("dw_cb", (1, 4), "input channels copied into planes at a time (4: one word of the input)"),
        Knob("requant", requants, "requantization: shared C helper, the gemm's fast form, doubled SMMULR"),
        Knob("unroll", (False, True), "the pixel blocks of an output row written out"),
        Knob("dw_wload", ("reg", "mem"), "weights held in locals for a whole plane, or loaded where used"),
        Knob("no_sched", (False, True), "GCC's pre-RA instruction scheduler off for this operator"),
    )
    blocks = lambda pt: (g.ow + pt["dw_px"] - 1) // pt["dw_px"]  # noqa: E731
    best_rq = "dbl" if dbl is None else ("fast" if fast is None else "c")
    # measured on QEMU (KWS 3x3 stride 1, micro_speech 10x8 stride 2 x 8): two pixels share the loads of
    # a stride-1 row on DSP targets; otherwise four pixels; the copy of 4 channels by words pays on DSP only.
    # Unrolling a row's blocks saves a loop (about 1%) for code that grows with the taps: only small rows
    # (micro_speech's 10x8 rows unrolled cost 3.9 KB, +36% of the firmware's code, for 1%).
    px = 4 if (g.sw > 1 or not dsp) and g.ow >= 4 else (2 if g.ow >= 2 else 1)
    oc = max(o for o in (1, 2, 4) if g.m % o == 0 and o * px <= 4)
    nb = (g.ow + px - 1) // px
    plane = {"algo": "plane", "dw_px": px, "dw_oc": oc, "dw_cb": 4 if dsp and g.c >= 4 else 1,
             "requant": best_rq, "unroll": 1 < nb <= MAX_UNROLL_BLOCKS and nb * g.kh * g.kw * px <= 256,
             "dw_wload": "mem", "no_sched": dsp}
    off = {"algo": "direct", "dw_px": 1, "dw_oc": 1, "dw_cb": 1, "requant": "c", "unroll": False,
           "dw_wload": "reg", "no_sched": False}
    plane_bytes = 2 * g.plane_size()
    if plane["dw_cb"] * plane_bytes > DEFAULT_SCRATCH:
        plane["dw_cb"] = 1
    default = plane if ctx.target.is_cortex_m and plane_bytes <= DEFAULT_SCRATCH else off

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":
            return None if pt == off else "the direct kernel has no plane knobs"
        if pt["dw_px"] > g.ow:
            return f"dw_px {pt['dw_px']} > the {g.ow} output columns"
        if g.m % pt["dw_oc"]:
            return f"dw_oc {pt['dw_oc']} does not divide the depth multiplier {g.m}"
        if pt["dw_px"] * pt["dw_oc"] > MAX_ACCUMULATORS:
            return f"{pt['dw_px']} x {pt['dw_oc']} accumulators exceed {MAX_ACCUMULATORS} registers"
        if pt["dw_cb"] > 1 and g.c < pt["dw_cb"]:
            return f"dw_cb {pt['dw_cb']} > the {g.c} input channels"
        if pt["dw_cb"] * plane_bytes > MAX_SCRATCH:
            return f"{pt['dw_cb']} planes of {plane_bytes} bytes exceed {MAX_SCRATCH} bytes of scratch"
        if pt["unroll"] and blocks(pt) > MAX_UNROLL_BLOCKS:
            return f"{blocks(pt)} blocks per row exceed {MAX_UNROLL_BLOCKS} to unroll"
        if pt["unroll"] and blocks(pt) == 1:
            return "one block per row: nothing to unroll"
        if pt["requant"] == "fast" and fast is not None:
            return f"requant fast: {fast}"
        if pt["requant"] == "dbl" and dbl is not None:
            return f"requant dbl: {dbl}"
        return None

    return Space(knobs, default, legal)


@register("depthwise_conv2d", space=depthwise_space)
def depthwise(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") == "plane":
        return _plane(ctx, ctx.params(), ctx.schedule)
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
    """Emits the plane kernel for one schedule."""

    def __init__(self, ctx: KernelContext, p: Conv2DParams, s: Schedule) -> None:
        self.ctx, self.p, self.s = ctx, p, s
        self.g = g = Geometry.of(p)
        self.dsp = ctx.target.dsp
        self.px, self.ocb, self.cb = s["dw_px"], s["dw_oc"], s["dw_cb"]
        self.wp = g.plane_w()
        self.ps = g.plane_size()
        self.aligned = self.dsp and (self.px * g.sw) % 2 == 0
        self.dbl = s["requant"] == "dbl"
        self.scale = 2 if self.dbl else 1
        w_t = ctx.in_tensor(1)
        assert w_t is not None and w_t.data is not None
        self.w = w_t.data.astype(np.int64).reshape(g.kh, g.kw, g.n_out) * self.scale  # [ky, kx, oc]
        b_t = ctx.in_tensor(2) if p.has_bias else None
        self.bias = (b_t.data.astype(np.int64).reshape(-1) * self.scale if b_t is not None and b_t.data is not None
                     else None)

    # plans per block width (the row's tail block may be narrower)
    def plan(self, px: int) -> tuple[list[int], list[Mac], list[tuple[int | None, int | None]], list[tuple[int, str]]]:
        """(loads, MACs, weight words, per MAC (word, instruction)) of a kernel row for a block of px pixels;
        the tail block reuses the main block's words."""
        g = self.g
        loads, macs = row_plan(g.kw, g.dw, g.sw, px, self.aligned or not self.dsp)
        have: list[tuple[int | None, int | None]] = []
        if px != self.px:
            have = self.plan(self.px)[2]
        words, ops = weight_words(macs, have)
        return loads, macs, words, ops

    def body(self) -> tuple[str, int]:
        ctx, p, g = self.ctx, self.p, self.g
        ctx.helper("string")
        if self.s["dw_wload"] == "mem":
            local_helper(ctx, "TVM_OPAQUE_PTR")
        if self.dsp:
            ctx.require_dsp()
            ctx.helper("dsp_ror8")
            local_helper(ctx, "tvm_pkhbt16")
            local_helper(ctx, "tvm_ld16x2")
            local_helper(ctx, "TVM_LDRD")
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
        if self.dsp:
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
        if self.dbl:
            self.rq = None
            uniform = len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1
            self.rq_fn = dbl_requant_helper(ctx, p.output_zero_point)
            if uniform:
                self.rq_setup = f"const int32_t rq_m = {p.multiplier[0]};\nconst int32_t rq_n = {-p.shift[0]};\n"
                self.rq_tab = ""
            else:
                self.rq_setup = ""
                inter = np.array([list(p.multiplier), [-s for s in p.shift]], np.int64).T.reshape(-1)
                self.rq_tab = ctx.table("int32_t", inter, "rq")
        else:
            self.rq = Requant(ctx, self.s["requant"], p.rounding, p.multiplier, p.shift)
            self.rq_setup = self.rq.setup
        head = [bound, f"const int32_t input_offset = {-p.input_zero_point};  /* -input zero point */"]
        if self.dsp:
            head.append("const uint32_t input_offset2 = ((uint32_t)input_offset & 0xFFFFu) * 0x10001u;"
                        "  /* in both int16 lanes */")
            head.append("(void)input_offset2;")
        if self.dbl:
            head.append("/* requant dbl: the weights and the bias are doubled (2 * bound < 2^31). */")
        head.append("int16_t* const planes = (int16_t*)(void*)scratch;")
        scratch = 2 * self.ps * self.cb
        head.append(f"memset(scratch, 0, {scratch});  /* the padding of every plane */")
        if self.rq_setup:
            head.append(self.rq_setup.rstrip("\n"))
        cb = self.cb
        copy = self._copy()
        passes = self._pass()
        x, y = ctx.inputs[0], ctx.outputs[0]
        if g.c % cb:
            chan = (f"const int32_t cn = {g.c} - c0 < {cb} ? {g.c} - c0 : {cb};\n" + copy
                    + f"\nfor (int32_t j = 0; j < cn; ++j) {{\n{_indent(passes)}\n}}")
        elif cb > 1:
            chan = copy + f"\nfor (int32_t j = 0; j < {cb}; ++j) {{\n{_indent(passes)}\n}}"
        else:
            chan = copy + "\n{\n  const int32_t j = 0;\n" + _indent(passes) + "\n}"
        body = "\n".join(head) + f"""
for (int32_t b = 0; b < {g.n}; ++b) {{
  const int8_t* const xb = {x} + b * {g.h * g.w * g.c};
  int8_t* const yb = {y} + b * {g.oh * g.ow * g.n_out};
  for (int32_t c0 = 0; c0 < {g.c}; c0 += {cb}) {{
{_indent(chan, 2)}
  }}
}}
return 0;"""
        return body, scratch

    # the copy into planes ------------------------------------------------------------------------------------
    def _copy(self) -> str:
        """C filling planes 0..cn-1 (or cb) from input channels c0.. of batch xb."""
        g = self.g
        row0 = f"(iy + {g.pt}) * {self.wp} + {g.pl}" if g.pt else f"iy * {self.wp} + {g.pl}"
        bytewise = f"""\
for (int32_t iy = 0; iy < {g.h}; ++iy) {{
  const int8_t* xs = xb + iy * {g.w * g.c} + c0;
  int16_t* const d = planes + {row0};
  for (int32_t ix = 0; ix < {g.w}; ++ix) {{
    for (int32_t j = 0; j < @CN@; ++j) {{
      d[j * {self.ps} + ix] = (int16_t)((int32_t)xs[j] + input_offset);
    }}
    xs += {g.c};
  }}
}}"""
        if self.cb == 1:
            return bytewise.replace("@CN@", "1")
        if not self.dsp:
            generic = bytewise.replace("@CN@", "cn" if g.c % self.cb else str(self.cb))
            return generic
        pb = 2 * self.ps  # bytes between planes
        pair_words = f"""\
uint32_t p0;
uint32_t p1;
memcpy(&p0, xs, 4);
memcpy(&p1, xs + {g.c}, 4);
xs += {2 * g.c};
{{
  const uint32_t a0 = __sxtab16(input_offset2, p0);
  const uint32_t a1 = __sxtab16(input_offset2, p1);
  const uint32_t b0 = tvm_sxtab16_ror8(input_offset2, p0);
  const uint32_t b1 = tvm_sxtab16_ror8(input_offset2, p1);
  const uint32_t v0 = tvm_pkhbt16(a0, a1);
  const uint32_t v1 = tvm_pkhbt16(b0, b1);
  const uint32_t v2 = tvm_pkhtb16(a1, a0);
  const uint32_t v3 = tvm_pkhtb16(b1, b0);
  memcpy(d, &v0, 4);
  memcpy(d + {pb}, &v1, 4);
  memcpy(d + {2 * pb}, &v2, 4);
  memcpy(d + {3 * pb}, &v3, 4);
}}
d += 4;"""
        last = f"""\
uint32_t p0;
memcpy(&p0, xs, 4);
{{
  const uint32_t a0 = __sxtab16(input_offset2, p0);
  const uint32_t b0 = tvm_sxtab16_ror8(input_offset2, p0);
  const uint16_t v0 = (uint16_t)a0;
  const uint16_t v1 = (uint16_t)b0;
  const uint16_t v2 = (uint16_t)(a0 >> 16);
  const uint16_t v3 = (uint16_t)(b0 >> 16);
  memcpy(d, &v0, 2);
  memcpy(d + {pb}, &v1, 2);
  memcpy(d + {2 * pb}, &v2, 2);
  memcpy(d + {3 * pb}, &v3, 2);
}}"""
        pairs = g.w // 2
        parts = [f"const int8_t* xs = xb + iy * {g.w * g.c} + c0;",
                 f"uint8_t* d = (uint8_t*)(void*)(planes + {row0});"]
        if pairs <= MAX_UNROLL_BLOCKS:  # written out: constant offsets
            parts += ["{\n" + _indent(pair_words) + "\n}"] * pairs
        else:
            parts.append(f"for (int32_t q = 0; q < {pairs}; ++q) {{\n{_indent(pair_words)}\n}}")
        if g.w % 2:
            parts.append("{\n" + _indent(last) + "\n}")
        words = f"for (int32_t iy = 0; iy < {g.h}; ++iy) {{\n{_indent(chr(10).join(parts))}\n}}"
        if g.c % self.cb:
            return (f"if (cn == {self.cb}) {{\n{_indent(words)}\n}} else {{\n"
                    f"{_indent(bytewise.replace('@CN@', 'cn'))}\n}}")
        return words

    # one input channel's output channels ----------------------------------------------------------------------
    def _pass(self) -> str:
        """C computing every output channel of input channel ic = c0 + j from plane j."""
        g = self.g
        ocb = self.ocb
        lines = ["const int32_t ic = c0 + j;", f"const int16_t* const plane = planes + j * {self.ps};"]
        inner = self._channels()
        if g.m == ocb:
            lines.append(f"{{\n  const int32_t oc = ic{f' * {g.m}' if g.m > 1 else ''};\n{_indent(inner)}\n}}")
        else:
            lines.append(f"for (int32_t oc = ic * {g.m}; oc < ic * {g.m} + {g.m}; oc += {ocb}) {{\n"
                         f"{_indent(inner)}\n}}")
        return "\n".join(lines)

    def _weight(self, o: int, k: int) -> str:
        if self.hoist:
            return f"w{o}_{k}"
        return f"v{o * self.nw + k}" if self.dsp else f"wb[{o * self.nw + k}]"

    def _channels(self) -> str:
        """C for output channels oc .. oc + dw_oc - 1 over the whole plane."""
        g, ocb = self.g, self.ocb
        self.hoist = self.s["dw_wload"] == "reg"
        wtype = "uint32_t" if self.dsp else "int16_t"
        lines = [f"const {wtype}* const wq = {self.wt} + oc * {self.nw};"]
        if self.hoist and self.dsp:
            lines += word_loads([(f"w{o}_{k}", 4 * (o * self.nw + k)) for o in range(ocb) for k in range(self.nw)],
                                "wq", "")
        elif self.hoist:
            lines += [f"const int32_t w{o}_{k} = wq[{o * self.nw + k}];" for o in range(ocb) for k in range(self.nw)]
        for o in range(ocb):
            ch = f"oc + {o}" if o else "oc"
            lines.append(f"const int32_t bias{o} = {self.bt}[{ch}];" if self.bt else f"const int32_t bias{o} = 0;")
            if self.dbl:
                if self.rq_tab:
                    lines.append(f"const int32_t rq_m{o} = {self.rq_tab}[({ch}) * 2];")
                    lines.append(f"const int32_t rq_n{o} = {self.rq_tab}[({ch}) * 2 + 1];")
                else:
                    lines.append(f"const int32_t rq_m{o} = rq_m;")
                    lines.append(f"const int32_t rq_n{o} = rq_n;")
        lines.append("int8_t* const yo = yb + oc;")
        nb, tail = g.ow // self.px, g.ow % self.px
        row: list[str] = [f"const int16_t* r = plane + oy * {g.sh * self.wp};",
                          f"int8_t* yr = yo + oy * {g.ow * g.n_out};"]
        step_r, step_y = self.px * g.sw, self.px * g.n_out
        if self.s["unroll"] or nb == 1:
            for i in range(nb):
                row.append(self._block(self.px, i * step_r, i * step_y))
            if tail:
                row.append(self._block(tail, nb * step_r, nb * step_y))
        else:
            blk = self._block(self.px, 0, 0)
            row.append(f"for (int32_t q = 0; q < {nb}; ++q) {{\n{_indent(blk)}\n"
                       f"  r += {step_r};\n  yr += {step_y};\n}}")
            if tail:
                row.append(self._block(tail, 0, 0))
        row += ["(void)r;", "(void)yr;"]
        lines.append(f"for (int32_t oy = 0; oy < {g.oh}; ++oy) {{\n{_indent(chr(10).join(row))}\n}}")
        return "\n".join(lines)

    def _dsp_row(self, px: int, ky: int, row_off: int, loads: list[int], macs: list[Mac],
                 ops: list[tuple[int, str]], accs: list[list[str]]) -> list[str]:
        """C for one kernel row of a DSP block: the plane words (x<i>) and, with dw_wload mem, the weight words
        (v<k>) loaded in LDRD pairs just before their first use, MACs grouped by the load they wait for (few
        live registers: GCC's scheduler is often off for this code)."""
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
            out.extend(word_loads(group, base, single))
            done.update(n for n, _ in group)

        for load, k, op, a in todo:
            need(f"x{load}", x_groups, "rb", "tvm_ld16x2a" if self.aligned else "tvm_ld16x2")
            if not self.hoist:
                need(f"v{k}", w_groups, "wb", "")
            wv = f"w{k // self.nw}_{k % self.nw}" if self.hoist else f"v{k}"
            fn = "__smlad" if op == "smlad" else f"__{op}"
            out.append(f"{a} = {fn}(x{load}, {wv}, {a});")
        return out

    def _block(self, px: int, col_off: int, y_off: int) -> str:
        """C for `px` pixels x dw_oc channels whose window starts `col_off` values after the plane pointer
        r (int16_t*), stored at yr + y_off."""
        g, ocb = self.g, self.ocb
        loads, macs, _words, ops = self.plan(px)
        accs = [[f"a{o}_{j}" for j in range(px)] for o in range(ocb)]
        lines = ["const int16_t* const rb = r;"]
        if not self.hoist:
            wtype = "uint32_t" if self.dsp else "int16_t"
            lines += [f"const {wtype}* wb = wq;", "TVM_OPAQUE_PTR(wb);"]
        for o in range(ocb):
            lines += [f"int32_t {accs[o][j]} = bias{o};" for j in range(px)]
        for ky in range(g.kh):
            row_off = ky * g.dh * self.wp + col_off
            rl = []
            if self.dsp:
                rl += self._dsp_row(px, ky, row_off, loads, macs, ops, accs)
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
            lines.append("{\n" + _indent("\n".join(rl)) + "\n}")
        lo, hi = int(self.p.act_min), int(self.p.act_max)
        for o in range(ocb):
            for j in range(px):
                a = accs[o][j]
                dst = f"yr[{y_off + j * g.n_out + o}]"
                zp = self.p.output_zero_point
                if self.dbl:
                    lines.append(f"{a} = {self.rq_fn}({a}, rq_m{o}, rq_n{o});")
                    zp = 0
                else:
                    assert self.rq is not None
                    lines.append(self.rq.stmt(a, f"oc + {o}" if o else "oc"))
                lines.append(clamp_store(a, zp, lo, hi, dst, self.dsp))
        return "{\n" + _indent("\n".join(lines)) + "\n}"


def _plane(ctx: KernelContext, p: Conv2DParams, s: Schedule) -> KernelCode:
    body, scratch = _Plane(ctx, p, s).body()
    attrs = ctx.helper("no_sched") if s["no_sched"] else ""
    return KernelCode(body=body, scratch_bytes=scratch, attributes=attrs)
