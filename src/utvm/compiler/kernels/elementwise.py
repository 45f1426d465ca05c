"""Binary elementwise kernels: add, sub, mul with numpy broadcasting and a fused activation.

float32: y = clamp(a op b, act_min, act_max) (TFLite clamps even without an activation: to +-FLT_MAX).
int8: TFLite's integer add/sub (inputs rescaled after a left shift of 20) and mul; see utvm.ops.elementwise.
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, broadcast_loops, c_literal, offset_term, register

_C_OPS = {"add": "+", "sub": "-", "mul": "*"}


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
        rq, clamp = ctx.helper("requant", p.rounding), ctx.helper("clamp_i32")
        load = (f"const int32_t va = (int32_t){a}[ia]{offset_term(-p.a_zero_point)};\n"
                f"const int32_t vb = (int32_t){b}[ib]{offset_term(-p.b_zero_point)};\n")
        if ctx.node.op == "mul":
            raw = "va * vb"
        else:
            raw = "sa + sb" if ctx.node.op == "add" else "sa - sb"
            load += (f"const int32_t sa = {rq}(va * {1 << p.left_shift}, {p.a_multiplier}, {p.a_shift});\n"
                     f"const int32_t sb = {rq}(vb * {1 << p.left_shift}, {p.b_multiplier}, {p.b_shift});\n")
        body = (load + f"const int32_t acc = {rq}({raw}, {p.output_multiplier}, {p.output_shift})"
                f"{offset_term(p.output_zero_point)};\n"
                f"{y}[io] = (int8_t){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});")
    else:
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    loops = broadcast_loops(p.output_shape, [p.a_shape, p.b_shape], body, ["ia", "ib"])
    # An input with the output's shape is read at index io only, just before out[io] is written.
    inplace = tuple(i for i, s in enumerate((p.a_shape, p.b_shape)) if tuple(s) == tuple(p.output_shape))
    return KernelCode(body=loops + "\nreturn 0;", inplace=inplace)
