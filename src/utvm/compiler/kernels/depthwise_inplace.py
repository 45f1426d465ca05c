"""In-place depthwise_conv2d (int8): the output written over the input, channel by channel, through a
one-channel temporary (TinyEngine's in-place depthwise; written here from its description).

Legal when the output has the input's shape (stride 1 and a padding that keeps H and W; depth multiplier 1):
output channel c depends on input channel c only, so the kernel first copies channel c into the temporary,
then computes output channel c from it into the output. When the output buffer is the input buffer, channel c
of the input is overwritten only after it was copied, and no other channel is touched, so input and output need
not coexist: a layer that held 2 * H * W * C bytes holds H * W * C plus the temporary. The kernel is correct
whether or not the two buffers are one (`KernelCode.inplace = (0,)`: the planner decides).

The temporary is the channel's *padded plane*: (H + KH' - 1) x (W + KW' - 1) int8 values (KH', KW' the dilated
window), the channel in the middle and the input zero point all around, filled once per call (the border never
changes from one channel to the next). A padding tap then holds the zero point, so (x - zp) * w is 0 there as
TFLite's skipped taps are: every window is a full window, with no bounds test, and the folded form is exact
for all of them: acc = sum x * w + (bias - zp * sum w), the channel's weights in locals, the window's taps at
compile-time offsets. No partial sum leaves int32 (|x| <= 128 times sum |w|, and the folded constant, checked at
compile time; otherwise the kernel refuses the node). Requantization by the compile's `requant` helper in the
op's rounding.

It is not the registered kernel of depthwise_conv2d: lowering uses it for a node carrying the attribute
`in_place_kernel` (`utvm.compiler.patch` marks the nodes the memory-aware plan wants in place; `inplace_reason` says why
a node cannot be).
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, multipliers_pm
from utvm.compiler.kernels.cemit import INT32_MAX, for_loop, lines
from utvm.ops.conv2d import Conv2DParams

#: the node attribute that asks lowering for this kernel
ATTR = "in_place_kernel"  # utvm.compiler.patch.INPLACE


def inplace_reason(p: Conv2DParams, weights_constant: bool) -> str | None:
    """Why a depthwise_conv2d with params `p` cannot run in place (None: it can)."""
    if p.op != "depthwise_conv2d":
        return f"{p.op} is not a depthwise_conv2d"
    if p.dtype != "int8":
        return f"dtype {p.dtype} (the in-place kernel is int8)"
    if p.depth_multiplier != 1:
        return f"depth multiplier {p.depth_multiplier} (output channel c must read input channel c only)"
    if tuple(p.output_shape) != tuple(p.input_shape):
        return f"output shape {list(p.output_shape)} differs from input shape {list(p.input_shape)}"
    if not weights_constant:
        return "run-time weights or bias"
    return None


def kernel(ctx: KernelContext) -> KernelCode:
    p: Conv2DParams = ctx.params()
    w_t, b_t = ctx.in_tensor(1), ctx.in_tensor(2)
    consts = w_t is not None and w_t.is_constant and (b_t is None or b_t.is_constant)
    reason = inplace_reason(p, consts)
    if reason is not None:
        raise ctx.error(f"cannot run in place: {reason}")
    assert w_t is not None and w_t.data is not None
    n, h, w, c = p.input_shape
    kh, kw = p.kernel
    (sh, sw), (dh, dw) = p.strides, p.dilation
    top, left = p.padding[0], p.padding[1]
    ph, pw = (h - 1) * sh + (kh - 1) * dh + 1, (w - 1) * sw + (kw - 1) * dw + 1  # the padded plane
    wts = w_t.data.astype(np.int64).reshape(kh * kw, c)
    bias = b_t.data.astype(np.int64).reshape(c) if b_t is not None and b_t.data is not None else np.zeros(c, np.int64)
    zp = int(p.input_zero_point)
    init = bias - zp * wts.sum(axis=0)
    worst = int((128 * np.abs(wts).sum(axis=0) + np.abs(init)).max(initial=0))
    if worst > INT32_MAX:
        raise ctx.error(f"cannot run in place: the folded int32 accumulator could overflow (|x| * sum|w| + "
                        f"|bias - zp * sum w| reaches {worst})")
    rq = ctx.helper("requant_pm" if multipliers_pm(p.multiplier) else "requant", p.rounding)
    clamp = ctx.helper("clamp_i32")
    mult = ctx.table("int32_t", list(p.multiplier), "multiplier")
    shift = ctx.table("int32_t", list(p.shift), "shift")
    init_tab = ctx.table("int32_t", init.astype(np.int32), "init")
    taps = " + ".join(f"(int32_t)q[{ky * dh * pw + kx * dw}] * k{ky * kw + kx}"
                      for ky in range(kh) for kx in range(kw))
    per_channel = [
        "const int8_t* const xc = xb + ch;",
        f"const int8_t* const wc = {ctx.inputs[1]} + ch;",
        f"const int32_t init = {init_tab}[ch];",
        f"const int32_t mult = {mult}[ch];",
        f"const int32_t shift = {shift}[ch];",
        *(f"const int32_t k{t} = wc[{t * c}];" for t in range(kh * kw)),
        "/* channel ch into the middle of the plane */",
        for_loop("y", 0, h, [f"int8_t* const row = plane + (y + {top}) * {pw} + {left};",
                             f"const int8_t* const src = xc + y * {w * c};",
                             for_loop("x", 0, w, f"row[x] = src[x * {c}];")]),
        "/* output channel ch, written over input channel ch (copied above) */",
        for_loop("oy", 0, h, [
            f"const int8_t* const pr = plane + oy * {sh * pw};",
            f"int8_t* const yr = yb + oy * {w * c} + ch;",
            for_loop("ox", 0, w, [
                f"const int8_t* const q = pr + ox{f' * {sw}' if sw != 1 else ''};",
                f"int32_t acc = init + {taps};",
                f"acc = {rq}(acc, mult, shift) + output_offset;",
                f"yr[ox * {c}] = (int8_t){clamp}(acc, act_min, act_max);"])]),
    ]
    body = lines(
        f"/* In-place depthwise {kh}x{kw}: channel by channel through its padded plane ({ph}x{pw} bytes). */",
        f"/* The int32 accumulator cannot overflow: |x| * sum|w| + |bias - zp * sum w| <= {worst} < 2^31. */",
        f"const int32_t output_offset = {int(p.output_zero_point)};",
        f"const int32_t act_min = {int(p.act_min)};",
        f"const int32_t act_max = {int(p.act_max)};",
        f"int8_t* const plane = (int8_t*)(void*){ctx.scratch};",
        "/* the border: the input zero point ((x - zp) * w = 0, TFLite's skipped taps), for every channel */",
        for_loop("i", 0, ph * pw, f"plane[i] = (int8_t){zp};"),
        for_loop("b", 0, n, [
            f"const int8_t* const xb = {ctx.inputs[0]} + b * {h * w * c};",
            f"int8_t* const yb = {ctx.outputs[0]} + b * {h * w * c};",
            for_loop("ch", 0, c, per_channel)]),
        "return 0;")
    return KernelCode(body=body, scratch_bytes=ph * pw, inplace=(0,))
