"""dense (fully connected): y[b, o] = act(sum_k x[b, k] * w[o, k] + bias[o]); float32 and int8.

int8 is TFLite's integer FullyConnected (per-tensor or per-channel weights): the int32 accumulator of
(x - input_zp) * (w - weight_zp) plus the bias is requantized per output row and clamped.
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, multipliers_pm, offset_term, register
from utvm.compiler.kernels._dot import dot_run
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


@register("dense")
def dense(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
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
