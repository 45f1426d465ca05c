"""Binary elementwise kernels: add, sub, mul with numpy broadcasting and a fused activation.

float32: y = clamp(a op b, act_min, act_max) (TFLite clamps even without an activation: to +-FLT_MAX).
int8: TFLite's integer add/sub (inputs rescaled after a left shift of 20) and mul; see utvm.ops.elementwise.

int8 add/sub rescale each input in 32-bit arithmetic (`_rescale_input`): with L = left_shift, va = a - zp_a
(|va| <= 255) and a multiplier m that is never INT32_MIN, both roundings of MultiplyByQuantizedMultiplier
of va * 2^L are floor((va * m + 2^(D-1)) / 2^D) (then, for double rounding, RoundingDivideByPOT by -shift)
with D = 31 - L (double) or 31 - shift - L (single), because va * m * 2^L + 2^(30...) shares the factor 2^L
with 2^31. Writing m = mh * 2^D + ml (0 <= ml < 2^D) gives va * mh + ((va * ml + 2^(D-1)) >> D) exactly,
and every term fits int32 (checked here from the actual zero point and multiplier; otherwise the generic
64-bit helper is used). The output requantization and mul use the `requant_pm` helper (the same function
for multipliers != INT32_MIN).
"""

from __future__ import annotations

from utvm.compiler.kernels import (
    KernelCode,
    KernelContext,
    broadcast_loops,
    c_literal,
    multipliers_pm,
    offset_term,
    register,
)

_C_OPS = {"add": "+", "sub": "-", "mul": "*"}
INT32_MAX = (1 << 31) - 1


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
    x (see the module docstring), or None when the 32-bit form does not provably fit."""
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


@register("add", "sub", "mul")
def binary(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    op = _C_OPS[ctx.node.op]
    if p.dtype == "float32":
        lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
        clamp = ctx.helper("clamp_f32")
        body = f"{y}[io] = {clamp}({a}[ia] {op} {b}[ib], {lo}, {hi});"
    elif p.dtype == "int8":
        clamp = ctx.helper("clamp_i32")
        if multipliers_pm([p.output_multiplier]):
            rq_out = ctx.helper("requant_pm", p.rounding)
        else:
            rq_out = ctx.helper("requant", p.rounding)
        load = (f"const int32_t va = (int32_t){a}[ia]{offset_term(-p.a_zero_point)};\n"
                f"const int32_t vb = (int32_t){b}[ib]{offset_term(-p.b_zero_point)};\n")
        if ctx.node.op == "mul":
            raw = "va * vb"
        else:
            raw = "sa + sb" if ctx.node.op == "add" else "sa - sb"
            for dst, var, zp, m, e in (("sa", "va", p.a_zero_point, p.a_multiplier, p.a_shift),
                                       ("sb", "vb", p.b_zero_point, p.b_multiplier, p.b_shift)):
                fast = rescale_input_stmts(dst, var, zp, p.left_shift, m, e, p.rounding)
                if fast is None:
                    rq = ctx.helper("requant", p.rounding)
                    fast = f"const int32_t {dst} = {rq}({var} * {1 << p.left_shift}, {m}, {e});"
                load += fast + "\n"
        body = (load + f"const int32_t acc = {rq_out}({raw}, {p.output_multiplier}, {p.output_shift})"
                f"{offset_term(p.output_zero_point)};\n"
                f"{y}[io] = (int8_t){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});")
    else:
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    loops = broadcast_loops(p.output_shape, [p.a_shape, p.b_shape], body, ["ia", "ib"])
    # An input with the output's shape is read at index io only, just before out[io] is written.
    inplace = tuple(i for i, s in enumerate((p.a_shape, p.b_shape)) if tuple(s) == tuple(p.output_shape))
    return KernelCode(body=loops + "\nreturn 0;", inplace=inplace)
