"""Binary elementwise kernels: add, sub, mul with numpy broadcasting and a fused activation.

int16 takes int8's per-element form (left shift 15, the generic requantization helper); int32 wraps in
uint32 arithmetic and clamps only where the activation asks (see utvm.ops.elementwise).

float32: y = clamp(a op b, act_min, act_max) (TFLite clamps even without an activation: to +-FLT_MAX).
int8: TFLite's integer add/sub (inputs rescaled after a left shift of 20) and mul; see utvm.ops.elementwise.

int8 add/sub rescale each input in 32-bit arithmetic (`_rescale_input`): with L = left_shift, va = a - zp_a
(|va| <= 255) and a multiplier m that is never INT32_MIN, both roundings of MultiplyByQuantizedMultiplier
of va * 2^L are floor((va * m + 2^(D-1)) / 2^D) (then, for double rounding, RoundingDivideByPOT by -shift)
with D = 31 - L (double) or 31 - shift - L (single), because va * m * 2^L + 2^(30...) shares the factor 2^L
with 2^31. Writing m = mh * 2^D + ml (0 <= ml < 2^D) gives va * mh + ((va * ml + 2^(D-1)) >> D) exactly,
and every term fits int32 (checked here from the actual zero point and multiplier; otherwise the generic
64-bit helper is used). The output requantization and mul use the `requant_pm` helper (the same function
for multipliers != INT32_MIN).

That per-element form is `algo = direct` of the int8 space (`binary_space`); `table` reads each input's
rescale from a 256-entry table and requantizes once (`requant`: c | fast | dbl, `unroll`), `lut` maps the
other input through one int8 table when one input is a constant single value. See "int8 through tables"
below for why each is exact.
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import (
    KernelCode,
    KernelContext,
    broadcast_loops,
    c_literal,
    multipliers_pm,
    offset_term,
    register,
)
from utvm.compiler.kernels._gemm import Requant
from utvm.compiler.kernels.depthwise import clamp_store, dbl_requant_helper, local_helper
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space
from utvm.ops import _quant
from utvm.ops import elementwise as ew_op
from utvm.ops.elementwise import ElementwiseParams

_C_OPS = {"add": "+", "sub": "-", "mul": "*"}
INT32_MAX = (1 << 31) - 1


def rdbpot_const_stmts(dst: str, src: str, exponent: int) -> str:
    """C declaring int32 `dst` = gemmlowp RoundingDivideByPOT(`src`, exponent) for a constant exponent in
    [0, 31] (the constants of tvm_rdbpot folded; `src` must be a side-effect-free int32 expression)."""
    if exponent == 0:
        return f"const int32_t {dst} = {src};"
    mask = (1 << exponent) - 1
    return (f"const int32_t {dst} = ({src} >> {exponent}) + "
            f"((({src}) & {mask}) > ({mask >> 1} + ({src} < 0 ? 1 : 0)) ? 1 : 0);")


def rescale_input_stmts(dst: str, va: str, zero_point: int, left_shift: int, multiplier: int, shift: int,
                        rounding: str) -> str | None:
    """32-bit C for `dst` = requant(va << left_shift, multiplier, shift) where va = x - zero_point of an int8
    x (see the module docstring), or None when the 32-bit form does not provably fit."""
    if shift > 0 or multiplier < 0 or multiplier >= 1 << 31 or not 0 <= left_shift <= 30:
        return None
    d = 31 - left_shift if rounding == "double" else 31 - shift - left_shift
    if not 1 <= d <= 30:
        return None
    va_max = max(abs(-128 - zero_point), abs(127 - zero_point))
    if (va_max << left_shift) > INT32_MAX:
        return None  # the original operand itself would not be an int32
    mh, ml = multiplier >> d, multiplier & ((1 << d) - 1)
    low_max = va_max * ml + (1 << (d - 1))
    if low_max > INT32_MAX or va_max * mh + (low_max >> d) + 1 > INT32_MAX:
        return None
    high = f"{va} * {mh}" if mh != 1 else va
    low = f"(({va} * {ml} + {1 << (d - 1)}) >> {d})"  # ml == 0: 2^(d-1) >> d == 0
    expr = " + ".join(t for t, keep in ((high, mh != 0), (low, ml != 0)) if keep) or "0"
    if rounding == "double" and shift < 0:
        return f"const int32_t {dst}_h = {expr};\n" + rdbpot_const_stmts(dst, f"{dst}_h", -shift)
    return f"const int32_t {dst} = {expr};"


@register("add", "sub", "mul", space=lambda ctx: binary_space(ctx))
def binary(ctx: KernelContext) -> KernelCode:
    algo = ctx.schedule.get("algo", "direct")
    if algo == "table":
        return _table_kernel(ctx, ctx.params(), ctx.schedule)
    if algo == "lut":
        return _lut_kernel(ctx, ctx.params(), ctx.schedule)
    return direct(ctx)


def direct(ctx: KernelContext) -> KernelCode:
    """The per-element kernels (float32 and int8): int8 add/sub rescale both inputs in 32-bit C
    (`rescale_input_stmts`), then requantize their sum."""
    p = ctx.params()
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    op = _C_OPS[ctx.node.op]
    if p.dtype == "float32":
        lo, hi = c_literal(p.act_min, "float32"), c_literal(p.act_max, "float32")
        clamp = ctx.helper("clamp_f32")
        body = f"{y}[io] = {clamp}({a}[ia] {op} {b}[ib], {lo}, {hi});"
    elif p.dtype == "int32":
        wrap = {"add": "(uint32_t){a}[ia] + (uint32_t){b}[ib]", "sub": "(uint32_t){a}[ia] - (uint32_t){b}[ib]",
                "mul": "(uint32_t){a}[ia] * (uint32_t){b}[ib]"}[ctx.node.op].format(a=a, b=b)
        body = f"const int32_t v = (int32_t)({wrap});\n"
        if (int(p.act_min), int(p.act_max)) == (-(1 << 31), INT32_MAX):
            body += f"{y}[io] = v;"
        else:
            clamp = ctx.helper("clamp_i32")
            body += (f"{y}[io] = {clamp}(v, {c_literal(p.act_min, 'int32')}, "
                     f"{c_literal(p.act_max, 'int32')});")
    elif p.dtype in ("int8", "int16"):
        ctype = "int8_t" if p.dtype == "int8" else "int16_t"
        clamp = ctx.helper("clamp_i32")
        if multipliers_pm([p.output_multiplier]):
            rq_out = ctx.helper("requant_pm", p.rounding)
        else:
            rq_out = ctx.helper("requant", p.rounding)
        load = (f"const int32_t va = (int32_t){a}[ia]{offset_term(-p.a_zero_point)};\n"
                f"const int32_t vb = (int32_t){b}[ib]{offset_term(-p.b_zero_point)};\n")
        if ctx.node.op == "mul":
            raw = "va * vb"
        else:
            raw = "sa + sb" if ctx.node.op == "add" else "sa - sb"
            for dst, var, zp, m, e in (("sa", "va", p.a_zero_point, p.a_multiplier, p.a_shift),
                                       ("sb", "vb", p.b_zero_point, p.b_multiplier, p.b_shift)):
                fast = (rescale_input_stmts(dst, var, zp, p.left_shift, m, e, p.rounding)
                        if p.dtype == "int8" else None)
                if fast is None:
                    rq = ctx.helper("requant", p.rounding)
                    fast = f"const int32_t {dst} = {rq}({var} * {1 << p.left_shift}, {m}, {e});"
                load += fast + "\n"
        body = (load + f"const int32_t acc = {rq_out}({raw}, {p.output_multiplier}, {p.output_shift})"
                f"{offset_term(p.output_zero_point)};\n"
                f"{y}[io] = ({ctype}){clamp}(acc, {int(p.act_min)}, {int(p.act_max)});")
    else:
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    loops = broadcast_loops(p.output_shape, [p.a_shape, p.b_shape], body, ["ia", "ib"])
    # An input with the output's shape is read at index io only, just before out[io] is written.
    inplace = tuple(i for i, s in enumerate((p.a_shape, p.b_shape)) if tuple(s) == tuple(p.output_shape))
    return KernelCode(body=loops + "\nreturn 0;", inplace=inplace)


# --- int8 through tables ------------------------------------------------------------------------------------
#
# int8 add/sub: each input's rescale a' = MBQM((a - zp_a) << 20, m_a, e_a) is a function of one int8 value,
# so a 256-entry int32 table per input (computed at compile time by utvm.ops' own fixed-point code, indexed
# by the input's byte) replaces it exactly (docs/kernels.md §7); sub stores -b'. Only the output
# requantization MBQM(a' +/- b', m_o, e_o) runs per element. int8 mul: the tables hold a - zp_a and
# b - zp_b (TFLite's int32 product (a - zp_a) * (b - zp_b) needs no table, but the lookups are as cheap as
# the subtractions and carry the doubling below for free).
# Requantization (`requant`): "c" / "fast" are _gemm.Requant's exact forms; "dbl" (DSP, double rounding) stores
# 2 * a' (add/sub) or 2 * (a - zp_a) (mul) and computes SaturatingRoundingDoublingHighMul(x, m) as
# SMMULR(2 * x, m) (utvm.compiler.kernels.depthwise.dbl_requant_helper, the output zero point folded in).
# No int32 overflow: the sum (product) of the largest table magnitudes is checked at compile time to stay
# below 2^31 (2^30 when doubled); otherwise the point is not legal.
# `algo = lut`, when one input is a constant holding a single value (a scalar, or broadcast from one element):
# the output is a function of the other input's byte only, so one 256-entry int8 table computed by the op's
# reference replaces everything (bit-exact by construction).

_INT8_ALL = np.arange(-128, 128, dtype=np.int64)


def _by_byte(values: np.ndarray) -> np.ndarray:
    """Values for the int8 inputs -128..127 (ascending) reordered to be indexed by the input's byte."""
    out = np.empty(256, dtype=values.dtype)
    out[_INT8_ALL & 0xFF] = values
    return out


def _tables(p: ElementwiseParams, scale: int) -> tuple[np.ndarray, np.ndarray]:
    """(table of a, table of b) indexed by byte: the rescaled inputs (add/sub, b negated for sub) or the
    offset inputs (mul), times `scale`."""
    va, vb = _INT8_ALL - p.a_zero_point, _INT8_ALL - p.b_zero_point
    if p.op == "mul":
        ta, tb = va, vb
    else:
        mbqm = _quant.multiply_by_quantized_multiplier
        ta = mbqm(va << p.left_shift, p.a_multiplier, p.a_shift, p.rounding)
        tb = mbqm(vb << p.left_shift, p.b_multiplier, p.b_shift, p.rounding)
        if p.op == "sub":
            tb = -tb
    # mul: the doubling goes on one factor only
    return _by_byte(ta * scale), _by_byte(tb * (1 if p.op == "mul" else scale))


def _raw_bound(p: ElementwiseParams) -> int:
    """The largest |a' +/- b'| (add/sub) or |(a - zp_a) * (b - zp_b)| (mul) over all int8 inputs."""
    ta, tb = _tables(p, 1)
    if p.op == "mul":
        return int(np.abs(ta).max() * np.abs(tb).max())
    return int(np.abs(ta).max() + np.abs(tb).max())


def _single_value(ctx: KernelContext, p: ElementwiseParams) -> int | None:
    """The input (0 or 1) that is a constant holding one value (broadcast to the output), if one is."""
    for i, sh in enumerate((p.a_shape, p.b_shape)):
        t = ctx.in_tensor(i)
        if math.prod(sh) == 1 and t is not None and t.data is not None:
            return i
    return None


def _dbl_reason(ctx: KernelContext, p: ElementwiseParams) -> str | None:
    if not ctx.target.dsp:
        return f"{ctx.target.name} has no SMMULR (DSP extension)"
    if p.rounding != "double":
        return "it implements double rounding only"
    if p.output_shift > -1:
        return "a left or zero output shift (it needs a right shift of at least 1)"
    if p.output_multiplier < 0:
        return "a negative multiplier"
    if 2 * _raw_bound(p) >= 1 << 31:
        return "twice the largest sum does not fit int32"
    return None


def binary_space(ctx: KernelContext) -> Space:
    """int8 add/sub/mul: `algo` direct (per element), table (256-entry input tables + one requantization)
    or lut (one input is a single value: one int8 output table), `requant` and `unroll` for table."""
    p: ElementwiseParams = ctx.params()
    if p.dtype != "int8":
        return EMPTY_SPACE
    table_ok = _raw_bound(p) < 1 << 31
    single = _single_value(ctx, p)
    fast = Requant.fast_reason(p.rounding, [p.output_multiplier], [p.output_shift], ctx.target)
    dbl = _dbl_reason(ctx, p)
    algos = ("direct", "table", "lut")
    requants = ("c", "fast", "dbl") if ctx.target.dsp else ("c", "fast")
    knobs = (Knob("algo", algos, "per element, input tables + one requantization, or one output table"),
             Knob("requant", requants, "output requantization (table): shared helper, asm form, doubled SMMULR"),
             Knob("unroll", (1, 2, 4), "elements per loop iteration (table, same shapes)"))
    off = {"algo": "direct", "requant": "c", "unroll": 1}
    if single is not None:
        default = {"algo": "lut", "requant": "c", "unroll": 1}
    elif table_ok:
        default = {"algo": "table", "requant": "dbl" if dbl is None else ("fast" if fast is None else "c"),
                   "unroll": 4 if ctx.target.is_cortex_m and _flat(p) else 1}
    else:
        default = off

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] in ("direct", "lut"):
            if pt["algo"] == "lut" and single is None:
                return "lut needs an input holding a single value"
            return None if pt["requant"] == "c" and pt["unroll"] == 1 else f"{pt['algo']} has no other knobs"
        if not table_ok:
            return "the sum of the input tables could overflow int32"
        if pt["requant"] == "fast" and fast is not None:
            return f"requant fast: {fast}"
        if pt["requant"] == "dbl" and dbl is not None:
            return f"requant dbl: {dbl}"
        if pt["unroll"] > 1 and not _flat(p):
            return "unroll is for inputs of the output's shape"
        return None

    return Space(knobs, default, legal)


def _flat(p: ElementwiseParams) -> bool:
    out = tuple(p.output_shape)
    return tuple(p.a_shape) == out and tuple(p.b_shape) == out


def _table_kernel(ctx: KernelContext, p: ElementwiseParams, s: Schedule) -> KernelCode:
    dbl = s["requant"] == "dbl"
    ta, tb = _tables(p, 2 if dbl else 1)
    bound = _raw_bound(p) * (2 if dbl else 1)
    assert bound < 1 << 31
    ta_name, tb_name = ctx.table("int32_t", ta, "ta"), ctx.table("int32_t", tb, "tb")
    tab_a, tab_b = "tab_a", "tab_b"
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    lo, hi = int(p.act_min), int(p.act_max)
    dsp = ctx.target.dsp
    if dsp:
        ctx.require_dsp()
    what = "a' - b'" if p.op == "sub" else ("(a - zp_a) * (b - zp_b)" if p.op == "mul" else "a' + b'")
    head = [f"/* {what}{' (doubled)' if dbl else ''} from 256-entry tables; |raw| <= {bound} < 2^31: no int32 "
            "overflow. */"]
    # each table in its own base register (GCC would otherwise address one from the other's, an add more)
    opaque = local_helper(ctx, "TVM_OPAQUE_PTR")
    head += [f"const int32_t* tab_a = {ta_name};", f"const int32_t* tab_b = {tb_name};", f"{opaque}(tab_a);",
             f"{opaque}(tab_b);"]
    if dbl:
        fn = dbl_requant_helper(ctx, p.output_zero_point)
        head.append(f"const int32_t rq_m = {p.output_multiplier};\nconst int32_t rq_n = {-p.output_shift};")
        zp = 0
    else:
        rq = Requant(ctx, s["requant"], p.rounding, [p.output_multiplier], [p.output_shift])
        head.append(rq.setup.rstrip("\n"))
        zp = p.output_zero_point

    def element(ia: str, ib: str, io: str, v: str) -> str:
        combine = "*" if p.op == "mul" else "+"
        lines = [f"int32_t {v} = {tab_a}[(uint8_t){a}[{ia}]] {combine} {tab_b}[(uint8_t){b}[{ib}]];"]
        lines.append(f"{v} = {fn}({v}, rq_m, rq_n);" if dbl else rq.stmt(v, "0"))
        return "\n".join(lines + [clamp_store(v, zp, lo, hi, f"{y}[{io}]", dsp)])

    size = math.prod(p.output_shape)
    if _flat(p):
        u = s["unroll"]
        main = size // u * u
        blk = "\n".join("{\n" + _indent(element(f"i + {j}", f"i + {j}", f"i + {j}", "v")) + "\n}"
                        for j in range(u))
        loop = f"for (int32_t i = 0; i < {main}; i += {u}) {{\n{_indent(blk)}\n}}" if main else ""
        tail = "\n".join("{\n" + _indent(element(str(i), str(i), str(i), "v")) + "\n}" for i in range(main, size))
        body = "\n".join(x for x in (loop, tail) if x)
    else:
        body = broadcast_loops(p.output_shape, [p.a_shape, p.b_shape], element("ia", "ib", "io", "v"), ["ia", "ib"])
    inplace = tuple(i for i, sh in enumerate((p.a_shape, p.b_shape)) if tuple(sh) == tuple(p.output_shape))
    return KernelCode(body="\n".join(h for h in head if h) + "\n" + body + "\nreturn 0;", inplace=inplace)


def _lut_kernel(ctx: KernelContext, p: ElementwiseParams, s: Schedule) -> KernelCode:
    single = _single_value(ctx, p)
    assert single is not None
    other = 1 - single
    t = ctx.in_tensor(single)
    assert t is not None and t.data is not None
    xs = _INT8_ALL.astype(np.int8)
    k = np.full(256, np.asarray(t.data).reshape(-1)[0], np.int8)
    args = (xs, k) if single == 1 else (k, xs)
    lut = _by_byte(np.asarray(ew_op.reference(_flat_params(p), *args)).astype(np.int64).reshape(-1))
    table = ctx.table("int8_t", lut, "lut")
    x, y = ctx.inputs[other], ctx.outputs[0]
    shape = (p.a_shape, p.b_shape)[other]
    body = [f"/* {p.op} with a constant single-valued input: the output is a function of the other input's "
            "byte (the op's reference on every value). */"]
    if tuple(shape) == tuple(p.output_shape):
        body.append(f"for (int32_t i = 0; i < {math.prod(p.output_shape)}; ++i) {{\n"
                    f"  {y}[i] = {table}[(uint8_t){x}[i]];\n}}")
    else:
        body.append(broadcast_loops(p.output_shape, [shape], f"{y}[io] = {table}[(uint8_t){x}[ix]];", ["ix"]))
    inplace = (other,) if tuple(shape) == tuple(p.output_shape) else ()
    return KernelCode(body="\n".join(body) + "\nreturn 0;", inplace=inplace)


def _flat_params(p: ElementwiseParams) -> ElementwiseParams:
    """p for two 256-element vectors (the reference evaluated on every value)."""
    from dataclasses import replace

    return replace(p, a_shape=(256,), b_shape=(256,), output_shape=(256,))


def _indent(text: str, levels: int = 1) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())
