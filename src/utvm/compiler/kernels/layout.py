"""Data movement: transpose and concat; any dtype (utvm.ops.shape). Raw element copies, no arithmetic
(int8 inputs and outputs share their quantization, checked by prepare).

transpose: size-1 axes are dropped and input axes that stay adjacent (and in order) in the permutation are
merged, so e.g. NHWC -> NCHW becomes a 2-D transpose per batch. The loops run over the output in order
(sequential writes) and step through the input with its strides.

concat: for each index of the axes before `axis`, each input contributes one contiguous chunk (its
extent along `axis` times everything after it) to the output row, in input order.
"""

from __future__ import annotations

import math

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, register, strides_of
from utvm.compiler.kernels.cemit import for_loop, lines
from utvm.ops.shape import ShapeParams


@register("transpose")
def transpose(ctx: KernelContext) -> KernelCode:
    p: ShapeParams = ctx.params()
    if p.dtype not in C_TYPES:
        raise ctx.error(f"no transpose kernel for dtype {p.dtype}")
    x, y = ctx.inputs[0], ctx.outputs[0]
    dims = simplify_transpose(p.input_shapes[0], p.perm)
    body = [f"{y}[io] = {x}[ix{len(dims)}];", "++io;"]
    for d in reversed(range(len(dims))):
        extent, stride = dims[d]
        body = [for_loop(f"d{d}", 0, extent, [f"const int32_t ix{d + 1} = ix{d} + d{d} * {stride};", *body])]
    return KernelCode(body=lines("int32_t io = 0;", "const int32_t ix0 = 0;", body, "return 0;"))


def simplify_transpose(shape: tuple[int, ...], perm: tuple[int, ...]) -> list[tuple[int, int]]:
    """(extent, input stride) per output loop, outermost first, after dropping size-1 axes and merging
    input axes that stay adjacent in the output."""
    strides = strides_of(shape)
    out_axes = [a for a in perm if shape[a] != 1]
    loops: list[tuple[int, int, int]] = []  # (extent, stride, last input axis merged)
    for a in out_axes:
        if loops:
            extent, stride, last = loops[-1]
            # a follows `last` in the input (skipping size-1 axes) and is contiguous with it
            if a > last and all(shape[b] == 1 for b in range(last + 1, a)) and stride == strides[a] * shape[a]:
                loops[-1] = (extent * shape[a], strides[a], a)
                continue
        loops.append((shape[a], strides[a], a))
    return [(e, s) for e, s, _ in loops] or [(1, 0)]


@register("concat")
def concat(ctx: KernelContext) -> KernelCode:
    p: ShapeParams = ctx.params()
    if p.dtype not in C_TYPES:
        raise ctx.error(f"no concat kernel for dtype {p.dtype}")
    y = ctx.outputs[0]
    outer = math.prod(p.output_shape[:p.axis])
    row = math.prod(p.output_shape[p.axis:])
    chunks = []
    offset = 0
    for i, shape in enumerate(p.input_shapes):
        chunk = math.prod(shape[p.axis:])
        if chunk == 0:
            continue
        chunks.append(for_loop("e", 0, chunk, f"{y}[o * {row} + {offset} + e] = {ctx.inputs[i]}[o * {chunk} + e];"))
        offset += chunk
    return KernelCode(body=lines(for_loop("o", 0, outer, chunks), "return 0;"))
