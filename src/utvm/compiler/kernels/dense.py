"""dense (fully connected): y[b, o] = act(sum_k x[b, k] * w[o, k] + bias[o]); float32 and int8.

int8 is TFLite's integer FullyConnected (per-tensor or per-channel weights): the int32 accumulator of
(x - input_zp) * (w - weight_zp) plus the bias is requantized per output row and clamped.
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, offset_term, register


@register("dense")
def dense(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    bias = ctx.inputs[2] if p.has_bias else None
    if p.dtype == "float32":
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
    rq, clamp = ctx.helper("requant", p.rounding), ctx.helper("clamp_i32")
    if len(set(p.multiplier)) == 1 and len(set(p.shift)) == 1:
        mult, shift = str(p.multiplier[0]), str(p.shift[0])
    else:
        mult = ctx.table("int32_t", p.multiplier, "multiplier") + "[o]"
        shift = ctx.table("int32_t", p.shift, "shift") + "[o]"
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
