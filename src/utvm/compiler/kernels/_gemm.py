"""int8 convolution and dense as im2col + GEMM, with SIMD multiply-accumulates on DSP targets.

One emitter serves conv2d (any kernel size, stride, dilation and padding; one group) and dense: the input
of `px_block` output pixels is widened to int16 with the input offset added (`x - input_zero_point`, in
[-255, 255]) into columns of `kp` values (the reduction length `k` padded to a multiple of 4 with zeros;
padding taps are zeros too, which is exactly TFLite's "padding taps are skipped"), and a register block of
`oc_block` output channels x `px_block` pixels accumulates column . weight-row products starting from the
bias. The int32 sum is the same integer as TFLite's accumulator whatever the order (integer addition is
associative; the kernel's proven bound |acc| <= max|x - zp| * sum|w| + |bias| < 2^31 holds for every
partial sum, and SMLAD wraps rather than saturates), so every point of the space gives the same bits.

DSP targets (ARMv7E-M and later; SMLAD does two 16x16 MACs): a column holds, per group of 4 reduction
positions k..k+3, the words (x[k], x[k+2]) and (x[k+1], x[k+3]) (`perm`), which is what SXTAB16 and
SXTAB16-ror-8 of a word of 4 input bytes give; the weights are words of 4 int8 values in their natural
order, so SXTB16 / SXTB16-ror-8 of a weight word give the matching (w[k], w[k+2]) / (w[k+1], w[k+3]) -- or,
with `w_fmt = i16`, those int16 pairs pre-widened at compile time (twice the flash, no unpacking in the
loop). Ideas from CMSIS-NN's `arm_nn_mat_mult_kernel_s8_s16` (a 2x2 SMLAD block) and docs/kernels.md §5,
written here. Portable targets (host, Cortex-M0/M3): the same blocks in plain C over natural-order columns.

Knobs (all bit-exact; `gemm_knobs`): `px_block` (pixels per block), `oc_block` (channels per block),
`k_unroll` (4-value groups per loop iteration), `w_fmt` (i8 | i16; i16 on DSP targets only), `requant`
(c | fast, see `Requant`), `no_sched` (GCC's pre-register-allocation scheduler off for the operator, which
otherwise hoists the loads of unrolled SMLAD code and spills; docs/kernels.md §2.4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from utvm.compiler.kernels import KernelContext, multipliers_pm
from utvm.compiler.schedule import Knob, Schedule
from utvm.target import Target

THUMB2_ISAS = ("armv7-m", "armv7e-m", "armv8-m.main", "armv8.1-m.main")
#: accumulators a register block may hold (Cortex-M has 13 usable registers; pointers and temps need some)
MAX_ACCUMULATORS = 8


def perm(k: int) -> int:
    """Where reduction position k lives in a DSP column (int16 index): pairs (k, k+2) and (k+1, k+3)."""
    return (k & ~3) | ((k & 1) << 1) | ((k >> 1) & 1)


def pad4(k: int) -> int:
    return (k + 3) // 4 * 4


def _indent(text: str, levels: int = 1) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())


# --- the space ------------------------------------------------------------------------------------------------

def gemm_knobs(target: Target, kq: int) -> tuple[Knob, ...]:
    """The GEMM's knobs for a reduction of `kq` groups of 4 on `target`."""
    unrolls = tuple(u for u in (1, 2, 4, 8) if u <= max(kq, 1))
    return (
        Knob("px_block", (1, 2, 4), "output pixels per register block"),
        Knob("oc_block", (1, 2, 4), "output channels per register block"),
        Knob("k_unroll", unrolls, "groups of 4 reduction values per loop iteration"),
        Knob("w_fmt", ("i8", "i16") if target.dsp else ("i8",), "weights as int8 words or pre-widened int16"),
        Knob("requant", ("c", "fast"), "requantization: the shared C helper or the shortest exact form"),
        Knob("no_sched", (False, True), "GCC's pre-RA instruction scheduler off for this operator"),
        Knob("ext", ("acle", "asm") if target.dsp else ("c",), "the block as ACLE intrinsics or one asm block"),
        Knob("share", (False, True), "one GEMM function per file for every layer of this workload and schedule "
             "(code size) or one per layer"),
    )


def gemm_legal(p: Schedule, max_px: int, requant_fast: str | None) -> str | None:
    """Why a GEMM point is not legal here (None when it is)."""
    if p["px_block"] * p["oc_block"] > MAX_ACCUMULATORS:
        return f"{p['px_block']} x {p['oc_block']} accumulators exceed {MAX_ACCUMULATORS} registers"
    if p["px_block"] > max(max_px, 1):
        return f"px_block {p['px_block']} > the {max_px} output pixels"
    if p["ext"] == "asm" and asm_registers(p["px_block"], p["oc_block"]) > MAX_ASM_REGISTERS:
        return f"the asm block needs {asm_registers(p['px_block'], p['oc_block'])} registers"
    if p["requant"] == "fast" and requant_fast is not None:
        return f"requant fast: {requant_fast}"
    return None


def gemm_default(target: Target, kq: int, n: int, max_px: int, requant_fast: str | None) -> Schedule:
    """The heuristic point: 2x2 blocks (4 for few pixels, like dense: 1 x 4), two groups per iteration."""
    px = 2 if max_px >= 2 else 1
    oc = 2 if px == 2 else (4 if n >= 4 else (2 if n >= 2 else 1))
    return {"px_block": px, "oc_block": oc, "k_unroll": 2 if kq >= 2 else 1, "w_fmt": "i8",
            "requant": "fast" if requant_fast is None else "c", "no_sched": target.dsp,
            "ext": "asm" if target.dsp else "c", "share": False}


# --- weights --------------------------------------------------------------------------------------------------

def pack_weights(w: np.ndarray, kp: int, fmt: str, dsp: bool, ob: int = 1) -> np.ndarray:
    """(n, k) int8 weights -> what the GEMM reads, every row padded with zeros to kp. Portable targets: int8
    rows. DSP targets: uint32 words per group of 4 (i8: the 4 bytes in natural order; i16: two words of
    int16 pairs in `perm` order), in blocks of `ob` channels (the last block holds the rest), group-major
    inside a block: word (block, g, i) follows (block, g, i - 1) -- the order the GEMM reads them in."""
    n, k = w.shape
    padded = np.zeros((n, kp), np.int64)
    padded[:, :k] = w.astype(np.int64)
    if not dsp:
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
    body = ",\n  ".join(", ".join(f"0x{int(v):08x}u" for v in flat[i:i + 8]) for i in range(0, flat.size, 8))
    ctx.file.decls.append(f"static const uint32_t {name}[{max(flat.size, 1)}] = {{\n  {body or '0u'}\n}};")
    ctx.file.constant_bytes += 4 * flat.size
    return name


# --- requantization -------------------------------------------------------------------------------------------

class Requant:
    """The exact requantization (MultiplyByQuantizedMultiplier in the op's rounding) in a chosen form.

    "c": the shared helpers (tvm_requant_single / tvm_requant_double[_pm]).
    "fast", single rounding, every shift <= -2 (so s = 31 - shift >= 33): with hi = (x * m) >> 32,
      (x * m + 2^(s-1)) >> s == (hi + 2^(s-33)) >> (s-32): the low word can never carry into the result
      (hi * 2^32 <= x*m < (hi + 1) * 2^32 and 2^(s-32) divides 2^32). SMULL, ADD, ASR.
    "fast", double rounding, every shift <= -1 and multiplier >= 0, Thumb-2 targets: a six-instruction asm
      (helper "requant:double_asm") computing gemmlowp's two roundings exactly.
    Per-channel operands live in one interleaved table (one base pointer, consecutive loads).
    """

    def __init__(self, ctx: KernelContext, impl: str, rounding: str, multiplier: Sequence[int],
                 shift: Sequence[int], table_param: str | None = None, shared_scalars: bool = False) -> None:
        """`table_param`: a kernel shared between layers reaches the operands through parameters: the
        table (`self.table` names the layer's) by this name, or, with `shared_scalars`, the scalars
        rq0.. (`self.values` holds the layer's)."""
        self.ctx, self.impl, self.rounding = ctx, impl, rounding
        self.multiplier, self.shift = [int(m) for m in multiplier], [int(s) for s in shift]
        if impl == "fast":
            reason = self.fast_reason(rounding, self.multiplier, self.shift, ctx.target)
            if reason:
                raise ctx.error(f"requant fast: {reason}")
        if impl == "fast" and rounding == "single":
            ops = [self.multiplier, [1 << (-s - 2) for s in self.shift], [-s - 1 for s in self.shift]]
        elif impl == "fast":
            ops = [self.multiplier, [-s for s in self.shift]]
        else:
            ops = [self.multiplier, self.shift]
        self.width = len(ops)
        self.values = [o[0] for o in ops]
        same = all(len(set(o)) == 1 for o in ops)
        self.uniform = same if table_param is None else shared_scalars
        if shared_scalars and not same:
            raise ctx.error("a shared kernel with scalar requantization operands needs one multiplier and shift")
        self.ref = table_param
        self.table = ""
        if self.uniform:
            self.setup = "" if table_param else "".join(f"const int32_t rq{t} = {v};\n"
                                                        for t, v in enumerate(self.values))
        else:
            self.setup = ""
            inter = np.array(ops, np.int64).T.reshape(-1)
            self.table = ctx.table("int32_t", inter, "rq")
            self.ref = table_param or self.table

    @staticmethod
    def fast_reason(rounding: str, multiplier: Sequence[int], shift: Sequence[int], target: Target) -> str | None:
        """None if the "fast" form is exact and available for these parameters on `target`; else why not."""
        if rounding == "single":
            return None if max(shift) <= -2 else "a shift above -2 (the short single-rounding form needs <= -2)"
        if target.isa not in THUMB2_ISAS:
            return f"{target.name} lacks Thumb-2 SMULL/ADC with shifted operands"
        if max(shift) > -1:
            return "a left or zero shift (the asm form needs a right shift of at least 1)"
        if min(multiplier) < 0:
            return "a negative multiplier"
        return None

    def operand(self, t: int, oc: str) -> str:
        return f"rq{t}" if self.uniform else f"{self.ref}[({oc}) * {self.width} + {t}]"

    def stmt(self, v: str, oc: str) -> str:
        """C statement: `v` (int32 lvalue) = `v` requantized for output channel `oc` (no output offset)."""
        a, b = self.operand(0, oc), self.operand(1, oc)
        if self.impl == "fast" and self.rounding == "single":
            return f"{v} = ((int32_t)(((int64_t){v} * {a}) >> 32) + {b}) >> {self.operand(2, oc)};"
        if self.impl == "fast":
            fn = self.ctx.helper("requant:double_asm")
            return f"{v} = {fn}({v}, {a}, {b});"
        fn = self.ctx.helper("requant_pm" if multipliers_pm(self.multiplier) else "requant", self.rounding)
        return f"{v} = {fn}({v}, {a}, {b});"


def store_stmt(v: str, zp: int | str, lo: int | str, hi: int | str, dst: str, ssat: bool = False) -> str:
    """C: add the output zero point to int32 `v`, clamp it to [lo, hi] (a sub-range of int8) and store it
    as int8 at `dst`. `ssat`: saturate to int8 with SSAT first (one instruction; `ssat_available`), so only
    bounds inside [-128, 127] need a compare. zp, lo and hi are numbers or C expressions (a shared kernel's
    parameters: then both bounds are always compared)."""
    if isinstance(zp, str):
        zp_s = f" + {zp}"
    else:
        zp_s = f" + {zp}" if zp > 0 else (f" - {-zp}" if zp < 0 else "")
    lines = [f"{v} = {v}{zp_s};"]
    if ssat:
        lines.append(f"{v} = __ssat({v}, 8);")
    if isinstance(lo, str) or lo > -128 or not ssat:
        lines.append(f"{v} = {v} < {lo} ? {lo} : {v};")
    if isinstance(hi, str) or hi < 127 or not ssat:
        lines.append(f"{v} = {v} > {hi} ? {hi} : {v};")
    lines.append(f"{dst} = (int8_t){v};")
    return "\n".join(lines)


def ssat_available(ctx: KernelContext) -> bool:
    """Whether SSAT may be used (every Thumb-2 Cortex-M has it); requests <arm_acle.h> when it may."""
    if ctx.target.isa not in THUMB2_ISAS:
        return False
    ctx.helper("acle_sat")
    return True


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


def im2col(win: Window, oh: int, ow: int, dsp: bool, src: str, col_w: str, col_h: str, gs: int) -> str:
    """C filling the column of one output pixel, whose window origin is (iy0, ix0) (int32 locals), from the
    batch's input `src` (const int8_t*). A column is kp/4 groups of 4 values, `gs` words apart (the columns of
    a block's pixels are interleaved group by group, so the GEMM reads one group of every pixel from one
    place). DSP targets: `col_w` (tvm_pair_t*, a union of one uint32_t and two int16_t, so the words the GEMM
    reads and the halves written here are one object, without type punning through pointers) points at
    this pixel's first pair, value k is half (k / 2) % 2 of pair (k / 4) * gs + k % 2 (`perm`). Portable
    targets: `col_h` (int16_t*) points at this pixel's column, value k at index k. Out-of-bounds taps and the
    padding up to kp are zeros."""
    c, kw, kh = win.c, win.kw, win.kh
    kp = pad4(win.k)
    rows_in, cols_in = win.always_inside(oh, ow)
    word_tap = dsp and c % 4 == 0
    word_row = dsp and not word_tap and win.dw == 1 and (kw * c) % 4 == 0

    def at(k: str) -> str:
        if dsp:
            return f"{col_w}[(({k}) >> 2) * {gs} + (({k}) & 1)].h[(({k}) >> 1) & 1]"
        return f"{col_h}[{k}]"

    def words(n_groups: int, g0: str, from_: str) -> str:
        """n_groups groups of 4 bytes at `from_` widened into the column's groups g0.. (DSP)."""
        one = n_groups == 1
        q = "" if one else " + q"
        off = "" if one else " + 4 * q"
        body = (f"uint32_t v;\nmemcpy(&v, {from_}{off}, 4);\n"
                f"{col_w}[({g0}{q}) * {gs}].w = __sxtab16(input_offset2, v);\n"
                f"{col_w}[({g0}{q}) * {gs} + 1].w = tvm_sxtab16_ror8(input_offset2, v);")
        if one:
            return "{\n" + _indent(body) + "\n}"
        return f"for (int32_t q = 0; q < {n_groups}; ++q) {{\n{_indent(body)}\n}}"

    def zeros(k0: str, n: int) -> str:
        if dsp and word_tap:  # k0 and n are multiples of 4
            return (f"for (int32_t q = 0; q < {n // 4}; ++q) {{\n  {col_w}[(({k0}) / 4 + q) * {gs}].w = 0u;\n"
                    f"  {col_w}[(({k0}) / 4 + q) * {gs} + 1].w = 0u;\n}}")
        return f"for (int32_t t = 0; t < {n}; ++t) {{\n  {at(f'({k0}) + t')} = 0;\n}}"

    def elems(k0: str, from_: str, n: int) -> str:
        return (f"for (int32_t t = 0; t < {n}; ++t) {{\n"
                f"  {at(f'({k0}) + t')} = (int16_t)((int32_t){from_}[t] + input_offset);\n}}")

    if word_tap:
        tap_ok = words(c // 4, f"(ky * {kw} + kx) * {c // 4}", "xp")
    else:
        tap_ok = elems(f"(ky * {kw} + kx) * {c}", "xp", c)
    tap_zero = zeros(f"(ky * {kw} + kx) * {c}", c)
    col_test = "" if cols_in else f"ix < 0 || ix >= {win.w}"
    tap = (f"const int32_t ix = ix0 + kx * {win.dw};\n"
           + (f"if ({col_test}) {{\n{_indent(tap_zero)}\n}} else {{\n" if col_test else "{\n")
           + f"  const int8_t* const xp = xrow + ix * {c};\n{_indent(tap_ok)}\n}}")
    row_taps = f"for (int32_t kx = 0; kx < {kw}; ++kx) {{\n{_indent(tap)}\n}}"
    if word_row:  # a whole window row is kw * c contiguous bytes: words when it is inside the input
        inside = "" if cols_in else f"ix0 >= 0 && ix0 + {kw - 1} < {win.w}"
        fast = words(kw * c // 4, f"ky * {kw * c // 4}", f"xrow + ix0 * {c}")
        row_taps = fast if not inside else (f"if ({inside}) {{\n{_indent(fast)}\n}} else {{\n"
                                            f"{_indent(row_taps)}\n}}")
    row = (f"const int32_t iy = iy0 + ky * {win.dh};\n"
           + ("" if rows_in else f"if (iy < 0 || iy >= {win.h}) {{\n{_indent(zeros(f'ky * {kw * c}', kw * c))}\n"
              "} else ")
           + f"{{\n  const int8_t* const xrow = {src} + iy * {win.w * c};\n{_indent(row_taps)}\n}}")
    out = [f"for (int32_t ky = 0; ky < {kh}; ++ky) {{\n{_indent(row)}\n}}"]
    for k in range(win.k, kp):
        out.append(f"{col_w}[{(k >> 2) * gs + (k & 1)}].h[{(k >> 1) & 1}] = 0;" if dsp else f"{col_h}[{k}] = 0;")
    return "\n".join(out)


# --- the GEMM block -------------------------------------------------------------------------------------------

def asm_registers(px: int, ob: int) -> int:
    """Registers the asm form of a px x ob block holds at once: accumulators, the pixels' x pairs, two weight
    temporaries and the two pointers."""
    return px * ob + 2 * px + 4


MAX_ASM_REGISTERS = 13  # r0-r12 and lr, less one the loop counter keeps


@dataclass(frozen=True)
class Gemm:
    """y[px, oc] for a block of `px` pixels whose columns were filled by `im2col` (interleaved on DSP
    targets), every output channel, `oc_block` at a time. DSP weights are packed by `pack_weights` in blocks
    of `oc_block` channels, group-major inside a block, so one pointer walks the whole table in order."""

    n: int  # output channels
    kp: int  # padded reduction length
    w_table: str  # packed weights (pack_weights)
    init: str  # C expression of channel oc's initial accumulator, with @OC@ for oc
    rq: Requant
    zp: int | str
    lo: int | str
    hi: int | str
    dsp: bool
    ssat: bool
    w_fmt: str
    k_unroll: int
    ext: str = "acle"  # DSP: "acle" (intrinsics) or "asm" (one asm block per group)

    @property
    def wpg(self) -> int:
        """Weight words per group per channel (DSP)."""
        return 1 if self.w_fmt == "i8" else 2

    def block(self, px: int, ob: int, col: str, ys: list[str]) -> str:
        """All channels for px pixels: the main channel blocks of ob, then a tail block."""
        main = self.n // ob * ob
        parts = [f"const uint32_t* wq = {self.w_table};" if self.dsp else ""]
        if main:
            parts.append(f"for (int32_t oc = 0; oc < {main}; oc += {ob}) {{\n"
                         f"{_indent(self._channels(px, ob, col, ys, 'oc'))}\n}}")
        rest = self.n - main
        if rest:
            parts.append(f"{{\n  const int32_t oc = {main};\n{_indent(self._channels(px, rest, col, ys, 'oc'))}\n}}")
        return "\n".join(p for p in parts if p)

    def _dsp_group(self, g: int, px: int, ob: int, accs: list[list[str]]) -> list[str]:
        wpg = self.wpg
        xo = [g * 2 * px + 2 * j for j in range(px)]  # word offsets of pixel j's pair
        wo = [g * ob * wpg + i * wpg for i in range(ob)]
        if self.ext == "asm":
            ins = [f"ldrd %[xa{j}], %[xb{j}], [%[xq], #{4 * xo[j]}]" for j in range(px)]
            for i in range(ob):
                if self.w_fmt == "i8":
                    ins += [f"ldr %[t0], [%[wq], #{4 * wo[i]}]", "sxtb16 %[t1], %[t0], ror #8",
                            "sxtb16 %[t0], %[t0]"]
                else:
                    ins.append(f"ldrd %[t0], %[t1], [%[wq], #{4 * wo[i]}]")
                for j in range(px):
                    a = accs[i][j]
                    ins += [f"smlad %[{a}], %[t0], %[xa{j}], %[{a}]", f"smlad %[{a}], %[t1], %[xb{j}], %[{a}]"]
            outs = ([f'[{a}] "+r"({a})' for row in accs for a in row] + ['[t0] "=&r"(t0)', '[t1] "=&r"(t1)']
                    + [f'[x{h}{j}] "=&r"(x{h}{j})' for j in range(px) for h in "ab"])
            text = "\n".join(f'"{x}\\n\\t"' for x in ins[:-1]) + f'\n"{ins[-1]}"'
            decl = "uint32_t t0, t1, " + ", ".join(f"x{h}{j}" for j in range(px) for h in "ab") + ";"
            return ["{", "  " + decl, "  __asm__ __volatile__(" + _indent(text, 4).lstrip(),
                    "          : " + ", ".join(outs), '          : [wq] "r"(wq), [xq] "r"(xq)',
                    '          : "memory");  /* reads the column: never moved across its stores */', "}"]
        out = []
        for i in range(ob):
            if self.w_fmt == "i8":
                out += [f"const uint32_t w{i} = wq[{wo[i]}];", f"const uint32_t wa{i} = __sxtb16(w{i});",
                        f"const uint32_t wb{i} = tvm_sxtb16_ror8(w{i});"]
            else:
                out += [f"const uint32_t wa{i} = wq[{wo[i]}];", f"const uint32_t wb{i} = wq[{wo[i] + 1}];"]
        for j in range(px):
            out += [f"const uint32_t xa{j} = xq[{xo[j]}].w;", f"const uint32_t xb{j} = xq[{xo[j] + 1}].w;"]
        for i in range(ob):
            for j in range(px):
                a = accs[i][j]
                out += [f"{a} = __smlad(wa{i}, xa{j}, {a});", f"{a} = __smlad(wb{i}, xb{j}, {a});"]
        return ["{", *("  " + x for x in out), "}"]

    def _portable_group(self, g: int, px: int, ob: int, accs: list[list[str]]) -> list[str]:
        out = []
        for t in range(4):
            k = 4 * g + t
            out += [f"const int32_t w{i}_{t} = wq[{i * self.kp + k}];" for i in range(ob)]
            out += [f"const int32_t x{j}_{t} = xq[{j * self.kp + k}];" for j in range(px)]
            out += [f"{accs[i][j]} += w{i}_{t} * x{j}_{t};" for i in range(ob) for j in range(px)]
        return ["{", *("  " + x for x in out), "}"]

    def _channels(self, px: int, ob: int, col: str, ys: list[str], oc: str) -> str:
        """One block of ob channels x px pixels; pixel j's output row (n int8) starts at `ys[j]`."""
        kq = self.kp // 4
        u = min(self.k_unroll, kq)
        main, rest = kq // u, kq % u
        accs = [[f"a{i}{j}" for j in range(px)] for i in range(ob)]
        lines = []
        for i in range(ob):
            init = self.init.replace("@OC@", f"{oc} + {i}")
            lines.append(f"int32_t {accs[i][0]} = {init};")
            lines += [f"int32_t {accs[i][j]} = {accs[i][0]};" for j in range(1, px)]
        if self.dsp:
            lines.append(f"const tvm_pair_t* xq = {col};")
            group = self._dsp_group
            step = f"wq += {u * ob * self.wpg};\nxq += {u * 2 * px};"
            tail_step = f"wq += {rest * ob * self.wpg};" if rest else ""
        else:
            lines.append(f"const int8_t* wq = {self.w_table} + ({oc}) * {self.kp};")
            lines.append(f"const int16_t* xq = {col};")
            group = self._portable_group
            step = f"wq += {4 * u};\nxq += {4 * u};"
            tail_step = ""
        body = [ln for g in range(u) for ln in group(g, px, ob, accs)]
        if main == 1:
            lines += body + [step]
        elif main > 1:
            lines.append(f"for (int32_t q = {main}; q > 0; --q) {{")
            lines += ["  " + ln for ln in body] + [_indent(step)]
            lines.append("}")
        lines += [ln for g in range(rest) for ln in group(g, px, ob, accs)]
        if tail_step:
            lines.append(tail_step)
        if not self.dsp or not rest:
            lines.append("(void)xq;")
        for i in range(ob):
            for j in range(px):
                a = accs[i][j]
                ch = f"{oc} + {i}" if i else oc
                lines.append(self.rq.stmt(a, ch))
                lines.append(store_stmt(a, self.zp, self.lo, self.hi, f"{ys[j]}[{ch}]", self.ssat))
        return "\n".join(lines)


# --- the whole kernel -------------------------------------------------------------------------------------------

SHARED_PARAMS = ("const int8_t* x, int8_t* y, uint8_t* scratch, const {wtype}* wt, const int32_t* bias, {rq}, "
                 "int32_t input_offset, int32_t output_zp, int32_t act_lo, int32_t act_hi")


def gemm_kernel_body(ctx: KernelContext, s: Schedule, win: Window, batch: int, oh: int, ow: int,
                     weights: np.ndarray, bias_expr: str | None, rounding: str, multiplier: Sequence[int],
                     shift: Sequence[int], input_zp: int, output_zp: int, act_min: int, act_max: int, x: str, y: str,
                     prologue: str, per_channel: bool = True) -> tuple[str, int, str]:
    """(C body, scratch bytes, function attributes) of an int8 conv/dense as im2col + GEMM with schedule
    `s`: `weights` is (n, k) int8 in the window's k order, `bias_expr` the C name of an int32 bias array (or
    None), `x`/`y` the input and output pointers, `prologue` the kernel's own comment (the accumulator
    bound). With `s["share"]` the GEMM is a file-scope function of everything but the data (weights, bias,
    requantization (a table when `per_channel`, else scalars), zero points and clamp range are its
    parameters), emitted once per file for all layers of one workload and schedule: code size for a call
    per layer."""
    dsp = ctx.target.dsp
    share = bool(s.get("share", False))
    n = weights.shape[0]
    kp = pad4(win.k)
    px_block, ob = s["px_block"], s["oc_block"]
    packed = pack_weights(weights, kp, s["w_fmt"], dsp, ob)
    table = words_table(ctx, packed, f"w{s['w_fmt']}") if dsp else ctx.table("int8_t", packed, "wpk")
    rq = Requant(ctx, s["requant"], rounding, multiplier, shift, "rq" if share else None,
                 shared_scalars=share and not per_channel)
    if share:
        gemm = Gemm(n, kp, "wt", "bias[@OC@]" if bias_expr else "0", rq, "output_zp", "act_lo", "act_hi", dsp,
                    ssat_available(ctx), s["w_fmt"], s["k_unroll"], s["ext"])
    else:
        gemm = Gemm(n, kp, table, f"{bias_expr}[@OC@]" if bias_expr else "0", rq, output_zp, act_min, act_max, dsp,
                    ssat_available(ctx), s["w_fmt"], s["k_unroll"], s["ext"])
    ctx.helper("string")
    if dsp:
        ctx.require_dsp()
        ctx.helper("dsp_ror8")
    attrs = ctx.helper("no_sched") if s["no_sched"] else ""
    m = oh * ow
    head = [] if share else [f"const int32_t input_offset = {-input_zp};  /* -input zero point */"]
    if dsp:
        head.append("const uint32_t input_offset2 = ((uint32_t)input_offset & 0xFFFFu) * 0x10001u;"
                    "  /* in both int16 lanes */")
        head += ["(void)input_offset2;", "tvm_pair_t* const colw = (tvm_pair_t*)(void*)scratch;"]
    else:
        head.append("int16_t* const colh = (int16_t*)(void*)scratch;")
    head.append(rq.setup.rstrip("\n"))
    advance = f"if (++ox == {ow}) {{\n  ox = 0;\n  ++oy;\n}}"

    # A last block with fewer pixels than px_block (m % px_block) runs the same code: its missing pixels
    # repeat the last real one (valid reads) and store into a spill row of the scratch (no tail copy of
    # the GEMM, which would cost code size).
    ragged = m % px_block != 0
    if dsp:  # the block's columns interleaved group by group
        col_decl = "tvm_pair_t* const cw = colw + 2 * j;\n"
        fill = im2col(win, oh, ow, dsp, "xb", "cw", "", 2 * px_block)
    else:
        col_decl = f"int16_t* const ch = colh + j * {kp};\n"
        fill = im2col(win, oh, ow, dsp, "xb", "", "ch", 2)
    origin = (f"const int32_t iy0 = oy * {win.sh} - {win.pt};\nconst int32_t ix0 = ox * {win.sw} - {win.pl};\n"
              "(void)iy0;\n(void)ix0;\n")
    step = f"if (p0 + j + 1 < {m}) {{\n{_indent(advance)}\n}}" if ragged else advance
    fill_loop = (f"for (int32_t j = 0; j < {px_block}; ++j) {{\n{_indent(origin + col_decl + fill)}\n"
                 f"{_indent(step)}\n}}")
    ys = [f"y{j}" for j in range(px_block)]
    rows = ["int8_t* const y0 = yb + p0 * " + str(n) + ";"]
    for j in range(1, px_block):
        real = f"y0 + {j * n}"
        rows.append(f"int8_t* const y{j} = p0 + {j} < {m} ? {real} : spill;" if ragged else
                    f"int8_t* const y{j} = {real};")
    col = "colw" if dsp else "colh"
    loop = [f"for (int32_t p0 = 0; p0 < {m}; p0 += {px_block}) {{\n{_indent(fill_loop)}\n"
            + _indent("\n".join(rows)) + f"\n{_indent(gemm.block(px_block, ob, col, ys))}\n}}"]
    scratch = 2 * kp * px_block
    if ragged:
        head.append(f"int8_t* const spill = (int8_t*)(void*)(scratch + {scratch});  /* rows of missing pixels */")
        scratch += n
    xs, ys_ = ("x", "y") if share else (x, y)
    core = "\n".join(h for h in head if h) + f"""
for (int32_t b = 0; b < {batch}; ++b) {{
  const int8_t* const xb = {xs} + b * {win.h * win.w * win.c};
  int8_t* const yb = {ys_} + b * {m * n};
  int32_t oy = 0;
  int32_t ox = 0;
{_indent(chr(10).join(loop))}
  (void)oy;
  (void)ox;
}}
return 0;"""
    if not share:
        return prologue + core, scratch, attrs
    wtype = "uint32_t" if dsp else "int8_t"
    rq_params = [f"int32_t rq{t}" for t in range(rq.width)] if rq.uniform else ["const int32_t* rq"]
    rq_args = [str(v) for v in rq.values] if rq.uniform else [rq.table]
    unused = "".join(f"(void){v.split()[-1].lstrip('*')};\n" for v in ["bias", *rq_params, "output_zp", "act_lo",
                                                                         "act_hi"])
    params = SHARED_PARAMS.format(wtype=wtype, rq=", ".join(rq_params))
    text = f"static int32_t @NAME@({params}) {{\n{_indent(unused + core)}\n}}"
    name = f"{ctx.file.prefix}_gemm_{hashlib.sha256((attrs + text).encode()).hexdigest()[:12]}"
    if name not in ctx.file.names:
        ctx.file.names.add(name)
        ctx.file.decls.append((f"{attrs} " if attrs else "") + text.replace("@NAME@", name))
    call = (f"return {name}({x}, {y}, scratch, {table}, {bias_expr or 'NULL'}, {', '.join(rq_args)}, {-input_zp}, "
            f"{output_zp}, {act_min}, {act_max});")
    return prologue + call, scratch, ""
