"""Requantization, the central arithmetic of every int8 kernel, in one place.

TFLite's MultiplyByQuantizedMultiplier (MBQM) of an int32 `x` by a Q31 `multiplier` and a power-of-two
`shift`, in the op's rounding ("single": TFLITE_SINGLE_ROUNDING, one rounding of x * m / 2^(31 - shift);
"double": gemmlowp's SaturatingRoundingDoublingHighMul then RoundingDivideByPOT, as TFLM), has several exact
C forms. They compute the same integer on every input their legality allows; a kernel's `requant` knob
(`utvm.compiler.schedule.requant_knob`: the same values everywhere) chooses one, `form_reason` says where a
form is exact and available, and `Requant` writes the statements:

| form   | rounding | where                                              | how                                        |
|--------|----------|----------------------------------------------------|--------------------------------------------|
| "c"    | both     | always                                             | the shared helpers tvm_requant_single /    |
|        |          |                                                    | tvm_requant_double (_pm: no INT32_MIN)     |
| "fast" | single   | every shift <= -2                                  | SMULL, ADD, ASR (high word only)           |
| "fast" | double   | Thumb-2, every shift <= -1, multipliers >= 0       | six-instruction asm (tvm_requant_double_asm)|
| "dbl"  | double   | DSP (SMMULR), shifts <= -1, multipliers >= 0,      | the accumulator doubled at compile time    |
|        |          | 2 * the accumulator bound < 2^31                   | (weights and bias x2), SMMULR + rounding   |
|        |          |                                                    | shift, the output zero point folded in     |

The helpers' C lives here too (emitted once per file through `KernelContext.helper`).

Helium (MVE) kernels requantize four outputs at once, always in the vector form (it is not a value of the
`requant` knob: an MVE kernel uses it inherently, where `mve_reason` allows, and its scalar tail, if any, keeps
the knob's forms):

| helper                                  | rounding | where (`mve_reason`)                      | instructions |
|-----------------------------------------|----------|-------------------------------------------|--------------|
| `mve_requant_helper(ctx, rounding)`     | double   | always                                    | 7            |
|   f(acc, mult, left_shift, right_shift) | single   | acc << left_shift fits int32 (the bound)  | 7            |
| `mve_requant_right_helper(ctx, rounding)` | double | every shift <= -1                         | 4            |
|   f(acc, mult, shift)                   | single   | every shift <= -1                         | 2            |

All take and return int32x4_t; left_shift = max(shift, 0), right_shift = max(-shift, 0). The operands come
from `mve_operands(ctx, multiplier, shift, *, right_only=False, hint="rq") -> MveOperands`: literals
(`vdupq_n_s32`) for one multiplier and shift, else zero-padded (to a multiple of 4) const int32 tables;
`MveOperands.vectors(first)` gives the int32x4_t expressions for outputs first..first+3 and
`MveOperands.call(fn, acc, first)` the helper call. The caller adds the output zero point (vaddq_n_s32),
clamps (vmaxq/vminq) and stores (vstrbq_s32 narrows).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from utvm.compiler.kernels import KernelContext, define_helper, multipliers_pm
from utvm.compiler.kernels.cemit import INT32_MAX, c_literal, offset_term
from utvm.compiler.kernels.isa import PortableC, vocabulary_class
from utvm.target import Target

# --- the shared helpers -----------------------------------------------------------------------------------

# TFLite MultiplyByQuantizedMultiplier, TFLITE_SINGLE_ROUNDING: one rounding of x * m / 2^(31 - shift).
define_helper("requant:single", """\
/* x * multiplier * 2^(shift - 31), rounded half up once (TFLite single rounding). shift in [-31, 30]. */
static inline int32_t tvm_requant_single(int32_t x, int32_t multiplier, int32_t shift) {
  const int32_t total_shift = 31 - shift;
  const int64_t round = (int64_t)1 << (total_shift - 1);
  const int64_t result = ((int64_t)x * (int64_t)multiplier + round) >> total_shift;
  return (int32_t)result;
}""", "tvm_requant_single")
# gemmlowp SaturatingRoundingDoublingHighMul + RoundingDivideByPOT (exponent in [0, 31]).
define_helper("gemmlowp", """\
static inline int32_t tvm_srdhm(int32_t a, int32_t b) {
  const int64_t ab = (int64_t)a * (int64_t)b;
  const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
  if (a == b && a == INT32_MIN) {
    return INT32_MAX;
  }
  return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}
static inline int32_t tvm_rdbpot(int32_t x, int32_t exponent) {
  const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}""", "tvm_srdhm")
# gemmlowp double rounding (TFLM).
define_helper("requant:double", """\
/* x * multiplier * 2^(shift - 31) with gemmlowp's two roundings (TFLM). shift in [-31, 30]. */
static inline int32_t tvm_requant_double(int32_t x, int32_t multiplier, int32_t shift) {
  const int32_t left_shift = shift > 0 ? shift : 0;
  const int32_t right_shift = shift > 0 ? 0 : -shift;
  return tvm_rdbpot(tvm_srdhm((int32_t)((uint32_t)x << left_shift), multiplier), right_shift);
}""", "tvm_requant_double", deps=("gemmlowp",))
# Faster, provably equal variants for a multiplier that is never INT32_MIN (every multiplier
# QuantizeMultiplier produces is in {0} u [2^30, 2^31)), which is the only input on which
# SaturatingRoundingDoublingHighMul saturates. Without that case gemmlowp's nudge-then-truncate is
# floor((a*b + 2^30) / 2^31) for either sign of a*b: ab >= 0 adds 2^30 and truncation is floor; ab < 0
# adds 1 - 2^30 and truncating towards zero gives ceil((ab + 1 - 2^30) / 2^31)
# = floor((ab + 1 - 2^30 + 2^31 - 1) / 2^31), the same. The result fits int32 because |a*b| < 2^62
# unless a == b == INT32_MIN. RoundingDivideByPOT is computed in 32 bits (exponent in [0, 31]:
# 1u << 31 is defined for uint32_t). `>>` of a negative value is an arithmetic shift on every compiler
# we target (tvm_rdbpot above relies on it too).
define_helper("requant:double_pm", """\
/* tvm_requant_double for multiplier != INT32_MIN (bit-identical there). shift in [-31, 30]. */
static inline int32_t tvm_requant_double_pm(int32_t x, int32_t multiplier, int32_t shift) {
  const int32_t left_shift = shift > 0 ? shift : 0;
  const int32_t right_shift = shift > 0 ? 0 : -shift;
  const int64_t ab = (int64_t)(int32_t)((uint32_t)x << left_shift) * (int64_t)multiplier;
  const int32_t hi = (int32_t)((ab + ((int64_t)1 << 30)) >> 31);
  const int32_t mask = (int32_t)((1u << right_shift) - 1u);
  const int32_t remainder = hi & mask;
  const int32_t threshold = (mask >> 1) + (hi < 0 ? 1 : 0);
  return (hi >> right_shift) + (remainder > threshold ? 1 : 0);
}""", "tvm_requant_double_pm")
# gemmlowp's double rounding for 0 <= m < 2^31 and a right shift n >= 1, exactly, in six Thumb-2
# instructions: r1 = floor((x*m + 2^30) / 2^31) (SaturatingRoundingDoublingHighMul without its
# INT32_MIN case; the carry of LSRS is bit 30), then floor((r1 - (r1 < 0) + 2^(n-1)) / 2^n)
# (RoundingDivideByPOT, half away from zero; the carry of ASRS is bit n-1). Idea: CMSIS-NN's optional
# asm requantization (docs/kernels.md §4.3), written here.
define_helper("requant:double_asm", """\
static inline int32_t tvm_requant_double_asm(int32_t x, int32_t m, int32_t n) {
  int32_t lo;
  int32_t hi;
  __asm__("smull %0, %1, %2, %3\\n\\t"
          "lsrs %0, %0, #31\\n\\t"
          "adc %1, %0, %1, lsl #1\\n\\t"
          "add %1, %1, %1, asr #31\\n\\t"
          "asrs %1, %1, %4\\n\\t"
          "adc %1, %1, #0"
          : "=&r"(lo), "=&r"(hi)
          : "r"(x), "r"(m), "r"(n)
          : "cc");
  return hi;
}""", "tvm_requant_double_asm")

# gemmlowp's SaturatingRoundingMultiplyByPOT for 0 <= e <= 31, and TFLite's GetInvSqrtQuantizedMultiplierExp
# (reverse_shift = -1): 1/sqrt(x) as a Q31 multiplier and a left shift, by five Newton-Raphson steps in Q3.28.
# rsqrt (int8/int16) and l2_normalization (int8) share them; utvm.ops._quant.inv_sqrt_multiplier_exp is the
# numpy definition.
define_helper("sat_pot", """\
static inline int32_t tvm_sat_pot(int32_t x, int32_t e) {
  int32_t threshold;
  if (e == 0) {
    return x;
  }
  threshold = (int32_t)((1u << (31 - e)) - 1u);
  if (x > threshold) {
    return INT32_MAX;
  }
  if (x < -threshold) {
    return INT32_MIN;
  }
  return (int32_t)((uint32_t)x << e);
}""", "tvm_sat_pot")
define_helper("inv_sqrt", """\
static inline void tvm_inv_sqrt(int32_t x, int32_t* multiplier, int32_t* shift) {
  int32_t s = 11;
  int32_t bits = 0;
  int32_t pairs;
  int32_t half_input;
  int32_t r = (int32_t)1 << 28;
  uint32_t u;
  int k;
  if (x <= 1) {
    *multiplier = INT32_MAX;
    *shift = 0;
    return;
  }
  while (x >= ((int32_t)1 << 29)) {
    x /= 4;
    ++s;
  }
  for (u = (uint32_t)x; u != 0u; u >>= 1) {
    ++bits;
  }
  pairs = (31 - bits) / 2 - 1;
  s -= pairs;
  x = (int32_t)((uint32_t)x << (2 * pairs));
  half_input = tvm_rdbpot(x >> 1, 1);
  for (k = 0; k < 5; ++k) {
    const int32_t r3 = tvm_sat_pot(tvm_srdhm(tvm_srdhm(r, r), r), 6);
    r = tvm_sat_pot((int32_t)((uint32_t)tvm_srdhm(402653184, r) - (uint32_t)tvm_srdhm(half_input, r3)), 3);
  }
  r = tvm_srdhm(r, 1518500250);
  if (s < 0) {
    r = (int32_t)((uint32_t)r << -s);
    s = 0;
  }
  *multiplier = r;
  *shift = -s;
}""", "tvm_inv_sqrt", deps=("gemmlowp", "sat_pot"))

# --- legality ---------------------------------------------------------------------------------------------

def form_reason(form: str, rounding: str, multiplier: Sequence[int], shift: Sequence[int], target: Target,
                bound: int | None = None) -> str | None:
    """None if requantization form `form` ("c", "fast", "dbl") is exact and available for these operands on
    `target`; else a one-line reason. `bound`: the largest |accumulator| ("dbl" doubles it; None: unknown,
    so "dbl" is refused)."""
    if form == "c":
        return None
    if form == "fast":
        if rounding == "single":
            return None if max(shift) <= -2 else "a shift above -2 (the short single-rounding form needs <= -2)"
        if not vocabulary_class(target).thumb2:
            return f"{target.name} lacks Thumb-2 SMULL/ADC with shifted operands"
        if max(shift) > -1:
            return "a left or zero shift (the asm form needs a right shift of at least 1)"
        if min(multiplier) < 0:
            return "a negative multiplier"
        return None
    if form == "dbl":
        if not vocabulary_class(target).simd16:
            return f"{target.name} has no SMMULR (DSP extension)"
        if rounding != "double":
            return "it implements double rounding only"
        if max(shift) > -1:
            return "a left or zero shift (it needs a right shift of at least 1)"
        if min(multiplier) < 0:
            return "a negative multiplier"
        if bound is None:
            return "the kernel has no accumulator bound to double"
        if 2 * bound > INT32_MAX:
            return f"2 * the accumulator bound {bound} does not fit int32"
        return None
    return f"unknown requantization form {form!r}"


# --- statements -------------------------------------------------------------------------------------------

def c_helper(ctx: KernelContext, rounding: str, multiplier: Sequence[int]) -> str:
    """The shared helper of form "c" for these multipliers, requested in ctx's file: the faster, bit-identical
    `requant_pm` variant when none is INT32_MIN (`multipliers_pm`)."""
    return ctx.helper("requant_pm" if multipliers_pm(multiplier) else "requant", rounding)


def operand_terms(ctx: KernelContext, multiplier: Sequence[int], shift: Sequence[int], index: str) -> tuple[str, str]:
    """C expressions of the multiplier and shift of output `index` (for `c_helper`): literals when one pair
    serves every output, else per-output tables."""
    if len(set(multiplier)) == 1 and len(set(shift)) == 1:
        return str(multiplier[0]), str(shift[0])
    return (f"{ctx.table('int32_t', multiplier, 'multiplier')}[{index}]",
            f"{ctx.table('int32_t', shift, 'shift')}[{index}]")


class Requant:
    """The exact requantization (MultiplyByQuantizedMultiplier in the op's rounding) in a chosen form.

    "c": the shared helpers (tvm_requant_single / tvm_requant_double[_pm]).
    "fast", single rounding, every shift <= -2 (so s = 31 - shift >= 33): with hi = (x * m) >> 32,
      (x * m + 2^(s-1)) >> s == (hi + 2^(s-33)) >> (s-32): the low word can never carry into the result
      (hi * 2^32 <= x*m < (hi + 1) * 2^32 and 2^(s-32) divides 2^32). SMULL, ADD, ASR.
    "fast", double rounding, every shift <= -1 and multiplier >= 0, Thumb-2 targets: a six-instruction asm
      (helper "requant:double_asm") computing gemmlowp's two roundings exactly.
    "dbl", double rounding, DSP targets: the caller accumulates 2 * acc (weights and bias doubled at compile
      time); SMMULR then the rounding shift (`dbl_requant_helper`), the output zero point added by the same
      instruction (`folds_zero_point`: the store adds none). Operands rq_m, rq_n (multiplier, -shift).
    Per-channel operands live in one interleaved table (one base pointer, consecutive loads).
    """

    def __init__(self, ctx: KernelContext, impl: str, rounding: str, multiplier: Sequence[int],
                 shift: Sequence[int], table_param: str | None = None, shared_scalars: bool = False, *,
                 zero_point: int = 0, bound: int | None = None) -> None:
        """`table_param`: a kernel shared between layers reaches the operands through parameters: the
        table (`self.table` names the layer's) by this name, or, with `shared_scalars`, the scalars
        rq0.. (`self.values` holds the layer's). "dbl" only: `zero_point`, the output zero point it folds in,
        and `bound`, the largest |accumulator| (undoubled), for its legality."""
        self.ctx, self.impl, self.rounding = ctx, impl, rounding
        self.multiplier, self.shift = [int(m) for m in multiplier], [int(s) for s in shift]
        reason = form_reason(impl, rounding, self.multiplier, self.shift, ctx.target, bound)
        if reason:
            raise ctx.error(f"requant {impl}: {reason}")
        #: the statement adds the output zero point itself ("dbl")
        self.folds_zero_point = impl == "dbl"
        self.fn = dbl_requant_helper(ctx, zero_point) if impl == "dbl" else ""
        if impl == "fast" and rounding == "single":
            ops = [self.multiplier, [1 << (-s - 2) for s in self.shift], [-s - 1 for s in self.shift]]
        elif impl in ("fast", "dbl"):
            ops = [self.multiplier, [-s for s in self.shift]]
        else:
            ops = [self.multiplier, self.shift]
        #: the operands' names as scalars (setup) or hoisted locals (`hoist`)
        self.names = ("rq_m", "rq_n") if impl == "dbl" else tuple(f"rq{t}" for t in range(len(ops)))
        self.width = len(ops)
        self.values = [o[0] for o in ops]
        same = all(len(set(o)) == 1 for o in ops)
        self.uniform = same if table_param is None else shared_scalars
        if shared_scalars and not same:
            raise ctx.error("a shared kernel with scalar requantization operands needs one multiplier and shift")
        self.ref = table_param
        self.table = ""
        if self.uniform:
            self.setup = "" if table_param else "".join(f"const int32_t {n} = {v};\n"
                                                        for n, v in zip(self.names, self.values, strict=True))
        else:
            self.setup = ""
            inter = np.array(ops, np.int64).T.reshape(-1)
            self.table = ctx.table("int32_t", inter, "rq")
            self.ref = table_param or self.table

    def operand(self, t: int, oc: str) -> str:
        return self.names[t] if self.uniform else f"{self.ref}[({oc}) * {self.width} + {t}]"

    def hoist(self, suffix: str, oc: str) -> list[str]:
        """C declaring the operands of output channel `oc` as locals `<name><suffix>` (loaded once, before a
        loop); `stmt(v, oc, suffix)` reads them."""
        return [f"const int32_t {n}{suffix} = "
                f"{n if self.uniform else f'{self.ref}[({oc}) * {self.width}{offset_term(t)}]'};"
                for t, n in enumerate(self.names)]

    def stmt(self, v: str, oc: str, suffix: str | None = None) -> str:
        """C statement: `v` (int32 lvalue) = `v` requantized for output channel `oc` (no output offset unless
        `folds_zero_point`); `suffix`: read the locals `hoist(suffix, oc)` declared."""
        ops = [self.operand(t, oc) if suffix is None else n + suffix for t, n in enumerate(self.names)]
        a, b = ops[0], ops[1]
        if self.impl == "dbl":
            return f"{v} = {self.fn}({v}, {a}, {b});"
        if self.impl == "fast" and self.rounding == "single":
            return f"{v} = ((int32_t)(((int64_t){v} * {a}) >> 32) + {b}) >> {ops[2]};"
        if self.impl == "fast":
            fn = self.ctx.helper("requant:double_asm")
            return f"{v} = {fn}({v}, {a}, {b});"
        return f"{v} = {c_helper(self.ctx, self.rounding, self.multiplier)}({v}, {a}, {b});"


def clamp_store(v: str, zp: int | str, lo: int | str, hi: int | str, dst: str, sat: PortableC | None, *,
                zp_in_sat: bool = True) -> str:
    """C: int32 `v` plus the output zero point, clamped to [lo, hi] (within int8), stored as int8 at `dst`:
    the int8 store of every requantizing kernel with an output stage (conv/dense GEMM, depthwise planes,
    add/sub/mul tables). With `sat` (a vocabulary with SSAT, the file ready for it) one SSAT #8 saturates
    first (exact: the clamp range lies inside it), so only bounds inside [-128, 127] are compared; the zero
    point is added inside it (`zp_in_sat`) or just before. zp, lo and hi are numbers or C expressions (a
    shared kernel's parameters: then both bounds are always compared)."""
    zp_s = f" + {zp}" if isinstance(zp, str) else offset_term(zp)
    if sat is not None and zp_in_sat:
        out = [f"{v} = {sat.ssat(f'{v}{zp_s}', 8)};"]
    else:
        out = [f"{v} = {v}{zp_s};"]
        if sat is not None:
            out.append(f"{v} = {sat.ssat(v, 8)};")
    if sat is None or isinstance(lo, str) or lo > -128:
        out.append(f"{v} = {v} < {lo} ? {lo} : {v};")
    if sat is None or isinstance(hi, str) or hi < 127:
        out.append(f"{v} = {v} > {hi} ? {hi} : {v};")
    return "\n".join(out + [f"{dst} = (int8_t){v};"])


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


# --- Helium (MVE): four lanes at once --------------------------------------------------------------------------
# MBQM of the four int32 lanes of an int32x4_t, each by its own multiplier and shift, from MVE instructions whose
# Armv8.1-M semantics (lane by lane, in unbounded integers before the final truncation or saturation) are:
#   VQRDMULH(a, b) = sat32(floor((a*b + 2^30) / 2^31))   (saturates only for a = b = INT32_MIN, to INT32_MAX)
#   VQDMULH(a, b)  = sat32(floor(a*b / 2^31))            (likewise)
#   VRSHL(x, s)    = floor((x + 2^(-s-1)) / 2^-s) for s < 0 (round half up, no intermediate overflow);
#                    x << s truncated to 32 bits for s >= 0
#   VSHL(x, s)     = x << s truncated to 32 bits (s >= 0);  VSHR #31: the sign as 0 / -1;  VQADD: saturating add
# Double rounding (gemmlowp): SaturatingRoundingDoublingHighMul is VQRDMULH exactly, for every pair (requant.py's
# "requant:double_pm" comment: gemmlowp's nudge-and-truncate is floor((a*b + 2^30) / 2^31), and both saturate the
# one overflowing pair to INT32_MAX). RoundingDivideByPOT(h, n) rounds half away from zero where VRSHL rounds half
# up: they differ only on a negative tie, and for n >= 1 floor((h - 1 + 2^(n-1)) / 2^n) is the half-away result
# for h < 0 (a negative tie h = (k - 1/2) 2^n gives k - 1; otherwise h = q 2^n + r, 0 <= r < 2^n, r != 2^(n-1),
# and subtracting 1 crosses a multiple of 2^n only when r + 2^(n-1) is one, i.e. r = 2^(n-1)). So h gets -1 when
# h < 0 and n >= 1 (VAND of h with -n has h's sign exactly then; VQADD keeps h = INT32_MIN, whose quotient is
# exact, from wrapping), then VRSHL by -n. The left shift wraps like the reference (`wrap32(x << left)`).
# Single rounding (TFLITE_SINGLE_ROUNDING), (x*m + 2^(30-shift)) >> (31-shift): for n = -shift >= 1,
# floor((floor(x*m / 2^31) + 2^(n-1)) / 2^n) = floor((x*m + 2^(30+n)) / 2^(31+n)) (nested floors of positive
# divisors), i.e. VRSHL(VQDMULH(x, m), -n), exact for every x; for shift = l >= 0 it is
# floor((x*2^l*m + 2^30) / 2^31) = VQRDMULH(x << l, m), exact when x << l does not wrap: the caller's accumulator
# bound must stay below 2^(31-l) (`mve_reason`). A lane picks its branch by a predicate (VCMP, VPSEL).
# tests/compiler/test_mve_requant.py proves both forms against ops._quant on the edges and millions of random
# operands, emulating each instruction as above.

define_helper("mve_requant:double", """\
/* Four lanes of gemmlowp's MultiplyByQuantizedMultiplier (TFLM): left_shift = max(shift, 0), right_shift =
   max(-shift, 0). VQRDMULH is SaturatingRoundingDoublingHighMul; VRSHL rounds half up, so a negative value is
   first lowered by one (when right_shift >= 1) to round half away from zero. Every acc. */
static inline int32x4_t tvm_mve_requant_double(int32x4_t acc, int32x4_t mult, int32x4_t left_shift,
                                               int32x4_t right_shift) {
  const int32x4_t neg_right = vnegq_s32(right_shift);
  const int32x4_t h = vqrdmulhq_s32(vshlq_s32(acc, left_shift), mult);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(h, neg_right), 31);
  return vrshlq_s32(vqaddq_s32(h, fixup), neg_right);
}""", "tvm_mve_requant_double", deps=("mve",))
define_helper("mve_requant:single", """\
/* Four lanes of TFLite's single-rounding MultiplyByQuantizedMultiplier: a right shift n >= 1 as
   VRSHL(VQDMULH(acc, mult), -n) (every acc); no right shift as VQRDMULH(acc << left_shift, mult) (acc <<
   left_shift must not wrap). */
static inline int32x4_t tvm_mve_requant_single(int32x4_t acc, int32x4_t mult, int32x4_t left_shift,
                                               int32x4_t right_shift) {
  const int32x4_t shifted = vrshlq_s32(vqdmulhq_s32(acc, mult), vnegq_s32(right_shift));
  const int32x4_t unshifted = vqrdmulhq_s32(vshlq_s32(acc, left_shift), mult);
  return vpselq_s32(unshifted, shifted, vcmpeqq_n_s32(right_shift, 0));
}""", "tvm_mve_requant_single", deps=("mve",))
# Every shift <= -1 (the usual case: a scale below one half): the operands are the multiplier and the shift
# itself (a negative count for VRSHL), and no left shift or lane select is needed.
define_helper("mve_requant_right:double", """\
/* tvm_mve_requant_double for shift <= -1 in every lane (`shift`: the negative TFLite shift). Every acc. */
static inline int32x4_t tvm_mve_requant_right_double(int32x4_t acc, int32x4_t mult, int32x4_t shift) {
  const int32x4_t h = vqrdmulhq_s32(acc, mult);
  return vrshlq_s32(vqaddq_s32(h, vshrq_n_s32(h, 31)), shift);
}""", "tvm_mve_requant_right_double", deps=("mve",))
define_helper("mve_requant_right:single", """\
/* tvm_mve_requant_single for shift <= -1 in every lane (`shift`: the negative TFLite shift). Every acc. */
static inline int32x4_t tvm_mve_requant_right_single(int32x4_t acc, int32x4_t mult, int32x4_t shift) {
  return vrshlq_s32(vqdmulhq_s32(acc, mult), shift);
}""", "tvm_mve_requant_right_single", deps=("mve",))


def mve_reason(rounding: str, multiplier: Sequence[int], shift: Sequence[int], bound: int | None,
               right_only: bool = False) -> str | None:
    """None if the MVE requantization (`mve_requant_helper`, or with `right_only` `mve_requant_right_helper`)
    is exact for these operands and every accumulator of magnitude <= `bound` (None: unknown); else a one-line
    reason. (Whether the target has MVE is the vocabulary's `mve`.)"""
    if rounding not in ("single", "double"):
        return f"unknown rounding {rounding!r}"
    if any(not -31 <= int(s) <= 30 for s in shift):
        return "a shift outside [-31, 30]"
    if right_only and max(int(s) for s in shift) > -1:
        return "a left or zero shift (the right-shift form needs every shift <= -1)"
    if rounding == "single":
        if not multipliers_pm(multiplier):
            return "a multiplier INT32_MIN (VQDMULH saturates where the reference does not)"
        lmax = max((int(s) for s in shift if int(s) >= 0), default=None)
        if lmax is not None:
            if bound is None:
                return "a left or zero shift and no accumulator bound (acc << shift must not wrap)"
            if bound > INT32_MAX >> lmax:
                return f"the accumulator bound {bound} shifted left by {lmax} does not fit int32"
    return None


def mve_requant_helper(ctx: KernelContext, rounding: str) -> str:
    """The name of `int32x4_t f(int32x4_t acc, int32x4_t mult, int32x4_t left_shift, int32x4_t right_shift)`, MBQM
    of each lane in `rounding` with left_shift = max(shift, 0) and right_shift = max(-shift, 0) (requested in
    ctx's file with <arm_mve.h>). Exact where `mve_reason(rounding, ..., bound)` is None; the caller adds the
    output zero point, clamps and stores."""
    return ctx.helper(f"mve_requant:{rounding}")


def mve_requant_right_helper(ctx: KernelContext, rounding: str) -> str:
    """The name of `int32x4_t f(int32x4_t acc, int32x4_t mult, int32x4_t shift)`: `mve_requant_helper` for every
    shift <= -1, taking the (negative) shift itself: 4 instructions (double) or 2 (single) instead of 7."""
    return ctx.helper(f"mve_requant_right:{rounding}")


@dataclass(frozen=True)
class MveOperands:
    """The requantization operands of an MVE kernel, as int32x4_t C expressions per block of four outputs.

    Per-tensor operands are `vdupq_n_s32` of literals (GCC keeps them in registers across a loop); per-output
    operands are `static const int32_t` tables padded with zeros to a multiple of 4 entries (so a block of four
    starting at a multiple of 4 never reads past a table; the padding lanes requantize to 0) read with
    VLDRW. `right_only`: the operands of `mve_requant_right_helper` (multiplier, shift), else those of
    `mve_requant_helper` (multiplier, left shift, right shift)."""

    right_only: bool
    #: C table names (per output) or literal values (per tensor), one per operand
    terms: tuple[str, ...]
    per_output: bool

    def vectors(self, first: str) -> tuple[str, ...]:
        """The operands of outputs `first` .. `first` + 3 (`first`: a C expression, a multiple of 4 for tables)."""
        if self.per_output:
            return tuple(f"vldrwq_s32(&{t}[{first}])" for t in self.terms)
        return tuple(f"vdupq_n_s32({t})" for t in self.terms)

    def call(self, fn: str, acc: str, first: str) -> str:
        """C: `fn` (the helper these operands are for) applied to int32x4_t `acc` for outputs `first`..+3."""
        return f"{fn}({acc}, {', '.join(self.vectors(first))})"


def mve_operands(ctx: KernelContext, multiplier: Sequence[int], shift: Sequence[int], *,
                 right_only: bool = False, hint: str = "rq") -> MveOperands:
    """The operands of the MVE requantization of outputs with these per-output (or one) multipliers and shifts:
    literals when one pair serves every output, else tables emitted into ctx's file (`hint` names them)."""
    m = [int(v) for v in multiplier]
    s = [int(v) for v in shift]
    cols = [m, s] if right_only else [m, [max(v, 0) for v in s], [max(-v, 0) for v in s]]
    if len(set(m)) == 1 and len(set(s)) == 1:
        return MveOperands(right_only, tuple(c_literal(c[0], "int32") for c in cols), False)
    pad = -len(m) % 4
    names = tuple(ctx.table("int32_t", c + [0] * pad, f"{hint}_{part}")
                  for c, part in zip(cols, ("m", "s") if right_only else ("m", "ls", "rs"), strict=True))
    return MveOperands(right_only, names, True)


# --- int16 x int8 ("16x8": conv2d, depthwise_conv2d, dense, matmul, transpose_conv) ---------------------------

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


# --- the int8 output stage of a convolution / dense layer (conv2d, depthwise_conv2d, dense, matmul, ...) --------

def x_abs_max(input_zero_point: int) -> int:
    """The largest |x - input_zero_point| of an int8 x."""
    return max(127 - input_zero_point, 128 + input_zero_point)


def acc_bound(x_abs: int, w_abs_sums: np.ndarray | Sequence[int] | int, bias_abs: np.ndarray | int = 0) -> int:
    """The bound of an int32 accumulator `bias + sum (x - zp) * w`, the one definition every kernel proves its
    accumulators by: the largest over outputs of `x_abs * sum|w| + |bias|` (`w_abs_sums`: per output, or one
    number for all; `bias_abs`: per output, or one number). It bounds every partial sum in any order, so an
    int32 sum of any reassociation is exact when it is at most INT32_MAX."""
    per_out = x_abs * np.asarray(w_abs_sums, np.int64) + np.asarray(bias_abs, np.int64)
    return int(np.max(per_out, initial=0))


@dataclass(frozen=True)
class OutputStage:
    """The int8 output stage of one node, prepared once (TFLM's OpData): the requantization operands, the zero
    points, the fused activation's range, the accumulator bound and, where the kernel folds it, the initial
    accumulator per output (`init`: bias - input_zp * sum w). Emitters take it whole."""

    rounding: str
    multiplier: tuple[int, ...]
    shift: tuple[int, ...]
    input_zp: int
    output_zp: int
    act_min: int
    act_max: int
    #: the largest |accumulator| (`acc_bound`)
    bound: int
    #: the weights are quantized per output channel (a workload property: every layer of a task agrees)
    per_channel: bool
    init: tuple[int, ...] | None = None

    def form_reason(self, form: str, target: Target) -> str | None:
        """`form_reason` of requantization form `form` for this stage on `target`."""
        return form_reason(form, self.rounding, self.multiplier, self.shift, target, self.bound)


# --- add/sub/mul and the comparisons: the 32-bit input rescale ----------------------------------------------

def rdbpot_const_stmts(dst: str, src: str, exponent: int) -> str:
    """C declaring int32 `dst` = gemmlowp RoundingDivideByPOT(`src`, exponent) for a constant exponent in
    [0, 31] (the constants of tvm_rdbpot folded; `src` must be a side-effect-free int32 expression)."""
    if exponent == 0:
        return f"const int32_t {dst} = {src};"
    mask = (1 << exponent) - 1
    return (f"const int32_t {dst} = ({src} >> {exponent}) + "
            f"((({src}) & {mask}) > ({mask >> 1} + ({src} < 0 ? 1 : 0)) ? 1 : 0);")


def rescale_input_stmts(dst: str, va: str, zero_point: int, left_shift: int, multiplier: int, shift: int,
                        rounding: str) -> str | None:
    """32-bit C for `dst` = requant(va << left_shift, multiplier, shift) where va = x - zero_point of an int8
    x, or None when the 32-bit form does not provably fit.

    With L = left_shift and a multiplier m that is never INT32_MIN, both roundings of MBQM of va * 2^L are
    floor((va * m + 2^(D-1)) / 2^D) (then, for double rounding, RoundingDivideByPOT by -shift) with
    D = 31 - L (double) or 31 - shift - L (single), because va * m * 2^L + 2^(30...) shares the factor 2^L
    with 2^31. Writing m = mh * 2^D + ml (0 <= ml < 2^D) gives va * mh + ((va * ml + 2^(D-1)) >> D) exactly;
    every term is checked here to fit int32 from the actual zero point and multiplier."""
    if shift > 0 or multiplier < 0 or multiplier >= 1 << 31 or not 0 <= left_shift <= 30:
        return None
    d = 31 - left_shift if rounding == "double" else 31 - shift - left_shift
    if not 1 <= d <= 30:
        return None
    va_max = max(abs(-128 - zero_point), abs(127 - zero_point))
    if (va_max << left_shift) > INT32_MAX:
        return None  # the original operand itself would not be an int32
    mh, ml = multiplier >> d, multiplier & ((1 << d) - 1)
    low_max = va_max * ml + (1 << (d - 1))
    if low_max > INT32_MAX or va_max * mh + (low_max >> d) + 1 > INT32_MAX:
        return None
    high = f"{va} * {mh}" if mh != 1 else va
    low = f"(({va} * {ml} + {1 << (d - 1)}) >> {d})"  # ml == 0: 2^(d-1) >> d == 0
    expr = " + ".join(t for t, keep in ((high, mh != 0), (low, ml != 0)) if keep) or "0"
    if rounding == "double" and shift < 0:
        return f"const int32_t {dst}_h = {expr};\n" + rdbpot_const_stmts(dst, f"{dst}_h", -shift)
    return f"const int32_t {dst} = {expr};"


def rescale_stmts(ctx: KernelContext, dst: str, va: str, zero_point: int, left_shift: int, multiplier: int,
                  shift: int, rounding: str, fast32: bool) -> str:
    """C declaring int32 `dst` = MBQM(va << left_shift, multiplier, shift), the input rescale of the binary
    ops (`va`: a side-effect-free int32 expression, x - zero_point of an int8 x). `fast32`: the 32-bit form
    (`rescale_input_stmts`) where it provably fits; otherwise (and without it) the shared helper."""
    fast = rescale_input_stmts(dst, va, zero_point, left_shift, multiplier, shift, rounding) if fast32 else None
    if fast is not None:
        return fast
    x = f"{va} * {1 << left_shift}" if left_shift else va
    return f"const int32_t {dst} = {ctx.helper('requant', rounding)}({x}, {multiplier}, {shift});"
