"""C kernels of the unary op family (utvm.ops.unary).

* int8 ops of one input ("table" params): `y = table[(uint8_t)x]`, the 256 outputs `prepare` computed
  with TFLM's arithmetic (no arithmetic at run time, bit-exact by construction).
* float32: one libm call or expression per element (`round` is TFLM's RoundToNearest, half to even, written
  out; elu uses expm1f; hard_swish/leaky_relu/prelu as TFLM's reference kernels write them).
* int16 abs / leaky_relu / rsqrt and quantized prelu: the per-element integer formulas of utvm.ops.unary
  with the shared gemmlowp requantization helper; int16 rsqrt runs TFLite's GetInvSqrtQuantizedMultiplierExp
  (a gemmlowp Newton-Raphson in Q3.28) per element, as TFLM does.
* cast (C conversions; `!= 0` into bool), logical_not, zeros_like; log_softmax float32 per row of the last
  axis (max, sum of expf, logf).
Element-wise kernels read x[i] right before writing y[i], so the output may share the input's buffer.
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import (
    C_TYPES,
    KernelCode,
    KernelContext,
    broadcast_loops,
    define_helper,
    register,
)
from utvm.compiler.kernels.cemit import block, fill, for_loop, lines
from utvm.ops import _quant
from utvm.ops.unary import OPS, UnaryParams

define_helper("unary_round_f32", """\
/* TFLite's RoundToNearest: half to even (the int cast only runs when |v| < 2^23). */
static inline float unary_round_f32(float v) {
  const float fl = floorf(v);
  const float diff = v - fl;
  if (diff < 0.5f || (diff == 0.5f && (int32_t)fl % 2 == 0)) {
    return fl;
  }
  return fl + 1.0f;
}""", "unary_round_f32", libm=("floorf",))

# gemmlowp fixed-point pieces of the int8 log_softmax kernel (clz, wrapping and saturating adds, 1/(1+x)); after
# "gemmlowp" and "sat_pot" (its deps)
define_helper("unary_fx", """\
static inline int32_t unary_clz(uint32_t u) {
  int32_t n = 0;
  if (u == 0u) {
    return 32;
  }
  while ((u & 0x80000000u) == 0u) {
    u <<= 1;
    ++n;
  }
  return n;
}
static inline int32_t unary_wadd(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a + (uint32_t)b);
}
static inline int32_t unary_wsub(int32_t a, int32_t b) {
  return (int32_t)((uint32_t)a - (uint32_t)b);
}
static inline int32_t unary_sat_add(int32_t a, int32_t b) {
  const int64_t s = (int64_t)a + (int64_t)b;
  return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}
/* gemmlowp one_over_one_plus_x_for_x_in_0_1 (Q0.31 in and out): three Newton-Raphson steps in Q2.29. */
static inline int32_t unary_one_over_one_plus_x(int32_t a) {
  const int64_t hsum = (int64_t)a + INT32_MAX;
  const int32_t half_den = (int32_t)((hsum + (hsum >= 0 ? 1 : -1)) / 2);
  int32_t x = unary_wadd(1515870810, tvm_srdhm(half_den, -1010580540));
  int32_t k;
  for (k = 0; k < 3; ++k) {
    const int32_t one_minus = unary_wsub(1 << 29, tvm_srdhm(half_den, x));
    x = unary_wadd(x, tvm_sat_pot(tvm_srdhm(x, one_minus), 2));
  }
  return tvm_sat_pot(x, 1);
}""", "unary_clz", deps=("gemmlowp", "sat_pot"))


# needs "gemmlowp" and "unary_fx"
define_helper("unary_log", """\
/* TFLite log_x_for_x_greater_than_or_equal_to_1<5>(FixedPoint<int32, 12> z): log(z) in Q5.26 (the
   accumulation in Q6.25). */
static inline int32_t unary_log_q12_q5(int32_t z) {
  const int32_t sqrt_half = 1518500250;
  const int32_t sqrt_sqrt_half = 1805811301;
  const int32_t quarter = 8388608; /* 1/4 in Q6.25 */
  const int32_t clz_a = unary_clz((uint32_t)z);
  const int32_t r_a = tvm_sat_pot(tvm_srdhm(tvm_sat_pot(z, clz_a - 1), sqrt_half), 1);
  const int32_t z_a_pow = unary_sat_add(tvm_sat_pot(12 - clz_a, 25), quarter);
  const int32_t z_b_headroom = unary_clz((uint32_t)tvm_srdhm(z, sqrt_half)) - 1;
  const int32_t r_b = tvm_sat_pot(z, z_b_headroom);
  const int32_t z_b_pow = unary_sat_add(tvm_sat_pot(12 - z_b_headroom, 25), -quarter);
  const int32_t r = r_a < r_b ? r_a : r_b;
  const int32_t z_pow = z_a_pow > z_b_pow ? z_a_pow : z_b_pow;
  const int64_t hsum = (int64_t)r + sqrt_sqrt_half;
  const int32_t p = (int32_t)((hsum + (hsum >= 0 ? 1 : -1)) / 2);
  const int32_t q = unary_wadd(unary_wsub(r, sqrt_sqrt_half), unary_wsub(r, sqrt_sqrt_half));
  const int32_t common_sq = tvm_srdhm(q, q);
  const int32_t num = unary_wadd(tvm_srdhm(q, r), tvm_srdhm(tvm_srdhm(q, common_sq), 117049297));
  const int32_t denom = unary_wadd(tvm_srdhm(p, unary_wadd(unary_wadd(1057819769, q), tvm_srdhm(127690142, common_sq))),
                                   tvm_srdhm(638450708, q));
  const int32_t recip = unary_one_over_one_plus_x(denom);
  const int32_t sum = unary_wadd(tvm_srdhm(z_pow, 1488522236), tvm_srdhm(tvm_rdbpot(num, 6), recip));
  return tvm_sat_pot(sum, 1);
}""", "unary_log_q12_q5")

# float32 ops of one <math.h> call or an expression of v: (template, the <math.h> function @F@ names or None)
_FLOAT_EXPR: dict[str, tuple[str, str | None]] = {
    "abs": ("@F@(v)", "fabsf"), "neg": ("-v", None), "ceil": ("@F@(v)", "ceilf"), "floor": ("@F@(v)", "floorf"),
    "sqrt": ("@F@(v)", "sqrtf"), "rsqrt": ("1.0f / @F@(v)", "sqrtf"), "square": ("v * v", None),
    "exp": ("@F@(v)", "expf"), "log": ("@F@(v)", "logf"), "sin": ("@F@(v)", "sinf"), "cos": ("@F@(v)", "cosf"),
    "elu": ("v < 0.0f ? @F@(v) : v", "expm1f"),
}
_SIZES = {"float32": 4, "int32": 4, "int16": 2, "int8": 1, "bool": 1, "int64": 8, "uint32": 4}


def _loop(size: int, stmt: str) -> str:
    return lines(for_loop("i", 0, size, stmt), "return 0;")


def _clamp(var: str, lo: int, hi: int) -> str:
    return f"{var} = {var} < {lo} ? {lo} : ({var} > {hi} ? {hi} : {var});"


@register(*OPS)
def unary(ctx: KernelContext) -> KernelCode:
    p: UnaryParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size = math.prod(p.shape)
    t_out = C_TYPES[p.out_dtype]
    lo, hi = (-128, 127) if p.dtype == "int8" else (-32768, 32767)
    if size == 0:
        return KernelCode("return 0;")
    if p.kind == "table":
        if len(p.table) != 256:
            raise ctx.error(f"int8 {p.op} needs a 256-entry table, prepare gave {len(p.table)}")
        table = ctx.table("int8_t", list(p.table), "table")
        return KernelCode(_loop(size, f"{y}[i] = {table}[(uint8_t){x}[i]];"), inplace=(0,))
    if p.kind == "float":
        if p.op == "prelu":
            return _prelu(ctx, p)
        if p.op == "log_softmax":
            return _log_softmax_float(ctx, p)
        if p.op == "round":
            expr = f"{ctx.helper('unary_round_f32')}(v)"
        elif p.op == "hard_swish":
            # in * min(6, max(0, in + 3)) / 6 with std::max/std::min's comparisons (NaN -> 0)
            expr = ("v * ((0.0f < v + 3.0f ? v + 3.0f : 0.0f) < 6.0f ? (0.0f < v + 3.0f ? v + 3.0f : 0.0f) : 6.0f)"
                    " / 6.0f")
        elif p.op == "leaky_relu":
            expr = f"v > 0.0f ? v : v * {ctx.float_literal(p.alpha)}"
        elif p.op in _FLOAT_EXPR:
            template, func = _FLOAT_EXPR[p.op]
            expr = fill(template, F=ctx.libm(func)) if func else template
        else:
            raise ctx.error(f"no float32 {p.op} kernel")
        return KernelCode(_loop(size, f"const float v = {x}[i];\n{y}[i] = {expr};"), inplace=(0,))
    if p.kind == "cast":
        expr = f"(uint8_t)({x}[i] != 0)" if p.out_dtype == "bool" else f"({t_out}){x}[i]"
        same_size = _SIZES[p.dtype] == _SIZES[p.out_dtype]
        return KernelCode(_loop(size, f"{y}[i] = {expr};"), inplace=(0,) if same_size else ())
    if p.kind == "zeros":
        return KernelCode(f"(void){x};\n" + _loop(size, f"{y}[i] = 0;"))
    if p.kind == "logical_not":
        return KernelCode(_loop(size, f"{y}[i] = (uint8_t)({x}[i] == 0);"), inplace=(0,))
    if p.kind == "abs16raw":
        return KernelCode(_loop(size, f"const int32_t v = {x}[i];\n"
                                      f"{y}[i] = (int16_t)(v == -32768 ? -32768 : (v < 0 ? -v : v));"), inplace=(0,))
    if p.kind == "prelu":
        return _prelu(ctx, p)
    if p.kind == "log_softmax":
        return _log_softmax_int8(ctx, p)
    rq = ctx.helper("requant", "double")
    zin, zout = p.input_zero_point, p.output_zero_point
    if p.kind == "abs16":
        scaled = f"{rq}(a, {p.multiplier}, {p.shift})" if p.rescale else "a"
        stmt = (f"const int32_t v = (int32_t){x}[i] - ({zin});\nconst int32_t a = v < 0 ? -v : v;\n"
                f"int32_t r = {scaled} + ({zout});\n{_clamp('r', lo, hi)}\n{y}[i] = ({t_out})r;")
    elif p.kind == "leaky16":
        stmt = (f"const int32_t v = (int32_t){x}[i] - ({zin});\n"
                f"int32_t r = ({zout}) + (v >= 0 ? {rq}(v, {p.multiplier}, {p.shift}) : "
                f"{rq}(v, {p.multiplier_alpha}, {p.shift_alpha}));\n{_clamp('r', lo, hi)}\n{y}[i] = ({t_out})r;")
    elif p.kind == "rsqrt16":
        inv = ctx.helper("inv_sqrt")
        stmt = lines(f"const int32_t v = (int32_t){x}[i] - ({zin});", f"int32_t r = {hi};",
                     block("if (v > 0)", ["int32_t m;", "int32_t k;", f"{inv}(v, &m, &k);",
                                          f"r = {rq}({rq}(1, m, k + 20), {p.multiplier}, {p.shift - 20}) + ({zout});",
                                          _clamp("r", lo, hi)]),
                     f"{y}[i] = ({t_out})r;")
    else:
        raise ctx.error(f"unknown unary kernel kind {p.kind!r}")
    return KernelCode(_loop(size, stmt), inplace=(0,))


def _prelu(ctx: KernelContext, p: UnaryParams) -> KernelCode:
    x, a, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    x_shape = ctx.in_tensor(0).shape
    if p.dtype == "float32":
        body = f"const float v = {x}[ix];\n{y}[io] = v >= 0.0f ? v : v * {a}[ia];"
    else:
        rq = ctx.helper("requant", "double")
        lo, hi = (-128, 127) if p.dtype == "int8" else (-32768, 32767)
        body = (f"const int32_t v = (int32_t){x}[ix] - ({p.input_zero_point});\n"
                f"int32_t r = v >= 0 ? {rq}(v, {p.multiplier}, {p.shift})\n"
                f"  : {rq}(v * ((int32_t){a}[ia] - ({p.alpha_zero_point})), {p.multiplier_alpha}, {p.shift_alpha});\n"
                f"r += {p.output_zero_point};\n{_clamp('r', lo, hi)}\n{y}[io] = ({C_TYPES[p.out_dtype]})r;")
    loops = broadcast_loops(p.shape, [x_shape, p.alpha_shape], body, ["ix", "ia"])
    same = tuple(x_shape) == tuple(p.shape)
    return KernelCode(loops + "\nreturn 0;", inplace=(0,) if same else ())


_LOG_SOFTMAX_F32 = """\
for (int32_t o = 0; o < @OUTER@; ++o) {
  const float* const xr = @X@ + o * @DEPTH@;
  float* const yr = @Y@ + o * @DEPTH@;
  float mx = xr[0];
  float sum = 0.0f;
  float log_sum;
  for (int32_t c = 1; c < @DEPTH@; ++c) {
    mx = xr[c] > mx ? xr[c] : mx;
  }
  for (int32_t c = 0; c < @DEPTH@; ++c) {
    sum += @EXPF@(xr[c] - mx);
  }
  log_sum = @LOGF@(sum);
  for (int32_t c = 0; c < @DEPTH@; ++c) {
    yr[c] = xr[c] - mx - log_sum;
  }
}
return 0;"""


def _log_softmax_float(ctx: KernelContext, p: UnaryParams) -> KernelCode:
    code = fill(_LOG_SOFTMAX_F32, X=ctx.inputs[0], Y=ctx.outputs[0], DEPTH=p.shape[-1], OUTER=math.prod(p.shape[:-1]),
                EXPF=ctx.libm("expf"), LOGF=ctx.libm("logf"))
    return KernelCode(code, inplace=(0,))


# per row of @DEPTH@: @EXP@ the Q12.19 exp table of the 256 differences, @SCALED@ the rescaled differences,
# @LOG@ unary_log_q12_q5, @RQ@ the double-rounding requantization helper
_LOG_SOFTMAX_I8 = """\
for (int32_t o = 0; o < @OUTER@; ++o) {
  const int8_t* const xr = @X@ + o * @DEPTH@;
  int8_t* const yr = @Y@ + o * @DEPTH@;
  int32_t mx = xr[0];
  uint32_t usum = 0u;
  int32_t log_sum;
  int32_t adjusted;
  for (int32_t c = 1; c < @DEPTH@; ++c) {
    mx = xr[c] > mx ? xr[c] : mx;
  }
  for (int32_t c = 0; c < @DEPTH@; ++c) {
    usum += (uint32_t)@EXP@[mx - xr[c]];
  }
  log_sum = @LOG@((int32_t)usum);
  adjusted = @RQ@((int32_t)((uint32_t)log_sum + 0x80000000u), @DIVISOR@,
                  @SHIFT@);
  if (adjusted < @MIN@) {
    adjusted = @MIN@;
  }
  for (int32_t c = 0; c < @DEPTH@; ++c) {
    const int32_t d = (int32_t)xr[c] - mx;
    int32_t r = -128;
    if (d > adjusted) {
      r = tvm_rdbpot(unary_wsub(@SCALED@[-d], log_sum), 22) + 127;
      r = r < -128 ? -128 : (r > 127 ? 127 : r);
    }
    yr[c] = (int8_t)r;
  }
}
return 0;"""


def _log_softmax_int8(ctx: KernelContext, p: UnaryParams) -> KernelCode:
    """Per row: the Q12.19 sum of exp over a table of the 256 possible differences, its gemmlowp log in
    Q5.26, then y = RoundingDivideByPOT(scaled[d] - log_sum, 22) + 127 above the adjusted diff_min."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    rq = ctx.helper("requant", "double")
    ctx.helper("unary_fx")
    log = ctx.helper("unary_log")
    d = -np.arange(256, dtype=np.int64)
    scaled = _quant.multiply_by_quantized_multiplier(d, p.input_multiplier, p.input_left_shift, "double")
    exp12 = _quant.rounding_divide_by_pot(_quant.exp_on_negative_values(scaled, 5), 12)
    exp12 = np.where(d >= p.diff_min, exp12, 0)
    t_scaled = ctx.table("int32_t", scaled, "scaled")
    t_exp = ctx.table("int32_t", exp12, "exp")
    code = fill(_LOG_SOFTMAX_I8, X=x, Y=y, DEPTH=p.shape[-1], OUTER=math.prod(p.shape[:-1]), EXP=t_exp,
                SCALED=t_scaled, LOG=log, RQ=rq, DIVISOR=p.reverse_scaling_divisor,
                SHIFT=-p.reverse_scaling_right_shift, MIN=p.diff_min - 1)
    return KernelCode(code, inplace=(0,))
