"""C kernels of the reduction op family (utvm.ops.reduction): mean (and the mean behind global_avg_pool2d),
reduce_max/min/sum/all, arg_max/min, cumsum, l2_normalization, l2_pool2d.

mean, reduce_*: the input's axes merged into runs of kept and reduced axes (size-1 axes dropped, `_runs`),
the kept runs outermost, in order (the output is then written sequentially), the reduced runs inside, each
with its input stride (one loop nest, `_reduction_nest`); a float sum adds in the input's row-major order, as
TFLM. mean int8/int16 (TFLite's QuantizedMeanOrSum): the int32 sum of the raw values minus input_zp * count,
requantized once with the multiplier that already holds the 1/count (see utvm.ops.reduction), plus the
output zero point, saturated to the dtype; float: the float sum times 1/count. reduce_sum int8/int16 sums
in uint32 (TFLM's wrapping int32 sum, without C's signed overflow), then `sum - zp_in * n` is requantized
once. (The two requantizations stay two code paths: they emit different C.) arg_*: [outer, depth, inner]
loops, a strict comparison keeps the first extreme. cumsum: [outer, depth, inner] with the running sum per
(outer, inner); int8 adds the 2^20-scaled inputs in uint32 (wrapping, as TFLM's int32). l2_normalization
int8 computes TFLM's GetInvSqrtQuantizedMultiplierExp per row at run time (integer only, the shared
`inv_sqrt` helper).
"""

from __future__ import annotations

from collections.abc import Callable

from utvm.compiler.kernels import (
    C_TYPES,
    KernelCode,
    KernelContext,
    offset_term,
    register,
    strides_of,
)
from utvm.compiler.kernels.cemit import for_loop, indent
from utvm.ops.reduction import (
    CUMSUM_LEFT_SHIFT,
    L2_EPSILON,
    ArgParams,
    CumsumParams,
    L2NormParams,
    L2PoolParams,
    MeanParams,
    ReduceParams,
)

FLT_MAX = 3.4028234663852886e38


# --- mean / reduce_max / reduce_min / reduce_sum / reduce_all --------------------------------------------------
def _runs(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[tuple[bool, int, int]]:
    """(reduced?, extent, input stride) per merged run of adjacent axes, outermost first."""
    strides = strides_of(shape)
    runs: list[tuple[bool, int, int]] = []
    for d, extent in enumerate(shape):
        if extent == 1:
            continue
        red = d in axes
        if runs and runs[-1][0] == red and runs[-1][2] == strides[d] * extent:
            runs[-1] = (red, runs[-1][1] * extent, strides[d])
        else:
            runs.append((red, extent, strides[d]))
    return runs


def _reduction_nest(shape: tuple[int, ...], axes: tuple[int, ...], init: str, step: Callable[[str], str],
                    finish: str) -> list[str]:
    """The lines of a reduction's loop nest: per output (`io`, in order), `init`, then `step(index)` for each
    reduced element (`index` the C name of its flat input index), then `finish`; ends with `return 0;`."""
    runs = _runs(shape, axes)
    kept = [(e, s) for red, e, s in runs if not red]
    reduced = [(e, s) for red, e, s in runs if red]
    body = [step(f"r_base{len(reduced)}")]
    for d in reversed(range(len(reduced))):
        extent, stride = reduced[d]
        body = [for_loop(f"r{d}", 0, extent, [f"const int32_t r_base{d + 1} = r_base{d} + r{d} * {stride};", *body])]
    body = [init, f"const int32_t r_base0 = k_base{len(kept)};", *body, finish, "++io;"]
    for d in reversed(range(len(kept))):
        extent, stride = kept[d]
        body = [for_loop(f"k{d}", 0, extent, [f"const int32_t k_base{d + 1} = k_base{d} + k{d} * {stride};", *body])]
    return ["int32_t io = 0;", "const int32_t k_base0 = 0;", *body, "return 0;"]


@register("mean")
def mean(ctx: KernelContext) -> KernelCode:
    return mean_kernel(ctx, ctx.params())


def mean_kernel(ctx: KernelContext, p: MeanParams) -> KernelCode:
    """mean (global_avg_pool2d's direct kernel too, utvm.compiler.kernels.pool)."""
    if p.dtype not in ("float32", "int8", "int16"):
        raise ctx.error(f"no mean kernel for dtype {p.dtype}")
    integer = p.dtype != "float32"
    x, y = ctx.inputs[0], ctx.outputs[0]
    cast = "(int32_t)" if integer else ""
    init = "int32_t sum = 0;" if integer else "float sum = 0.0f;"

    def step(index: str) -> str:
        return f"sum += {cast}{x}[{index}];"

    if integer:
        rq, clamp = ctx.helper("requant", p.rounding), ctx.helper("clamp_i32")
        span, (lo, hi), limit = ((255, (-128, 127), 1 << 23) if p.dtype == "int8"
                                 else (65535, (-32768, 32767), 1 << 15))
        finish = (f"const int32_t acc = {rq}(sum{offset_term(-p.input_zero_point * p.count)}, "
                  f"{p.multiplier}, {p.shift}){offset_term(p.output_zero_point)};\n")
        finish += (f"{y}[io] = ({C_TYPES[p.dtype]}){clamp}(acc, {lo}, {hi});" if p.count else
                   f"{y}[io] = 0; /* no element: TFLM writes a raw 0 */\n(void)acc;")
        if p.count > limit:
            raise ctx.error(f"mean over {p.count} elements could overflow the int32 sum")
        lines = [f"/* The int32 sum cannot overflow: |sum - zp * n| <= {span} * {p.count} < 2^31. */"]
    else:
        finish = (f"{y}[io] = sum * {ctx.float_literal(1.0 / p.count)};" if p.count > 1
                  else f"{y}[io] = sum;")
        lines = []
    lines += _reduction_nest(p.input_shape, p.axes, init, step, finish)
    return KernelCode(body="\n".join(lines))


@register("reduce_max", "reduce_min", "reduce_sum", "reduce_all")
def reduce(ctx: KernelContext) -> KernelCode:
    p: ReduceParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    ct = C_TYPES[p.dtype]
    integer_sum = p.op == "reduce_sum" and p.dtype != "float32"
    if p.op == "reduce_all":
        acc_t, init, step = "uint8_t", "1u", "acc = (uint8_t)(acc && v);"
    elif p.op == "reduce_sum":
        acc_t, init = ("uint32_t", "0u") if integer_sum else ("float", "0.0f")
        step = ("acc += (uint32_t)(int32_t)v;" if integer_sum else "acc += v;")
    else:
        acc_t = ct
        if p.dtype == "float32":
            init = ctx.float_literal(-FLT_MAX if p.op == "reduce_max" else FLT_MAX)
        else:
            init = "-128" if p.op == "reduce_max" else "127"
        step = f"if (v {'>' if p.op == 'reduce_max' else '<'} acc) {{\n  acc = v;\n}}"
    if integer_sum:
        rq = ctx.helper("requant", p.rounding)
        lo, hi = (-128, 127) if p.dtype == "int8" else (-32768, 32767)
        off = (-p.input_zero_point * p.count) % (1 << 32)
        finish = (f"const int32_t s = (int32_t)(acc + {off}u);\n"
                  f"const int32_t q = {rq}(s, {p.multiplier}, {p.shift}){offset_term(p.output_zero_point)};\n")
        finish += (f"{y}[io] = ({ct})(q < {lo} ? {lo} : (q > {hi} ? {hi} : q));" if p.count else
                   f"{y}[io] = 0; /* no element: TFLM writes a raw 0 */\n(void)q;")
    else:
        finish = f"{y}[io] = acc;"
    lines = _reduction_nest(p.input_shape, p.axes, f"{acc_t} acc = {init};",
                            lambda index: f"const {ct} v = {x}[{index}];\n{step}", finish)
    return KernelCode(body="\n".join(lines))


# --- arg_max / arg_min --------------------------------------------------------------------------------------
@register("arg_max", "arg_min")
def arg_min_max(ctx: KernelContext) -> KernelCode:
    p: ArgParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    ct = C_TYPES[p.dtype]
    cmp = ">" if p.op == "arg_max" else "<"
    body = f"""\
for (int32_t o = 0; o < {p.outer}; ++o) {{
  for (int32_t i = 0; i < {p.inner}; ++i) {{
    const {ct}* const xp = {x} + o * {p.depth * p.inner} + i;
    {ct} best = xp[0];
    int32_t idx = 0;
    for (int32_t d = 1; d < {p.depth}; ++d) {{
      const {ct} v = xp[d * {p.inner}];
      if (v {cmp} best) {{
        best = v;
        idx = d;
      }}
    }}
    {y}[o * {p.inner} + i] = idx;
  }}
}}
return 0;"""
    return KernelCode(body=body)


# --- cumsum ---------------------------------------------------------------------------------------------------
@register("cumsum")
def cumsum(ctx: KernelContext) -> KernelCode:
    p: CumsumParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    pos = f"({p.depth - 1} - d)" if p.reverse else "d"
    index = f"o * {p.depth * p.inner} + {pos} * {p.inner} + i"
    if p.dtype == "float32":
        if p.exclusive:
            step = f"{y}[k] = acc;\nacc += {x}[k];"
        else:
            step = f"acc += {x}[k];\n{y}[k] = acc;"
        init, acc_t, pre = "0.0f", "float", ""
    else:
        rq = ctx.helper("requant", p.rounding)
        pre = ""
        scaled = (f"const int32_t sc = {rq}(((int32_t){x}[k]{offset_term(-p.input_zero_point)}) * "
                  f"{1 << CUMSUM_LEFT_SHIFT}, {p.input_multiplier}, {p.input_shift});")
        add = "acc += (uint32_t)sc;"
        emit = (f"const int32_t q = {rq}((int32_t)acc, {p.output_multiplier}, {p.output_shift})"
                f"{offset_term(p.output_zero_point)};\n{y}[k] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));")
        step = f"{scaled}\n{emit}\n{add}" if p.exclusive else f"{scaled}\n{add}\n{emit}"
        init, acc_t = f"{p.init % (1 << 32)}u", "uint32_t"
    body = f"""\
{pre}for (int32_t o = 0; o < {p.outer}; ++o) {{
  for (int32_t i = 0; i < {p.inner}; ++i) {{
    {acc_t} acc = {init};
    for (int32_t d = 0; d < {p.depth}; ++d) {{
      const int32_t k = {index};
{indent(step, 3)}
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body)


# --- l2_normalization -----------------------------------------------------------------------------------------
@register("l2_normalization")
def l2_normalization(ctx: KernelContext) -> KernelCode:
    p: L2NormParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    if p.dtype == "float32":
        sqrt = ctx.libm("sqrtf")
        body = f"""\
for (int32_t r = 0; r < {p.rows}; ++r) {{
  const float* const xr = {x} + r * {p.depth};
  float* const yr = {y} + r * {p.depth};
  float s = 0.0f;
  float norm;
  for (int32_t c = 0; c < {p.depth}; ++c) {{
    s += xr[c] * xr[c];
  }}
  norm = {sqrt}(s);
  if (norm < {ctx.float_literal(L2_EPSILON)}) {{
    norm = {ctx.float_literal(L2_EPSILON)};
  }}
  for (int32_t c = 0; c < {p.depth}; ++c) {{
    yr[c] = xr[c] / norm;
  }}
}}
return 0;"""
        return KernelCode(body=body)
    inv = ctx.helper("inv_sqrt")
    rq = ctx.helper("requant", p.rounding)
    zp = offset_term(-p.input_zero_point)
    if p.depth > 32768:
        raise ctx.error(f"a row of {p.depth} int8 values could overflow the int32 sum of squares")
    body = f"""\
/* The int32 sum of squares cannot overflow: {p.depth} * 255^2 < 2^31. */
for (int32_t r = 0; r < {p.rows}; ++r) {{
  const int8_t* const xr = {x} + r * {p.depth};
  int8_t* const yr = {y} + r * {p.depth};
  int32_t acc = 0;
  int32_t m;
  int32_t sh;
  for (int32_t c = 0; c < {p.depth}; ++c) {{
    const int32_t d = (int32_t)xr[c]{zp};
    acc += d * d;
  }}
  {inv}(acc, &m, &sh);
  for (int32_t c = 0; c < {p.depth}; ++c) {{
    const int32_t q = {rq}((int32_t)xr[c]{zp}, m, sh + 7);
    yr[c] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
  }}
}}
return 0;"""
    return KernelCode(body=body)


# --- l2_pool2d --------------------------------------------------------------------------------------------------
@register("l2_pool2d")
def l2_pool2d(ctx: KernelContext) -> KernelCode:
    p: L2PoolParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    n, h, w, c = p.input_shape
    _, oh, ow, _ = p.output_shape
    kh, kw = p.pool
    clamp = ""
    sqrt = ctx.libm("sqrtf")
    if p.activation != "none":
        fn = ctx.helper("clamp_f32")
        clamp = indent(f"v = {fn}(v, {ctx.float_literal(p.act_min)}, {ctx.float_literal(p.act_max)});", 4) + "\n"
    body = f"""\
for (int32_t b = 0; b < {n}; ++b) {{
  for (int32_t oy = 0; oy < {oh}; ++oy) {{
    const int32_t iy0 = oy * {p.strides[0]} - {p.padding[0]};
    const int32_t ky_lo = iy0 < 0 ? -iy0 : 0;
    const int32_t ky_hi = {h} - iy0 < {kh} ? {h} - iy0 : {kh};
    for (int32_t ox = 0; ox < {ow}; ++ox) {{
      const int32_t ix0 = ox * {p.strides[1]} - {p.padding[1]};
      const int32_t kx_lo = ix0 < 0 ? -ix0 : 0;
      const int32_t kx_hi = {w} - ix0 < {kw} ? {w} - ix0 : {kw};
      const int32_t count = (ky_hi - ky_lo) * (kx_hi - kx_lo);
      float* const yp = {y} + ((b * {oh} + oy) * {ow} + ox) * {c};
      for (int32_t ch = 0; ch < {c}; ++ch) {{
        float s = 0.0f;
        float v;
        for (int32_t ky = ky_lo; ky < ky_hi; ++ky) {{
          const float* const xrow = {x} + ((b * {h} + iy0 + ky) * {w} + ix0) * {c} + ch;
          for (int32_t kx = kx_lo; kx < kx_hi; ++kx) {{
            const float t = xrow[kx * {c}];
            s += t * t;
          }}
        }}
        v = {sqrt}(s / (float)(count > 0 ? count : 1));
{clamp}        yp[ch] = v;
      }}
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body)
