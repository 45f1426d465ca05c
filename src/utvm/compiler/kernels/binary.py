"""C kernels of the binary op family (utvm.ops.binary): add, sub, mul and the other elementwise binary,
comparison, logical, select and add_n ops. One loop nest over the broadcast output per node
(`broadcast_loops`), the element computed as TFLite Micro's reference kernels compute it (see utvm.ops.binary
for the quantized arithmetic).

add, sub, mul (ElementwiseParams; numpy broadcasting and a fused activation):
- float32: y = clamp(a op b, act_min, act_max) (TFLite clamps even without an activation: to +-FLT_MAX).
- int32: wraps in uint32 arithmetic and clamps only where the activation asks.
- int8 / int16: TFLite's integer add/sub (each input rescaled after a left shift of 20; 15 for int16) and
  mul, then the output requantization (the `requant_pm` helper for multipliers != INT32_MIN).
  int8 add/sub rescale each input in 32-bit arithmetic where that provably fits
  (requant.rescale_input_stmts, proof in its docstring; otherwise the 64-bit helper): `_rescale_fast32`.
- int8 has a conditional space (`elementwise_space`): `algo = direct` (the per-element form above, no
  knobs); `table` reads each input's rescale from a 256-entry table and requantizes once (`requant`:
  c | fast | dbl, `unroll`: elements per loop iteration); `lut` maps the other input through one int8 table
  when one input is a constant single value. See "int8 through tables" below for why each is exact. On Helium
  vocabularies (`ctx.isa.mve`) also `mve`: four elements per vector (inputs of the output's shape or one
  element against it), `mve_in` table | arith, `mve_unroll` ("Helium (MVE)" below).

The other ops (BinaryParams): int8 div reads GetReciprocal of the (non-negative) divisor from a 256-entry
table computed at compile time by utvm.ops._quant; everything else runs in int32 C (int64 for int64
tensors). Their input rescales (comparisons, squared_difference, add_n) are the same statement builder as
add/sub's (requant.rescale_stmts) with the 32-bit form not taken (`_rescale_fast32`: taking it for their
int8 inputs is that one line, and changes their code). The output requantization + clamp + store of
add/sub/mul (direct), squared_difference and add_n is one builder (`_requant_store`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from utvm.compiler.kernels import (
    C_TYPES,
    KernelCode,
    KernelContext,
    broadcast_loops,
    c_literal,
    define_helper,
    multipliers_pm,
    offset_term,
    register,
)
from utvm.compiler.kernels.cemit import INT32_MAX, INT32_MIN, block, for_loop, lines
from utvm.compiler.kernels.requant import (
    Requant,
    clamp_store,
    form_reason,
    mve_operands,
    mve_reason,
    mve_requant_helper,
    mve_requant_right_helper,
    rescale_stmts,
)
from utvm.compiler.schedule import EMPTY_SPACE, Knob, Schedule, Space, requant_knob, unroll_knob
from utvm.ops import _quant
from utvm.ops.binary import BINARY, COMPARISONS, BinaryParams, ElementwiseParams, reference

_CMP = {"equal": "==", "not_equal": "!=", "greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<="}
_C_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}

# CountLeadingSignBits of an int32 (31 for 0), portable C.
define_helper("binary_clrsb", """\
static inline int32_t binary_clrsb(int32_t x) {
  const uint32_t u = x < 0 ? ~(uint32_t)x : (uint32_t)x;
  int32_t n = 0;
  while (n < 31 && (u & (0x40000000u >> n)) == 0u) {
    ++n;
  }
  return n;
}""", "binary_clrsb")
# MultiplyByQuantizedMultiplier (double rounding) for any right shift, as TFLM's int32 code computes it past
# 31: the mask (1ll << e) - 1 truncates to -1 and the shift count wraps modulo 32 (needs "gemmlowp").
define_helper("binary_mbqm_wide", """\
static inline int32_t binary_mbqm_wide(int32_t x, int32_t m, int32_t shift) {
  const int32_t left = shift > 0 ? shift : 0;
  const int32_t right = shift > 0 ? 0 : -shift;
  const int32_t hi = tvm_srdhm((int32_t)((uint32_t)x << left), m);
  const int32_t mask = right >= 32 ? -1 : (int32_t)(((int64_t)1 << right) - 1);
  const int32_t remainder = hi & mask;
  const int32_t threshold = (mask >> 1) + (hi < 0 ? 1 : 0);
  return (hi >> (right & 31)) + (remainder > threshold ? 1 : 0);
}""", "binary_mbqm_wide")


# --- statements both kinds of params share ------------------------------------------------------------------

def _rescale_fast32(op: str, dtype: str) -> bool:
    """Whether an input rescale takes the 32-bit form (requant.rescale_input_stmts) where it fits: int8
    add/sub. squared_difference, add_n and the comparisons rescale int8 the same way but keep the helper
    (issue 20 changes no code; taking it for them is `op in ("add", "sub", ...)` here)."""
    return dtype == "int8" and op in ("add", "sub")


def _requant_store(ctx: KernelContext, var: str, raw: str, multiplier: int, shift: int, zero_point: int,
                   rounding: str, ctype: str, lo: int, hi: int, dst: str, pm: bool = False) -> str:
    """C: int32 `var` = MBQM(raw, multiplier, shift) + zero_point (the `requant_pm` helper with `pm`), stored
    at `dst` as (ctype) clamp(var, lo, hi)."""
    clamp = ctx.helper("clamp_i32")
    rq = ctx.helper("requant_pm" if pm else "requant", rounding)
    return (f"const int32_t {var} = {rq}({raw}, {multiplier}, {shift}){offset_term(zero_point)};\n"
            f"{dst} = ({ctype}){clamp}({var}, {int(lo)}, {int(hi)});")


def _float_store(ctx: KernelContext, expr: str, act_min: float, act_max: float, dst: str) -> str:
    """C: `dst` = `expr` clamped to the float activation range."""
    lo, hi = c_literal(act_min, "float32"), c_literal(act_max, "float32")
    return f"{dst} = {ctx.helper('clamp_f32')}({expr}, {lo}, {hi});"


def _int32_clamp(ctx: KernelContext, v: str, act_min: float | int, act_max: float | int) -> str:
    return f"{ctx.helper('clamp_i32')}({v}, {c_literal(act_min, 'int32')}, {c_literal(act_max, 'int32')})"


def _inplace(shapes: tuple[tuple[int, ...], ...], output_shape: tuple[int, ...], data: range) -> tuple[int, ...]:
    """The inputs of `data` an output may overwrite: those of the output's shape (read at index io only,
    just before out[io] is written)."""
    return tuple(i for i in data if tuple(shapes[i]) == tuple(output_shape))


# --- add, sub, mul ------------------------------------------------------------------------------------------

@register("add", "sub", "mul", space=lambda ctx: elementwise_space(ctx))
def elementwise(ctx: KernelContext) -> KernelCode:
    algo = ctx.schedule.get("algo", "direct")
    if algo == "table":
        return _table_kernel(ctx, ctx.params(), ctx.schedule)
    if algo == "lut":
        return _lut_kernel(ctx, ctx.params())
    if algo == "mve":
        return _mve_kernel(ctx, ctx.params(), ctx.schedule)
    return elementwise_direct(ctx)


def elementwise_direct(ctx: KernelContext) -> KernelCode:
    """The per-element add/sub/mul kernels (float32, int32, int8, int16): int8 add/sub rescale both inputs
    in 32-bit C where it fits (`_rescale_fast32`), then requantize their sum."""
    p: ElementwiseParams = ctx.params()
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    op = _C_OPS[ctx.node.op]
    if p.dtype == "float32":
        body = _float_store(ctx, f"{a}[ia] {op} {b}[ib]", p.act_min, p.act_max, f"{y}[io]")
    elif p.dtype == "int32":
        body = f"const int32_t v = (int32_t)((uint32_t){a}[ia] {op} (uint32_t){b}[ib]);\n"
        if (int(p.act_min), int(p.act_max)) == (INT32_MIN, INT32_MAX):
            body += f"{y}[io] = v;"
        else:
            body += f"{y}[io] = {_int32_clamp(ctx, 'v', p.act_min, p.act_max)};"
    elif p.dtype in ("int8", "int16"):
        raw = "va * vb" if ctx.node.op == "mul" else f"sa {op} sb"
        store = _requant_store(ctx, "acc", raw, p.output_multiplier, p.output_shift, p.output_zero_point,
                               p.rounding, C_TYPES[p.dtype], int(p.act_min), int(p.act_max), f"{y}[io]",
                               pm=multipliers_pm([p.output_multiplier]))
        load = [f"const int32_t va = (int32_t){a}[ia]{offset_term(-p.a_zero_point)};",
                f"const int32_t vb = (int32_t){b}[ib]{offset_term(-p.b_zero_point)};"]
        if ctx.node.op != "mul":
            fast32 = _rescale_fast32(p.op, p.dtype)
            load += [rescale_stmts(ctx, dst, var, zp, p.left_shift, m, e, p.rounding, fast32)
                     for dst, var, zp, m, e in (("sa", "va", p.a_zero_point, p.a_multiplier, p.a_shift),
                                                ("sb", "vb", p.b_zero_point, p.b_multiplier, p.b_shift))]
        body = lines(load, store)
    else:
        raise ctx.error(f"no {ctx.node.op} kernel for dtype {p.dtype}")
    loops = broadcast_loops(p.output_shape, [p.a_shape, p.b_shape], body, ["ia", "ib"])
    return KernelCode(body=loops + "\nreturn 0;",
                      inplace=_inplace((p.a_shape, p.b_shape), p.output_shape, range(2)))


# --- int8 add/sub/mul through tables ------------------------------------------------------------------------
#
# int8 add/sub: each input's rescale a' = MBQM((a - zp_a) << 20, m_a, e_a) is a function of one int8 value,
# so a 256-entry int32 table per input (computed at compile time by utvm.ops' own fixed-point code, indexed
# by the input's byte) replaces it exactly (docs/kernels.md §7); sub stores -b'. Only the output
# requantization MBQM(a' +/- b', m_o, e_o) runs per element. int8 mul: the tables hold a - zp_a and
# b - zp_b (TFLite's int32 product (a - zp_a) * (b - zp_b) needs no table, but the lookups are as cheap as
# the subtractions and carry the doubling below for free).
# Requantization (`requant`): requant.Requant's exact forms; "dbl" (DSP, double rounding) stores 2 * a'
# (add/sub) or 2 * (a - zp_a) (mul) and computes SaturatingRoundingDoublingHighMul(x, m) as SMMULR(2 * x, m)
# (requant.dbl_requant_helper, the output zero point folded in).
# No int32 overflow: the sum (product) of the largest table magnitudes is checked at compile time to stay
# below 2^31 (2^30 when doubled); otherwise the point is not legal.
# `algo = lut`, when one input is a constant holding a single value (a scalar, or broadcast from one element):
# the output is a function of the other input's byte only, so one 256-entry int8 table computed by the op's
# reference replaces everything (bit-exact by construction).

_INT8_ALL = np.arange(-128, 128, dtype=np.int64)

ALGO = Knob("algo", ("direct", "table", "lut"), "per element, input tables + one requantization, or one output table")
UNROLL = unroll_knob((1, 2, 4), "elements per loop iteration (table, inputs of the output's shape)")


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
    """The largest |a' +/- b'| (add/sub) or |(a - zp_a) * (b - zp_b)| (mul) over all int8 inputs: the
    accumulator bound of the table kernel."""
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


def _flat(p: ElementwiseParams) -> bool:
    out = tuple(p.output_shape)
    return tuple(p.a_shape) == out and tuple(p.b_shape) == out


def elementwise_space(ctx: KernelContext) -> Space:
    """int8 add/sub/mul: `algo` direct (per element), table (256-entry input tables + one requantization:
    `requant`, `unroll`) or lut (one input is a single value: one int8 output table)."""
    p: ElementwiseParams = ctx.params()
    if p.dtype != "int8":
        return EMPTY_SPACE
    bound = _raw_bound(p)
    table_ok = bound < 1 << 31
    single = _single_value(ctx, p)

    def rq_reason(form: str) -> str | None:
        return form_reason(form, p.rounding, [p.output_multiplier], [p.output_shift], ctx.target, bound)

    if single is not None:
        default: Schedule = {"algo": "lut"}
    elif table_ok:
        default = {"algo": "table", "requant": next(f for f in ("dbl", "fast", "c") if rq_reason(f) is None),
                   "unroll": 4 if ctx.target.is_cortex_m and _flat(p) else 1}
    else:
        default = {"algo": "direct"}

    mve = ctx.isa.mve
    if mve and single is None:
        form = "table" if p.op != "mul" else "arith"
        if mve_binary_reason(p, form) is None:
            default = {"algo": "mve", "mve_in": form, "mve_unroll": 2}

    def legal(pt: Schedule) -> str | None:
        if pt["algo"] == "lut" and single is None:
            return "lut needs an input holding a single value"
        if pt["algo"] == "mve":
            if p.op == "mul" and pt["mve_in"] == "table":
                return "mve_in table: mul's inputs need no rescale (the arith form is the table's x - zp)"
            return mve_binary_reason(p, pt["mve_in"])
        if pt["algo"] != "table":
            return None
        if not table_ok:
            return "the sum of the input tables could overflow int32"
        reason = rq_reason(pt["requant"])
        if reason:
            return f"requant {pt['requant']}: {reason}"
        if pt["unroll"] > 1 and not _flat(p):
            return "unroll is for inputs of the output's shape"
        return None

    branches: dict[str, tuple[Knob, ...]] = {"direct": (), "table": (requant_knob(), UNROLL), "lut": ()}
    if mve:  # Helium vectors: a branch only where the vocabulary has them (other targets' spaces unchanged)
        branches["mve"] = (MVE_IN, MVE_UNROLL)
    return Space.conditional(MVE_ALGO if mve else ALGO, branches, default=default, legal=legal)


def _table_kernel(ctx: KernelContext, p: ElementwiseParams, s: Schedule) -> KernelCode:
    v = ctx.isa
    dbl = s["requant"] == "dbl"
    ta, tb = _tables(p, 2 if dbl else 1)
    bound = _raw_bound(p)
    assert bound * (2 if dbl else 1) < 1 << 31
    ta_name, tb_name = ctx.table("int32_t", ta, "ta"), ctx.table("int32_t", tb, "tb")
    tab_a, tab_b = "tab_a", "tab_b"
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    lo, hi = int(p.act_min), int(p.act_max)
    simd = v.simd16
    if simd:
        v.use_simd()
    what = "a' - b'" if p.op == "sub" else ("(a - zp_a) * (b - zp_b)" if p.op == "mul" else "a' + b'")
    head = [f"/* {what}{' (doubled)' if dbl else ''} from 256-entry tables; |raw| <= {bound * (2 if dbl else 1)} "
            "< 2^31: no int32 overflow. */"]
    # each table in its own base register (GCC would otherwise address one from the other's, an add more)
    opaque = v.local("TVM_OPAQUE_PTR")
    head += [f"const int32_t* tab_a = {ta_name};", f"const int32_t* tab_b = {tb_name};", f"{opaque}(tab_a);",
             f"{opaque}(tab_b);"]
    rq = Requant(ctx, s["requant"], p.rounding, [p.output_multiplier], [p.output_shift],
                 zero_point=p.output_zero_point, bound=bound)
    head.append(rq.setup.rstrip("\n"))
    zp = 0 if rq.folds_zero_point else p.output_zero_point
    sat = v if simd else None  # SSAT #8 with the zero point (the SIMD vocabularies)

    def element(ia: str, ib: str, io: str, val: str) -> str:
        combine = "*" if p.op == "mul" else "+"
        return lines(f"int32_t {val} = {tab_a}[(uint8_t){a}[{ia}]] {combine} {tab_b}[(uint8_t){b}[{ib}]];",
                     rq.stmt(val, "0"), clamp_store(val, zp, lo, hi, f"{y}[{io}]", sat))

    size = math.prod(p.output_shape)
    if _flat(p):
        u = s["unroll"]
        main = size // u * u
        blk = lines(block("", element(f"i + {j}", f"i + {j}", f"i + {j}", "v")) for j in range(u))
        loop = block(f"for (int32_t i = 0; i < {main}; i += {u})", blk) if main else ""
        tail = lines(block("", element(str(i), str(i), str(i), "v")) for i in range(main, size))
        body = lines(loop, tail)
    else:
        body = broadcast_loops(p.output_shape, [p.a_shape, p.b_shape], element("ia", "ib", "io", "v"), ["ia", "ib"])
    return KernelCode(body=lines(head, body, "return 0;"),
                      inplace=_inplace((p.a_shape, p.b_shape), p.output_shape, range(2)))


def _lut_kernel(ctx: KernelContext, p: ElementwiseParams) -> KernelCode:
    single = _single_value(ctx, p)
    assert single is not None
    other = 1 - single
    t = ctx.in_tensor(single)
    assert t is not None and t.data is not None
    xs = _INT8_ALL.astype(np.int8)
    k = np.full(256, np.asarray(t.data).reshape(-1)[0], np.int8)
    args = (xs, k) if single == 1 else (k, xs)
    flat = replace(p, a_shape=(256,), b_shape=(256,), output_shape=(256,))  # the reference on every value
    lut = _by_byte(np.asarray(reference(flat, *args)).astype(np.int64).reshape(-1))
    table = ctx.table("int8_t", lut, "lut")
    x, y = ctx.inputs[other], ctx.outputs[0]
    shape = (p.a_shape, p.b_shape)[other]
    body = [f"/* {p.op} with a constant single-valued input: the output is a function of the other input's "
            "byte (the op's reference on every value). */"]
    if tuple(shape) == tuple(p.output_shape):
        body.append(for_loop("i", 0, math.prod(p.output_shape), f"{y}[i] = {table}[(uint8_t){x}[i]];"))
    else:
        body.append(broadcast_loops(p.output_shape, [shape], f"{y}[io] = {table}[(uint8_t){x}[ix]];", ["ix"]))
    inplace = (other,) if tuple(shape) == tuple(p.output_shape) else ()
    return KernelCode(body=lines(body, "return 0;"), inplace=inplace)


# --- the other binary ops ----------------------------------------------------------------------------------

def _rescale(ctx: KernelContext, p: BinaryParams, dst: str, src: str, i: int) -> str:
    """int32 `dst` = MBQM((src - zp_i) << left_shift, m_i, e_i)."""
    k = i if len(p.multipliers) > 1 else 0
    va = f"((int32_t){src}{offset_term(-p.zero_points[i])})"
    return rescale_stmts(ctx, dst, va, p.zero_points[i], p.left_shift, p.multipliers[k], p.shifts[k], p.rounding,
                         _rescale_fast32(p.op, p.dtype))


def _element(ctx: KernelContext, p: BinaryParams, ins: list[str], y: str) -> str:
    op = p.op
    ctype = C_TYPES[p.out_dtype]
    if op == "select":
        return f"{y} = {ins[0]} ? {ins[1]} : {ins[2]};"
    a, b = ins
    if op in ("maximum", "minimum"):
        rel = ">" if op == "maximum" else "<"
        return f"{y} = ({a} {rel} {b}) ? {a} : {b};"
    if op == "logical_and":
        return f"{y} = (uint8_t)(({a} != 0) && ({b} != 0));"
    if op == "logical_or":
        return f"{y} = (uint8_t)(({a} != 0) || ({b} != 0));"
    if op in COMPARISONS:
        if p.quantized:
            return lines(_rescale(ctx, p, "sa", a, 0), _rescale(ctx, p, "sb", b, 1),
                         f"{y} = (uint8_t)(sa {_CMP[op]} sb);")
        return f"{y} = (uint8_t)({a} {_CMP[op]} {b});"
    if p.dtype == "float32":
        if op == "div":
            return _float_store(ctx, f"{a} {_C_OPS[op]} {b}", p.act_min, p.act_max, y)
        if op == "floor_div":
            return f"{y} = {ctx.libm('floorf')}({a} / {b});"
        if op == "floor_mod":
            return (f"const float vb = {b};\nconst float t = {ctx.libm('fmodf')}({a}, vb);\n"
                    f"{y} = (t != 0.0f && ((vb < 0.0f) != (t < 0.0f))) ? t + vb : t;")
        return f"const float d = {a} - {b};\n{y} = d * d;"
    if p.dtype == "int32":
        if op == "div":
            return (f"const int32_t va = {a};\nconst int32_t vb = {b};\n"
                    "const int32_t q = vb == 0 ? 0 : (vb == -1 ? (int32_t)(0u - (uint32_t)va) : va / vb);\n"
                    f"{y} = {_int32_clamp(ctx, 'q', p.act_min, p.act_max)};")
        return f"const uint32_t d = (uint32_t){a} - (uint32_t){b};\n{y} = (int32_t)(d * d);"
    clamp = ctx.helper("clamp_i32")
    if op == "div":
        inv, rs = _quant.get_reciprocal(np.maximum(np.arange(256, dtype=np.int64), 1), 31)
        t_inv = ctx.table("int32_t", inv, "recip")
        t_rs = ctx.table("int8_t", rs, "recip_shift")
        ctx.file.require("gemmlowp")
        clrsb, wide = ctx.helper("binary_clrsb"), ctx.helper("binary_mbqm_wide")
        za, zb = p.zero_points
        return lines(
            f"int32_t va = (int32_t){a}{offset_term(-za)};",
            f"int32_t vb = (int32_t){b}{offset_term(-zb)};",
            block("if (vb < 0)", ["va = -va;", "vb = -vb;"]),
            f"const int32_t h = {clrsb}(va);",
            f"const int32_t q = tvm_srdhm((int32_t)((uint32_t)va << h), {t_inv}[vb]);",
            f"const int32_t r = {wide}(q, {p.output_multiplier}, {p.output_shift} - {t_rs}[vb] - h)"
            f"{offset_term(p.output_zero_point)};",
            f"{y} = ({ctype}){clamp}(r, {int(p.act_min)}, {int(p.act_max)});")
    # squared_difference int8 / int16
    return lines(_rescale(ctx, p, "sa", a, 0), _rescale(ctx, p, "sb", b, 1), "const int32_t d = sa - sb;",
                 _requant_store(ctx, "r", "d * d", p.output_multiplier, p.output_shift, p.output_zero_point,
                                p.rounding, ctype, int(p.act_min), int(p.act_max), y))


def _add_n(ctx: KernelContext, p: BinaryParams) -> KernelCode:
    n = len(p.shapes)
    size = math.prod(p.output_shape)
    y = ctx.outputs[0]
    if p.dtype == "float32":
        stmts = ["float acc = 0.0f;"] + [f"acc += {ctx.inputs[j]}[i];" for j in range(n)] + [f"{y}[i] = acc;"]
    else:
        init = int(_quant.multiply_by_quantized_multiplier(-p.zero_points[0] << p.left_shift, p.multipliers[0],
                                                           p.shifts[0], p.rounding))
        stmts = [f"uint32_t acc = (uint32_t){c_literal(init, 'int32')};"]
        for j in range(n):
            stmts.append(_rescale(ctx, p, f"s{j}", f"{ctx.inputs[j]}[i]", j))
            stmts.append(f"acc += (uint32_t)s{j};")
        stmts.append(_requant_store(ctx, "r", "(int32_t)acc", p.output_multiplier, p.output_shift,
                                    p.output_zero_point, p.rounding, "int8_t", int(p.act_min), int(p.act_max),
                                    f"{y}[i]"))
    loop = for_loop("i", 0, size, stmts) if size else None
    return KernelCode(body=lines(loop, "return 0;"), inplace=tuple(range(n)))


@register(*BINARY)
def binary_family(ctx: KernelContext) -> KernelCode:
    p: BinaryParams = ctx.params()
    if p.op == "add_n":
        return _add_n(ctx, p)
    names = ["ia", "ib", "ic"][:len(p.shapes)]
    ins = [f"{ctx.inputs[k]}[{names[k]}]" for k in range(len(p.shapes))]
    body = _element(ctx, p, ins, f"{ctx.outputs[0]}[io]")
    loops = broadcast_loops(p.output_shape, p.shapes, body, names)
    pre = None
    if p.op == "floor_div":  # TFLM checks every denominator before computing anything
        nb = math.prod(p.shapes[1])
        pre = for_loop("i", 0, nb, block(f"if ({ctx.inputs[1]}[i] == 0.0f)", "return 1;")) if nb else None
    data = range(1, 3) if p.op == "select" else range(len(p.shapes))
    inplace = _inplace(p.shapes, p.output_shape, data) if p.dtype == p.out_dtype else ()
    return KernelCode(body=lines(pre, loops, "return 0;"), inplace=inplace)


# --- Helium (MVE) --------------------------------------------------------------------------------------------------
# `algo = mve` (vocabularies with `mve`), int8 add/sub/mul whose inputs have the output's shape or hold one element
# (a scalar broadcast): four elements per vector, TFLite's arithmetic lane by lane, the last vector tail-
# predicated (VCTP32: loads read no byte past the tensors, the store writes only real elements).
# `mve_in` (add/sub) says how each input is rescaled to a' = MBQM((a - zp_a) << left_shift, m_a, e_a):
# - "table": the 256-entry int32 table of the table kernel (docs/kernels.md §7; sub stores -b'), read by a
#   gather (VLDRB.U32 widens the four input bytes into indices, VLDRW.S32 gathers the entries): exact by
#   construction, two instructions per input;
# - "arith": (a - zp_a) << left_shift by one VMLAS (a * 2^left_shift + (-zp_a << left_shift), |.| < 2^28) and the
#   vector requantization (requant.mve_requant_helper: exact where requant.mve_reason allows).
# mul multiplies the offset inputs (VADD of -zp, VMUL: |(a - zp_a) * (b - zp_b)| <= 255 * 255). The output
# requantization is the vector one; the sum a' +- b' is checked at compile time to stay inside int32 (the table
# kernel's bound). `mve_unroll`: vectors per loop iteration.

MVE_ALGO = Knob("algo", ("direct", "table", "lut", "mve"),
                "per element, input tables + one requantization, one output table, or Helium vectors")
MVE_IN = Knob("mve_in", ("table", "arith"), "add/sub input rescale: a gathered table entry or vector arithmetic")
MVE_UNROLL = Knob("mve_unroll", (1, 2, 4), "vectors of 4 elements per loop iteration")


def _scalar_input(p: ElementwiseParams) -> int | None:
    """The input (0 or 1) holding one element while the other has the output's shape, if one does."""
    out = tuple(p.output_shape)
    for i, (mine, other) in enumerate(((p.a_shape, p.b_shape), (p.b_shape, p.a_shape))):
        if math.prod(mine) == 1 and tuple(other) == out:
            return i
    return None


def mve_binary_reason(p: ElementwiseParams, form: str) -> str | None:
    """None if the MVE kernel with input form `form` serves this add/sub/mul, else why not."""
    if not _flat(p) and _scalar_input(p) is None:
        return "inputs that broadcast (other than one element against the output's shape)"
    bound = _raw_bound(p)
    if bound >= 1 << 31:
        return "the sum of the rescaled inputs could overflow int32"
    reason = mve_reason(p.rounding, [p.output_multiplier], [p.output_shift], bound, p.output_shift <= -1)
    if reason:
        return f"the output requantization: {reason}"
    if p.op != "mul" and form == "arith":
        for m, e in ((p.a_multiplier, p.a_shift), (p.b_multiplier, p.b_shift)):
            reason = mve_reason(p.rounding, [m], [e], 255 << p.left_shift, e <= -1)
            if reason:
                return f"the input rescale: {reason}"
    return None


def _mve_kernel(ctx: KernelContext, p: ElementwiseParams, s: Schedule) -> KernelCode:
    ctx.isa.use_mve()
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    size = math.prod(p.output_shape)
    form = s["mve_in"]
    scalar = _scalar_input(p) if not _flat(p) else None
    bound = _raw_bound(p)
    right = p.output_shift <= -1
    fn = (mve_requant_right_helper if right else mve_requant_helper)(ctx, p.rounding)
    ops = mve_operands(ctx, [p.output_multiplier], [p.output_shift], right_only=right, hint="rq")
    what = "(a - zp_a) * (b - zp_b)" if p.op == "mul" else ("a' - b'" if p.op == "sub" else "a' + b'")
    head = [f"/* {what}: |raw| <= {bound} < 2^31, no int32 overflow. */",
            f"const int32x4_t act_lo = vdupq_n_s32({int(p.act_min)});",
            f"const int32x4_t act_hi = vdupq_n_s32({int(p.act_max)});"]
    tables: list[str] = []
    if p.op != "mul" and form == "table":
        ta, tb = _tables(p, 1)
        tables = [ctx.table("int32_t", ta, "ta"), ctx.table("int32_t", tb, "tb")]
    rescale = []
    if p.op != "mul" and form == "arith":
        for m, e in ((p.a_multiplier, p.a_shift), (p.b_multiplier, p.b_shift)):
            r = e <= -1
            rescale.append(((mve_requant_right_helper if r else mve_requant_helper)(ctx, p.rounding),
                            mve_operands(ctx, [m], [e], right_only=r, hint="rs")))
        head.append(f"const int32x4_t scale_in = vdupq_n_s32({1 << p.left_shift});")

    def operand(k: int, src: str, idx: str, pred: str | None) -> str:
        """int32x4_t C expression of input k's term (a', +-b', or x - zp) for elements idx .. idx + 3."""
        zp = (p.a_zero_point, p.b_zero_point)[k]
        if tables:
            ld = (f"vldrbq_z_u32((const uint8_t*){src} + {idx}, {pred})" if pred
                  else f"vldrbq_u32((const uint8_t*){src} + {idx})")
            return f"vldrwq_gather_shifted_offset_s32({tables[k]}, {ld})"
        ld = f"vldrbq_z_s32({src} + {idx}, {pred})" if pred else f"vldrbq_s32({src} + {idx})"
        if p.op == "mul":
            return f"vaddq_n_s32({ld}, {-zp})" if zp else ld
        r_fn, r_ops = rescale[k]
        shifted = f"vmlasq_n_s32({ld}, scale_in, {-zp * (1 << p.left_shift)})"
        term = r_ops.call(r_fn, shifted, "0")
        return term if p.op != "sub" or k == 0 else f"vnegq_s32({term})"

    def vec(idx: str, pred: str | None) -> list[str]:
        terms = []
        for k, src in enumerate((a, b)):
            if k == scalar:
                terms.append(f"t{k}")
            else:
                terms.append(operand(k, src, idx, pred))
        combine = "vmulq_s32" if p.op == "mul" else "vaddq_s32"
        out = [f"int32x4_t v = {combine}({terms[0]}, {terms[1]});", f"v = {ops.call(fn, 'v', '0')};"]
        if p.output_zero_point:
            out.append(f"v = vaddq_n_s32(v, {p.output_zero_point});")
        out.append("v = vminq_s32(vmaxq_s32(v, act_lo), act_hi);")
        out.append(f"vstrbq_p_s32({y} + {idx}, v, {pred});" if pred else f"vstrbq_s32({y} + {idx}, v);")
        return out

    if scalar is not None:  # the one-element input's term, once, in every lane
        src = (a, b)[scalar]
        bcast = f"vdupq_n_s32((int32_t){src}[0])" if not tables else f"vdupq_n_u32((uint8_t){src}[0])"
        if tables:
            head.append(f"const int32x4_t t{scalar} = vldrwq_gather_shifted_offset_s32({tables[scalar]}, {bcast});")
        else:
            head.append(f"const int32x4_t t{scalar} = {operand_of_value(p, scalar, bcast, rescale)};")
    u = s["mve_unroll"]
    per = 4 * u
    main = size // per * per
    body = []
    if main:
        body.append(block(f"for (int32_t i = 0; i < {main}; i += {per})",
                          [block("", vec(f"i + {4 * k}" if k else "i", None)) for k in range(u)]))
    for r in range(main, size, 4):
        n = min(4, size - r)
        pred = None
        if n < 4:
            body.append(f"const mve_pred16_t tail = {ctx.isa.pred32(range(n))};")
            pred = "tail"
        body.append(block("", vec(str(r), pred)))
    inplace = _inplace((p.a_shape, p.b_shape), p.output_shape, range(2))
    return KernelCode(body=lines(head, body, "return 0;"), inplace=inplace, attributes=ctx.helper("mve_in_order"))


def operand_of_value(p: ElementwiseParams, k: int, value: str, rescale: list) -> str:
    """The arith form's term of input k for an int32x4_t of its values `value` (mul: x - zp)."""
    zp = (p.a_zero_point, p.b_zero_point)[k]
    if p.op == "mul":
        return f"vaddq_n_s32({value}, {-zp})" if zp else value
    r_fn, r_ops = rescale[k]
    term = r_ops.call(r_fn, f"vmlasq_n_s32({value}, scale_in, {-zp * (1 << p.left_shift)})", "0")
    return term if p.op != "sub" or k == 0 else f"vnegq_s32({term})"
