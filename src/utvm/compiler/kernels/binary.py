"""C kernels of the binary op family (utvm.ops.binary): one loop nest over the broadcast output per node,
the element computed as TFLite Micro's reference kernels compute it (see utvm.ops.binary for the
quantized arithmetic). int8 div reads GetReciprocal of the (non-negative) divisor from a 256-entry table
computed at compile time by utvm.ops._quant; everything else runs in int32 C (int64 for int64 tensors).
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import (
    C_TYPES,
    KernelCode,
    KernelContext,
    broadcast_loops,
    c_literal,
    define_helper,
    offset_term,
    register,
)
from utvm.ops import _quant
from utvm.ops.binary import COMPARISONS, OPS, BinaryParams

_CMP = {"equal": "==", "not_equal": "!=", "greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<="}

# CountLeadingSignBits of an int32 (31 for 0), portable C.
define_helper("binary_clrsb", """\
static inline int32_t binary_clrsb(int32_t x) {
  const uint32_t u = x < 0 ? ~(uint32_t)x : (uint32_t)x;
  int32_t n = 0;
  while (n < 31 && (u & (0x40000000u >> n)) == 0u) {
    ++n;
  }
  return n;
}""", "binary_clrsb")
# MultiplyByQuantizedMultiplier (double rounding) for any right shift, as TFLM's int32 code computes it past
# 31: the mask (1ll << e) - 1 truncates to -1 and the shift count wraps modulo 32 (needs "gemmlowp").
define_helper("binary_mbqm_wide", """\
static inline int32_t binary_mbqm_wide(int32_t x, int32_t m, int32_t shift) {
  const int32_t left = shift > 0 ? shift : 0;
  const int32_t right = shift > 0 ? 0 : -shift;
  const int32_t hi = tvm_srdhm((int32_t)((uint32_t)x << left), m);
  const int32_t mask = right >= 32 ? -1 : (int32_t)(((int64_t)1 << right) - 1);
  const int32_t remainder = hi & mask;
  const int32_t threshold = (mask >> 1) + (hi < 0 ? 1 : 0);
  return (hi >> (right & 31)) + (remainder > threshold ? 1 : 0);
}""", "binary_mbqm_wide")


def _rescale(ctx: KernelContext, p: BinaryParams, dst: str, src: str, i: int) -> str:
    """int32 `dst` = MBQM((src - zp_i) << left_shift, m_i, e_i)."""
    rq = ctx.helper("requant", p.rounding)
    k = i if len(p.multipliers) > 1 else 0
    v = f"((int32_t){src}{offset_term(-p.zero_points[i])})"
    if p.left_shift:
        v = f"{v} * {1 << p.left_shift}"
    return f"const int32_t {dst} = {rq}({v}, {p.multipliers[k]}, {p.shifts[k]});"


def _element(ctx: KernelContext, p: BinaryParams, ins: list[str], y: str) -> str:
    op = p.op
    ctype = C_TYPES[p.out_dtype]
    if op == "select":
        return f"{y} = {ins[0]} ? {ins[1]} : {ins[2]};"
    a, b = ins
    if op in ("maximum", "minimum"):
        rel = ">" if op == "maximum" else "<"
        return f"{y} = ({a} {rel} {b}) ? {a} : {b};"
    if op == "logical_and":
        return f"{y} = (uint8_t)(({a} != 0) && ({b} != 0));"
    if op == "logical_or":
        return f"{y} = (uint8_t)(({a} != 0) || ({b} != 0));"
    if op in COMPARISONS:
        if p.quantized:
            return "\n".join([_rescale(ctx, p, "sa", a, 0), _rescale(ctx, p, "sb", b, 1),
                              f"{y} = (uint8_t)(sa {_CMP[op]} sb);"])
        return f"{y} = (uint8_t)({a} {_CMP[op]} {b});"
    if p.dtype == "float32":
        if op == "div":
            lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
            return f"{y} = {ctx.helper('clamp_f32')}({a} / {b}, {lo}, {hi});"
        if op == "floor_div":
            return f"{y} = floorf({a} / {b});"
        if op == "floor_mod":
            return (f"const float vb = {b};\nconst float t = fmodf({a}, vb);\n"
                    f"{y} = (t != 0.0f && ((vb < 0.0f) != (t < 0.0f))) ? t + vb : t;")
        return f"const float d = {a} - {b};\n{y} = d * d;"
    if p.dtype == "int32":
        if op == "div":
            clamp = ctx.helper("clamp_i32")
            return (f"const int32_t va = {a};\nconst int32_t vb = {b};\n"
                    "const int32_t q = vb == 0 ? 0 : (vb == -1 ? (int32_t)(0u - (uint32_t)va) : va / vb);\n"
                    f"{y} = {clamp}(q, {c_literal(p.act_min, 'int32')}, {c_literal(p.act_max, 'int32')});")
        return f"const uint32_t d = (uint32_t){a} - (uint32_t){b};\n{y} = (int32_t)(d * d);"
    clamp = ctx.helper("clamp_i32")
    if op == "div":
        inv, rs = _quant.get_reciprocal(np.maximum(np.arange(256, dtype=np.int64), 1), 31)
        t_inv = ctx.table("int32_t", inv, "recip")
        t_rs = ctx.table("int8_t", rs, "recip_shift")
        ctx.file.require("gemmlowp")
        clrsb, wide = ctx.helper("binary_clrsb"), ctx.helper("binary_mbqm_wide")
        za, zb = p.zero_points
        return "\n".join([
            f"int32_t va = (int32_t){a}{offset_term(-za)};",
            f"int32_t vb = (int32_t){b}{offset_term(-zb)};",
            "if (vb < 0) {\n  va = -va;\n  vb = -vb;\n}",
            f"const int32_t h = {clrsb}(va);",
            f"const int32_t q = tvm_srdhm((int32_t)((uint32_t)va << h), {t_inv}[vb]);",
            f"const int32_t r = {wide}(q, {p.output_multiplier}, {p.output_shift} - {t_rs}[vb] - h)"
            f"{offset_term(p.output_zero_point)};",
            f"{y} = ({ctype}){clamp}(r, {int(p.act_min)}, {int(p.act_max)});"])
    # squared_difference int8 / int16
    rq = ctx.helper("requant", p.rounding)
    return "\n".join([_rescale(ctx, p, "sa", a, 0), _rescale(ctx, p, "sb", b, 1), "const int32_t d = sa - sb;",
                      f"const int32_t r = {rq}(d * d, {p.output_multiplier}, {p.output_shift})"
                      f"{offset_term(p.output_zero_point)};",
                      f"{y} = ({ctype}){clamp}(r, {int(p.act_min)}, {int(p.act_max)});"])


def _add_n(ctx: KernelContext, p: BinaryParams) -> KernelCode:
    n = len(p.shapes)
    size = math.prod(p.output_shape)
    y = ctx.outputs[0]
    if p.dtype == "float32":
        lines = ["float acc = 0.0f;"] + [f"acc += {ctx.inputs[j]}[i];" for j in range(n)] + [f"{y}[i] = acc;"]
    else:
        rq = ctx.helper("requant", p.rounding)
        clamp = ctx.helper("clamp_i32")
        init = int(_quant.multiply_by_quantized_multiplier(-p.zero_points[0] << p.left_shift, p.multipliers[0],
                                                           p.shifts[0], p.rounding))
        lines = [f"uint32_t acc = (uint32_t){c_literal(init, 'int32')};"]
        for j in range(n):
            lines.append(_rescale(ctx, p, f"s{j}", f"{ctx.inputs[j]}[i]", j))
            lines.append(f"acc += (uint32_t)s{j};")
        lines += [f"const int32_t r = {rq}((int32_t)acc, {p.output_multiplier}, {p.output_shift})"
                  f"{offset_term(p.output_zero_point)};",
                  f"{y}[i] = (int8_t){clamp}(r, {int(p.act_min)}, {int(p.act_max)});"]
    body = "\n".join("  " + ln for ln in "\n".join(lines).splitlines())
    loop = f"for (int32_t i = 0; i < {size}; ++i) {{\n{body}\n}}" if size else ""
    return KernelCode(body=(loop + "\nreturn 0;").lstrip("\n"), inplace=tuple(range(n)))


@register(*OPS)
def binary_family(ctx: KernelContext) -> KernelCode:
    p: BinaryParams = ctx.params()
    if p.op == "add_n":
        return _add_n(ctx, p)
    names = ["ia", "ib", "ic"][:len(p.shapes)]
    ins = [f"{ctx.inputs[k]}[{names[k]}]" for k in range(len(p.shapes))]
    body = _element(ctx, p, ins, f"{ctx.outputs[0]}[io]")
    loops = broadcast_loops(p.output_shape, p.shapes, body, names)
    pre = ""
    if p.op == "floor_div":  # TFLM checks every denominator before computing anything
        nb = math.prod(p.shapes[1])
        pre = (f"for (int32_t i = 0; i < {nb}; ++i) {{\n  if ({ctx.inputs[1]}[i] == 0.0f) {{\n    return 1;\n  }}\n}}\n"
               if nb else "")
    data = range(1, 3) if p.op == "select" else range(len(p.shapes))
    inplace = tuple(i for i in data if tuple(p.shapes[i]) == tuple(p.output_shape) and p.dtype == p.out_dtype)
    uses_libm = p.op in ("floor_div", "floor_mod")
    return KernelCode(body=pre + loops + "\nreturn 0;", inplace=inplace, uses_libm=uses_libm)
