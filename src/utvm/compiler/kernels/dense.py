"""dense (fully connected): y[b, o] = act(sum_k x[b, k] * w[o, k] + bias[o]); float32 and int8.

int8 is TFLite's integer FullyConnected (per-tensor or per-channel weights): the int32 accumulator of
(x - input_zp) * (w - weight_zp) plus the bias is requantized per output row and clamped. With constant
weights (zero point 0) and bias it has a space (`dense_space`): `algo` "direct" (weight sums folded,
unrolled dot products; no knobs) or "gemm" (utvm.compiler.kernels._gemm), and on Helium (MVE) vocabularies
"mve" (utvm.compiler.kernels._gemm_mve: the row read in place; the default there).

int16 activations with int8 weights ("16x8"): a plain C loop of its own (no schedule space): the same sum
in an int64 accumulator (zero points included, as TFLM's int16 FullyConnected uses them), requantized by the
int64 MultiplyByQuantizedMultiplier for an int64 bias (or none), by the int32 one on the wrapped int32
accumulator for an int32 bias (utvm.compiler.kernels.requant.requant_int16_stmts). On Helium (MVE)
vocabularies, with zero points 0, the row's dot products by VMLALDAVA (`ctx.isa.dot_s16s8`).
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, offset_term, register
from utvm.compiler.kernels._dot import dot_run
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
    pad4,
)
from utvm.compiler.kernels._gemm_mve import mve_cost, mve_default, mve_gemm_kernel, mve_knobs, mve_legal, mve_scratch
from utvm.compiler.kernels.cemit import INT32_MAX, for_loop, lines
from utvm.compiler.kernels.requant import (
    OutputStage,
    acc_bound,
    c_helper,
    operand_terms,
    requant_int16_stmts,
    x_abs_max,
)
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops.dense import DenseParams

_FOLDED_NOTE = """\
/* acc = sum x * w + acc_init[o], acc_init = bias - input_zero_point * sum w (compile time): the same integer
   as TFLite's bias + sum (x - input_zero_point) * w; no partial sum exceeds 128 * sum|w| + |acc_init|. */"""


def int8_stage(ctx: KernelContext, p: DenseParams) -> OutputStage | None:
    """The output stage of an int8 dense with constant weights (zero point 0) and bias, prepared once: the
    accumulator bound (`requant.acc_bound`) and the folded initial accumulator bias - input_zp * sum w per
    output when no partial sum of the folded form (<= 128 * sum|w| + |init|) and no accumulator can leave
    int32 (else None); None when the weights or the bias are not such constants."""
    w_t = ctx.in_tensor(1)
    b_t = ctx.in_tensor(2) if p.has_bias else None
    if p.dtype != "int8" or p.weight_zero_point != 0 or w_t is None or w_t.data is None:
        return None
    if p.has_bias and (b_t is None or b_t.data is None):
        return None
    w64 = w_t.data.astype(np.int64).reshape(p.units, p.k)
    bias = b_t.data.astype(np.int64).reshape(-1) if b_t is not None and b_t.data is not None else 0
    wabs = np.abs(w64).sum(axis=1)
    bound = acc_bound(x_abs_max(p.input_zero_point), wabs, np.abs(bias))
    init = bias + (-p.input_zero_point) * w64.sum(axis=1)
    folds = acc_bound(128, wabs, np.abs(init)) <= INT32_MAX and bound <= INT32_MAX
    q = w_t.quant
    return OutputStage(p.rounding, tuple(int(m) for m in p.multiplier), tuple(int(s) for s in p.shift),
                       p.input_zero_point, p.output_zero_point, int(p.act_min), int(p.act_max), bound,
                       q is not None and q.per_channel and len(q.scale) > 1,
                       tuple(int(v) for v in init) if folds else None)


def _gemm_note(p: DenseParams, stage: OutputStage | None) -> str | None:
    """The accumulator bound comment when int8 dense can run as a GEMM (constant weights with zero point 0,
    constant bias, |acc| < 2^31 for any order of the sum); None when it cannot."""
    if p.op != "dense" or stage is None or stage.bound > INT32_MAX:
        return None
    return (f"/* The int32 accumulator cannot overflow: |acc| <= {x_abs_max(p.input_zero_point)} * (sum |w| of "
            f"each output) + |bias| <= {stage.bound} < 2^31, whatever the order of the sum. */\n")


def dense_space(ctx: KernelContext) -> Space:
    """int8 dense: `algo` direct (weight sums folded, unrolled dot products; no knobs) or gemm (the input row
    widened once into scratch, or word by word where it lies with `widen = inline`; `oc_block` rows per block,
    SIMD where the ISA has it; utvm.compiler.kernels._gemm). The space tells each point's scratch and
    estimated cost (docs/kernels.md §12)."""
    p: DenseParams = ctx.params()
    stage = int8_stage(ctx, p)
    if stage is None or _gemm_note(p, stage) is None:
        return EMPTY_SPACE
    v = ctx.isa
    kq = pad4(p.k) // 4
    shape = GemmShape(Window(1, 1, p.k), p.batch, 1, 1, p.units)
    # Layers of one workload share one GEMM function by default (dense layers carry little compute for their
    # code: a call per layer costs ~2%, each copy of the code ~400 bytes on Cortex-M4). The row is widened
    # where it lies (no scratch) when that is no slower (few blocks of outputs: `gemm_default`).
    if v.simd16:
        default = {"algo": "gemm", **gemm_default(v, kq, p.units, 1, stage, shape), "share": ctx.task_count > 1}
    else:
        default = {"algo": "direct"}
    gemm = gemm_knobs(v, kq, True)
    branches = {"direct": (), "gemm": gemm}
    if v.mve:  # the Helium GEMM (utvm.compiler.kernels._gemm_mve) reads the row in place
        branches["mve"] = (*gemm[:2], *mve_knobs(p.k, True))
        mve = {"algo": "mve", **mve_default(p.k, 1, True)}
        if mve_legal(mve, 1, stage) is None:
            default = mve

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "mve":
            return mve_legal(pt, 1, stage)
        return None if pt["algo"] == "direct" else gemm_legal(pt, 1, stage, v, p.k)

    def scratch(pt: Schedule) -> int:
        if pt["algo"] == "mve":
            return mve_scratch(pt, p.k)
        return 0 if pt["algo"] == "direct" else gemm_scratch(pt, shape.kp)

    def cost(pt: Schedule) -> float:
        if pt["algo"] == "mve":
            return mve_cost(shape, pt)
        if pt["algo"] == "direct":  # an unrolled int8 dot product: two loads and a multiply-accumulate per term
            return float(p.batch * p.units * (3 * p.k + 10))
        return gemm_cost(v, shape, pt, p.k)

    return Space.conditional(Knob("algo", tuple(branches), "scalar dot products, the GEMM or the Helium GEMM"
                                  if v.mve else "scalar dot products or the GEMM"),
                             branches, default=default, legal=legal, legacy=LEGACY, added={"widen": "copy"},
                             scratch=scratch, cost=cost,
                             memory_knobs=(*GEMM_MEMORY_KNOBS, *(("cols",) if v.mve else ())))


def _dense_gemm(ctx: KernelContext, p: DenseParams) -> KernelCode:
    stage = int8_stage(ctx, p)
    note = _gemm_note(p, stage)
    w_t = ctx.in_tensor(1)
    assert stage is not None and note is not None and w_t is not None and w_t.data is not None
    mve = ctx.schedule.get("algo") == "mve"
    # the MVE GEMM folds the bias into its initial accumulators (no reference to the bias array)
    layer = GemmLayer(GemmShape(Window(1, 1, p.k), p.batch, 1, 1, p.units), stage, w_t.data.reshape(p.units, p.k),
                      ctx.inputs[0], ctx.outputs[0], ctx.inputs[2] if p.has_bias and not mve else None, note)
    if mve:
        b_t = ctx.in_tensor(2) if p.has_bias else None
        return mve_gemm_kernel(ctx, ctx.schedule, layer, b_t.data if b_t is not None else None)
    return gemm_kernel(ctx, ctx.schedule, layer)


@register("dense", space=dense_space)
def dense(ctx: KernelContext) -> KernelCode:
    p = ctx.params()
    if ctx.schedule.get("algo") in ("gemm", "mve"):
        return _dense_gemm(ctx, p)
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    if p.dtype == "float32":
        bias = ctx.inputs[2] if p.has_bias else None
        clamp = ctx.helper("clamp_f32")
        lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
        body = for_loop("b", 0, p.batch, for_loop("o", 0, p.units, [
            "float acc = 0.0f;",
            for_loop("k", 0, p.k, f"acc += {x}[b * {p.k} + k] * {w}[o * {p.k} + k];"),
            f"{y}[b * {p.units} + o] = {clamp}(acc{f' + {bias}[o]' if bias else ''}, {lo}, {hi});"]))
        return KernelCode(body=body + "\nreturn 0;")
    if p.dtype == "int16":
        return _dense_int16(ctx, p)
    if p.dtype != "int8":
        raise ctx.error(f"no dense kernel for dtype {p.dtype}")
    rq = c_helper(ctx, p.rounding, p.multiplier)
    clamp = ctx.helper("clamp_i32")
    mult, shift = operand_terms(ctx, p.multiplier, p.shift, "o")
    store = [f"acc = {rq}(acc, {mult}, {shift}){offset_term(p.output_zero_point)};",
             f"{y}[b * {p.units} + o] = (int8_t){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});"]
    stage = int8_stage(ctx, p)
    if stage is not None and stage.init is not None:
        init_tab = ctx.table("int32_t", np.asarray(stage.init, np.int64), "acc_init")
        body = for_loop("b", 0, p.batch, [f"const int8_t* const row = {x} + b * {p.k};", for_loop("o", 0, p.units, [
            f"const int8_t* const wrow = {w} + o * {p.k};", "int32_t acc = 0;",
            dot_run("acc", "row", "wrow", p.k), f"acc += {init_tab}[o];", *store])])
        return KernelCode(body=lines(_FOLDED_NOTE, body, "return 0;"))
    bias = ctx.inputs[2] if p.has_bias else None  # emitted only where the generic loop reads it
    x_off, w_off = offset_term(-p.input_zero_point), offset_term(-p.weight_zero_point)
    body = for_loop("b", 0, p.batch, [f"const int8_t* row = {x} + b * {p.k};", for_loop("o", 0, p.units, [
        f"const int8_t* wrow = {w} + o * {p.k};", f"int32_t acc = {f'{bias}[o]' if bias else '0'};",
        for_loop("k", 0, p.k, f"acc += ((int32_t)row[k]{x_off}) * ((int32_t)wrow[k]{w_off});"), *store])])
    return KernelCode(body=body + "\nreturn 0;")


def _dense_int16(ctx: KernelContext, p: DenseParams) -> KernelCode:
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    mult, shift = operand_terms(ctx, p.multiplier, p.shift, "o")
    bias = f"acc += (int64_t){ctx.inputs[2]}[o];" if p.has_bias else ""
    x_off, w_off = offset_term(-p.input_zero_point), offset_term(-p.weight_zero_point)
    store = requant_int16_stmts(ctx, p.rounding, p.acc_bits, "acc", mult, shift, p.output_zero_point,
                                int(p.act_min), int(p.act_max), f"{y}[b * {p.units} + o]")
    if ctx.isa.mve and not x_off and not w_off:  # Helium, zero points 0: 8 MACs per VMLALDAVA, exact in int64
        mac = f"acc = {ctx.isa.dot_s16s8('acc', 'row', 'wrow', p.k)};"
    else:
        mac = for_loop("k", 0, p.k, f"acc += (int64_t)(((int32_t)row[k]{x_off}) * ((int32_t)wrow[k]{w_off}));")
    body = for_loop("b", 0, p.batch, [f"const int16_t* const row = {x} + b * {p.k};", for_loop("o", 0, p.units, [
        f"const int8_t* const wrow = {w} + o * {p.k};", "int64_t acc = 0;", mac, bias, store])])
    return KernelCode(body=body + "\nreturn 0;")
