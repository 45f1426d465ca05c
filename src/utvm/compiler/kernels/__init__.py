"""The C kernel interface: how one IR node becomes the body of one generated operator function.

A kernel is a function registered for an op name:

    @register("dense")
    def dense(ctx: KernelContext) -> KernelCode: ...

It reads the node through `ctx` (tensors, `ctx.params()` = the op module's `prepare(node, graph, rounding)`)
and returns C *statements* that compute the outputs from the inputs. The code generator wraps them into a
function in the chosen calling convention (docs/architecture.md §6), so a kernel never sees DLTensor, TVMValue or
the convention:

    int32_t tvmgen_<model>_<op>(const int8_t* in0, ..., int8_t* out0 [, uint8_t* scratch] [, uint8_t* state])

Rules for kernel bodies (they are checked by the tests of every op):
- Arguments: `ctx.inputs[i]` is the C expression of node input i: a parameter (`in0`, ...) for tensors
  computed at run time, or the name of a file-scope `static const` array for constants (weights land in
  flash; constants are never parameters). `ctx.outputs[i]` is `out0`, ... Element types are the C types
  of `C_TYPES`; all tensors are dense, row-major (NHWC).
- Shapes, quantization parameters and constants are baked in: read them from `ctx.params()` and the
  tensors, and emit tables with `ctx.table(...)` (a `static const` array at file scope).
- Portable C99 only. int8 paths use no libm and no floating point; float kernels that call <math.h>
  set `uses_libm=True`. Integer helpers (requantization, saturation, gemmlowp primitives) come from
  `ctx.helper(name)`, which emits each helper once per file: the rounding choice lives there only
  (`ctx.helper("requant", params.rounding)`: the op module resolved which rounding that op uses).
- Return 0 on success (the body's last statement is `return 0;`); a nonzero value is an error code.
- `inplace`: indices of inputs whose buffer the output 0 may share (the kernel reads element i of that
  input before it writes element i of the output, and reads no element j < i afterwards). The memory
  planner uses it only when legal (same size, the input dies here, not a model input or output).
- `scratch_bytes`: temporary memory the kernel needs for the duration of the call; the planner places it
  in the workspace and the kernel receives it as `uint8_t* scratch` (16-byte aligned).
- `persistent_bytes`: state the kernel keeps from one run of the model to the next (SVDF's and LSTM's
  variable tensors, delay lines): the planner places it in the workspace for the whole run and across runs
  (never shared), all-zero before the first run; the kernel receives it as `uint8_t* state` (`ctx.state`,
  16-byte aligned, after `scratch`). A kernel with state must be the only writer of it and encode its
  initial value as all-zero bytes.
- `ctx.target` is the CPU the code is for (utvm.target: DSP extension, FPU): the only place a kernel may
  learn it. A DSP target's kernels may use ACLE intrinsics (`ctx.require_dsp()` includes <arm_acle.h> and
  makes the file fail to compile, with an #error, on a compiler not told that CPU).
- A kernel with choices registers a space function (`register(op, space=fn)`, utvm.compiler.schedule):
  `fn(ctx) -> Space` lists its knobs for this node and target, with a default point; the kernel reads the
  chosen point from `ctx.schedule`. Every point must produce the same output bits.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utvm.compiler.schedule import EMPTY_SPACE, Schedule, Space, canonical, task_key
from utvm.errors import CompileError, UnsupportedOperatorError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.target import Target, get_target

# IR dtype -> C element type.
C_TYPES: dict[str, str] = {
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "float32": "float",
    "bool": "uint8_t",
    "uint32": "uint32_t",
    "uint64": "uint64_t",
}

# IR dtype -> (DLDataTypeCode, bits) for argument checks.
DL_TYPES: dict[str, tuple[int, int]] = {
    "int8": (0, 8),
    "uint8": (1, 8),
    "int16": (0, 16),
    "int32": (0, 32),
    "int64": (0, 64),
    "float32": (2, 32),
    "bool": (6, 8),
    "uint32": (1, 32),
    "uint64": (1, 64),
}

# Modules under utvm.compiler.kernels that register kernels; imported on first use.
KERNEL_MODULES: tuple[str, ...] = ("shape", "elementwise", "dense", "conv", "depthwise", "pool", "reduce", "softmax",
                                   "activation", "pad", "quantize", "layout", "matmul", "batch_norm",
                                   # the families of utvm.ops.FAMILY_MODULES
                                   "unary", "binary", "movement", "gather", "reduction", "transpose_conv",
                                   "recurrent", "signal", "custom")


@dataclass(frozen=True, slots=True)
class KernelCode:
    """What a kernel returns: the statements of the operator's body and how it may use memory."""

    body: str
    scratch_bytes: int = 0
    inplace: tuple[int, ...] = ()
    uses_libm: bool = False
    #: what goes before the function's definition (a macro from a helper, e.g. TVM_NO_SCHED)
    attributes: str = ""
    #: bytes of state kept across runs (`ctx.state`); 0 for stateless kernels
    persistent_bytes: int = 0


# --- helpers: shared C functions a kernel may ask for ---------------------------------------------------
# Each is emitted at most once per file, only when requested. `{rounding}` variants are chosen here, in
# one place; kernels call the name `ctx.helper("requant", p.rounding)` returns without knowing its body.

_HELPERS: dict[str, str] = {
    # ACLE intrinsics of the DSP extension (SMLAD, SXTB16, SSAT, ...): only for targets that have it.
    "acle": """\
#include <arm_acle.h>
#if !defined(__ARM_FEATURE_DSP) || (__ARM_FEATURE_DSP != 1)
#error "generated for a Cortex-M with the DSP extension: compile with its -mcpu (e.g. -mcpu=cortex-m4)"
#endif""",
    # ACLE's saturation intrinsics (__ssat, __usat): every Thumb-2 Cortex-M (ARMv7-M and later) has them.
    "acle_sat": """\
#include <arm_acle.h>
#if !defined(__ARM_FEATURE_SAT)
#error "generated for a Cortex-M with SSAT (ARMv7-M or later): compile with its -mcpu (e.g. -mcpu=cortex-m3)"
#endif""",
    # SXTB16 / SXTAB16 of a word rotated by 8 (GCC's ACLE has no rotate, and does not fold one in): the odd
    # bytes as int16 lanes. Non-volatile asm: the compiler may move or drop it like an expression.
    "dsp_ror8": """\
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
} tvm_pair_t;""",
    "string": "#include <string.h>",
    # GCC's pre-register-allocation scheduler hoists the loads of unrolled SMLAD code and spills; a kernel
    # may turn it off for its function (other compilers ignore the request).
    "no_sched": """\
#if defined(__GNUC__) && !defined(__clang__)
#define TVM_NO_SCHED __attribute__((optimize("no-schedule-insns")))
#else
#define TVM_NO_SCHED
#endif""",
    # gemmlowp's double rounding for 0 <= m < 2^31 and a right shift n >= 1, exactly, in six Thumb-2
    # instructions: r1 = floor((x*m + 2^30) / 2^31) (SaturatingRoundingDoublingHighMul without its
    # INT32_MIN case; the carry of LSRS is bit 30), then floor((r1 - (r1 < 0) + 2^(n-1)) / 2^n)
    # (RoundingDivideByPOT, half away from zero; the carry of ASRS is bit n-1). Idea: CMSIS-NN's optional
    # asm requantization (docs/kernels.md §4.3), written here.
    "requant:double_asm": """\
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
}""",
    "sat_i8": """\
static inline int8_t tvm_sat_i8(int32_t x) {
  return (int8_t)(x < -128 ? -128 : (x > 127 ? 127 : x));
}""",
    "clamp_i32": """\
static inline int32_t tvm_clamp_i32(int32_t x, int32_t lo, int32_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}""",
    "clamp_f32": """\
static inline float tvm_clamp_f32(float x, float lo, float hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}""",
    # TFLite MultiplyByQuantizedMultiplier, TFLITE_SINGLE_ROUNDING: one rounding of x * m / 2^(31 - shift).
    "requant:single": """\
/* x * multiplier * 2^(shift - 31), rounded half up once (TFLite single rounding). shift in [-31, 30]. */
static inline int32_t tvm_requant_single(int32_t x, int32_t multiplier, int32_t shift) {
  const int32_t total_shift = 31 - shift;
  const int64_t round = (int64_t)1 << (total_shift - 1);
  const int64_t result = ((int64_t)x * (int64_t)multiplier + round) >> total_shift;
  return (int32_t)result;
}""",
    # gemmlowp SaturatingRoundingDoublingHighMul + RoundingDivideByPOT (exponent in [0, 31]).
    "gemmlowp": """\
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
}""",
    # gemmlowp double rounding (TFLM; needs "gemmlowp").
    "requant:double": """\
/* x * multiplier * 2^(shift - 31) with gemmlowp's two roundings (TFLM). shift in [-31, 30]. */
static inline int32_t tvm_requant_double(int32_t x, int32_t multiplier, int32_t shift) {
  const int32_t left_shift = shift > 0 ? shift : 0;
  const int32_t right_shift = shift > 0 ? 0 : -shift;
  return tvm_rdbpot(tvm_srdhm((int32_t)((uint32_t)x << left_shift), multiplier), right_shift);
}""",
    # Faster, provably equal variants for a multiplier that is never INT32_MIN (every multiplier
    # QuantizeMultiplier produces is in {0} u [2^30, 2^31)), which is the only input on which
    # SaturatingRoundingDoublingHighMul saturates. Without that case gemmlowp's nudge-then-truncate is
    # floor((a*b + 2^30) / 2^31) for either sign of a*b: ab >= 0 adds 2^30 and truncation is floor; ab < 0
    # adds 1 - 2^30 and truncating towards zero gives ceil((ab + 1 - 2^30) / 2^31)
    # = floor((ab + 1 - 2^30 + 2^31 - 1) / 2^31), the same. The result fits int32 because |a*b| < 2^62
    # unless a == b == INT32_MIN. RoundingDivideByPOT is computed in 32 bits (exponent in [0, 31]:
    # 1u << 31 is defined for uint32_t). `>>` of a negative value is an arithmetic shift on every compiler
    # we target (tvm_rdbpot above relies on it too).
    "requant:double_pm": """\
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
}""",
}

_HELPER_NAMES = {"acle": "", "acle_sat": "__ssat", "dsp_ror8": "tvm_sxtb16_ror8", "string": "",
                 "no_sched": "TVM_NO_SCHED",
                 "requant:double_asm": "tvm_requant_double_asm", "sat_i8": "tvm_sat_i8",
                 "clamp_i32": "tvm_clamp_i32", "clamp_f32": "tvm_clamp_f32",
                 "gemmlowp": "tvm_srdhm", "requant:single": "tvm_requant_single",
                 "requant:double": "tvm_requant_double", "requant:double_pm": "tvm_requant_double_pm"}
_HELPER_DEPS: dict[str, tuple[str, ...]] = {"requant:double": ("gemmlowp",)}


def define_helper(key: str, code: str, name: str, deps: Sequence[str] = ()) -> None:
    """Add a shared C helper a kernel module provides: `ctx.helper(key)` then emits `code` once per file (after
    the helpers in `deps`) and returns `name`, the function to call. Keys are prefixed by their module's family
    (e.g. "signal_log32"); a key defined twice is a programming error."""
    if key in _HELPERS:
        raise RuntimeError(f"kernel helper {key!r} is defined twice")
    _HELPERS[key] = code.rstrip()
    _HELPER_NAMES[key] = name
    if deps:
        _HELPER_DEPS[key] = tuple(deps)


def helper_source(key: str) -> str:
    return _HELPERS[key]


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


# --- formatting of C literals ----------------------------------------------------------------------------

def c_literal(value: Any, dtype: str) -> str:
    """One value as a C literal of `dtype` (exact for float32: 9 significant digits round-trip)."""
    if dtype == "float32":
        v = float(np.float32(value))
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "-INFINITY"
        s = f"{v:.9g}"
        if "e" not in s and "." not in s and "n" not in s:
            s += ".0"
        return s + "f"
    v = int(value)
    if dtype == "int64":
        return "(-9223372036854775807LL - 1)" if v == -(2**63) else f"{v}LL"
    if dtype in ("uint32", "uint64"):
        return f"{v}U" if dtype == "uint32" else f"{v}ULL"
    if dtype in ("int32", "int16", "int8") and v == -(2**31):
        return "(-2147483647 - 1)"
    return str(v)


def c_array_body(values: np.ndarray | Sequence[Any], dtype: str, per_line: int = 16) -> str:
    flat = np.asarray(values).reshape(-1)
    if dtype == "float32":
        items = [c_literal(v, dtype) for v in flat.tolist()]
    elif dtype in ("int8", "uint8", "int16", "int32", "bool") and flat.size:
        ints = flat.astype(np.int64).tolist()
        items = ["(-2147483647 - 1)" if v == -(2**31) else str(v) for v in ints]
    else:
        items = [c_literal(v, dtype) for v in flat.tolist()]
    if not items:
        return "0"
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return ",\n  ".join(lines)


def dtype_of_ctype(ctype: str) -> str:
    for k, v in C_TYPES.items():
        if v == ctype and k != "bool":
            return k
    raise CompileError(f"no IR dtype for C type {ctype!r}")


# --- the context a kernel is emitted in ------------------------------------------------------------------

class _InputExprs(Sequence[str]):
    """ctx.inputs: parameter names for run-time tensors; constants are emitted on first access."""

    def __init__(self, ctx: KernelContext, params: dict[int, str]) -> None:
        self._ctx = ctx
        self._params = params

    def __len__(self) -> int:
        return len(self._ctx.node.inputs)

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        if i in self._params:
            return self._params[i]
        if not self._ctx.has_input(i):
            raise self._ctx.error(f"optional input {i} is absent")
        return self._ctx.const(i)


class KernelContext:
    """Everything a kernel needs about the node it compiles, plus the file-scope emitters."""

    def __init__(self, node: Node, index: int, graph: Graph, rounding: str, func_name: str,
                 file: FileScope, input_params: dict[int, str], output_params: Sequence[str],
                 target: Target | str = "host", schedule: Schedule | None = None) -> None:
        self.node = node
        self.index = index
        self.graph = graph
        self.rounding = rounding
        self.func_name = func_name
        self.file = file
        self.inputs: Sequence[str] = _InputExprs(self, input_params)
        self.outputs = tuple(output_params)
        self.scratch = "scratch"
        #: the C expression of the node's persistent state block (KernelCode.persistent_bytes)
        self.state = "state"
        self.target = get_target(target)
        #: the point of this kernel's space it is emitted with (empty for kernels without a space)
        self.schedule: Schedule = dict(schedule or {})
        #: how many nodes of the model share this node's workload (lowering sets it; a default may share
        #: code between them)
        self.task_count = 1
        self._params: Any = None

    def workload(self) -> dict[str, Any]:
        """What makes this node's kernel one tuning task: op, shapes, dtypes, which inputs are constants,
        quantization class, attributes, rounding and target (utvm.compiler.schedule)."""
        g = self.graph

        def tensor(name: str) -> dict[str, Any] | None:
            if not name:
                return None
            t = g.tensor(name)
            q = t.quant
            qclass = None if q is None else ("per-channel" if q.per_channel and len(q.scale) > 1 else "per-tensor")
            return {"shape": list(t.shape), "dtype": t.dtype, "quant": qclass, "const": t.is_constant}

        try:
            rounding = getattr(self.params(), "rounding", self.rounding)
        except (CompileError, ModuleNotFoundError, AttributeError, ValueError):
            rounding = self.rounding
        return canonical({"op": self.node.op, "inputs": [tensor(x) for x in self.node.inputs],
                          "outputs": [tensor(x) for x in self.node.outputs], "attrs": dict(self.node.attrs),
                          "rounding": rounding, "target": self.target.name})

    def task_key(self) -> str:
        return task_key(self.workload())

    def require_dsp(self) -> None:
        """Use ACLE's DSP intrinsics in this file: <arm_acle.h>, checked to be for a DSP CPU."""
        if not self.target.dsp:
            raise self.error(f"a DSP kernel was chosen for target {self.target.name}, which has no DSP extension")
        self.file.require("acle")

    # tensors
    def in_tensor(self, i: int) -> Tensor | None:
        name = self.node.inputs[i] if i < len(self.node.inputs) else ""
        return self.graph.tensor(name) if name else None

    def out_tensor(self, i: int = 0) -> Tensor:
        return self.graph.tensor(self.node.outputs[i])

    def has_input(self, i: int) -> bool:
        return i < len(self.node.inputs) and bool(self.node.inputs[i])

    @property
    def label(self) -> str:
        return self.node.label(self.index)

    def params(self) -> Any:
        """The op module's prepare(node, graph, rounding): every number the C code bakes in."""
        if self._params is None:
            from utvm import ops

            mod = ops.op_module(self.node.op)
            self._params = mod.prepare(self.node, self.graph, self.rounding)
        return self._params

    # file-scope emitters
    def table(self, ctype: str, values: np.ndarray | Sequence[Any], hint: str = "t") -> str:
        """A `static const` table at file scope holding `values`; returns its C name."""
        return self.file.table(ctype, values, f"{self.func_name}_{hint}")

    def const(self, i: int) -> str:
        """C name of the constant array of node input i (raises if that input is not a constant)."""
        t = self.in_tensor(i)
        if t is None or not t.is_constant:
            raise CompileError(f"{self.label}: input {i} is not a constant")
        return self.file.constant(t)

    def helper(self, name: str, rounding: str | None = None) -> str:
        """Request a shared C helper (see _HELPERS); returns the function name to call.

        "requant" takes the rounding its op uses (`params.rounding`, resolved by the op module's
        prepare); without one, the compile's mode. Both variants can live in one file. "requant_pm" is
        the same function, bit for bit, for multipliers that are never INT32_MIN (check with
        `multipliers_pm`): faster (no saturation test, 32-bit RoundingDivideByPOT)."""
        if name in ("requant", "requant_pm"):
            key = f"requant:{rounding or self.rounding}"
            if name == "requant_pm" and key == "requant:double":
                key = "requant:double_pm"  # single rounding has no saturation case: the helper is the same
        else:
            key = name
        if key not in _HELPERS:
            raise CompileError(f"unknown kernel helper {name!r}")
        for dep in _HELPER_DEPS.get(key, ()):
            self.file.require(dep)
        self.file.require(key)
        return _HELPER_NAMES[key] if key in _HELPER_NAMES else _HELPER_NAMES[name]

    def error(self, what: str) -> CompileError:
        return CompileError(f"{self.label}: {what}")


@dataclass
class FileScope:
    """File-scope C of one generated source: helpers, constants and tables, emitted once each."""

    prefix: str
    helpers: list[str] = field(default_factory=list)
    decls: list[str] = field(default_factory=list)
    constants: dict[str, str] = field(default_factory=dict)  # tensor name -> C name
    names: set[str] = field(default_factory=set)
    uses_libm: bool = False
    constant_bytes: int = 0

    def unique(self, hint: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint)
        name, k = base, 1
        while name in self.names:
            name = f"{base}_{k}"
            k += 1
        self.names.add(name)
        return name

    def require(self, key: str) -> None:
        if key not in self.helpers:
            self.helpers.append(key)

    def table(self, ctype: str, values: np.ndarray | Sequence[Any], hint: str) -> str:
        arr = np.asarray(values)
        name = self.unique(hint)
        dtype = dtype_of_ctype(ctype)
        if dtype == "float32" and not np.all(np.isfinite(arr.astype(np.float64))):
            self.uses_libm = True  # INFINITY / NAN come from <math.h> (macros only, no libm call)
        n = max(int(arr.size), 1)
        self.decls.append(f"static const {ctype} {name}[{n}] = {{\n  {c_array_body(arr, dtype)}\n}};")
        return name

    def constant(self, t: Tensor) -> str:
        if t.name in self.constants:
            return self.constants[t.name]
        assert t.data is not None
        name = self.table(C_TYPES[t.dtype], t.data, f"{self.prefix}_const_{t.name}")
        self.constants[t.name] = name
        self.constant_bytes += t.nbytes
        return name

    def render_prelude(self) -> str:
        return "\n".join(_HELPERS[k] for k in self.helpers)


# --- registry ----------------------------------------------------------------------------------------------

KernelFn = Callable[[KernelContext], KernelCode]
SpaceFn = Callable[[KernelContext], Space]
_KERNELS: dict[str, KernelFn] = {}
_SPACES: dict[str, SpaceFn] = {}
_ALIAS_OPS: set[str] = set()
_loaded = False


def register(*ops: str, alias: bool = False, space: SpaceFn | None = None) -> Callable[[KernelFn], KernelFn]:
    """Decorator registering a kernel for one or more op names.

    alias=True marks ops whose output is the input's bytes unchanged (reshape): the memory planner
    gives both tensors one buffer and no function is generated, unless both are model inputs/outputs,
    in which case the kernel (a copy) is used. `space`: the kernel's schedule space for a node (see the
    module docstring); without one the kernel has no choices.
    """

    def deco(fn: KernelFn) -> KernelFn:
        for op in ops:
            _KERNELS[op] = fn
            if space is not None:
                _SPACES[op] = space
            if alias:
                _ALIAS_OPS.add(op)
        return fn

    return deco


def get_space(ctx: KernelContext) -> Space:
    """The schedule space of ctx's node on ctx's target (EMPTY_SPACE for kernels without choices)."""
    _load()
    fn = _SPACES.get(ctx.node.op)
    if fn is None:
        return EMPTY_SPACE
    space = fn(ctx)
    if not isinstance(space, Space):
        raise ctx.error(f"the space function of {ctx.node.op} returned {type(space).__name__}, not a Space")
    return space


def has_space(op: str) -> bool:
    _load()
    return op in _SPACES


def is_alias_op(op: str) -> bool:
    _load()
    return op in _ALIAS_OPS


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in KERNEL_MODULES:
        try:
            importlib.import_module(f"utvm.compiler.kernels.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"utvm.compiler.kernels.{mod}":
                raise


def supported_ops() -> tuple[str, ...]:
    _load()
    return tuple(sorted(_KERNELS))


def get_kernel(node: Node, index: int) -> KernelFn:
    _load()
    try:
        return _KERNELS[node.op]
    except KeyError:
        raise UnsupportedOperatorError(node.op, f"{index} ({node.name!r})" if node.name else index,
                                       supported_ops()) from None


# --- small utilities kernels share -------------------------------------------------------------------------

_F32_ACTIVATIONS: dict[str, tuple[float, float] | None] = {
    "none": None, "relu": (0.0, math.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}


def activation_range_f32(activation: str) -> tuple[float, float] | None:
    """The clamp of a fused float activation; None for "none"."""
    if activation not in _F32_ACTIVATIONS:
        raise CompileError(f"fused activation {activation!r} is not supported in float kernels")
    return _F32_ACTIVATIONS[activation]


def multipliers_pm(multipliers: Sequence[int]) -> bool:
    """True when every multiplier is a valid int32 other than INT32_MIN: the precondition of "requant_pm"."""
    return all(-(2**31) < int(m) < 2**31 for m in multipliers)


def float_clamp_stmt(var: str, activation: str) -> str:
    """C statement clamping float `var` in place for a fused activation ("" when none)."""
    rng = activation_range_f32(activation)
    if rng is None:
        return ""
    lo, hi = rng
    parts = []
    if lo != -math.inf:
        parts.append(f"if ({var} < {c_literal(lo, 'float32')}) {{ {var} = {c_literal(lo, 'float32')}; }}")
    if hi != math.inf:
        parts.append(f"if ({var} > {c_literal(hi, 'float32')}) {{ {var} = {c_literal(hi, 'float32')}; }}")
    return " ".join(parts)


def strides_of(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(list(shape)):
        out.append(acc)
        acc *= d
    return list(reversed(out))


def offset_term(v: int) -> str:
    """` + v` / ` - |v|` / `` for adding a baked-in integer to an expression."""
    v = int(v)
    return f" + {v}" if v > 0 else (f" - {-v}" if v < 0 else "")


def broadcast_loops(out_shape: Sequence[int], in_shapes: Sequence[Sequence[int]], body: str,
                    index_names: Sequence[str], out_index: str = "io") -> str:
    """Nested loops over `out_shape` that keep a flat index per input (numpy broadcasting) and the output.

    `body` is C using `index_names[k]` (the flat index into input k) and `out_index`. Adjacent dimensions
    that broadcast the same way are merged, so equal shapes give a single flat loop.
    """
    rank = len(out_shape)
    padded = [[1] * (rank - len(s)) + list(s) for s in in_shapes]
    # Merge adjacent dims with identical broadcast patterns.
    dims: list[tuple[int, tuple[bool, ...]]] = []
    for d in range(rank):
        pattern = tuple(p[d] == out_shape[d] for p in padded)
        if out_shape[d] == 1:
            continue
        if dims and dims[-1][1] == pattern:
            dims[-1] = (dims[-1][0] * out_shape[d], pattern)
        else:
            dims.append((int(out_shape[d]), pattern))
    if not dims:
        dims = [(1, tuple(True for _ in padded))]
    # Strides per input along the merged dims (0 where broadcast).
    strides: list[list[int]] = []
    for k in range(len(padded)):
        acc, st = 1, []
        for extent, pattern in reversed(dims):
            st.append(acc if pattern[k] else 0)
            acc *= extent if pattern[k] else 1
        strides.append(list(reversed(st)))
    lines = [f"int32_t {out_index} = 0;"]
    for name in index_names:
        lines.append(f"int32_t {name}_base0 = 0;")
    depth = len(dims)
    for d, (extent, _pattern) in enumerate(dims):
        ind = "  " * d
        lines.append(f"{ind}for (int32_t d{d} = 0; d{d} < {extent}; ++d{d}) {{")
        for k, name in enumerate(index_names):
            st = strides[k][d]
            base = f"{name}_base{d}"
            nxt = f"{name}_base{d + 1}" if d + 1 < depth else name
            expr = f"{base} + d{d} * {st}" if st else base
            lines.append(f"{ind}  const int32_t {nxt} = {expr};")
    inner = "  " * depth
    lines += [inner + ln for ln in body.strip().splitlines()]
    lines.append(f"{inner}++{out_index};")
    for d in reversed(range(depth)):
        lines.append("  " * d + "}")
    return "\n".join(lines)
