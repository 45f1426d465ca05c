"""matmul (numpy matmul semantics with broadcast batch axes); float32, int8 and int16 (utvm.ops.dense).

Rank-1 operands are read as [1, K] (a) and [K, 1] (b). The batch axes broadcast like numpy
(`broadcast_loops` keeps one flat batch index per operand), and each batch is a plain M x N x K product.

float32: float sum, clamped to +-FLT_MAX as the reference's float32 cast and clamp do.
int8 (TFLite BATCH_MATMUL): int32 sum of (a - a_zp) * (b - b_zp), one per-tensor requantization with the
op's rounding, plus the output zero point, clamped. |acc| <= 255 * 255 * K, checked to fit int32.
int16 (zero points 0): an int64 sum of a * b, TFLite's int64 requantization
(utvm.compiler.kernels.requant.requant_int16_stmts).
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, broadcast_loops, c_literal, offset_term, register
from utvm.compiler.kernels.cemit import INT32_MAX, for_loop, lines
from utvm.compiler.kernels.requant import acc_bound, requant_int16_stmts
from utvm.ops.dense import DenseParams


@register("matmul")
def matmul(ctx: KernelContext) -> KernelCode:
    p: DenseParams = ctx.params()
    a_shape = p.a_shape if len(p.a_shape) > 1 else (1, *p.a_shape)
    b_shape = p.b_shape if len(p.b_shape) > 1 else (*p.b_shape, 1)
    m, k, n = a_shape[-2], a_shape[-1], b_shape[-1]
    a_batch, b_batch = a_shape[:-2], b_shape[:-2]
    rank = max(len(a_batch), len(b_batch))
    out_batch = tuple(max(x, y) for x, y in zip((1,) * (rank - len(a_batch)) + tuple(a_batch),
                                                 (1,) * (rank - len(b_batch)) + tuple(b_batch), strict=True))
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    a_ik, b_kj, y_ij = f"ap[mi * {k} + ki]", f"bp[ki * {n} + ni]", f"yp[mi * {n} + ni]"
    if p.dtype == "float32":
        clamp = ctx.helper("clamp_f32")
        acc_decl, mac = "float acc = 0.0f;", f"acc += {a_ik} * {b_kj};"
        lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
        store = f"{y_ij} = {clamp}(acc, {lo}, {hi});"
        comment = ""
        t = "float"
    elif p.dtype == "int8":
        if acc_bound(255, 255 * k) > INT32_MAX:  # |a - a_zp| <= 255 times k terms |b - b_zp| <= 255
            raise ctx.error(f"int8 matmul with K={k} could overflow the int32 accumulator")
        rq, clamp = ctx.helper("requant", p.rounding), ctx.helper("clamp_i32")
        acc_decl = "int32_t acc = 0;"
        mac = (f"acc += ((int32_t){a_ik}{offset_term(-p.input_zero_point)}) * "
               f"((int32_t){b_kj}{offset_term(-p.weight_zero_point)});")
        store = lines(f"acc = {rq}(acc, {p.multiplier[0]}, {p.shift[0]}){offset_term(p.output_zero_point)};",
                      f"{y_ij} = (int8_t){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});")
        comment = f"/* The int32 accumulator cannot overflow: |acc| <= 255 * 255 * {k} < 2^31. */\n"
        t = "int8_t"
    elif p.dtype == "int16":
        acc_decl = "int64_t acc = 0;"
        mac = f"acc += (int64_t)((int32_t){a_ik} * (int32_t){b_kj});"
        store = requant_int16_stmts(ctx, p.rounding, 64, "acc", str(p.multiplier[0]), str(p.shift[0]),
                                    p.output_zero_point, int(p.act_min), int(p.act_max), y_ij)
        comment = ""
        t = "int16_t"
    else:
        raise ctx.error(f"no matmul kernel for dtype {p.dtype}")
    body = lines(f"const {t}* const ap = {a} + ia * {m * k};", f"const {t}* const bp = {b} + ib * {k * n};",
                 f"{t}* const yp = {y} + io * {m * n};",
                 for_loop("mi", 0, m, for_loop("ni", 0, n, [acc_decl, for_loop("ki", 0, k, mac), store])))
    loops = broadcast_loops(out_batch, [a_batch, b_batch], body, ["ia", "ib"])
    return KernelCode(body=comment + loops + "\nreturn 0;")
