"""C kernels of the recurrent op family (utvm.ops.recurrent).

Each keeps its state in the node's persistent block (`KernelCode.persistent_bytes`, `ctx.state`), encoded so
that all-zero bytes are TFLM's reset state (see utvm.ops.recurrent). Float kernels accumulate in the order
TFLM's reference kernels do (no reassociation), so they match it to rounding of libm's tanhf/expf only.
"""

from __future__ import annotations

from utvm.compiler.kernels import KernelCode, KernelContext, define_helper, register
from utvm.compiler.kernels.cemit import c_array_body, fill, table_decl
from utvm.ops.recurrent import SIGMOID_LUT_U16, LstmParams, SvdfParams

# TFLM's int16 Logistic (Q3.12 in, input multiplier 0 -> x3) and Tanh (input multiplier and right shift) over
# TFLite's sigmoid table, with its linear interpolation, bit for bit (utvm.ops.recurrent.sigmoid16 / tanh16).
define_helper("recurrent_lut16", fill("""\
@LUT@
static inline int16_t tvm_recurrent_sigmoid16(int16_t x) {
  const int32_t v = (int32_t)x * 3;
  const uint32_t a = (uint32_t)(v < 0 ? -v : v);
  const uint32_t uh = a >> 9;
  uint32_t r;
  if (uh >= 255u) {
    r = 0x7FFFu << 10;
  } else {
    const uint32_t ua = tvm_recurrent_sigmoid_lut[uh];
    const uint32_t ub = tvm_recurrent_sigmoid_lut[uh + 1u];
    r = (ua << 9) + (a & 0x1FFu) * (ub - ua);
  }
  r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
  return (int16_t)(r >> 10);
}
static inline int16_t tvm_recurrent_tanh16(int16_t x, int32_t multiplier, int32_t shift) {
  const int32_t rnd = shift > 0 ? (int32_t)(1 << (shift - 1)) : 0;
  const int32_t v = ((int32_t)x * multiplier + rnd) >> shift;
  const uint32_t a = (uint32_t)(v < 0 ? -v : v);
  const uint32_t uh = a >> 8;
  int32_t r;
  if (uh >= 255u) {
    r = 0xFFFF << 8;
  } else {
    const uint32_t ua = tvm_recurrent_sigmoid_lut[uh];
    const uint32_t ub = tvm_recurrent_sigmoid_lut[uh + 1u];
    r = (int32_t)((ua << 8) + (a & 0xFFu) * (ub - ua));
  }
  r = v >= 0 ? r - (1 << 23) + (1 << 7) : -r + (1 << 23) + (1 << 7) - 1;
  return (int16_t)(r >> 8);
}
static inline int32_t tvm_recurrent_sat16(int32_t x) {
  return x < -32768 ? -32768 : (x > 32767 ? 32767 : x);
}""", LUT=table_decl("uint16_t", "tvm_recurrent_sigmoid_lut", c_array_body(list(SIGMOID_LUT_U16), "int32"),
                     len(SIGMOID_LUT_U16))), "tvm_recurrent_sigmoid16")
# TFLite's MultiplyByQuantizedMultiplier for an int64 accumulator (the 16x8 kernels): a 16-bit multiplier,
# one rounding.
define_helper("recurrent_mbqm64", """\
static inline int32_t tvm_recurrent_mbqm64(int64_t x, int32_t multiplier, int32_t shift) {
  const int32_t reduced = multiplier < 0x7FFF0000 ? ((multiplier + (1 << 15)) >> 16) : 0x7FFF;
  const int32_t total = 15 - shift;
  return (int32_t)((x * (int64_t)reduced + ((int64_t)1 << (total - 1))) >> total);
}""", "tvm_recurrent_mbqm64")


def _float_act_stmt(ctx: KernelContext, var: str, act: str) -> str:
    if act == "tanh":
        return f"{var} = {ctx.libm('tanhf')}({var});"
    lo_hi = {"relu": ("0.0f", None), "relu6": ("0.0f", "6.0f"), "relu_n1_to_1": ("-1.0f", "1.0f")}.get(act)
    if lo_hi is None:
        return ""
    lo, hi = lo_hi
    out = f"if ({var} < {lo}) {{ {var} = {lo}; }}"
    if hi is not None:
        out += f" if ({var} > {hi}) {{ {var} = {hi}; }}"
    return out


@register("svdf")
def svdf(ctx: KernelContext) -> KernelCode:
    p: SvdfParams = ctx.params()
    x, wf, wt = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2]
    y = ctx.outputs[0]
    B, I, F, M, U, R = p.batch, p.input_size, p.filters, p.memory, p.units, p.rank
    shift = f"""\
/* shift every filter's memory left by one cell (the last cell receives this run's feature) */
for (int32_t k = 0; k < {B * F}; ++k) {{
  for (int32_t m = 0; m < {M - 1}; ++m) {{
    st[k * {M} + m] = st[k * {M} + m + 1];
  }}
}}"""
    if p.dtype == "float32":
        bias = f"{ctx.inputs[3]}[u]" if p.has_bias else "0.0f"
        act = _float_act_stmt(ctx, "acc", p.activation)
        body = f"""\
float* const st = (float*)(void*){ctx.state};
{shift}
for (int32_t b = 0; b < {B}; ++b) {{
  for (int32_t f = 0; f < {F}; ++f) {{
    float dot = 0.0f;
    for (int32_t i = 0; i < {I}; ++i) {{
      dot += {wf}[f * {I} + i] * {x}[b * {I} + i];
    }}
    st[(b * {F} + f) * {M} + {M - 1}] = dot;
  }}
  for (int32_t u = 0; u < {U}; ++u) {{
    float acc = {bias};
    for (int32_t r = 0; r < {R}; ++r) {{
      const int32_t f = u * {R} + r;
      const float* const s = &st[(b * {F} + f) * {M}];
      float t = 0.0f;
      for (int32_t m = 0; m < {M}; ++m) {{
        t += {wt}[f * {M} + m] * s[m];
      }}
      acc += t;
    }}
    {act}
    {y}[b * {U} + u] = acc;
  }}
}}
return 0;"""
        return KernelCode(body=body, persistent_bytes=4 * B * F * M)
    rq = ctx.helper("requant", p.rounding)
    body = f"""\
int16_t* const st = (int16_t*)(void*){ctx.state};
{shift}
for (int32_t b = 0; b < {B}; ++b) {{
  for (int32_t f = 0; f < {F}; ++f) {{
    int32_t dot = 0;
    int32_t v;
    for (int32_t i = 0; i < {I}; ++i) {{
      dot += (int32_t){wf}[f * {I} + i] * ((int32_t){x}[b * {I} + i] - ({p.input_zero_point}));
    }}
    v = {rq}(dot, {p.multiplier_1}, {p.shift_1});
    v = v < {p.state_min} ? {p.state_min} : (v > {p.state_max} ? {p.state_max} : v);
    /* + zero point, wrapping in the state type (as TFLM) */
    v = (int32_t)((uint32_t)(v + ({p.state_zero_point}) - ({p.state_min})) & {p.state_max - p.state_min}u)
        + ({p.state_min});
    st[(b * {F} + f) * {M} + {M - 1}] = (int16_t)(v - ({p.store_offset}));
  }}
  for (int32_t u = 0; u < {U}; ++u) {{
    uint32_t acc = (uint32_t){ctx.inputs[3]}[u];  /* int32 sums wrap, as TFLM's do in practice */
    int32_t v;
    for (int32_t r = 0; r < {R}; ++r) {{
      const int32_t f = u * {R} + r;
      const int16_t* const s = &st[(b * {F} + f) * {M}];
      for (int32_t m = 0; m < {M}; ++m) {{
        acc += (uint32_t)((int32_t){wt}[f * {M} + m] * ((int32_t)s[m] - ({p.time_offset})));
      }}
    }}
    v = {rq}((int32_t)acc, {p.multiplier_2}, {p.shift_2}) + ({p.output_zero_point});
    {y}[b * {U} + u] = (int8_t)(v < -128 ? -128 : (v > 127 ? 127 : v));
  }}
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=2 * B * F * M)



def _step_offsets(p: LstmParams, width: int) -> str:
    """C expression of the offset of row (b, t) of a [B, T, width] (or time-major [T, B, width]) tensor."""
    if p.time_major:
        return f"(t * {p.batch} + b) * {width}"
    return f"(b * {p.time} + t) * {width}"


@register("lstm")
def lstm(ctx: KernelContext) -> KernelCode:
    p: LstmParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    B, S, I = p.batch, p.units, p.input_size
    w_in = ", ".join(ctx.inputs[1 + g] for g in range(4))
    w_rec = ", ".join(ctx.inputs[5 + g] for g in range(4))
    bias = ", ".join(ctx.inputs[9 + g] for g in range(4))
    x_off, y_off = _step_offsets(p, I), _step_offsets(p, S)
    if p.dtype == "float32":
        clip = ""
        if p.cell_clip > 0:
            lim = ctx.float_literal(p.cell_clip)
            clip = f"if (cv > {lim}) {{ cv = {lim}; }} if (cv < -{lim}) {{ cv = -{lim}; }}"
        tanhf, expf = ctx.libm("tanhf"), ctx.libm("expf")
        body = f"""\
float* const hs = (float*)(void*){ctx.state};
float* const cs = hs + {B * S};
float* const gate = (float*)(void*){ctx.scratch};  /* [4][S]: input, forget, cell, output */
const float* const w_in[4] = {{{w_in}}};
const float* const w_rec[4] = {{{w_rec}}};
const float* const bias[4] = {{{bias}}};
for (int32_t b = 0; b < {B}; ++b) {{
  float* const h = hs + b * {S};
  float* const c = cs + b * {S};
  for (int32_t t = 0; t < {p.time}; ++t) {{
    const float* const xt = {x} + {x_off};
    float* const yt = {y} + {y_off};
    for (int32_t g = 0; g < 4; ++g) {{
      for (int32_t s = 0; s < {S}; ++s) {{
        float a = 0.0f;
        float r = 0.0f;
        float v;
        for (int32_t k = 0; k < {I}; ++k) {{
          a += xt[k] * w_in[g][s * {I} + k];
        }}
        a += bias[g][s];
        for (int32_t k = 0; k < {S}; ++k) {{
          r += h[k] * w_rec[g][s * {S} + k];
        }}
        v = a + r;
        if (g == 2) {{
          v = {tanhf}(v);
        }} else if (v > 16.619047164916992188f) {{
          v = 1.0f;
        }} else if (v < -9.0f) {{
          v = {expf}(v);
        }} else {{
          v = 1.0f / (1.0f + {expf}(-v));
        }}
        gate[g * {S} + s] = v;
      }}
    }}
    for (int32_t s = 0; s < {S}; ++s) {{
      const float fc = gate[{S} + s] * c[s];
      const float ic = gate[s] * gate[{2 * S} + s];
      float cv = fc + ic;
      {clip}
      c[s] = cv;
      h[s] = {tanhf}(cv) * gate[{3 * S} + s];
      yt[s] = h[s];
    }}
  }}
}}
return 0;"""
        return KernelCode(body=body, scratch_bytes=4 * 4 * S, persistent_bytes=4 * 2 * B * S)
    ctx.helper("recurrent_lut16")
    rq = ctx.helper("requant", p.rounding)
    act_t = "int8_t" if p.dtype == "int8" else "int16_t"
    bias_t = "int32_t" if p.dtype == "int8" else "int64_t"
    if p.dtype == "int8":
        acc_t, fc_in, fc_rec = "int32_t", f"{rq}(acc, in_m[g], in_s[g])", f"{rq}(acc, rec_m[g], rec_s[g])"
    else:
        mb = ctx.helper("recurrent_mbqm64")
        acc_t, fc_in, fc_rec = "int64_t", f"{mb}(acc, in_m[g], in_s[g])", f"{mb}(acc, rec_m[g], rec_s[g])"
    tables = {k: ctx.table("int32_t", list(v), k) for k, v in (
        ("in_m", p.in_multiplier), ("in_s", p.in_shift), ("rec_m", p.rec_multiplier), ("rec_s", p.rec_shift))}
    clip = ""
    if p.quantized_cell_clip > 0:
        q = p.quantized_cell_clip
        clip = f"cv = cv > {q} ? {q} : (cv < -{q} ? -{q} : cv);"
    h_off = p.hidden_zero_point - p.hidden_store_offset
    body = f"""\
int16_t* const hs = (int16_t*)(void*){ctx.state};  /* hidden state (minus the int8 zero point) */
int16_t* const cs = hs + {B * S};
int16_t* const gate = (int16_t*)(void*){ctx.scratch};  /* [4][S]: input, forget, cell, output (Q0.15) */
const int8_t* const w_in[4] = {{{w_in}}};
const int8_t* const w_rec[4] = {{{w_rec}}};
const {bias_t}* const bias[4] = {{{bias}}};
const int32_t* const in_m = {tables["in_m"]};
const int32_t* const in_s = {tables["in_s"]};
const int32_t* const rec_m = {tables["rec_m"]};
const int32_t* const rec_s = {tables["rec_s"]};
for (int32_t b = 0; b < {B}; ++b) {{
  int16_t* const h = hs + b * {S};
  int16_t* const c = cs + b * {S};
  for (int32_t t = 0; t < {p.time}; ++t) {{
    const {act_t}* const xt = {x} + {x_off};
    {act_t}* const yt = {y} + {y_off};
    for (int32_t g = 0; g < 4; ++g) {{
      for (int32_t s = 0; s < {S}; ++s) {{
        {acc_t} acc = 0;
        int32_t a;
        int32_t r;
        for (int32_t k = 0; k < {I}; ++k) {{
          acc += ({acc_t})w_in[g][s * {I} + k] * (({acc_t})xt[k] - ({p.input_zero_point}));
        }}
        acc += bias[g][s];
        a = tvm_recurrent_sat16({fc_in});
        acc = 0;
        for (int32_t k = 0; k < {S}; ++k) {{
          acc += ({acc_t})w_rec[g][s * {S} + k] * (({acc_t})h[k] - ({h_off}));
        }}
        r = tvm_recurrent_sat16({fc_rec});
        a = tvm_recurrent_sat16(a + r);
        gate[g * {S} + s] = g == 2 ? tvm_recurrent_tanh16((int16_t)a, 3, 0) : tvm_recurrent_sigmoid16((int16_t)a);
      }}
    }}
    for (int32_t s = 0; s < {S}; ++s) {{
      const int32_t fc = tvm_recurrent_sat16({rq}((int32_t)gate[{S} + s] * c[s], {p.forget_cell_multiplier}, \
{p.forget_cell_shift}));
      const int32_t ic = tvm_recurrent_sat16({rq}((int32_t)gate[s] * gate[{2 * S} + s], {p.input_cell_multiplier}, \
{p.input_cell_shift}));
      int32_t cv = tvm_recurrent_sat16(fc + ic);
      int32_t hv;
      {clip}
      c[s] = (int16_t)cv;
      hv = {rq}((int32_t)tvm_recurrent_tanh16((int16_t)cv, {p.tanh_multiplier}, {p.tanh_shift}) * gate[{3 * S} + s], \
{p.hidden_multiplier}, {p.hidden_shift}) + ({p.hidden_zero_point});
      hv = hv < {p.hidden_min} ? {p.hidden_min} : (hv > {p.hidden_max} ? {p.hidden_max} : hv);
      h[s] = (int16_t)(hv - ({p.hidden_store_offset}));
      yt[s] = ({act_t})hv;
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body, scratch_bytes=2 * 4 * S, persistent_bytes=2 * 2 * B * S)
