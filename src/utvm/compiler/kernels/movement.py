"""C kernels of the movement op family (utvm.ops.movement): element copies, no arithmetic.

Most ops are affine copies: output element (i0, i1, ...) comes from input offset base + sum(ik * sk), with
strides sk that may be negative (reverse, negative slice strides) or zero (broadcast). `affine_copy` emits
the nested loops for one such copy after dropping extent-1 dimensions and merging dimensions that stay
contiguous on both sides (a plain slice of whole rows becomes one loop per row). split, unpack and pack
are one affine copy per output / input. mirror_pad maps each padded axis through a flash table of input
offsets; dynamic_update_slice copies the operand, then the update at start indices clamped at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, register, strides_of
from utvm.compiler.kernels.cemit import block, for_loop
from utvm.ops.movement import MovementParams


def affine_copy(dst: str, dst_base: int | str, dst_strides: Sequence[int], src: str, src_base: int | str,
                src_strides: Sequence[int], extents: Sequence[int]) -> list[str]:
    """C statements (one block) copying dst[dst_base + sum(i*ds)] = src[src_base + sum(i*ss)] over
    `extents`; nothing when the copy is empty."""
    if any(e == 0 for e in extents):
        return []
    dims: list[list[int]] = []  # [extent, dst stride, src stride], outermost first
    for e, ds, ss in zip(extents, dst_strides, src_strides, strict=True):
        if e == 1:
            continue
        if dims and dims[-1][1] == ds * e and dims[-1][2] == ss * e:
            dims[-1] = [dims[-1][0] * e, ds, ss]
        else:
            dims.append([int(e), int(ds), int(ss)])
    n = len(dims)
    body = [f"{dst}[d{n}] = {src}[s{n}];"]
    for k in reversed(range(n)):
        e, ds, ss = dims[k]
        body = [for_loop(f"i{k}", 0, e, [f"const int32_t d{k + 1} = d{k} + i{k} * {ds};",
                                          f"const int32_t s{k + 1} = s{k} + i{k} * {ss};", *body])]
    return [block("", [f"const int32_t d0 = {dst_base};", f"const int32_t s0 = {src_base};", *body])]


def _ctype(ctx: KernelContext, p: MovementParams) -> str:
    if p.dtype not in C_TYPES:
        raise ctx.error(f"no {p.op} kernel for dtype {p.dtype}")
    return C_TYPES[p.dtype]


def _unused(ctx: KernelContext, inputs: Sequence[int]) -> list[str]:
    """`(void)inK;` for the run-time inputs among `inputs` that the body does not read."""
    return [f"(void){ctx.inputs[i]};" for i in inputs
            if ctx.has_input(i) and not ctx.graph.tensor(ctx.node.inputs[i]).is_constant]


def _body(lines: list[str], ctx: KernelContext | None = None) -> KernelCode:
    """The statements plus `return 0;` (an empty copy marks its parameters used: `(void)in0;` ...)."""
    if not lines and ctx is not None:
        lines = [*_unused(ctx, range(len(ctx.node.inputs))), *(f"(void){o};" for o in ctx.outputs)]
    return KernelCode(body="\n".join([*lines, "return 0;"]))


@register("strided_slice", "slice", "reverse")
def view(ctx: KernelContext) -> KernelCode:
    """One affine copy: output axis d walks the input from starts[d] by steps[d], counts[d] times."""
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    shape = p.input_shapes[0]
    ist = strides_of(shape)
    base = sum(s * st for s, st in zip(p.starts, ist, strict=True))
    src_strides = [step * st for step, st in zip(p.steps, ist, strict=True)]
    return _body(affine_copy(ctx.outputs[0], 0, strides_of(p.counts), ctx.inputs[0], base, src_strides,
                             p.counts), ctx)


@register("broadcast_to")
def broadcast_to(ctx: KernelContext) -> KernelCode:
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    out = p.output_shapes[0]
    shape = (1,) * (len(out) - len(p.input_shapes[0])) + tuple(p.input_shapes[0])
    ist = strides_of(shape)
    src_strides = [0 if n == 1 else st for n, st in zip(shape, ist, strict=True)]
    return _body(affine_copy(ctx.outputs[0], 0, strides_of(out), ctx.inputs[0], 0, src_strides, out), ctx)


def _outer_inner(shape: Sequence[int], axis: int) -> tuple[int, int]:
    return math.prod(shape[:axis]), math.prod(shape[axis + 1:])


@register("split")
def split(ctx: KernelContext) -> KernelCode:
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    shape = p.input_shapes[0]
    outer, inner = _outer_inner(shape, p.axis)
    row = shape[p.axis] * inner
    lines: list[str] = []
    offset = 0
    for k, size in enumerate(p.sizes):
        lines += affine_copy(ctx.outputs[k], 0, (size * inner, 1), ctx.inputs[0], offset * inner, (row, 1),
                             (outer, size * inner))
        offset += size
    return _body(lines, ctx)


@register("unpack")
def unpack(ctx: KernelContext) -> KernelCode:
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    shape = p.input_shapes[0]
    outer, inner = _outer_inner(shape, p.axis)
    row = shape[p.axis] * inner
    lines: list[str] = []
    for k in range(shape[p.axis]):
        lines += affine_copy(ctx.outputs[k], 0, (inner, 1), ctx.inputs[0], k * inner, (row, 1), (outer, inner))
    return _body(lines, ctx)


@register("pack")
def pack(ctx: KernelContext) -> KernelCode:
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    out = p.output_shapes[0]
    outer, inner = _outer_inner(out, p.axis)
    row = out[p.axis] * inner
    lines: list[str] = []
    for k in range(len(p.input_shapes)):
        lines += affine_copy(ctx.outputs[0], k * inner, (row, 1), ctx.inputs[k], 0, (inner, 1), (outer, inner))
    return _body(lines, ctx)


@register("mirror_pad")
def mirror_pad(ctx: KernelContext) -> KernelCode:
    """Loops over the output; each padded axis maps its output index to an input offset through a table
    (one table for all of them); the unpadded trailing axes are one contiguous row."""
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    x, y = ctx.inputs[0], ctx.outputs[0]
    shape, out = p.input_shapes[0], p.output_shapes[0]
    n_out = math.prod(out)
    if n_out == 0:
        return _body([], ctx)
    k = len(shape)
    while k > 0 and p.pads[k - 1] == (0, 0):
        k -= 1
    if k == 0:
        return _body(affine_copy(y, 0, (1,), x, 0, (1,), (n_out,)))
    ist = strides_of(shape)
    row = math.prod(shape[k:])
    table: list[int] = []
    starts = []
    for d in range(k):
        b, n = p.pads[d][0], shape[d]
        starts.append(len(table))
        for i in range(out[d]):
            j = i - b
            if j < 0:
                j = -j if p.mode == "reflect" else -j - 1
            elif j >= n:
                j = 2 * n - 2 - j if p.mode == "reflect" else 2 * n - 1 - j
            table.append(j * ist[d])
    tab = ctx.table("int32_t", table, f"{ctx.func_name}_mirror")
    body = [for_loop("e", 0, row, f"{y}[io + e] = {x}[s{k} + e];"), f"io += {row};"]
    for d in reversed(range(k)):
        body = [for_loop(f"i{d}", 0, out[d], [f"const int32_t s{d + 1} = s{d} + {tab}[{starts[d]} + i{d}];", *body])]
    return _body(["int32_t io = 0;", "const int32_t s0 = 0;", *body])


@register("dynamic_update_slice")
def dynamic_update_slice(ctx: KernelContext) -> KernelCode:
    """Copy the operand (in place when the planner lets the output share its buffer), then the update at
    the start indices clamped at run time to [0, operand dim - update dim]."""
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    x, u, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    shape, ushape = p.input_shapes[0], p.input_shapes[1]
    n = math.prod(shape)
    lines = affine_copy(y, 0, (1,), x, 0, (1,), (n,))
    if math.prod(ushape) == 0:
        unused = _unused(ctx, (1, 2) if lines else (0, 1, 2))
        return KernelCode(body="\n".join([*unused, *lines, "return 0;"]), inplace=(0,))
    ost = strides_of(shape)
    lines.append("int32_t base = 0;")
    for d, (xd, ud) in enumerate(zip(shape, ushape, strict=True)):
        hi = xd - ud
        if hi == 0:
            continue  # the clamp range is {0}
        lines.append(block("", [f"const int64_t s = (int64_t){ctx.inputs[2]}[{d}];",
                                f"base += (int32_t)(s < 0 ? 0 : (s > {hi} ? {hi} : s)) * {ost[d]};"]))
    lines += affine_copy(y, "base", ost, u, 0, strides_of(ushape), ushape)
    if shape == ushape:  # every start index clamps to 0
        lines = [*_unused(ctx, (2,)), *lines]
    return KernelCode(body="\n".join([*lines, "return 0;"]), inplace=(0,))


@register("fill")
def fill(ctx: KernelContext) -> KernelCode:
    p: MovementParams = ctx.params()
    _ctype(ctx, p)
    n = math.prod(p.output_shapes[0])
    return _body(affine_copy(ctx.outputs[0], 0, (1,), ctx.inputs[0], 0, (0,), (n,)), ctx)
