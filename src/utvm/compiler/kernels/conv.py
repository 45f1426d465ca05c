"""conv2d (with groups) and depthwise_conv2d on NHWC tensors; float32 and int8 (utvm.ops.conv2d).

int8 is TFLite's ConvPerChannel / DepthwiseConvPerChannel: an int32 accumulator of (x - input_zp) * w over
the taps inside the input (padding taps are skipped, i.e. they hold the input zero point), plus the bias,
requantized per output channel with the op's rounding, plus the output zero point, clamped to the fused
activation's range. Float sums in float and adds the bias last, clamped to the activation range.

int16 activations with int8 weights ("16x8", `_Direct.int16`): a plain C path of its own (no schedule space,
no SIMD): the products x * w (int32) summed in an int64 accumulator, plus the bias; with an int64 bias (or
none) requantized by TFLite's int64 MultiplyByQuantizedMultiplier (helper "conv16_requant64",
utvm.compiler.kernels.requant), with an int32 bias wrapped to int32 and requantized by the usual int32
helper; no zero point in the arithmetic (TFLM's int16 kernels ignore them); clamped to the activation range
and stored as int16.

Loop shape (TFLM reference order): batch, output row, output column, then output channel; the taps that
fall inside the input are computed once per row / column (`_window.tap_range`), so the inner loops carry no
bounds tests. conv2d's innermost loop runs over the input channels of a group (contiguous in both the input
and the OHWI weights). depthwise_conv2d accumulates all output channels of a pixel at once in `scratch`
(contiguous in the input and the 1HW(C*M) weights), then requantizes them.

int8 conv2d with constant weights has a space (`conv_space`): `algo` "direct" (the scalar kernel above,
with `direct_knobs`: none for conv2d) or "gemm" (im2col + GEMM, utvm.compiler.kernels._gemm), and on Helium
(MVE) vocabularies "mve" (utvm.compiler.kernels._gemm_mve, the default there). The 16x8 path takes a tap's
channels by VMLALDAVA on MVE vocabularies (`ctx.isa.dot_s16s8`).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, register
from utvm.compiler.kernels._dot import dot_offsets, dot_run
from utvm.compiler.kernels._gemm import (
    GEMM_MEMORY_KNOBS,
    LEGACY,
    GemmLayer,
    GemmShape,
    Window,
    gemm_cost,
    gemm_default,
    gemm_kernel,
    gemm_knobs,
    gemm_legal,
    gemm_scratch,
    inline_applies,
    pad4,
    pixel_stride,
)
from utvm.compiler.kernels._gemm_mve import (
    mve_cost,
    mve_default,
    mve_gemm_kernel,
    mve_knobs,
    mve_legal,
    mve_scratch,
    window_cols,
)
from utvm.compiler.kernels._window import Axis, origin_stmt, pos, tap_range
from utvm.compiler.kernels.cemit import INT32_MAX, block, fill, for_loop, lines
from utvm.compiler.kernels.requant import OutputStage, acc_bound, c_helper, requant_int16_stmts, x_abs_max
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops.conv2d import Conv2DParams

# --- the direct kernel's knobs ----------------------------------------------------------------------------------

#: depthwise direct, depth multiplier m > 1: up to this m the outputs of one input channel accumulate in m
#: locals by default (`m_regs`)
MAX_REGISTER_MULTIPLIER = 16
#: depthwise direct: windows of up to this many taps are written out by default (`taps`)
MAX_UNROLLED_TAPS = 32


def direct_knobs(p: Conv2DParams) -> tuple[Knob, ...]:
    """The knobs of the scalar int8 kernel (`direct`, constant weights: weight sums folded for interior
    windows) for layer `p`: only knobs that change its code, so a conv2d has none. depthwise_conv2d:
    `taps` ("unrolled": the kh x kw taps of an interior window written out with constant offsets; "loop": a
    ky/kx loop) and, for a depth multiplier m > 1, `m_regs` (True: per input channel, each tap's input value
    loaded once into m local accumulators; False: one output channel at a time). The "direct" branch of the
    conv2d and depthwise_conv2d spaces; `direct_default` is its heuristic point."""
    if p.op != "depthwise_conv2d":
        return ()
    knobs = [Knob("taps", ("unrolled", "loop"), "an interior window's taps written out or looped")]
    if p.depth_multiplier > 1:
        knobs.append(Knob("m_regs", (False, True), "the depth multiplier's outputs of one input channel in "
                          "locals (each input value loaded once) or one output channel at a time"))
    return tuple(knobs)


def direct_default(p: Conv2DParams) -> Schedule:
    """The direct kernel's heuristic point for `p` (the code it always wrote): taps written out up to
    MAX_UNROLLED_TAPS, m locals up to MAX_REGISTER_MULTIPLIER."""
    out: Schedule = {}
    names = {k.name for k in direct_knobs(p)}
    if "taps" in names:
        out["taps"] = "unrolled" if p.kernel[0] * p.kernel[1] <= MAX_UNROLLED_TAPS else "loop"
    if "m_regs" in names:
        out["m_regs"] = p.depth_multiplier <= MAX_REGISTER_MULTIPLIER
    return out


def direct_scratch(p: Conv2DParams, stage: OutputStage) -> int:
    """Scratch bytes of the int8 direct kernel: none where the weight sums fold (`int8_stage`'s init), else
    depthwise's generic loop keeps the int32 accumulators of a pixel's output channels there."""
    if stage.init is not None or p.op != "depthwise_conv2d":
        return 0
    return 4 * p.output_shape[3]


def direct_cost(p: Conv2DParams) -> float:
    """Estimated instructions of the scalar int8 kernel: about three per multiply-accumulate (two byte loads and
    a multiply-accumulate) and ten per output (the requantization and store)."""
    _, oh, ow, n_out = p.output_shape
    kh, kw = p.kernel
    cg = p.input_shape[3] // p.groups if p.op == "conv2d" else 1
    outputs = p.input_shape[0] * oh * ow * n_out
    return float(outputs * (3 * kh * kw * cg + 10))


def _direct_point(ctx: KernelContext, p: Conv2DParams) -> Schedule:
    """The direct kernel's knobs as the node's schedule gives them (the default for those it does not name:
    a node without a space, or a point of another branch)."""
    names = {k.name for k in direct_knobs(p)}
    return {**direct_default(p), **{k: v for k, v in ctx.schedule.items() if k in names}}


# --- the int8 output stage and the accumulator bound --------------------------------------------------------

def _const_data(ctx: KernelContext, i: int) -> np.ndarray | None:
    t = ctx.in_tensor(i)
    return t.data if t is not None and t.data is not None else None


def _bound_terms(ctx: KernelContext, p: Conv2DParams) -> tuple[int, np.ndarray, str, np.ndarray | int, str]:
    """(max |x - zp|, sum |w| per output channel, how it was taken, |bias| per output channel, how the bias
    counts) of an int8 layer: from the constant weights and bias, or for run-time weights 128 per tap."""
    xmax = x_abs_max(p.input_zero_point)
    n_out = p.output_shape[3]
    w = _const_data(ctx, 1)
    if w is not None:
        wa = np.abs(w.astype(np.int64))
        per_oc = wa.reshape(n_out, -1).sum(axis=1) if p.op == "conv2d" else wa.reshape(-1, n_out).sum(axis=0)
        where = "the sum of |w| of each output channel"
    else:
        taps = int(np.prod(p.weight_shape)) // n_out
        per_oc = np.full(n_out, 128 * taps, dtype=np.int64)
        where = f"128 * {taps} taps (run-time weights)"
    b = _const_data(ctx, 2) if p.has_bias else None
    if b is not None:
        return xmax, per_oc, where, np.abs(b.astype(np.int64)), " + |bias|"
    return xmax, per_oc, where, 0, " (+ a run-time bias, which TFLite bounds the same way)" if p.has_bias else ""


def int8_stage(ctx: KernelContext, p: Conv2DParams) -> OutputStage:
    """The output stage of an int8 conv2d / depthwise_conv2d node, prepared once: requantization operands,
    zero points, activation range, the accumulator bound (`requant.acc_bound`) and, with constant weights
    (and bias), the folded initial accumulator bias - input_zp * sum w per output channel when it and every
    interior partial sum (<= 128 * sum|w|) fit int32 (else None: the kernel keeps TFLite's form)."""
    xmax, per_oc, _, bias_abs, _ = _bound_terms(ctx, p)
    init = None
    w, b = _const_data(ctx, 1), _const_data(ctx, 2) if p.has_bias else None
    if w is not None and (not p.has_bias or b is not None):
        n_out = p.output_shape[3]
        w64 = w.astype(np.int64)
        wsum = w64.reshape(n_out, -1).sum(axis=1) if p.op == "conv2d" else w64.reshape(-1, n_out).sum(axis=0)
        folded = (b.astype(np.int64).reshape(-1) if b is not None else 0) + (-p.input_zero_point) * wsum
        if 128 * int(per_oc.max(initial=0)) <= INT32_MAX and int(np.abs(folded).max(initial=0)) <= INT32_MAX:
            init = tuple(int(v) for v in np.broadcast_to(folded, (n_out,)))
    w_t = ctx.in_tensor(1)
    per_channel = w_t is not None and w_t.quant is not None and w_t.quant.per_channel and len(w_t.quant.scale) > 1
    return OutputStage(p.rounding, tuple(int(m) for m in p.multiplier), tuple(int(s) for s in p.shift),
                       p.input_zero_point, p.output_zero_point, int(p.act_min), int(p.act_max),
                       acc_bound(xmax, per_oc, bias_abs), per_channel, init)


def accumulator_bound(ctx: KernelContext, p: Conv2DParams) -> str:
    """A comment proving the int32 accumulator cannot overflow (from the actual weights and biases when they
    are constants); a CompileError when it could."""
    xmax, per_oc, where, bias_abs, bias_note = _bound_terms(ctx, p)
    worst = acc_bound(xmax, per_oc, bias_abs)
    if worst > INT32_MAX:
        raise ctx.error(f"the int32 accumulator could overflow: |x - zp| <= {xmax} times {where}{bias_note} "
                        f"reaches {worst} > 2^31 - 1")
    return (f"/* The int32 accumulator cannot overflow: |acc| <= {xmax} * ({where}){bias_note} <= {worst} "
            f"< 2^31. */")


# --- the space ------------------------------------------------------------------------------------------------

def _gemm_able(ctx: KernelContext, p: Conv2DParams) -> bool:
    """int8 conv2d of one group with constant weights (and bias): the im2col + GEMM form applies."""
    if p.op != "conv2d" or p.dtype != "int8" or p.groups != 1:
        return False
    return _const_data(ctx, 1) is not None and (not p.has_bias or _const_data(ctx, 2) is not None)


def _window(p: Conv2DParams) -> Window:
    _, h, w, c = p.input_shape
    kh, kw = p.kernel
    return Window(h, w, c, kh, kw, p.strides[0], p.strides[1], p.dilation[0], p.dilation[1], p.padding[0],
                  p.padding[1])


def _inplace_ok(p: Conv2DParams) -> bool:
    """A 1x1 window that never reaches the padding: the MVE GEMM may read each pixel's channels in place."""
    _, oh, ow, _ = p.output_shape
    return p.kernel == (1, 1) and all(_window(p).always_inside(oh, ow))


def conv_space(ctx: KernelContext) -> Space:
    """int8 conv2d with constant weights: `algo` direct (the scalar kernel: weight sums folded,
    interior/border split; `direct_knobs`) or gemm (im2col + GEMM, SIMD where the ISA has it;
    utvm.compiler.kernels._gemm) with the GEMM's knobs; on MVE vocabularies also mve (the Helium GEMM,
    utvm.compiler.kernels._gemm_mve: the GEMM's `px_block` and `oc_block` and its own knobs), the default where
    its requantization is exact."""
    p: Conv2DParams = ctx.params()
    if not _gemm_able(ctx, p):
        return EMPTY_SPACE
    v = ctx.isa
    stage = int8_stage(ctx, p)
    win = _window(p)
    kq = pad4(win.k) // 4
    batch, oh, ow, n = p.output_shape
    shape = GemmShape(win, batch, oh, ow, n)
    inline = inline_applies(win, oh, ow)
    stride = pixel_stride(win, oh, ow) if inline else 0
    if v.simd16:
        default = {"algo": "gemm", **gemm_default(v, kq, n, oh * ow, stage, shape)}
    else:
        default = {"algo": "direct", **direct_default(p)}
    gemm = gemm_knobs(v, kq, inline)
    branches = {"direct": direct_knobs(p), "gemm": gemm}
    if v.mve:
        window = window_cols(win) and not _inplace_ok(p)
        branches["mve"] = (*gemm[:2], *mve_knobs(win.k, _inplace_ok(p), window))
        mve = {"algo": "mve", **mve_default(win.k, oh * ow, _inplace_ok(p), window)}
        if mve_legal(mve, oh * ow, stage) is None:
            default = mve

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "mve":
            return mve_legal(pt, oh * ow, stage)
        return None if pt["algo"] == "direct" else gemm_legal(pt, oh * ow, stage, v, stride)

    def scratch(pt: Schedule) -> int:
        if pt["algo"] == "mve":
            return mve_scratch(pt, win.k)
        return direct_scratch(p, stage) if pt["algo"] == "direct" else gemm_scratch(pt, shape.kp)

    def cost(pt: Schedule) -> float:
        if pt["algo"] == "mve":
            return mve_cost(shape, pt)
        return direct_cost(p) if pt["algo"] == "direct" else gemm_cost(v, shape, pt, stride)

    return Space.conditional(Knob("algo", tuple(branches), "scalar direct convolution, im2col + GEMM or the "
                                  "Helium GEMM" if v.mve else "scalar direct convolution or im2col + GEMM"),
                             branches, default=default, legal=legal, legacy=LEGACY, added={"widen": "copy"},
                             scratch=scratch, cost=cost,
                             memory_knobs=(*GEMM_MEMORY_KNOBS, *(("cols",) if v.mve else ())))


@register("conv2d", space=conv_space)
def conv(ctx: KernelContext) -> KernelCode:
    if ctx.schedule.get("algo") in ("gemm", "mve"):
        return _conv_gemm(ctx, ctx.params())
    return direct(ctx)


def _conv_gemm(ctx: KernelContext, p: Conv2DParams) -> KernelCode:
    w = _const_data(ctx, 1)
    assert w is not None
    note = accumulator_bound(ctx, p) + "\n"  # raises when the int32 accumulator could overflow
    n, _, _, _ = p.input_shape
    _, oh, ow, n_out = p.output_shape
    mve = ctx.schedule.get("algo") == "mve"
    # the MVE GEMM folds the bias into its initial accumulators (no reference to the bias array)
    bias = ctx.inputs[2] if p.has_bias and not mve else None
    layer = GemmLayer(GemmShape(_window(p), n, oh, ow, n_out), int8_stage(ctx, p), w.reshape(n_out, -1),
                      ctx.inputs[0], ctx.outputs[0], bias, note)
    if mve:
        return mve_gemm_kernel(ctx, ctx.schedule, layer, _const_data(ctx, 2) if p.has_bias else None)
    return gemm_kernel(ctx, ctx.schedule, layer)


# --- the direct kernels -----------------------------------------------------------------------------------------

def direct(ctx: KernelContext) -> KernelCode:
    """The scalar kernels of conv2d and depthwise_conv2d (float32, int8 and int16): the weight sums folded at
    compile time for interior windows (`_Direct.fast_int8`), TFLite's loop form otherwise. The int8
    depthwise kernel reads its knobs (`direct_knobs`) from ctx's schedule, the defaults where it names none."""
    p: Conv2DParams = ctx.params()
    k = _Direct(ctx, p)
    if p.dtype == "int16":
        return k.int16()
    if p.dtype not in ("float32", "int8"):
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    if p.dtype == "int8":
        fast = k.fast_int8()
        if fast is not None:
            return fast
    if p.op == "depthwise_conv2d":
        return k.depthwise()
    return k.conv2d()


_T = {"int8": "int8_t", "float32": "float", "int16": "int16_t"}


def _axes(p: Conv2DParams) -> tuple[Axis, Axis]:
    _, h, w, _ = p.input_shape
    _, oh, ow, _ = p.output_shape
    kh, kw = p.kernel
    return (Axis(oh, 0, h, kh, p.strides[0], p.dilation[0], p.padding[0]),
            Axis(ow, 0, w, kw, p.strides[1], p.dilation[1], p.padding[1]))


class _Direct:
    """The scalar kernels of one node: its parameters, knobs and requantization tables prepared once (the
    tables on first use, one pair however many epilogues ask)."""

    def __init__(self, ctx: KernelContext, p: Conv2DParams) -> None:
        self.ctx, self.p = ctx, p
        self.point = _direct_point(ctx, p)
        self.ay, self.ax = _axes(p)

    @property
    def uniform(self) -> bool:
        return len(set(self.p.multiplier)) == 1 and len(set(self.p.shift)) == 1

    @cached_property
    def _tables(self) -> tuple[str, str]:
        return (self.ctx.table("int32_t", self.p.multiplier, "multiplier"),
                self.ctx.table("int32_t", self.p.shift, "shift"))

    def requant_terms(self, index: str) -> tuple[str, str]:
        """C expressions of the multiplier and shift of output channel `index` (the const locals of
        `params_int8` when uniform, tables otherwise)."""
        if self.uniform:
            return "output_multiplier", "output_shift"
        mult, shift = self._tables
        return f"{mult}[{index}]", f"{shift}[{index}]"

    def params_int8(self) -> str:
        """The baked-in parameters as const locals (TFLM style); the C compiler folds them."""
        p = self.p
        out = [f"const int32_t input_offset = {-p.input_zero_point};  /* -input zero point */",
               f"const int32_t output_offset = {p.output_zero_point};",
               f"const int32_t act_min = {int(p.act_min)};",
               f"const int32_t act_max = {int(p.act_max)};"]
        if self.uniform:
            out += [f"const int32_t output_multiplier = {p.multiplier[0]};",
                    f"const int32_t output_shift = {p.shift[0]};"]
        return lines(out) + "\n"

    def params_f32(self) -> str:
        return (f"const float act_min = {c_literal(self.p.act_min, 'float32')};\n"
                f"const float act_max = {c_literal(self.p.act_max, 'float32')};\n")

    def epilogue_int8(self, acc: str, oc: str, dst: str, add_bias: bool = True) -> str:
        ctx, p = self.ctx, self.p
        rq = c_helper(ctx, p.rounding, p.multiplier)
        clamp = ctx.helper("clamp_i32")
        mult, shift = self.requant_terms(oc)
        bias = f"{acc} += {ctx.inputs[2]}[{oc}];" if p.has_bias and add_bias else ""
        return lines(bias, f"{acc} = {rq}({acc}, {mult}, {shift}) + output_offset;",
                     f"{dst} = (int8_t){clamp}({acc}, act_min, act_max);")

    def epilogue_f32(self, acc: str, oc: str, dst: str) -> str:
        clamp = self.ctx.helper("clamp_f32")
        bias = f" + {self.ctx.inputs[2]}[{oc}]" if self.p.has_bias else ""
        return f"{dst} = {clamp}({acc}{bias}, act_min, act_max);"

    def pixel_loops(self, inner: str) -> str:
        """batch / output row / output column loops with the tap ranges, around `inner` (which may use xb,
        iy0, ky_lo, ky_hi, ix0, kx_lo, kx_hi and yp, the output pixel). The input and output are the holes
        @IN@ and @OUT@ (`finish` names them last, so a constant input is emitted after the kernel's own
        tables)."""
        p, ay, ax = self.p, self.ay, self.ax
        n, h, w, c = p.input_shape
        _, oh, ow, oc = p.output_shape
        t = _T[p.dtype]
        pixel = [origin_stmt("ix0", "ox", ax), tap_range("kx_lo", "kx_hi", "ix0", ax),
                 f"{t}* const yp = @OUT@ + ((b * {oh} + oy) * {ow} + ox) * {oc};", inner]
        row = [origin_stmt("iy0", "oy", ay), tap_range("ky_lo", "ky_hi", "iy0", ay), for_loop("ox", 0, ow, pixel)]
        return for_loop("b", 0, n, [f"const {t}* const xb = @IN@ + b * {h * w * c};", for_loop("oy", 0, oh, row)])

    def finish(self, body: str, scratch_bytes: int = 0) -> KernelCode:
        return KernelCode(body=fill(body, IN=self.ctx.inputs[0], OUT=self.ctx.outputs[0]),
                          scratch_bytes=scratch_bytes)

    # --- conv2d --------------------------------------------------------------------------------------------

    def conv2d(self) -> KernelCode:
        comment = (self.params_int8() + accumulator_bound(self.ctx, self.p) + "\n" if self.p.dtype == "int8"
                   else self.params_f32())
        return self.finish(comment + self.pixel_loops(self.conv2d_inner()) + "\nreturn 0;")

    def conv2d_inner(self) -> str:
        """Per output channel over the in-bounds taps (TFLite's form: the input offset inside the product)."""
        p = self.p
        _, _, w, c = p.input_shape
        n_out = p.output_shape[3]
        kh, kw = p.kernel
        g = p.groups
        cg, og = c // g, n_out // g
        wts = self.ctx.inputs[1]
        t = _T[p.dtype]
        if p.dtype == "int8":
            acc_decl = "int32_t acc = 0;"
            mac = "acc += ((int32_t)xp[ic] + input_offset) * (int32_t)wp[ic];"
            epilogue = self.epilogue_int8("acc", "oc", "yp[oc]")
        else:
            acc_decl = "float acc = 0.0f;"
            mac = "acc += xp[ic] * wp[ic];"
            epilogue = self.epilogue_f32("acc", "oc", "yp[oc]")
        group_in = f" + gi * {cg}" if g > 1 else ""
        taps = for_loop("ky", "ky_lo", "ky_hi", [
            f"const {t}* const xrow = xb + ({pos('iy0', 'ky', p.dilation[0])}) * {w * c}{group_in};",
            for_loop("kx", "kx_lo", "kx_hi", [
                f"const {t}* const xp = xrow + ({pos('ix0', 'kx', p.dilation[1])}) * {c};",
                f"const {t}* const wp = wo + (ky * {kw} + kx) * {cg};",
                for_loop("ic", 0, cg, mac)])])
        per_channel = [f"const {t}* const wo = {wts} + oc * {kh * kw * cg};", acc_decl, taps, epilogue]
        return _channel_loops(g, og, n_out, per_channel)

    # --- int16 x int8 --------------------------------------------------------------------------------------

    def int16(self) -> KernelCode:
        """conv2d (with groups) and depthwise_conv2d on int16 activations: TFLM's loops, int64 accumulators."""
        ctx, p = self.ctx, self.p
        _, _, w, c = p.input_shape
        n_out = p.output_shape[3]
        kh, kw = p.kernel
        wts = ctx.inputs[1]
        mult, shift = self.requant_terms("oc")
        bias = f"acc += (int64_t){ctx.inputs[2]}[oc];" if p.has_bias else ""
        consts = ""
        if self.uniform:
            consts = (f"const int32_t output_multiplier = {p.multiplier[0]};\n"
                      f"const int32_t output_shift = {p.shift[0]};\n")
        store = requant_int16_stmts(ctx, p.rounding, p.acc_bits, "acc", mult, shift, p.output_zero_point,
                                    int(p.act_min), int(p.act_max), "yp[oc]")
        xrow = f"const int16_t* const xrow = xb + ({pos('iy0', 'ky', p.dilation[0])}) * {w * c}"
        xp = f"const int16_t* const xp = xrow + ({pos('ix0', 'kx', p.dilation[1])}) * {c};"
        if p.op == "depthwise_conv2d":
            m = p.depth_multiplier
            inner = lines(
                for_loop("oc", 0, n_out, "sums[oc] = 0;"),
                for_loop("ky", "ky_lo", "ky_hi", [xrow + ";", for_loop("kx", "kx_lo", "kx_hi", [
                    xp, f"const int8_t* const wp = {wts} + (ky * {kw} + kx) * {n_out};",
                    for_loop("oc", 0, n_out, f"sums[oc] += (int64_t)((int32_t)xp[oc / {m}] * (int32_t)wp[oc]);")])]),
                for_loop("oc", 0, n_out, ["int64_t acc = sums[oc];", bias, store]))
            body = (consts + f"/* int64 accumulators of the {n_out} output channels of one pixel. */\n"
                    f"int64_t* const sums = (int64_t*)(void*){ctx.scratch};\n"
                    + self.pixel_loops(inner) + "\nreturn 0;")
            return self.finish(body, 8 * n_out)
        g = p.groups
        cg, og = c // g, n_out // g
        group_in = f" + (oc / {og}) * {cg}" if g > 1 else ""
        # Helium: a tap's channels by VMLALDAVA, 8 MACs an instruction, exact in int64 (the vocabulary's helper)
        mac = (f"acc = {ctx.isa.dot_s16s8('acc', 'xp', 'wp', cg)};" if ctx.isa.mve else
               for_loop("ic", 0, cg, "acc += (int64_t)((int32_t)xp[ic] * (int32_t)wp[ic]);"))
        inner = for_loop("oc", 0, n_out, [
            f"const int8_t* const wo = {wts} + oc * {kh * kw * cg};",
            "int64_t acc = 0;",
            for_loop("ky", "ky_lo", "ky_hi", [xrow + f"{group_in};", for_loop("kx", "kx_lo", "kx_hi", [
                xp, f"const int8_t* const wp = wo + (ky * {kw} + kx) * {cg};", mac])]),
            bias, store])
        return self.finish(consts + self.pixel_loops(inner) + "\nreturn 0;")

    # --- depthwise_conv2d ----------------------------------------------------------------------------------

    def depthwise(self) -> KernelCode:
        ctx, p = self.ctx, self.p
        _, _, w, c = p.input_shape
        n_out = p.output_shape[3]
        kw = p.kernel[1]
        m = p.depth_multiplier
        wts = ctx.inputs[1]
        t = _T[p.dtype]
        if p.dtype == "int8":
            acc_t, zero = "int32_t", "0"
            xv = "(int32_t)xp[ic] + input_offset"
            wv = "(int32_t)wp"
            epilogue = self.epilogue_int8("v", "oc", "yp[oc]")
            comment = self.params_int8() + accumulator_bound(ctx, p) + "\n"
        else:
            acc_t, zero = "float", "0.0f"
            xv, wv = "xp[ic]", "wp"
            epilogue = self.epilogue_f32("v", "oc", "yp[oc]")
            comment = self.params_f32()
        if m == 1:
            mac = for_loop("ic", 0, c, f"acc[ic] += ({xv}) * {wv}[ic];")
        else:
            mac = for_loop("ic", 0, c, [f"const {acc_t} xv = {xv};",
                                        for_loop("mi", 0, m, f"acc[ic * {m} + mi] += xv * {wv}[ic * {m} + mi];")])
        inner = lines(
            for_loop("oc", 0, n_out, f"acc[oc] = {zero};"),
            for_loop("ky", "ky_lo", "ky_hi", [
                f"const {t}* const xrow = xb + ({pos('iy0', 'ky', p.dilation[0])}) * {w * c};",
                for_loop("kx", "kx_lo", "kx_hi", [
                    f"const {t}* const xp = xrow + ({pos('ix0', 'kx', p.dilation[1])}) * {c};",
                    f"const {t}* const wp = {wts} + (ky * {kw} + kx) * {n_out};", mac])]),
            for_loop("oc", 0, n_out, [f"{acc_t} v = acc[oc];", epilogue]))
        body = (comment + f"/* Accumulators of the {n_out} output channels of one pixel. */\n"
                f"{acc_t}* const acc = ({acc_t}*)(void*){ctx.scratch};\n"
                + self.pixel_loops(inner) + "\nreturn 0;")
        return self.finish(body, 4 * n_out)

    # --- int8 fast path: weight sums folded into a per-channel initial value ---------------------------------
    #
    # With constant weights (and bias), acc = bias + sum_taps (x + input_offset) * w splits into
    # sum_taps x * w + (bias + input_offset * sum_taps w). When the whole window is inside the input (the
    # interior), the second term is one compile-time constant per output channel (`acc_init`), so the inner
    # loop is a plain int8 dot product, unrolled by its compile-time length. Windows that clip at the padded
    # borders count only their in-bounds taps: there the original form (the input offset inside the product,
    # bias first) is used unchanged. Both compute the same integer, so the output bits do not depend on the
    # path. No int32 overflow: the interior partial sums are bounded by 128 * sum|w| and `acc_init` by
    # |bias| + 128 * sum|w| (both checked by `int8_stage`, else the generic kernel is used), and the final
    # sum + acc_init is the true accumulator, bounded by `accumulator_bound`.

    def fast_int8(self) -> KernelCode | None:
        ctx, p = self.ctx, self.p
        init = int8_stage(ctx, p).init
        if init is None:
            return None
        bound = accumulator_bound(ctx, p)  # raises when the accumulator itself could overflow
        init_tab = ctx.table("int32_t", np.asarray(init, np.int64), "acc_init")
        ay, ax = self.ay, self.ax
        unrolled = self.point.get("taps") == "unrolled"
        multi = p.op == "depthwise_conv2d" and p.depth_multiplier > 1 and bool(self.point["m_regs"])
        if p.op == "conv2d":
            fast = self.conv2d_fast_inner(init_tab)
        elif multi:
            fast = self.depthwise_multi_inner(init_tab, unrolled)
        else:
            fast = self.depthwise_fast_inner(init_tab, unrolled)
        kh, kw = p.kernel
        conds = []
        for lo_name, hi_name, k, a in (("ky_lo", "ky_hi", kh, ay), ("kx_lo", "kx_hi", kw, ax)):
            if a.clips_low:
                conds.append(f"{lo_name} == 0")
            if a.clips_high:
                conds.append(f"{hi_name} == {k}")
        if conds:
            if p.op == "conv2d":
                border = self.conv2d_inner()
            else:
                border = self.depthwise_multi_inner(None) if multi else self.depthwise_border_inner()
            inner = (block(f"if ({' && '.join(conds)})", ["/* interior: the whole window is inside the input */",
                                                           fast])
                     + " else " + block("", ["/* border: only the in-bounds taps count */", border]))
        else:  # no window ever clips: the tap ranges and the input offset are not needed
            inner = lines("(void)ky_lo;", "(void)ky_hi;", "(void)kx_lo;", "(void)kx_hi;", fast)
        note = ("/* Interior windows: acc = sum x * w + acc_init[oc], acc_init = bias + input_offset * sum w "
                "(compile time). */\n")
        unused = "" if conds else "(void)input_offset;\n"
        return self.finish(self.params_int8() + unused + bound + "\n" + note + self.pixel_loops(inner)
                           + "\nreturn 0;")

    def conv2d_fast_inner(self, init_tab: str) -> str:
        p = self.p
        _, _, w, c = p.input_shape
        n_out = p.output_shape[3]
        kh, kw = p.kernel
        dh, dw = p.dilation
        g = p.groups
        cg, og = c // g, n_out // g
        wts = self.ctx.inputs[1]
        group_in = f" + gi * {cg}" if g > 1 else ""
        merged = g == 1 and dw == 1  # one window row: kw * c contiguous values in the input and the weights

        def row(ky: str) -> list[str]:
            xr = f"xw + {ky} * {dh * w * c}{group_in}" if ky != "0" else f"xw{group_in}"
            wr = f"wo + {ky} * {kw * cg}" if ky != "0" else "wo"
            out = [f"const int8_t* const xr = {xr};", f"const int8_t* const wr = {wr};"]
            if merged:
                out.append(dot_run("acc", "xr", "wr", kw * c))
            else:
                for kx in range(kw):
                    out.append(dot_run("acc", f"(xr + {kx * dw * c})", f"(wr + {kx * cg})", cg))
            return out

        per_channel = [f"const int8_t* const wo = {wts} + oc * {kh * kw * cg};", "int32_t acc = 0;",
                       block("", row("0")) if kh == 1 else for_loop("ky", 0, kh, row("ky")),
                       f"acc += {init_tab}[oc];"]
        per_channel.append(self.epilogue_int8("acc", "oc", "yp[oc]", add_bias=False))
        return self._window_head() + _channel_loops(g, og, n_out, per_channel)

    def _depthwise_dims(self) -> tuple[int, int, int, int, int, int, int, int, str]:
        """What the depthwise emitters read of the layer: input width and channels, output channels, kernel
        height and width, dilations, depth multiplier, and the weights' C name."""
        p = self.p
        _, _, w, c = p.input_shape
        return (w, c, p.output_shape[3], *p.kernel, *p.dilation, p.depth_multiplier, self.ctx.inputs[1])

    def _window_head(self) -> str:
        """`xw`: the first input value of the window at (iy0, ix0), the interior windows' base."""
        _, _, w, c = self.p.input_shape
        return f"const int8_t* const xw = xb + (iy0 * {w} + ix0) * {c};\n"

    def depthwise_fast_inner(self, init_tab: str, unrolled: bool) -> str:
        w, c, n_out, kh, kw, dh, dw, m, wts = self._depthwise_dims()
        ic = "oc" if m == 1 else f"oc / {m}"
        out = [f"const int8_t* const xc = xw + {ic};", f"const int8_t* const wc = {wts} + oc;", "int32_t acc = 0;"]
        if unrolled:
            offs = [((ky * dh * w + kx * dw) * c, (ky * kw + kx) * n_out) for ky in range(kh) for kx in range(kw)]
            out.append(dot_offsets("acc", "xc", "wc", offs))
        else:
            out.append(for_loop("ky", 0, kh, for_loop("kx", 0, kw, (
                f"acc += (int32_t)xc[(ky * {dh * w} + kx * {dw}) * {c}] * wc[(ky * {kw} + kx) * {n_out}];"))))
        out.append(f"acc += {init_tab}[oc];")
        out.append(self.epilogue_int8("acc", "oc", "yp[oc]", add_bias=False))
        return self._window_head() + for_loop("oc", 0, n_out, out)

    def depthwise_border_inner(self) -> str:
        """Per output channel over the in-bounds taps, the input offset in the product (TFLite's form)."""
        w, c, n_out, _, kw, dh, dw, m, wts = self._depthwise_dims()
        ic = "oc" if m == 1 else f"oc / {m}"
        epilogue = self.epilogue_int8("acc", "oc", "yp[oc]")
        return for_loop("oc", 0, n_out, [
            f"const int8_t* const xc = xb + {ic};", f"const int8_t* const wc = {wts} + oc;", "int32_t acc = 0;",
            for_loop("ky", "ky_lo", "ky_hi", [
                f"const int8_t* const xr = xc + ({pos('iy0', 'ky', dh)}) * {w * c};",
                f"const int8_t* const wr = wc + ky * {kw * n_out};",
                for_loop("kx", "kx_lo", "kx_hi",
                         f"acc += ((int32_t)xr[({pos('ix0', 'kx', dw)}) * {c}] + input_offset) * "
                         f"wr[kx * {n_out}];")]),
            epilogue])

    def depthwise_multi_inner(self, init_tab: str | None, unrolled: bool = False) -> str:
        """depth_multiplier m > 1: per input channel, each tap's input value is loaded once and multiplied into
        m local accumulators (output channels ic * m .. ic * m + m - 1, contiguous in the weights). With
        `init_tab` the whole window (interior: acc = sum x * w + acc_init; its taps written out when
        `unrolled`); without it the in-bounds taps of a border window in TFLite's form ((x + input_offset) * w,
        then the bias)."""
        w, c, n_out, kh, kw, dh, dw, m, wts = self._depthwise_dims()
        accs = [f"acc{j}" for j in range(m)]

        def tap(xexpr: str, wexpr: str) -> str:
            return block("", [f"const int32_t xv = {xexpr};", f"const int8_t* const wt = {wexpr};",
                              *(f"{a} += xv * wt[{j}];" for j, a in enumerate(accs))])

        out = [f"const int8_t* const wc = {wts} + ic * {m};"]
        out += [f"int32_t {a} = 0;" for a in accs]
        if init_tab is not None:
            out.insert(0, "const int8_t* const xc = xw + ic;")
            if unrolled:
                out += [tap(f"(int32_t)xc[{(ky * dh * w + kx * dw) * c}]", f"wc + {(ky * kw + kx) * n_out}")
                        for ky in range(kh) for kx in range(kw)]
            else:
                out.append(for_loop("ky", 0, kh, for_loop("kx", 0, kw, tap(
                    f"(int32_t)xc[(ky * {dh * w} + kx * {dw}) * {c}]", f"wc + (ky * {kw} + kx) * {n_out}"))))
            head = self._window_head()
        else:
            out.insert(0, "const int8_t* const xc = xb + ic;")
            out.append(for_loop("ky", "ky_lo", "ky_hi", [
                f"const int8_t* const xr = xc + ({pos('iy0', 'ky', dh)}) * {w * c};",
                for_loop("kx", "kx_lo", "kx_hi", tap(f"(int32_t)xr[({pos('ix0', 'kx', dw)}) * {c}] + input_offset",
                                                     f"wc + (ky * {kw} + kx) * {n_out}"))]))
            head = ""
        for j, a in enumerate(accs):
            epi = self.epilogue_int8(a, "oc", "yp[oc]", add_bias=init_tab is None)
            init = f"{a} += {init_tab}[oc];" if init_tab is not None else ""
            out.append(block("", [f"const int32_t oc = ic * {m} + {j};", init, epi]))
        return head + for_loop("ic", 0, c, out)


def _channel_loops(g: int, og: int, n_out: int, per_channel: list[str]) -> str:
    """`per_channel` for every output channel `oc`: one loop, or groups x channels of a group."""
    if g == 1:
        return for_loop("oc", 0, n_out, per_channel)
    return for_loop("gi", 0, g, for_loop("oj", 0, og, [f"const int32_t oc = gi * {og} + oj;", *per_channel]))
