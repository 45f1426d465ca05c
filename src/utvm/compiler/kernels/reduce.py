"""mean (and the mean behind global_avg_pool2d); float32, int8 and int16 (utvm.ops.reduce).

The input's axes are merged into runs of kept and reduced axes (size-1 axes dropped), so the loops are:
the kept runs outermost, in order (the output is then written sequentially), the reduced runs inside,
each with its input stride. int8/int16 (TFLite's QuantizedMeanOrSum): the int32 sum of the raw values minus
input_zp * count, requantized once with the multiplier that already holds the 1/count (see
utvm.ops.reduce), plus the output zero point, saturated to the dtype. Float: the float sum times 1/count.
"""

from __future__ import annotations

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, c_literal, offset_term, register, strides_of
from utvm.ops.reduce import MeanParams


@register("mean")
def mean(ctx: KernelContext) -> KernelCode:
    return mean_kernel(ctx, ctx.params())


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


def mean_kernel(ctx: KernelContext, p: MeanParams) -> KernelCode:
    if p.dtype not in ("float32", "int8", "int16"):
        raise ctx.error(f"no mean kernel for dtype {p.dtype}")
    integer = p.dtype != "float32"
    x, y = ctx.inputs[0], ctx.outputs[0]
    runs = _runs(p.input_shape, p.axes)
    kept = [(e, s) for red, e, s in runs if not red]
    reduced = [(e, s) for red, e, s in runs if red]
    ctype = "int32_t" if integer else "float"
    zero = "0" if integer else "0.0f"
    lines = ["int32_t io = 0;", "const int32_t k_base0 = 0;"]
    depth = 0
    for d, (extent, stride) in enumerate(kept):
        ind = "  " * depth
        lines.append(f"{ind}for (int32_t k{d} = 0; k{d} < {extent}; ++k{d}) {{")
        lines.append(f"{ind}  const int32_t k_base{d + 1} = k_base{d} + k{d} * {stride};")
        depth += 1
    ind = "  " * depth
    lines.append(f"{ind}{ctype} sum = {zero};")
    lines.append(f"{ind}const int32_t r_base0 = k_base{len(kept)};")
    for d, (extent, stride) in enumerate(reduced):
        ind2 = "  " * (depth + d)
        lines.append(f"{ind2}for (int32_t r{d} = 0; r{d} < {extent}; ++r{d}) {{")
        lines.append(f"{ind2}  const int32_t r_base{d + 1} = r_base{d} + r{d} * {stride};")
    inner = "  " * (depth + len(reduced))
    cast = "(int32_t)" if integer else ""
    lines.append(f"{inner}sum += {cast}{x}[r_base{len(reduced)}];")
    for d in reversed(range(len(reduced))):
        lines.append("  " * (depth + d) + "}")
    if integer:
        rq, clamp = ctx.helper("requant", p.rounding), ctx.helper("clamp_i32")
        span, (lo, hi), limit = ((255, (-128, 127), 1 << 23) if p.dtype == "int8"
                                 else (65535, (-32768, 32767), 1 << 15))
        lines.insert(0, f"/* The int32 sum cannot overflow: |sum - zp * n| <= {span} * {p.count} < 2^31. */")
        lines.append(f"{ind}const int32_t acc = {rq}(sum{offset_term(-p.input_zero_point * p.count)}, "
                     f"{p.multiplier}, {p.shift}){offset_term(p.output_zero_point)};")
        lines.append(f"{ind}{y}[io] = ({C_TYPES[p.dtype]}){clamp}(acc, {lo}, {hi});" if p.count else
                     f"{ind}{y}[io] = 0; /* no element: TFLM writes a raw 0 */\n{ind}(void)acc;")
        if p.count > limit:
            raise ctx.error(f"mean over {p.count} elements could overflow the int32 sum")
    else:
        lines.append(f"{ind}{y}[io] = sum * {c_literal(1.0 / p.count, 'float32')};" if p.count > 1
                     else f"{ind}{y}[io] = sum;")
    lines.append(f"{ind}++io;")
    for d in reversed(range(len(kept))):
        lines.append("  " * d + "}")
    lines.append("return 0;")
    return KernelCode(body="\n".join(lines))
