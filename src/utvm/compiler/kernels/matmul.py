"""matmul (numpy matmul semantics with broadcast batch axes); float32, int8 and int16 (utvm.ops.dense).

Rank-1 operands are read as [1, K] (a) and [K, 1] (b). The batch axes broadcast like numpy
(`broadcast_loops` keeps one flat batch index per operand), and each batch is a plain M x N x K product.

float32: float sum, clamped to +-FLT_MAX as the reference's float32 cast and clamp do.
int8 (TFLite BATCH_MATMUL): int32 sum of (a - a_zp) * (b - b_zp), one per-tensor requantization with the
op's rounding, plus the output zero point, clamped. |acc| <= 255 * 255 * K, checked to fit int32. On Helium
(MVE) vocabularies four output columns at a time in vector lanes (`_mve_int8_rows`).
int16 (zero points 0): an int64 sum of a * b, TFLite's int64 requantization
(utvm.compiler.kernels.requant.requant_int16_stmts).
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, broadcast_loops, c_literal, offset_term, register
from utvm.compiler.kernels.cemit import INT32_MAX, block, for_loop, lines
from utvm.compiler.kernels.requant import (
    acc_bound,
    mve_reason,
    mve_requant_helper,
    mve_requant_right_helper,
    requant_int16_stmts,
)
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
    rows = for_loop("mi", 0, m, for_loop("ni", 0, n, [acc_decl, for_loop("ki", 0, k, mac), store]))
    if p.dtype == "int8" and ctx.isa.mve and mve_reason(p.rounding, p.multiplier[:1], p.shift[:1],
                                                         acc_bound(255, 255 * k)) is None:
        rows = _mve_int8_rows(ctx, p, m, k, n)
    body = lines(f"const {t}* const ap = {a} + ia * {m * k};", f"const {t}* const bp = {b} + ib * {k * n};",
                 f"{t}* const yp = {y} + io * {m * n};", rows)
    loops = broadcast_loops(out_batch, [a_batch, b_batch], body, ["ia", "ib"])
    return KernelCode(body=comment + loops + "\nreturn 0;")


def _mve_int8_rows(ctx: KernelContext, p: DenseParams, m: int, k: int, n: int) -> str:
    """int8 matmul on Helium: for each row of a, four columns of b at a time in the int32 lanes of one vector:
    VLDRB.S32 widens four consecutive values of a row of b, VMLA adds them times the scalar a - a_zp, and the
    b zero point enters once per row as -b_zp * sum(a - a_zp), the accumulator's start (the same integer:
    sum (a - za)(b - zb) = sum (a - za) b - zb sum (a - za); the lanes wrap like the int32 sum, whose value the
    bound keeps in int32). Then the vector requantization (requant.mve_requant_*_helper), the zero point, the
    clamp and a narrowing store; a last group of fewer than four columns is predicated (loads and store)."""
    v = ctx.isa
    v.use_mve()
    right = p.shift[0] <= -1
    fn = (mve_requant_right_helper if right else mve_requant_helper)(ctx, p.rounding)
    ops = [p.multiplier[0], p.shift[0]] if right else [p.multiplier[0], max(p.shift[0], 0), max(-p.shift[0], 0)]
    za, zb = p.input_zero_point, p.weight_zero_point
    rq = ", ".join(f"vdupq_n_s32({c_literal(o, 'int32')})" for o in ops)

    def group(pred: str | None) -> list[str]:
        load = f"vldrbq_z_s32(bp + ki * {n} + nb, {pred})" if pred else f"vldrbq_s32(bp + ki * {n} + nb)"
        store = (f"vstrbq_p_s32(yp + mi * {n} + nb, r, {pred});" if pred else f"vstrbq_s32(yp + mi * {n} + nb, r);")
        return ["int32x4_t acc = vdupq_n_s32(start);",
                for_loop("ki", 0, k, f"acc = vmlaq_n_s32(acc, {load}, (int32_t)ar[ki]{offset_term(-za)});"),
                f"int32x4_t r = {fn}(acc, {rq});",
                f"r = vminq_s32(vmaxq_s32(vaddq_n_s32(r, {p.output_zero_point}), vdupq_n_s32({int(p.act_min)})), "
                f"vdupq_n_s32({int(p.act_max)}));", store]

    out = [f"const int8_t* const ar = ap + mi * {k};", "int32_t asum = 0;",
           for_loop("ki", 0, k, "asum += ar[ki];"),
           f"const int32_t start = {-zb} * (asum{offset_term(-za * k)});  /* -b_zp * sum(a - a_zp) */",
           "(void)start;"]
    if n // 4:
        out.append(for_loop("nb", 0, n // 4 * 4, group(None), step=4))
    if n % 4:
        out.append(block("", [f"const int32_t nb = {n // 4 * 4};", *group(v.pred32(range(n % 4)))]))
    return for_loop("mi", 0, m, out)
