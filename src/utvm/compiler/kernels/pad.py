"""pad: constant padding of any rank; float32, int8, int16, int32 (utvm.ops.pad).

The output is first filled with the padding value, then the input is copied in row by row. A "row" is the
longest contiguous run the padding leaves intact: the trailing axes without padding merge with the last
padded axis, so NHWC spatial padding copies whole W*C rows.
"""

from __future__ import annotations

import math

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, register, strides_of
from utvm.compiler.kernels.cemit import block, for_loop, lines
from utvm.ops.pad import PadParams


@register("pad")
def pad(ctx: KernelContext) -> KernelCode:
    p: PadParams = ctx.params()
    if p.dtype not in C_TYPES:
        raise ctx.error(f"no pad kernel for dtype {p.dtype}")
    t = C_TYPES[p.dtype]
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_shape, out_shape = list(p.input_shape), list(p.output_shape)
    rank = len(in_shape)
    total = math.prod(out_shape)
    # k: the first axis from which on nothing is padded.
    k = rank
    while k > 0 and p.pads[k - 1] == (0, 0):
        k -= 1
    if k == 0 or math.prod(in_shape) == 0:  # nothing padded (or nothing to copy): a plain copy / fill
        n = math.prod(in_shape)
        return KernelCode(body=lines(for_loop("i", 0, n, f"{y}[i] = {x}[i];") if k == 0 else _fill(ctx, y, t, total, p),
                                     "return 0;"))
    run = math.prod(in_shape[k:])  # contiguous elements per index of axis k - 1
    row = in_shape[k - 1] * run
    out_strides = strides_of(out_shape)
    # Loops over the input's axes 0 .. k-2, tracking the output offset of each row.
    base0 = p.pads[k - 1][0] * run + sum(p.pads[d][0] * out_strides[d] for d in range(k - 1))
    body = [for_loop("e", 0, row, f"{y}[dst{k - 1} + e] = {x}[src + e];"), f"src += {row};"]
    for d in reversed(range(k - 1)):
        body = [block(f"for (int32_t i{d} = 0; i{d} < {in_shape[d]}; ++i{d})",
                      [f"const int32_t dst{d + 1} = dst{d} + i{d} * {out_strides[d]};", *body])]
    return KernelCode(body=lines(_fill(ctx, y, t, total, p), "int32_t src = 0;", f"const int32_t dst0 = {base0};",
                                 body, "return 0;"))


def _fill(ctx: KernelContext, y: str, t: str, total: int, p: PadParams) -> str:
    return for_loop("i", 0, total, f"{y}[i] = ({t}){ctx.literal(p.value, p.dtype)};")
