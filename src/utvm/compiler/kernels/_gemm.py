"""int8 convolution and dense as im2col + GEMM, with SIMD multiply-accumulates where the ISA has them.

One emitter serves conv2d (any kernel size, stride, dilation and padding; one group) and dense: the input
of `px_block` output pixels is widened to int16 with the input offset added (`x - input_zero_point`, in
[-255, 255]) into columns of `kp` values (the reduction length `k` padded to a multiple of 4 with zeros;
padding taps are zeros too, which is exactly TFLite's "padding taps are skipped"), and a register block of
`oc_block` output channels x `px_block` pixels accumulates column . weight-row products starting from the
bias. The int32 sum is the same integer as TFLite's accumulator whatever the order (integer addition is
associative; the kernel's proven bound |acc| <= max|x - zp| * sum|w| + |bias| < 2^31 (requant.acc_bound)
holds for every partial sum, and SMLAD wraps rather than saturates), so every point of the space gives the
same bits.

16-bit SIMD vocabularies (`ctx.isa.simd16`: ARMv7E-M and later; SMLAD does two 16x16 MACs): a column holds,
per group of 4 reduction positions k..k+3, the words (x[k], x[k+2]) and (x[k+1], x[k+3]) (`perm`), which is
what SXTAB16 and SXTAB16-ror-8 of a word of 4 input bytes give; the weights are words of 4 int8 values in
their natural order, so SXTB16 / SXTB16-ror-8 of a weight word give the matching (w[k], w[k+2]) /
(w[k+1], w[k+3]) -- or, with `w_fmt = i16`, those int16 pairs pre-widened at compile time (twice the flash,
no unpacking in the loop). Ideas from CMSIS-NN's `arm_nn_mat_mult_kernel_s8_s16` (a 2x2 SMLAD block) and
docs/kernels.md §5, written here. Other vocabularies (host, Cortex-M0/M3): the same blocks in plain C over
natural-order columns.

The Helium (MVE) GEMM is utvm.compiler.kernels._gemm_mve (`algo = mve`); it shares `px_block` and `oc_block`
(whose 8 exists on MVE vocabularies only and is refused here).

`widen` (`copy` | `inline`): the columns above live in scratch (2 * kp * px_block bytes); where each output
pixel's k reduction values lie contiguous in the input (dense, and a 1x1 window that never reaches the padding:
`inline_applies`), `inline` reads them where they are instead, widening each word of 4 input bytes in the
register block (SXTAB16 and SXTAB16-ror-8 with the offset: the column's lane order, so the weights are the
same) -- no scratch at all, the widening repeated for every block of channels. It is the faster form when the
layer has few blocks of channels (micro_speech's 4000 -> 4 dense: one block, and no copy), the slower when many
blocks share one column. A last group of fewer than 4 values (k % 4) is read byte by byte into a word whose
missing lanes meet zero weights. A last block of fewer than `px_block` pixels starts `px_block - m % px_block`
pixels earlier instead (those pixels are computed twice and stored twice with the same bytes), so neither form
needs a spill row (docs/kernels.md §12).

Knobs (all bit-exact; `gemm_knobs`): `px_block` (pixels per block), `oc_block` (channels per block),
`unroll` (4-value groups per loop iteration; `k_unroll` before), `w_fmt` (i8 | i16; i16 with SIMD only),
`requant` (c | fast; "dbl" is refused: the GEMM has no doubled-accumulator form), `no_sched` (GCC's
pre-register-allocation scheduler off for the operator, which otherwise hoists the loads of unrolled SMLAD
code and spills; docs/kernels.md §2.4), `ext` (the SIMD block as ACLE intrinsics or one asm block; see
below), `share` (one GEMM function per file for every layer of one workload and schedule).

The asm forms differ only in how a group's words are loaded (what a Cortex-M4 pays for: a single LDR costs
2 cycles, 1 right behind another single load whose result it does not address through; LDRD 3 for two
words, never pipelined with its neighbours; docs/timing.md): `asm` loads each pixel's x pair with one LDRD
and each channel's weights right before their SMLADs; `asm_ldr` uses single LDRs with fixed bases (no
writeback, which would break the pipelining), the x words and the first channel's weights in one
back-to-back run, the other channels' weights before their SMLADs (as many registers as `asm`); `asm_run`
loads every word of the group in one run before any SXTB16/SMLAD (one more register per channel: legal
only where the block fits in the registers). All three compute the same sums in the same order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, multipliers_pm
from utvm.compiler.kernels.cemit import block, for_loop, hex_words_body, indent, lines
from utvm.compiler.kernels.isa import PortableC
from utvm.compiler.kernels.requant import OutputStage, Requant, clamp_store
from utvm.compiler.schedule import Knob, Schedule, no_sched_knob, requant_knob, unroll_knob

#: accumulators a register block may hold (Cortex-M has 13 usable registers; pointers and temps need some)
MAX_ACCUMULATORS = 8
MAX_ASM_REGISTERS = 13  # r0-r12 and lr, less one the loop counter keeps
#: the knobs of old tuning logs named differently now (Space.legacy)
LEGACY = {"k_unroll": "unroll"}
#: `ext` on 16-bit SIMD vocabularies: ACLE intrinsics, then the asm forms (see the module docstring)
ASM_FORMS = ("acle", "asm", "asm_ldr", "asm_run")


def perm(k: int) -> int:
    """Where reduction position k lives in a SIMD column (int16 index): pairs (k, k+2) and (k+1, k+3)."""
    return (k & ~3) | ((k & 1) << 1) | ((k >> 1) & 1)


def pad4(k: int) -> int:
    return (k + 3) // 4 * 4


# --- the space ------------------------------------------------------------------------------------------------

#: `widen`: the column of a block's pixels copied into scratch, or each word widened where it lies
WIDEN = ("copy", "inline")


def gemm_knobs(v: PortableC, kq: int, inline: bool = False) -> tuple[Knob, ...]:
    """The GEMM's knobs for a reduction of `kq` groups of 4 with vocabulary `v`; `inline`: the layer's pixels
    read their reduction values where they lie (`inline_applies`), so `widen` has both values."""
    unrolls = tuple(u for u in (1, 2, 4, 8) if u <= max(kq, 1))
    return (
        Knob("px_block", (1, 2, 4), "output pixels per register block"),
        # (8: the MVE GEMM's 1 x 8 block, on MVE vocabularies only; the SMLAD GEMM refuses it)
        Knob("oc_block", (1, 2, 4, 8) if v.mve else (1, 2, 4), "output channels per register block"),
        unroll_knob(unrolls, "groups of 4 reduction values per loop iteration"),
        Knob("w_fmt", ("i8", "i16") if v.simd16 else ("i8",), "weights as int8 words or pre-widened int16"),
        requant_knob(),
        no_sched_knob(),
        Knob("ext", ASM_FORMS if v.simd16 else ("c",),
             "the block as ACLE intrinsics or one asm block (asm: LDRD pairs; asm_ldr: single LDRs in a "
             "back-to-back run; asm_run: every load of a group in one run)"),
        Knob("share", (False, True), "one GEMM function per file for every layer of this workload and schedule "
             "(code size) or one per layer"),
        Knob("widen", WIDEN if inline else WIDEN[:1], "the inputs of a block widened once into columns in scratch "
             "(im2col) or word by word in the register block where they lie (no scratch)"),
    )


#: the knobs of the GEMM branch whose values change its scratch (Space.memory_knobs)
GEMM_MEMORY_KNOBS = ("algo", "px_block", "widen")


def inline_applies(win: Window, oh: int, ow: int) -> bool:
    """Whether `widen = inline` applies: each output pixel's k reduction values are contiguous in the input (a
    1x1 window that never reaches the padding; dense is the 1x1 window over a row)."""
    return win.kh == 1 and win.kw == 1 and all(win.always_inside(oh, ow))


def pixel_stride(win: Window, oh: int, ow: int) -> int | None:
    """Bytes between the inputs of consecutive output pixels of an inline layer (`inline_applies`) when that is
    one constant over the whole output (one row, one column, or rows that follow each other in the input), else
    None (each pixel of a block then keeps its own pointer)."""
    if oh == 1 or ow == 1 or win.sh * win.w == ow * win.sw:
        return (win.sw if oh == 1 or ow > 1 else win.sh * win.w) * win.c
    return None


def gemm_scratch(p: Schedule, kp: int) -> int:
    """Bytes of scratch a GEMM point asks for: the interleaved int16 columns of a block (`copy`), none (`inline`)."""
    return 0 if p.get("widen", "copy") == "inline" else 2 * kp * p["px_block"]


def gemm_legal(p: Schedule, max_px: int, stage: OutputStage, v: PortableC, stride: int | None = 0) -> str | None:
    """Why a GEMM point is not legal here (None when it is); `stride`: the layer's `pixel_stride` (None: a
    pointer per pixel of an inline block)."""
    if p["oc_block"] > 4:
        return f"oc_block {p['oc_block']}: the SMLAD GEMM takes blocks of up to 4 channels"
    if p["px_block"] * p["oc_block"] > MAX_ACCUMULATORS:
        return f"{p['px_block']} x {p['oc_block']} accumulators exceed {MAX_ACCUMULATORS} registers"
    if p["px_block"] > max(max_px, 1):
        return f"px_block {p['px_block']} > the {max_px} output pixels"
    if p["ext"] in ASM_FORMS[1:]:
        ptrs = 0 if p.get("widen", "copy") == "copy" else (1 if stride is not None else p["px_block"])
        need = asm_registers(p["px_block"], p["oc_block"], p["ext"], p["w_fmt"], ptrs)
        if need > MAX_ASM_REGISTERS:
            return f"ext {p['ext']}: the asm block needs {need} registers (at most {MAX_ASM_REGISTERS})"
    if p["requant"] == "dbl":
        return "requant dbl: the GEMM has no doubled-accumulator form"
    if p["requant"] == "fast":
        reason = stage.form_reason("fast", v.target)
        if reason is not None:
            return f"requant fast: {reason}"
    return None


def gemm_default(v: PortableC, kq: int, n: int, max_px: int, stage: OutputStage,
                 shape: GemmShape | None = None) -> Schedule:
    """The heuristic point: 2x2 blocks (4 for few pixels, like dense: 1 x 4), two groups per iteration; the
    inputs widened where they lie (`widen = inline`) when the layer allows it (`shape`) and the cost model says
    it is no slower than copying them (few blocks of channels), else copied."""
    px = 2 if max_px >= 2 else 1
    oc = 2 if px == 2 else (4 if n >= 4 else (2 if n >= 2 else 1))
    fast = stage.form_reason("fast", v.target) is None
    point: Schedule = {"px_block": px, "oc_block": oc, "unroll": 2 if kq >= 2 else 1, "w_fmt": "i8",
                       "requant": "fast" if fast else "c", "no_sched": v.simd16, "ext": "asm" if v.simd16 else "c",
                       "share": False, "widen": "copy"}
    if shape is not None and inline_applies(shape.win, shape.oh, shape.ow):
        inline = {**point, "widen": "inline"}
        stride = pixel_stride(shape.win, shape.oh, shape.ow)
        if (gemm_legal(inline, shape.m, stage, v, stride) is None
                and gemm_cost(v, shape, inline, stride) <= gemm_cost(v, shape, point, stride)):
            point = inline
    return point


def gemm_cost(v: PortableC, shape: GemmShape, p: Schedule, stride: int | None = 0) -> float:
    """Estimated instructions of one call of GEMM point `p` (a static model for ranking points that trade speed
    for scratch, fit.lower_within; the tuner measures): per group of 4 reduction values and block, the loads
    and unpacking of the x pairs and the weights and the multiply-accumulates; the im2col copy; the loop; the
    requantization and store of each output."""
    win, n, m = shape.win, shape.n, shape.m
    px, ob, u = p["px_block"], p["oc_block"], max(1, p["unroll"])
    kq = shape.kp // 4
    inline = p.get("widen", "copy") == "inline"
    px_blocks = (m + px - 1) // px
    oc_blocks = (n + ob - 1) // ob
    if v.simd16:
        asm = p["ext"] in ASM_FORMS[1:]
        x = 3 * px if inline else (px if asm and p["ext"] != "asm_ldr" else 2 * px)
        w = ob * 3 if p["w_fmt"] == "i8" else ob * (1 if asm and p["ext"] == "asm" else 2)
        per_group = x + w + 2 * px * ob
    else:
        per_group = 4 * (px + ob + px * ob + (px if inline else 0))
    per_block = kq * per_group + 3 * ((kq + u - 1) // u) + 2 * ob + (px if inline and stride is None else 0)
    copy = 0.0
    if not inline:
        word = v.simd16 and (win.c % 4 == 0 or (win.dw == 1 and (win.kw * win.c) % 4 == 0))
        copy = m * (kq * 5 if word else win.k * 4 + 4 * win.kh * win.kw)
    epilogue = 8 * m * n
    return float(shape.batch * (px_blocks * oc_blocks * per_block + copy + epilogue + 6 * px_blocks))


# --- weights --------------------------------------------------------------------------------------------------

def pack_weights(w: np.ndarray, kp: int, fmt: str | None, ob: int = 1) -> np.ndarray:
    """(n, k) int8 weights -> what the GEMM reads, every row padded with zeros to kp. `fmt` None (no SIMD):
    int8 rows. SIMD: uint32 words per group of 4 (`fmt` i8: the 4 bytes in natural order; i16: two words of
    int16 pairs in `perm` order), in blocks of `ob` channels (the last block holds the rest), group-major
    inside a block: word (block, g, i) follows (block, g, i - 1) -- the order the GEMM reads them in."""
    n, k = w.shape
    padded = np.zeros((n, kp), np.int64)
    padded[:, :k] = w.astype(np.int64)
    if fmt is None:
        return padded.astype(np.int8)
    if fmt == "i8":
        b = (padded & 0xFF).reshape(n, kp // 4, 4)
        per_group = (b[..., 0] | (b[..., 1] << 8) | (b[..., 2] << 16) | (b[..., 3] << 24))[..., None]
    else:
        h = padded & 0xFFFF
        at = np.empty(kp, np.int64)
        at[[perm(i) for i in range(kp)]] = np.arange(kp)  # at[perm(k)] = k
        permuted = h[:, at]
        per_group = (permuted[:, 0::2] | (permuted[:, 1::2] << 16)).reshape(n, kp // 4, 2)
    blocks = [per_group[o:o + ob].transpose(1, 0, 2).reshape(-1) for o in range(0, n, ob)]
    return np.concatenate(blocks).astype(np.uint32)


def words_table(ctx: KernelContext, words: np.ndarray, hint: str) -> str:
    """A `static const uint32_t` table (word aligned: the GEMM may load pairs with LDRD)."""
    name = ctx.file.unique(f"{ctx.func_name}_{hint}")
    flat = np.asarray(words, np.uint32).reshape(-1)
    ctx.file.declare_array(name, "uint32_t", flat, hex_words_body(flat))
    ctx.file.constant_bytes += 4 * flat.size
    return name


# --- im2col ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Window:
    """Where the k = kh * kw * c reduction values of one output pixel come from (NHWC input, OHWI weights:
    k runs over ky, kx, channel). Dense is the 1 x 1 window over a row of k values."""

    h: int
    w: int
    c: int
    kh: int = 1
    kw: int = 1
    sh: int = 1
    sw: int = 1
    dh: int = 1
    dw: int = 1
    pt: int = 0
    pl: int = 0

    @property
    def k(self) -> int:
        return self.kh * self.kw * self.c

    def always_inside(self, oh: int, ow: int) -> tuple[bool, bool]:
        """(rows, columns): whether every window of an oh x ow output stays inside the input."""
        rows = self.pt == 0 and (oh - 1) * self.sh + (self.kh - 1) * self.dh < self.h
        cols = self.pl == 0 and (ow - 1) * self.sw + (self.kw - 1) * self.dw < self.w
        return rows, cols


def im2col(win: Window, oh: int, ow: int, v: PortableC, src: str, col: str, gs: int) -> str:
    """C filling the column of one output pixel, whose window origin is (iy0, ix0) (int32 locals), from the
    batch's input `src` (const int8_t*). A column is kp/4 groups of 4 values, `gs` words apart (the columns of
    a block's pixels are interleaved group by group, so the GEMM reads one group of every pixel from one
    place). With 16-bit SIMD (`v.simd16`): `col` (`v.pair_type()`*, a union of one uint32_t and two int16_t,
    so the words the GEMM reads and the halves written here are one object, without type punning through
    pointers) points at this pixel's first pair, value k is half (k / 2) % 2 of pair (k / 4) * gs + k % 2
    (`perm`). Without: `col` (int16_t*) points at this pixel's column, value k at index k. Out-of-bounds taps
    and the padding up to kp are zeros."""
    simd = v.simd16
    c, kw, kh = win.c, win.kw, win.kh
    kp = pad4(win.k)
    rows_in, cols_in = win.always_inside(oh, ow)
    word_tap = simd and c % 4 == 0
    word_row = simd and not word_tap and win.dw == 1 and (kw * c) % 4 == 0

    def at(k: str) -> str:
        if simd:
            return f"{col}[(({k}) >> 2) * {gs} + (({k}) & 1)].h[(({k}) >> 1) & 1]"
        return f"{col}[{k}]"

    def words(n_groups: int, g0: str, from_: str) -> str:
        """n_groups groups of 4 bytes at `from_` widened into the column's groups g0.. (SIMD)."""
        one = n_groups == 1
        q = "" if one else " + q"
        off = "" if one else " + 4 * q"
        body = ["uint32_t v;", f"memcpy(&v, {from_}{off}, 4);",
                f"{col}[({g0}{q}) * {gs}].w = {v.sxtab16('input_offset2', 'v')};",
                f"{col}[({g0}{q}) * {gs} + 1].w = {v.sxtab16_odd('input_offset2', 'v')};"]
        return block("", body) if one else for_loop("q", 0, n_groups, body)

    def zeros(k0: str, n: int) -> str:
        if word_tap:  # k0 and n are multiples of 4
            return for_loop("q", 0, n // 4, [f"{col}[(({k0}) / 4 + q) * {gs}].w = 0u;",
                                             f"{col}[(({k0}) / 4 + q) * {gs} + 1].w = 0u;"])
        return for_loop("t", 0, n, f"{at(f'({k0}) + t')} = 0;")

    def elems(k0: str, from_: str, n: int) -> str:
        return for_loop("t", 0, n, f"{at(f'({k0}) + t')} = (int16_t)((int32_t){from_}[t] + input_offset);")

    def or_else(test: str, then: str, otherwise: str | list[str]) -> str:
        """`if (test) { then } else { otherwise }`, or the bare block `{ otherwise }` without a test."""
        return (block(f"if ({test})", then) + " else " if test else "") + block("", otherwise)

    if word_tap:
        tap_ok = words(c // 4, f"(ky * {kw} + kx) * {c // 4}", "xp")
    else:
        tap_ok = elems(f"(ky * {kw} + kx) * {c}", "xp", c)
    tap_zero = zeros(f"(ky * {kw} + kx) * {c}", c)
    col_test = "" if cols_in else f"ix < 0 || ix >= {win.w}"
    tap = lines(f"const int32_t ix = ix0 + kx * {win.dw};",
                or_else(col_test, tap_zero, [f"const int8_t* const xp = xrow + ix * {c};", tap_ok]))
    row_taps = for_loop("kx", 0, kw, tap)
    if word_row:  # a whole window row is kw * c contiguous bytes: words when it is inside the input
        inside = "" if cols_in else f"ix0 >= 0 && ix0 + {kw - 1} < {win.w}"
        fast = words(kw * c // 4, f"ky * {kw * c // 4}", f"xrow + ix0 * {c}")
        row_taps = fast if not inside else block(f"if ({inside})", fast) + " else " + block("", row_taps)
    row_test = "" if rows_in else f"iy < 0 || iy >= {win.h}"
    row = lines(f"const int32_t iy = iy0 + ky * {win.dh};",
                or_else(row_test, zeros(f"ky * {kw * c}", kw * c),
                        [f"const int8_t* const xrow = {src} + iy * {win.w * c};", row_taps]))
    pads = [f"{col}[{(k >> 2) * gs + (k & 1)}].h[{(k >> 1) & 1}] = 0;" if simd else f"{col}[{k}] = 0;"
            for k in range(win.k, kp)]
    return lines(for_loop("ky", 0, kh, row), pads)


# --- the GEMM block -------------------------------------------------------------------------------------------

def asm_registers(px: int, ob: int, ext: str = "asm", w_fmt: str = "i8", inline_ptrs: int = 0) -> int:
    """Registers the asm form `ext` of a px x ob block holds at once: accumulators, the pixels' x pairs, the
    two pointers and the weights: two temporaries (`asm`, `asm_ldr`), or every channel's word plus one
    temporary for its odd half (`asm_run`, int8 weights) or every channel's two words (`asm_run`, int16).
    `widen = inline` (`inline_ptrs` pointers into the input: 1, or one per pixel) adds the doubled input
    offset and the pointers beyond the first."""
    if ext == "asm_run":
        weights = ob + 1 if w_fmt == "i8" else 2 * ob
    else:
        weights = 2
    extra = 1 + inline_ptrs - 1 if inline_ptrs else 0
    return px * ob + 2 * px + weights + 2 + extra


@dataclass(frozen=True)
class GemmShape:
    """One conv/dense layer as the GEMM sees it: `batch` inputs whose `win` windows give an oh x ow output of
    `n` channels."""

    win: Window
    batch: int
    oh: int
    ow: int
    n: int

    @property
    def kp(self) -> int:
        """The reduction length padded to whole groups of 4."""
        return pad4(self.win.k)

    @property
    def m(self) -> int:
        """Output pixels per batch."""
        return self.oh * self.ow


@dataclass(frozen=True, eq=False)
class GemmLayer:
    """What one node hands the GEMM: its shape, output stage (prepared once), (n, k) int8 weights in the
    window's k order, the C names of its input, output and int32 bias (None: no bias), and its own comment
    (the accumulator bound) that heads the body."""

    shape: GemmShape
    stage: OutputStage
    weights: np.ndarray
    x: str
    y: str
    bias: str | None
    note: str


@dataclass(frozen=True)
class GemmBlock:
    """y[px, oc] for a block of `px` pixels whose columns were filled by `im2col` (interleaved with SIMD),
    every output channel, `oc_block` at a time. SIMD weights are packed by `pack_weights` in blocks of
    `oc_block` channels, group-major inside a block, so one pointer walks the whole table in order. `init`
    gives the C expression of an output channel's initial accumulator; zp, lo and hi are numbers or C
    expressions (a shared GEMM's parameters); `ssat`: the store saturates with SSAT first. With `inline`
    (`widen = inline`) there are no columns: pixel j's k reduction values start at `xp<j>` (const int8_t*), or at
    `xp0 + j * stride` when `stride` is not None, and each word is widened in the block."""

    v: PortableC
    n: int  # output channels
    kp: int  # padded reduction length
    w_table: str  # packed weights (pack_weights)
    init: Callable[[str], str]
    rq: Requant
    zp: int | str
    lo: int | str
    hi: int | str
    ssat: bool
    w_fmt: str
    unroll: int
    ext: str  # SIMD: "acle" (intrinsics) or "asm" (one asm block per group)
    inline: bool = False
    k: int = 0  # the reduction length (inline: a last group of k % 4 values is read byte by byte)
    stride: int | None = 0  # inline: bytes between the inputs of a block's pixels (None: a pointer per pixel)

    @property
    def wpg(self) -> int:
        """Weight words per group per channel (SIMD)."""
        return 1 if self.w_fmt == "i8" else 2

    def all_channels(self, px: int, ob: int, col: str, ys: list[str]) -> str:
        """All channels for px pixels: the main channel blocks of ob, then a tail block."""
        main = self.n // ob * ob
        parts = [f"const uint32_t* wq = {self.w_table};" if self.v.simd16 else ""]
        if main:
            parts.append(block(f"for (int32_t oc = 0; oc < {main}; oc += {ob})", self._channels(px, ob, col, ys)))
        rest = self.n - main
        if rest:
            parts.append(block("", [f"const int32_t oc = {main};", self._channels(px, rest, col, ys)]))
        return lines(parts)

    def _x_at(self, g: int, j: int) -> tuple[str, int]:
        """Inline: (pointer, byte offset) of group g of pixel j, from the block's pointers (`xq` or `xq<j>`)."""
        if self.stride is None:
            return f"xq{j}", 4 * g
        return "xq", 4 * g + j * self.stride

    def _simd_group(self, g: int, px: int, ob: int, accs: list[list[str]], part: int = 4) -> str:
        """Group g of a SIMD block; `part` < 4: an inline last group of that many values."""
        v, wpg = self.v, self.wpg
        xo = [g * 2 * px + 2 * j for j in range(px)]  # word offsets of pixel j's pair
        wo = [g * ob * wpg + i * wpg for i in range(ob)]
        if self.ext in ASM_FORMS[1:] and part == 4:
            return self._asm_group(g, xo, wo, px, ob, accs)
        out = []
        for i in range(ob):
            if self.w_fmt == "i8":
                out += [f"const uint32_t w{i} = wq[{wo[i]}];", f"const uint32_t wa{i} = {v.sxtb16(f'w{i}')};",
                        f"const uint32_t wb{i} = {v.sxtb16_odd(f'w{i}')};"]
            else:
                out += [f"const uint32_t wa{i} = wq[{wo[i]}];", f"const uint32_t wb{i} = wq[{wo[i] + 1}];"]
        for j in range(px):
            if self.inline:  # a word of 4 input bytes widened here: the column's lane order, the offset added
                ptr, off = self._x_at(g, j)
                out += [f"uint32_t v{j};" if part == 4 else f"uint32_t v{j} = 0u;",
                        f"memcpy(&v{j}, {ptr} + {off}, {part});",
                        f"const uint32_t xa{j} = {v.sxtab16('input_offset2', f'v{j}')};",
                        f"const uint32_t xb{j} = {v.sxtab16_odd('input_offset2', f'v{j}')};"]
            else:
                out += [f"const uint32_t xa{j} = xq[{xo[j]}].w;", f"const uint32_t xb{j} = xq[{xo[j] + 1}].w;"]
        for i in range(ob):
            for j in range(px):
                a = accs[i][j]
                out += [f"{a} = {v.smlad(f'wa{i}', f'xa{j}', a)};", f"{a} = {v.smlad(f'wb{i}', f'xb{j}', a)};"]
        return block("", out)

    def _asm_group(self, g: int, xo: list[int], wo: list[int], px: int, ob: int, accs: list[list[str]]) -> str:
        """One group as one asm block in the form `self.ext` (module docstring); `xo`/`wo`: the word offsets
        of each pixel's x pair and each channel's weights. Inline: each pixel's word is loaded and widened
        (SXTAB16 ror 8 into its odd pair, SXTAB16 over the word itself) before the weights."""
        v, i8 = self.v, self.w_fmt == "i8"
        xs = [f"x{h}{j}" for j in range(px) for h in "ab"]
        x_ptrs = ["xq"]
        if self.inline:
            loads = []
            for j in range(px):
                ptr, off = self._x_at(g, j)
                loads += [v.asm_ldr(f"xa{j}", ptr, off), v.asm_sxtab16(f"xb{j}", "off2", f"xa{j}", odd=True),
                          v.asm_sxtab16(f"xa{j}", "off2", f"xa{j}")]
            if self.stride is None:
                x_ptrs = [f"xq{j}" for j in range(px)]
        elif self.ext == "asm":
            loads = [v.asm_ldrd(f"xa{j}", f"xb{j}", "xq", 4 * xo[j]) for j in range(px)]
        else:
            loads = [v.asm_ldr(f"x{h}{j}", "xq", 4 * (xo[j] + (h == "b"))) for j in range(px) for h in "ab"]

        def weights(i: int, lo: str, hi: str) -> list[str]:
            """The loads of channel i's weights into lo (int8: the word; int16: the even pairs) and hi."""
            if i8:
                return [v.asm_ldr(lo, "wq", 4 * wo[i])]
            if self.ext == "asm":
                return [v.asm_ldrd(lo, hi, "wq", 4 * wo[i])]
            return [v.asm_ldr(lo, "wq", 4 * wo[i]), v.asm_ldr(hi, "wq", 4 * wo[i] + 4)]

        run = self.ext == "asm_run"
        if run:  # channel i's weights in wa{i} (and wb{i}); int8: the odd half through t1
            regs = [(f"wa{i}", "t1" if i8 else f"wb{i}") for i in range(ob)]
            temps = [f"wa{i}" for i in range(ob)] + (["t1"] if i8 else [f"wb{i}" for i in range(ob)])
        else:
            regs = [("t0", "t1")] * ob
            temps = ["t0", "t1"]
        ins = loads + weights(0, *regs[0])
        if run:
            for i in range(1, ob):
                ins += weights(i, *regs[i])
        for i, (lo, hi) in enumerate(regs):
            if i and not run:
                ins += weights(i, lo, hi)
            if i8:
                ins += [v.asm_sxtb16(hi, lo, odd=True), v.asm_sxtb16(lo, lo)]
            for j in range(px):
                a = accs[i][j]
                ins += [v.asm_smlad(a, lo, f"xa{j}", a), v.asm_smlad(a, hi, f"xb{j}", a)]
        outs = ([f'[{a}] "+r"({a})' for row in accs for a in row] + [f'[{t}] "=&r"({t})' for t in temps]
                + [f'[{x}] "=&r"({x})' for x in xs])
        text = "\n".join(f'"{x}\\n\\t"' for x in ins[:-1]) + f'\n"{ins[-1]}"'
        decl = f"uint32_t {', '.join(temps + xs)};"
        ins_ = ", ".join(['[wq] "r"(wq)', *(f'[{q}] "r"({q})' for q in x_ptrs)]
                         + (['[off2] "r"(input_offset2)'] if self.inline else []))
        what = "the input" if self.inline else "the column: never moved across its stores"
        return block("", [decl, "__asm__ __volatile__(" + indent(text, 4).lstrip(),
                          "        : " + ", ".join(outs), f"        : {ins_}",
                          f'        : "memory");  /* reads {what} */'])

    def _portable_group(self, g: int, px: int, ob: int, accs: list[list[str]], part: int = 4) -> str:
        out = []
        for t in range(part):  # (an inline last group: its values past k meet zero weights, so are skipped)
            k = 4 * g + t
            out += [f"const int32_t w{i}_{t} = wq[{i * self.kp + k}];" for i in range(ob)]
            if self.inline:
                for j in range(px):
                    ptr, off = self._x_at(g, j)
                    out.append(f"const int32_t x{j}_{t} = (int32_t){ptr}[{off + t}] + input_offset;")
            else:
                out += [f"const int32_t x{j}_{t} = xq[{j * self.kp + k}];" for j in range(px)]
            out += [f"{accs[i][j]} += w{i}_{t} * x{j}_{t};" for i in range(ob) for j in range(px)]
        return block("", out)

    def _channels(self, px: int, ob: int, col: str, ys: list[str]) -> str:
        """One block of ob channels (from `oc`) x px pixels; pixel j's output row (n int8) starts at `ys[j]`."""
        simd = self.v.simd16
        kq = self.kp // 4
        part = 0  # inline: the values of a last partial group
        if self.inline and self.k % 4:
            kq, part = self.k // 4, self.k % 4
        u = max(1, min(self.unroll, kq))
        main, rest = kq // u, kq % u
        accs = [[f"a{i}{j}" for j in range(px)] for i in range(ob)]
        out = []
        for i in range(ob):
            out.append(f"int32_t {accs[i][0]} = {self.init(f'oc + {i}')};")
            out += [f"int32_t {accs[i][j]} = {accs[i][0]};" for j in range(1, px)]
        if self.inline:
            ptrs = ["xq"] if self.stride is not None else [f"xq{j}" for j in range(px)]
            out += [f"const int8_t* {q} = xp{q[2:] or '0'};" for q in ptrs]
            x_step = [f"{q} += {4 * u};" for q in ptrs]
        else:
            ptrs = ["xq"]
            out.append(f"const {self.v.pair_type()}* xq = {col};" if simd else f"const int16_t* xq = {col};")
            x_step = [f"xq += {u * 2 * px if simd else 4 * u};"]
        tail = rest + (1 if part else 0)
        if simd:
            group = self._simd_group
            step = [f"wq += {u * ob * self.wpg};", *x_step]
            tail_step = f"wq += {tail * ob * self.wpg};" if tail else ""
        else:
            out.append(f"const int8_t* wq = {self.w_table} + (oc) * {self.kp};")
            group = self._portable_group
            step = [f"wq += {4 * u};", *x_step]
            tail_step = ""
        body = [group(g, px, ob, accs) for g in range(u)] if main else []
        if main == 1:
            out += body + step
        elif main > 1:
            out.append(block(f"for (int32_t q = {main}; q > 0; --q)", body + step))
        out += [group(g, px, ob, accs) for g in range(rest)]
        if part:
            out.append(group(rest, px, ob, accs, part))
        out.append(tail_step)
        out += [f"(void){q};" for q in ptrs]
        for i in range(ob):
            for j in range(px):
                a = accs[i][j]
                ch = f"oc + {i}" if i else "oc"
                out.append(self.rq.stmt(a, ch))
                out.append(clamp_store(a, self.zp, self.lo, self.hi, f"{ys[j]}[{ch}]",
                                       self.v if self.ssat else None, zp_in_sat=False))
        return lines(out)


# --- the whole kernel -------------------------------------------------------------------------------------------

def _shared_name(ctx: KernelContext, s: Schedule, layer: GemmLayer, rq: Requant, attrs: str) -> str:
    """The file-scope name of the shared GEMM of this layer: a digest of everything its text is made of (the
    vocabulary, the shape, the schedule, the function attributes and the requantization's form: rounding,
    operands as a table or scalars, the helper it calls), never of the layer's numbers (they are
    parameters). Two layers with one name have one function."""
    st = layer.stage
    key = {"isa": ctx.isa.name, "attrs": attrs, "shape": asdict(layer.shape),
           "schedule": {k: s[k] for k in sorted(s) if k not in ("algo", "share")},
           "rq": [rq.impl, st.rounding, rq.width, rq.uniform, rq.impl == "c" and multipliers_pm(rq.multiplier)],
           "bias": layer.bias is not None}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    return f"{ctx.file.prefix}_gemm_{digest}"


def gemm_kernel(ctx: KernelContext, s: Schedule, layer: GemmLayer) -> KernelCode:
    """An int8 conv/dense as im2col + GEMM with schedule `s`. With `s["share"]` the GEMM is a file-scope
    function of everything but the data (weights, bias, requantization (a table when the weights are per
    channel, else scalars), zero points and clamp range are its parameters), emitted once per file for all
    layers of one workload and schedule: code size for a call per layer."""
    v = ctx.isa
    simd = v.simd16
    shape, st = layer.shape, layer.stage
    win, n, kp, m = shape.win, shape.n, shape.kp, shape.m
    share = bool(s.get("share", False))
    px_block, ob = s["px_block"], s["oc_block"]
    inline = s.get("widen", "copy") == "inline"
    if inline and not inline_applies(win, shape.oh, shape.ow):
        raise ctx.error("widen inline: the reduction values of a pixel are not contiguous in the input")
    stride = pixel_stride(win, shape.oh, shape.ow) if inline else 0
    packed = pack_weights(layer.weights, kp, s["w_fmt"] if simd else None, ob)
    table = words_table(ctx, packed, f"w{s['w_fmt']}") if simd else ctx.table("int8_t", packed, "wpk")
    rq = Requant(ctx, s["requant"], st.rounding, st.multiplier, st.shift, "rq" if share else None,
                 shared_scalars=share and not st.per_channel)
    ssat = v.thumb2  # SSAT #8 before the clamp: every Thumb-2 Cortex-M has it
    if ssat:
        v.use_sat()
    bias: str | None
    zp: int | str
    lo: int | str
    hi: int | str
    if share:  # the layer's data are the shared function's parameters
        bias, w_ref, zp, lo, hi = "bias" if layer.bias else None, "wt", "output_zp", "act_lo", "act_hi"
    else:
        bias, w_ref, zp, lo, hi = layer.bias, table, st.output_zp, st.act_min, st.act_max
    gemm = GemmBlock(v, n, kp, w_ref, lambda oc: f"{bias}[{oc}]" if bias else "0", rq, zp, lo, hi, ssat, s["w_fmt"],
                     s["unroll"], s["ext"], inline, win.k, stride)
    ctx.helper("string")
    pair = ""
    if simd:
        v.use_simd()
        pair = v.pair_type()
    attrs = ctx.helper("no_sched") if s["no_sched"] else ""
    head = [] if share else [f"const int32_t input_offset = {-st.input_zp};  /* -input zero point */"]
    if simd:
        head += ["const uint32_t input_offset2 = ((uint32_t)input_offset & 0xFFFFu) * 0x10001u;"
                 "  /* in both int16 lanes */", "(void)input_offset2;"]
    if not inline:
        head.append(f"{pair}* const colw = ({pair}*)(void*)scratch;" if simd else
                    "int16_t* const colh = (int16_t*)(void*)scratch;")
    if share:
        head.append("(void)scratch;")  # (the shared function's parameter; NULL for an inline layer)
    head.append(rq.setup.rstrip("\n"))
    advance = block(f"if (++ox == {shape.ow})", ["ox = 0;", "++oy;"])

    # A last block with fewer pixels than px_block (m % px_block) starts earlier, so that it ends on the last
    # pixel: its first pixels are computed again and stored again with the same bytes (no tail copy of the
    # GEMM, which would cost code size, and no spill row).
    ragged = m % px_block != 0
    origin = [f"const int32_t iy0 = oy * {win.sh} - {win.pt};", f"const int32_t ix0 = ox * {win.sw} - {win.pl};",
              "(void)iy0;", "(void)ix0;"]
    if inline and stride is not None:
        fill_loop = f"const int8_t* const xp0 = xb + p0 * {stride};"
    elif inline:  # a pointer per pixel of the block
        fill_loop = lines([block("", [*origin, f"xp{j} = xb + (iy0 * {win.w} + ix0) * {win.c};", advance])
                           for j in range(px_block)])
        fill_loop = lines(f"const int8_t {', '.join(f'*xp{j}' for j in range(px_block))};", fill_loop)
    else:
        if simd:  # the block's columns interleaved group by group
            col_decl = f"{pair}* const cw = colw + 2 * j;"
            fill = im2col(win, shape.oh, shape.ow, v, "xb", "cw", 2 * px_block)
        else:
            col_decl = f"int16_t* const ch = colh + j * {kp};"
            fill = im2col(win, shape.oh, shape.ow, v, "xb", "ch", 2)
        fill_loop = for_loop("j", 0, px_block, [*origin, col_decl, fill, advance])
    ys = [f"y{j}" for j in range(px_block)]
    rows = [f"int8_t* const y0 = yb + p0 * {n};"]
    rows += [f"int8_t* const y{j} = y0 + {j * n};" for j in range(1, px_block)]
    last = m - px_block
    rewind = block(f"if (p0 > {last})", [f"p0 = {last};  /* the last block ends on the last pixel */",
                                          f"oy = {last // shape.ow};", f"ox = {last % shape.ow};"]) if ragged else ""
    pixels = block(f"for (int32_t p0 = 0; p0 < {m}; p0 += {px_block})",
                   [rewind, fill_loop, *rows, gemm.all_channels(px_block, ob, "colw" if simd else "colh", ys)])
    scratch = gemm_scratch(s, kp)
    xs, ys_ = ("x", "y") if share else (layer.x, layer.y)
    core = lines(head, for_loop("b", 0, shape.batch, [
        f"const int8_t* const xb = {xs} + b * {win.h * win.w * win.c};",
        f"int8_t* const yb = {ys_} + b * {m * n};",
        "int32_t oy = 0;", "int32_t ox = 0;", pixels, "(void)oy;", "(void)ox;"]), "return 0;")
    if not share:
        return KernelCode(body=layer.note + core, scratch_bytes=scratch, attributes=attrs)
    rq_params = [f"int32_t rq{t}" for t in range(rq.width)] if rq.uniform else ["const int32_t* rq"]
    rq_args = [str(x) for x in rq.values] if rq.uniform else [rq.table]
    unused = [f"(void){name};" for name in ["bias", *(p.split()[-1].lstrip("*") for p in rq_params), "output_zp",
                                             "act_lo", "act_hi"]]
    wtype = "uint32_t" if simd else "int8_t"
    params = (f"const int8_t* x, int8_t* y, uint8_t* scratch, const {wtype}* wt, const int32_t* bias, "
              f"{', '.join(rq_params)}, int32_t input_offset, int32_t output_zp, int32_t act_lo, int32_t act_hi")
    name = _shared_name(ctx, s, layer, rq, attrs)
    if name not in ctx.file.names:
        ctx.file.names.add(name)
        ctx.file.decls.append((f"{attrs} " if attrs else "") + block(f"static int32_t {name}({params})",
                                                                        [*unused, core]))
    scratch_arg, bias_arg = "scratch" if scratch else "NULL", layer.bias or "NULL"
    call = (f"return {name}({layer.x}, {layer.y}, {scratch_arg}, {table}, {bias_arg}, {', '.join(rq_args)}, "
            f"{-st.input_zp}, {st.output_zp}, {st.act_min}, {st.act_max});")
    return KernelCode(body=layer.note + call, scratch_bytes=scratch)

