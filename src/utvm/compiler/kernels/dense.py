"""dense (fully connected): y[b, o] = act(sum_k x[b, k] * w[o, k] + bias[o]); float32 and int8.

int8 is TFLite's integer FullyConnected (per-tensor or per-channel weights): the int32 accumulator of
(x - input_zp) * (w - weight_zp) plus the bias is requantized per output row and clamped.

int16 activations with int8 weights ("16x8"): a plain C loop of its own (no schedule space): the same sum
in an int64 accumulator (zero points included, as TFLM's int16 FullyConnected uses them), requantized by the
int64 MultiplyByQuantizedMultiplier for an int64 bias (or none), by the int32 one on the wrapped int32
accumulator for an int32 bias (utvm.compiler.kernels.conv.requant_int16_stmts).
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, multipliers_pm, offset_term, register
from utvm.compiler.kernels._dot import dot_run
from utvm.compiler.kernels._gemm import (
    Requant,
    Window,
    gemm_default,
    gemm_kernel_body,
    gemm_knobs,
    gemm_legal,
    pad4,
)
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops.dense import DenseParams

INT32_MAX = (1 << 31) - 1


def _indent(text: str, levels: int) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())


def _acc_init(ctx: KernelContext, p: DenseParams) -> np.ndarray | None:
    """bias + (-input_zero_point) * sum_k w[o, k] per output, when the weights (zero point 0) and the bias
    are constants and no partial sum can overflow int32; None otherwise (the generic loop is used)."""
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    if p.weight_zero_point != 0 or w_t is None or w_t.data is None:
        return None
    if p.has_bias and (b_t is None or b_t.data is None):
        return None
    w64 = w_t.data.astype(np.int64).reshape(p.units, p.k)
    bias = b_t.data.astype(np.int64).reshape(-1) if b_t is not None and b_t.data is not None else 0
    init = bias + (-p.input_zero_point) * w64.sum(axis=1)
    wabs = np.abs(w64).sum(axis=1)
    xmax = max(127 - p.input_zero_point, 128 + p.input_zero_point)
    if int((128 * wabs + np.abs(init)).max(initial=0)) > INT32_MAX or int((xmax * wabs + np.abs(bias)).max(
            initial=0)) > INT32_MAX:
        return None
    return init


def _gemm_bound(ctx: KernelContext, p: DenseParams) -> str | None:
    """The accumulator bound comment when int8 dense can run as a GEMM (constant weights with zero point 0,
    constant bias, |acc| < 2^31 for any order of the sum); None when it cannot."""
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    if p.dtype != "int8" or p.weight_zero_point != 0 or w_t is None or w_t.data is None:
        return None
    if p.has_bias and (b_t is None or b_t.data is None):
        return None
    wabs = np.abs(w_t.data.astype(np.int64).reshape(p.units, p.k)).sum(axis=1)
    bias = np.abs(b_t.data.astype(np.int64).reshape(-1)) if b_t is not None and b_t.data is not None else 0
    xmax = max(127 - p.input_zero_point, 128 + p.input_zero_point)
    worst = int((xmax * wabs + bias).max(initial=0))
    if worst > INT32_MAX:
        return None
    return (f"/* The int32 accumulator cannot overflow: |acc| <= {xmax} * (sum |w| of each output) + |bias| <= "
            f"{worst} < 2^31, whatever the order of the sum. */\n")


def dense_space(ctx: KernelContext) -> Space:
    """int8 dense: `algo` direct (weight sums folded, unrolled dot products) or gemm (the input row widened
    once, `oc_block` rows per block, SIMD on DSP targets; utvm.compiler.kernels._gemm)."""
    p: DenseParams = ctx.params()
    if p.op != "dense" or _gemm_bound(ctx, p) is None:
        return EMPTY_SPACE
    kq = pad4(p.k) // 4
    fast = Requant.fast_reason(p.rounding, p.multiplier, p.shift, ctx.target)
    # Layers of one workload share one GEMM function by default (dense layers carry little compute for their
    # code: a call per layer costs ~2%, each copy of the code ~400 bytes on Cortex-M4).
    gemm = {**gemm_default(ctx.target, kq, p.units, 1, fast), "share": ctx.task_count > 1}
    default = {"algo": "gemm" if ctx.target.dsp else "direct", **gemm}

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "direct":
            return None if all(pt[k] == v for k, v in gemm.items()) else "the direct kernel has no GEMM knobs"
        return gemm_legal(pt, 1, fast)

    return Space((Knob("algo", ("direct", "gemm"), "scalar dot products or the GEMM"),
                  *gemm_knobs(ctx.target, kq)), default, legal)


def _per_channel(ctx: KernelContext) -> bool:
    """Whether the weights are quantized per output (a workload property: all layers of a task agree)."""
    q = ctx.in_tensor(1).quant if ctx.in_tensor(1) is not None else None  # type: ignore[union-attr]
    return q is not None and q.per_channel and len(q.scale) > 1


def _dense_gemm(ctx: KernelContext, p: DenseParams) -> KernelCode:
    bound = _gemm_bound(ctx, p)
    w_t = ctx.in_tensor(1)
    assert bound is not None and w_t is not None and w_t.data is not None
    body, scratch, attrs = gemm_kernel_body(
        ctx, ctx.schedule, Window(1, 1, p.k), p.batch, 1, 1, w_t.data.reshape(p.units, p.k),
        ctx.inputs[2] if p.has_bias else None, p.rounding, p.multiplier, p.shift, p.input_zero_point,
        p.output_zero_point, int(p.act_min), int(p.act_max), ctx.inputs[0], ctx.outputs[0], bound,
        per_channel=_per_channel(ctx))
    return KernelCode(body=body, scratch_bytes=scratch, attributes=attrs)


@register("dense", space=dense_space)
def dense(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
    if ctx.schedule.get("algo") == "gemm":
        return _dense_gemm(ctx, p)
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if p.dtype == "float32":
        bias = ctx.inputs[2] if p.has_bias else None
        clamp = ctx.helper("clamp_f32")
        lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
        body = f"""\
for (int32_t b = 0; b < {p.batch}; ++b) {{
  for (int32_t o = 0; o < {p.units}; ++o) {{
    float acc = 0.0f;
    for (int32_t k = 0; k < {p.k}; ++k) {{
      acc += {x}[b * {p.k} + k] * {w}[o * {p.k} + k];
    }}
    {y}[b * {p.units} + o] = {clamp}(acc{f' + {bias}[o]' if bias else ''}, {lo}, {hi});
  }}
}}
return 0;"""
        return KernelCode(body=body)
    if p.dtype == "int16":
        return _dense_int16(ctx, p)
    if p.dtype != "int8":
        raise ctx.error(f"no dense kernel for dtype {p.dtype}")
    rq = ctx.helper("requant_pm" if multipliers_pm(p.multiplier) else "requant", p.rounding)
    clamp = ctx.helper("clamp_i32")
    if len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1:
        mult, shift = str(p.multiplier[0]), str(p.shift[0])
    else:
        mult = ctx.table("int32_t", p.multiplier, "multiplier") + "[o]"
        shift = ctx.table("int32_t", p.shift, "shift") + "[o]"
    init = _acc_init(ctx, p)
    if init is not None:
        init_tab = ctx.table("int32_t", init, "acc_init")
        body = f"""\
/* acc = sum x * w + acc_init[o], acc_init = bias - input_zero_point * sum w (compile time): the same integer
   as TFLite's bias + sum (x - input_zero_point) * w; no partial sum exceeds 128 * sum|w| + |acc_init|. */
for (int32_t b = 0; b < {p.batch}; ++b) {{
  const int8_t* const row = {x} + b * {p.k};
  for (int32_t o = 0; o < {p.units}; ++o) {{
    const int8_t* const wrow = {w} + o * {p.k};
    int32_t acc = 0;
{_indent(dot_run("acc", "row", "wrow", p.k), 2)}
    acc += {init_tab}[o];
    acc = {rq}(acc, {mult}, {shift}){offset_term(p.output_zero_point)};
    {y}[b * {p.units} + o] = (int8_t){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});
  }}
}}
return 0;"""
        return KernelCode(body=body)
    bias = ctx.inputs[2] if p.has_bias else None  # emitted only where the generic loop reads it
    x_off, w_off = offset_term(-p.input_zero_point), offset_term(-p.weight_zero_point)
    body = f"""\
for (int32_t b = 0; b < {p.batch}; ++b) {{
  const int8_t* row = {x} + b * {p.k};
  for (int32_t o = 0; o < {p.units}; ++o) {{
    const int8_t* wrow = {w} + o * {p.k};
    int32_t acc = {f'{bias}[o]' if bias else '0'};
    for (int32_t k = 0; k < {p.k}; ++k) {{
      acc += ((int32_t)row[k]{x_off}) * ((int32_t)wrow[k]{w_off});
    }}
    acc = {rq}(acc, {mult}, {shift}){offset_term(p.output_zero_point)};
    {y}[b * {p.units} + o] = (int8_t){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});
  }}
}}
return 0;"""
    return KernelCode(body=body)


def _dense_int16(ctx: KernelContext, p: DenseParams) -> KernelCode:
    from utvm.compiler.kernels.conv import requant_int16_stmts

    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1:
        mult, shift = str(p.multiplier[0]), str(p.shift[0])
    else:
        mult = ctx.table("int32_t", p.multiplier, "multiplier") + "[o]"
        shift = ctx.table("int32_t", p.shift, "shift") + "[o]"
    bias = f"acc += (int64_t){ctx.inputs[2]}[o];\n" if p.has_bias else ""
    x_off, w_off = offset_term(-p.input_zero_point), offset_term(-p.weight_zero_point)
    store = requant_int16_stmts(ctx, p.rounding, p.acc_bits, "acc", mult, shift, p.output_zero_point,
                                int(p.act_min), int(p.act_max), f"{y}[b * {p.units} + o]")
    body = f"""\
for (int32_t b = 0; b < {p.batch}; ++b) {{
  const int16_t* const row = {x} + b * {p.k};
  for (int32_t o = 0; o < {p.units}; ++o) {{
    const int8_t* const wrow = {w} + o * {p.k};
    int64_t acc = 0;
    for (int32_t k = 0; k < {p.k}; ++k) {{
      acc += (int64_t)(((int32_t)row[k]{x_off}) * ((int32_t)wrow[k]{w_off}));
    }}
{_indent(bias + store, 2)}
  }}
}}
return 0;"""
    return KernelCode(body=body)
