"""Targets as instruction vocabularies: what an emitter may ask of the CPU it writes C for.

A kernel never tests a target's flags. It asks its context for the vocabulary (`ctx.isa`) and calls the
operations it needs: "widen four int8 into two int16 pairs", "two 16x16 multiply-accumulates", "saturate to
8 bits". A vocabulary answers with the C spelling of the operation (an ACLE intrinsic, a helper wrapping one
instruction) and requests what that spelling needs in the file (<arm_acle.h> and its CPU check, a helper),
or says by its capabilities that it has no such operation, so the emitter chooses another form.

One class per ISA level, each extending the one below:

| vocabulary   | targets                   | adds                                                           |
|--------------|---------------------------|----------------------------------------------------------------|
| `PortableC`  | host, Cortex-M0 (Armv6-M) | nothing: C99 only                                              |
| `Thumb2`     | Cortex-M3 (Armv7-M)       | SSAT/USAT; SMULL with shifted-operand ADC (asm requantization) |
| `ArmV7EMDsp` | M4, M7, M33 (DSP)         | SXTB16/SXTAB16 widening, SMLAD dual MAC, PKHBT/PKHTB, SMMULR,  |
|              |                           | SSUB8/SEL byte SIMD, LDRD of word pairs                         |
| `ArmV81MMve` | M55 (Helium)              | MVE's 128-bit vectors: <arm_mve.h> checked for MVE (`use_mve`), |
|              |                           | four scalars into a vector (`lanes4`), predicates (`pred8`,     |
|              |                           | `pred32`), constant-length vector copies and fills              |
|              |                           | (`copy_bytes`, `fill_bytes`); every DSP operation too           |

The ISA's helpers (inline-asm wrappers of instructions GCC does not form by itself) are defined here, once.
Two GCC 12 / QEMU 7.2 traps shape the MVE spellings (docs/kernels.md §11.1): a constant predicate of 32-bit
lanes is folded to all-true by GCC (predicates go through `tvm_mve_pred`), and the two-lane VMOV fills its
lanes in opposite orders in GAS and QEMU (`lanes4` uses single-lane moves).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from utvm.errors import CompileError
from utvm.target import Target

if TYPE_CHECKING:
    from utvm.compiler.kernels import KernelContext

#: the ISAs with Thumb-2 (SSAT, SMULL/ADC with shifted operands): every Cortex-M but Armv6-M
THUMB2_ISAS = ("armv7-m", "armv7e-m", "armv8-m.main", "armv8.1-m.main")

# --- the ISA's helpers ---------------------------------------------------------------------------------------
# Prelude helpers (`ctx.helper(key)`, emitted once per file before the declarations), defined with
# kernels.define_helper at import; local helpers (`local`, emitted once per file at the head of the
# declarations, their names reserved in the file's namespace).

PRELUDE_HELPERS: dict[str, tuple[str, str]] = {
    # ACLE intrinsics of the DSP extension (SMLAD, SXTB16, SSAT, ...): only for targets that have it.
    "acle": ("""\
#include <arm_acle.h>
#if !defined(__ARM_FEATURE_DSP) || (__ARM_FEATURE_DSP != 1)
#error "generated for a Cortex-M with the DSP extension: compile with its -mcpu (e.g. -mcpu=cortex-m4)"
#endif""", ""),
    # ACLE's saturation intrinsics (__ssat, __usat): every Thumb-2 Cortex-M (ARMv7-M and later) has them.
    "acle_sat": ("""\
#include <arm_acle.h>
#if !defined(__ARM_FEATURE_SAT)
#error "generated for a Cortex-M with SSAT (ARMv7-M or later): compile with its -mcpu (e.g. -mcpu=cortex-m3)"
#endif""", "__ssat"),
    # SXTB16 / SXTAB16 of a word rotated by 8 (GCC's ACLE has no rotate, and does not fold one in): the odd
    # bytes as int16 lanes. Non-volatile asm: the compiler may move or drop it like an expression.
    "dsp_ror8": ("""\
static inline uint32_t tvm_sxtb16_ror8(uint32_t x) {
  uint32_t r;
  __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
  return r;
}
static inline uint32_t tvm_sxtab16_ror8(uint32_t a, uint32_t x) {
  uint32_t r;
  __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
  return r;
}
/* One word of a DSP im2col column: two int16 lanes, written as halves and read as a word (a union, so no
   pointer type punning). */
typedef union {
  uint32_t w;
  int16_t h[2];
} tvm_pair_t;""", "tvm_sxtb16_ror8"),
    # Helium (MVE) intrinsics: only for targets that have MVE's integer instructions. The check comes first,
    # so a compiler not told the CPU stops with this message rather than <arm_mve.h>'s own.
    "mve": ("""\
#if !defined(__ARM_FEATURE_MVE) || ((__ARM_FEATURE_MVE & 1) == 0)
#error "generated for a Cortex-M with Helium (MVE integer): compile with -mcpu=cortex-m55 -mfloat-abi=hard"
#endif
#include <arm_mve.h>""", ""),
}

LOCAL_HELPERS: dict[str, str] = {
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
    # Four int32 scalars into the lanes of one vector: VDUP then three single-lane VMOVs (MVE's two-lane VMOV
    # would take two, but QEMU 7.2 fills its lanes in the other order than the assembler's syntax names them,
    # so its meaning is not one we can test).
    "tvm_mve_lanes4": """\
static inline int32x4_t tvm_mve_lanes4(int32_t a0, int32_t a1, int32_t a2, int32_t a3) {
  return vsetq_lane_s32(a3, vsetq_lane_s32(a2, vsetq_lane_s32(a1, vdupq_n_s32(a0), 1), 2), 3);
}""",
    # An MVE predicate from a constant, through an empty asm so GCC cannot see the constant: GCC 12 folds a
    # constant predicate of 32-bit (or 16-bit) lanes to all-true (0x000f becomes 0xffff, measured), byte-lane
    # constants survive; a run-time value (VMSR P0 from the register) is always taken as it is.
    "tvm_mve_pred": """\
static inline mve_pred16_t tvm_mve_pred(uint32_t bits) {
  __asm__("" : "+r"(bits));
  return (mve_pred16_t)bits;
}""",
    # The 16x8 dot product of the int16 kernels (conv2d, dense; TFLite accumulates it in int64): 8 MACs per
    # VMLALDAVA into a 64-bit accumulator (exact: no product or sum leaves int64), weights widened by the load
    # (VLDRB.S16), the last n % 8 by zero-predicated loads (the predicate hidden from GCC: see tvm_mve_pred).
    "tvm_mve_dot_s16s8": """\
static inline int64_t tvm_mve_dot_s16s8(int64_t acc, const int16_t* x, const int8_t* w, int32_t n) {
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    acc = vmlaldavaq_s16(acc, vldrhq_s16(x + i), vldrbq_s16(w + i));
  }
  if (i < n) {
    uint32_t bits = (1u << (2u * (uint32_t)(n - i))) - 1u;
    __asm__("" : "+r"(bits));
    acc = vmlaldavaq_s16(acc, vldrhq_z_s16(x + i, (mve_pred16_t)bits), vldrbq_z_s16(w + i, (mve_pred16_t)bits));
  }
  return acc;
}""",
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


def local(ctx: KernelContext, name: str) -> str:
    """Emit the local helper `name` into ctx's file once (its name reserved in the file's namespace)."""
    if name not in ctx.file.names:
        ctx.file.names.add(name)
        ctx.file.decls.insert(0, LOCAL_HELPERS[name])
    return name


# --- the vocabularies ----------------------------------------------------------------------------------------

class PortableC:
    """C99 only (host, Armv6-M): every operation beyond it is absent."""

    name = "portable C"
    #: SSAT/USAT and SMULL with a shifted-operand ADC (Thumb-2)
    thumb2 = False
    #: the DSP extension's 16-bit SIMD: widen-and-pair (SXTB16), dual MAC (SMLAD), pack (PKHBT), SMMULR
    simd16 = False
    #: Helium (MVE) vectors (the slot for Armv8.1-M kernels)
    mve = False

    def __init__(self, ctx: KernelContext) -> None:
        self.ctx = ctx

    @property
    def target(self) -> Target:
        return self.ctx.target

    def _absent(self, what: str) -> CompileError:
        return self.ctx.error(f"{what} was asked of {self.target.name}, whose vocabulary is {self.name}")

    # saturation -----------------------------------------------------------------------------------------
    def use_sat(self) -> None:
        """Make the file ready for ACLE's saturation intrinsics (<arm_acle.h>, checked for SSAT)."""
        raise self._absent("SSAT")

    def ssat(self, expr: str, bits: int) -> str:
        """`expr` saturated to a signed `bits`-bit value in one instruction (SSAT; the file must be ready
        through `use_sat` or `use_simd`)."""
        raise self._absent("SSAT")

    # 16-bit SIMD ----------------------------------------------------------------------------------------
    def use_simd(self) -> None:
        """Make the file ready for the DSP intrinsics (<arm_acle.h>, checked to be for a DSP CPU)."""
        raise self._absent("the DSP extension")

    def sxtb16(self, x: str) -> str:
        raise self._absent("SXTB16")

    def sxtb16_odd(self, x: str) -> str:
        raise self._absent("SXTB16 ror 8")

    def sxtab16(self, acc: str, x: str) -> str:
        raise self._absent("SXTAB16")

    def sxtab16_odd(self, acc: str, x: str) -> str:
        raise self._absent("SXTAB16 ror 8")

    def smlad(self, a: str, b: str, acc: str) -> str:
        raise self._absent("SMLAD")

    def smlaxy(self, xy: str, a: str, b: str, acc: str) -> str:
        """One 16x16 multiply-accumulate of a half of `a` by a half of `b` (`xy`: "bb", "bt", "tb", "tt";
        b: the bottom half, t: the top half)."""
        raise self._absent("SMLAxy")

    def ssub8(self, a: str, b: str) -> str:
        raise self._absent("SSUB8")

    def sel(self, a: str, b: str) -> str:
        raise self._absent("SEL")

    def pkhbt16(self, a: str, b: str) -> str:
        raise self._absent("PKHBT")

    def pkhtb16(self, a: str, b: str) -> str:
        raise self._absent("PKHTB")

    def pair_type(self) -> str:
        """The C type of one word of two int16 lanes written as halves and read as a word (`tvm_pair_t`)."""
        raise self._absent("16-bit SIMD words")

    # inline-asm spellings: one instruction of an asm block, its operands named (`%[name]`)
    def asm_ldr(self, d: str, base: str, off: int) -> str:
        raise self._absent("LDR in asm")

    def asm_ldrd(self, lo: str, hi: str, base: str, off: int) -> str:
        raise self._absent("LDRD")

    def asm_sxtb16(self, d: str, x: str, odd: bool = False) -> str:
        raise self._absent("SXTB16")

    def asm_sxtab16(self, d: str, acc: str, x: str, odd: bool = False) -> str:
        raise self._absent("SXTAB16")

    def asm_smlad(self, d: str, a: str, b: str, acc: str) -> str:
        raise self._absent("SMLAD")

    # Helium (MVE) ----------------------------------------------------------------------------------------
    def use_mve(self) -> None:
        """Make the file ready for the MVE intrinsics (<arm_mve.h>, checked to be for an MVE CPU)."""
        raise self._absent("Helium (MVE)")

    def lanes4(self, a0: str, a1: str, a2: str, a3: str) -> str:
        """An int32x4_t of four int32 scalars (lane 0 = a0)."""
        raise self._absent("MVE lane moves")

    def pred8(self, n: int) -> str:
        """The predicate of the first n of 16 byte lanes (a C expression of type mve_pred16_t; never a bare
        constant: GCC 12 miscompiles constant predicates of wider lanes, see `tvm_mve_pred`)."""
        raise self._absent("MVE predicates")

    def pred32(self, lanes: Sequence[int]) -> str:
        """The predicate of the 32-bit lanes listed (0..3), a C expression of type mve_pred16_t."""
        raise self._absent("MVE predicates")

    def copy_bytes(self, dst: str, src: str, n: int) -> str:
        """C copying n (a compile-time count) int8 values from `src` to `dst` (int8_t pointers, any alignment):
        16 at a time through vector registers, a shorter rest predicated (or a memcpy of 1, 2, 4 or 8)."""
        raise self._absent("MVE vector copies")

    def fill_bytes(self, dst: str, vec: str, n: int) -> str:
        """C storing n (compile-time) copies of a byte to `dst` from `vec`, an int8x16_t holding it in every lane."""
        raise self._absent("MVE vector stores")

    def dot_s16s8(self, acc: str, x: str, w: str, n: str | int) -> str:
        """C expression: int64 `acc` + the dot product of n int16 values at `x` and int8 values at `w` (8 MACs
        per VMLALDAVA, exact in int64)."""
        raise self._absent("VMLALDAVA")

    def local(self, name: str) -> str:
        """A local helper of this ISA (`LOCAL_HELPERS`), emitted into the file once; returns its name."""
        return local(self.ctx, name)


class Thumb2(PortableC):
    """Armv7-M: C plus SSAT/USAT and the Thumb-2 forms of the requantization (utvm.compiler.kernels.requant)."""

    name = "Armv7-M (Thumb-2)"
    thumb2 = True

    def use_sat(self) -> None:
        self.ctx.helper("acle_sat")

    def ssat(self, expr: str, bits: int) -> str:
        return f"__ssat({expr}, {bits})"

    def asm_ldr(self, d: str, base: str, off: int) -> str:
        return f"ldr %[{d}], [%[{base}], #{off}]"

    def asm_ldrd(self, lo: str, hi: str, base: str, off: int) -> str:
        return f"ldrd %[{lo}], %[{hi}], [%[{base}], #{off}]"


class ArmV7EMDsp(Thumb2):
    """Armv7E-M / Armv8-M Mainline with the DSP extension (Cortex-M4, M7, M33)."""

    name = "Armv7E-M DSP"
    simd16 = True

    def use_simd(self) -> None:
        self.ctx.file.require("acle")

    def sxtb16(self, x: str) -> str:
        return f"__sxtb16({x})"

    def sxtb16_odd(self, x: str) -> str:
        self.ctx.helper("dsp_ror8")
        return f"tvm_sxtb16_ror8({x})"

    def sxtab16(self, acc: str, x: str) -> str:
        return f"__sxtab16({acc}, {x})"

    def sxtab16_odd(self, acc: str, x: str) -> str:
        self.ctx.helper("dsp_ror8")
        return f"tvm_sxtab16_ror8({acc}, {x})"

    def smlad(self, a: str, b: str, acc: str) -> str:
        return f"__smlad({a}, {b}, {acc})"

    def smlaxy(self, xy: str, a: str, b: str, acc: str) -> str:
        if xy not in ("bb", "bt", "tb", "tt"):
            raise ValueError(f"SMLAxy halves {xy!r}")
        return f"__smla{xy}({a}, {b}, {acc})"

    def ssub8(self, a: str, b: str) -> str:
        return f"__ssub8({a}, {b})"

    def sel(self, a: str, b: str) -> str:
        return f"__sel({a}, {b})"

    def pkhbt16(self, a: str, b: str) -> str:
        return f"{local(self.ctx, 'tvm_pkhbt16')}({a}, {b})"

    def pkhtb16(self, a: str, b: str) -> str:
        local(self.ctx, "tvm_pkhbt16")
        return f"tvm_pkhtb16({a}, {b})"

    def pair_type(self) -> str:
        self.ctx.helper("dsp_ror8")
        return "tvm_pair_t"

    def asm_sxtb16(self, d: str, x: str, odd: bool = False) -> str:
        return f"sxtb16 %[{d}], %[{x}]" + (", ror #8" if odd else "")

    def asm_sxtab16(self, d: str, acc: str, x: str, odd: bool = False) -> str:
        return f"sxtab16 %[{d}], %[{acc}], %[{x}]" + (", ror #8" if odd else "")

    def asm_smlad(self, d: str, a: str, b: str, acc: str) -> str:
        return f"smlad %[{d}], %[{a}], %[{b}], %[{acc}]"


class ArmV81MMve(ArmV7EMDsp):
    """Armv8.1-M Mainline with Helium (Cortex-M55, M85): MVE's vectors beside the DSP vocabulary (the M55 has
    the DSP extension too). Kernels write the vector code with <arm_mve.h>'s intrinsics (or asm) after
    `use_mve()`; what several families share is here."""

    name = "Armv8.1-M MVE"
    mve = True

    def use_mve(self) -> None:
        """Make the file ready for the MVE intrinsics (<arm_mve.h>, checked to be for an MVE CPU)."""
        self.ctx.file.require("mve")

    def lanes4(self, a0: str, a1: str, a2: str, a3: str) -> str:
        self.use_mve()
        return f"{local(self.ctx, 'tvm_mve_lanes4')}({a0}, {a1}, {a2}, {a3})"

    def _pred(self, bits: int) -> str:
        self.use_mve()
        return f"{local(self.ctx, 'tvm_mve_pred')}(0x{bits:04x}u)"

    def pred8(self, n: int) -> str:
        if not 0 <= n <= 16:
            raise ValueError(f"{n} byte lanes of 16")
        return self._pred((1 << n) - 1)

    def pred32(self, lanes: Sequence[int]) -> str:
        bits = 0
        for lane in lanes:
            if not 0 <= lane <= 3:
                raise ValueError(f"32-bit lane {lane} of 4")
            bits |= 0xF << (4 * lane)
        return self._pred(bits)

    def copy_bytes(self, dst: str, src: str, n: int) -> str:
        out = [f"vstrbq_s8({dst} + {16 * i}, vldrbq_s8({src} + {16 * i}));" for i in range(n // 16)]
        rest, at = n % 16, n // 16 * 16
        if rest in (1, 2, 4, 8):
            self.ctx.helper("string")
            out.append(f"memcpy({dst} + {at}, {src} + {at}, {rest});")
        elif rest:
            p = self.pred8(rest)
            out.append(f"vstrbq_p_s8({dst} + {at}, vldrbq_z_s8({src} + {at}, {p}), {p});")
        return "\n".join(out)

    def dot_s16s8(self, acc: str, x: str, w: str, n: str | int) -> str:
        self.use_mve()
        return f"{local(self.ctx, 'tvm_mve_dot_s16s8')}({acc}, {x}, {w}, {n})"

    def fill_bytes(self, dst: str, vec: str, n: int) -> str:
        out = [f"vstrbq_s8({dst} + {16 * i}, {vec});" for i in range(n // 16)]
        if n % 16:
            out.append(f"vstrbq_p_s8({dst} + {n // 16 * 16}, {vec}, {self.pred8(n % 16)});")
        return "\n".join(out)


def vocabulary_class(target: Target) -> type[PortableC]:
    """The vocabulary of a target's ISA level (the one place a target's flags are read for code)."""
    if target.mve and target.dsp:
        return ArmV81MMve
    if target.dsp:
        return ArmV7EMDsp
    if target.isa in THUMB2_ISAS:
        return Thumb2
    return PortableC


def vocabulary(ctx: KernelContext) -> PortableC:
    """The vocabulary bound to ctx (its helpers go into ctx's file)."""
    return vocabulary_class(ctx.target)(ctx)
