"""The recurrent op family: stateful operators whose state streams from one run of the model to the next.

  svdf  (x[B, I], w_feature[F, I], w_time[F, M], bias[U])  -> y[B, U]        (TFLite SVDF, U = F / rank)
        rank=int activation=str state_dtype=str state_scale=float state_zero_point=int

  The TFLite variable input activation_state[B, F*M] is node state (`state_spec`), not an input: each run
  shifts every filter's memory left by one, writes the new feature projection into the last cell, then
  reduces memory x w_time over time and over the rank. float32: all float32 (TFLM's float kernel,
  accumulating in order). int8: x int8, w_feature int8, w_time and the state int16 (TFLM's full-integer
  SVDF) or both int8, bias int32, output int8; the feature projection is requantized by
  input*w_feature/state scale, clamped to the state type, then its zero point is added, wrapping in that
  type (as the TFLM we test against does); the output by state*w_time/output scale. The bias is required
  (TFLM's kernel crashes without one). TFLM applies no fused activation in its integer kernel (the output
  is clamped to int8 only): neither do we. int16 inputs are refused, as TFLM refuses them. The state starts
  as TFLM resets variable tensors: 0, or the zero point for an int8 state.

  lstm  (x, w_input[4 gates], w_recurrent[4 gates], bias[4 gates])  -> y      (UNIDIRECTIONAL_SEQUENCE_LSTM)
        time_major=bool activation="tanh" cell_clip=float hidden_dtype/_scale/_zero_point
        cell_dtype/_scale/_zero_point

  x is [B, T, I] (or time-major [T, B, I]); gates in the order input, forget, cell, output; w_input [S, I],
  w_recurrent [S, S], bias [S]; y is x's layout with S features. The TFLite variables output_state[B, S]
  and cell_state[B, S] are node state. Per step: gate = act(FC(x_t) + FC(h)) (sigmoid; tanh for the cell
  gate), c = f*c + i*g (clipped by cell_clip), h = tanh(c)*o, y_t = h. TFLM's kernel exactly: float32
  (operation order as TFLM's, float32 throughout); int8 (int8 weights, int32 bias, int16 cell state with a
  power-of-two scale): each FC requantized into Q3.12 int16 (multiplier input*weight/2^-12), saturating
  add, TFLM's int16 sigmoid/tanh tables (Q0.15), int16 products requantized into the cell scale and the
  hidden scale (plus its zero point); int16 (16x8: int8 weights, int64 bias): the same with TFLM's 64-bit
  accumulator rescale (a 16-bit multiplier, one rounding). CIFG, peephole, projection and layer norm
  (which TFLM's LSTM refuses) are refused at import. The state starts at TFLM's reset: zeros, an int8
  output state at its zero point.

State encoding (what `state_spec` arrays and the C state block hold; all-zero = the reset state): float32
raw; integer states in int16, an int8 state minus its zero point (so that TFLM's reset value, the zero
point, is 0), an int16 state raw (TFLM resets it to 0 whatever its zero point). LSTM: [hidden, cell], each
[B, S].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant
from utvm.ops.activation import SIGMOID_TABLE_U16

OPS: tuple[str, ...] = ("svdf", "lstm")

_FLOAT_ACTIVATIONS = ("none", "relu", "relu_n1_to_1", "relu6", "tanh")


# --- svdf ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SvdfParams:
    dtype: str  # "float32" | "int8" (the input's)
    batch: int
    input_size: int
    filters: int
    units: int
    memory: int
    rank: int
    has_bias: bool
    activation: str  # float32 only (the integer kernel applies none)
    # integer only
    state_dtype: str = "float32"  # "int16" | "int8"
    input_zero_point: int = 0
    output_zero_point: int = 0
    state_zero_point: int = 0
    state_min: int = 0
    state_max: int = 0
    store_offset: int = 0  # subtracted from a state value before it is stored (the int8 state's zero point)
    time_offset: int = 0  # subtracted from a stored value in the time product (state zp - store_offset)
    multiplier_1: int = 0
    shift_1: int = 0
    multiplier_2: int = 0
    shift_2: int = 0
    rounding: str = "double"


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    if node.op == "lstm":
        return [_lstm_check(node, graph)[0]]
    if node.op != "svdf":
        raise c.fail(node, graph, f"op {node.op!r} is not in the recurrent family")
    return [_svdf_check(node, graph)[0]]


def _svdf_check(node: Node, graph: Graph) -> tuple[c.OutType, int, int, int, int, int, int]:
    c.check_count(node, graph, (3, 4))
    x, wf, wt = c.req(node, graph, 0), c.req(node, graph, 1), c.req(node, graph, 2)
    bias = c.inp(node, graph, 3, optional=True)
    rank = int(c.attr(node, graph, "rank"))
    c.check_dtype(node, graph, x, ("float32", "int8"), "input")
    if len(x.shape) != 2 or len(wf.shape) != 2 or len(wt.shape) != 2:
        raise c.fail(node, graph, f"input {list(x.shape)}, weights_feature {list(wf.shape)} and weights_time "
                                  f"{list(wt.shape)} must all be rank 2")
    b, i = x.shape
    f, m = wt.shape
    if wf.shape != (f, i):
        raise c.fail(node, graph, f"weights_feature {wf.name!r} has shape {list(wf.shape)}, expected [{f}, {i}] "
                                  "(filters from weights_time, input size from the input)")
    if not wf.is_constant or not wt.is_constant or (bias is not None and not bias.is_constant):
        raise c.fail(node, graph, "weights_feature, weights_time and bias must be constants")
    if rank < 1 or f % rank:
        raise c.fail(node, graph, f"rank {rank} must be >= 1 and divide the {f} filters")
    if m < 1:
        raise c.fail(node, graph, "weights_time has no memory (dimension 1 is 0)")
    u = f // rank
    if bias is not None and bias.shape != (u,):
        raise c.fail(node, graph, f"bias {bias.name!r} has shape {list(bias.shape)}, expected [{u}]")
    if bias is None:
        raise c.fail(node, graph, "SVDF needs its bias input (TFLite Micro dereferences it: a model without one "
                                  "crashes its interpreter)")
    state_dtype = str(c.attr(node, graph, "state_dtype"))
    if x.dtype == "float32":
        for t, role in ((wf, "weights_feature"), (wt, "weights_time")):
            c.check_dtype(node, graph, t, ("float32",), role)
        if bias is not None:
            c.check_dtype(node, graph, bias, ("float32",), "bias")
        if state_dtype != "float32":
            raise c.fail(node, graph, f"a float32 SVDF needs a float32 activation state, not {state_dtype}")
        act = str(c.attr(node, graph, "activation"))
        if act not in _FLOAT_ACTIVATIONS:
            raise c.fail(node, graph, f"fused activation {act!r} is not supported (supported: "
                                      f"{', '.join(_FLOAT_ACTIVATIONS)})")
    else:
        c.check_dtype(node, graph, wf, ("int8",), "weights_feature")
        c.check_dtype(node, graph, wt, ("int16", "int8"), "weights_time")
        if state_dtype != wt.dtype:
            raise c.fail(node, graph, f"the activation state is {state_dtype} but weights_time {wt.name!r} is "
                                      f"{wt.dtype}: TFLM reads the state as the weights_time type, they must match")
        c.check_dtype(node, graph, bias, ("int32",), "bias")
        y = c.out(node, graph)
        c.check_dtype(node, graph, y, ("int8",), "output")
    return ((b, u), x.dtype), b, i, f, m, u, rank


def prepare(node: Node, graph: Graph, rounding: str = "single") -> SvdfParams | LstmParams:
    if node.op == "lstm":
        return _lstm_prepare(node, graph, rounding)
    (_shape, dtype), b, i, f, m, u, rank = _svdf_check(node, graph)
    has_bias = c.inp(node, graph, 3, optional=True) is not None
    act = str(c.attr(node, graph, "activation"))
    if dtype == "float32":
        return SvdfParams("float32", b, i, f, u, m, rank, has_bias, act)
    x, wf, wt, bias = (c.req(node, graph, k) for k in range(4))
    y = c.out(node, graph)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    s_wf, _ = c.per_tensor(node, graph, wf, "weights_feature")
    s_wt, _ = c.per_tensor(node, graph, wt, "weights_time")
    s_b, _ = c.per_tensor(node, graph, bias, "bias")
    state_dtype = str(c.attr(node, graph, "state_dtype"))
    s_st = float(c.attr(node, graph, "state_scale"))
    zp_st = int(c.attr(node, graph, "state_zero_point"))
    if not (np.isfinite(s_st) and s_st > 0):
        raise c.fail(node, graph, f"activation state scale {s_st!r} must be finite and > 0")
    info = np.iinfo(np.dtype(state_dtype))
    if not info.min <= zp_st <= info.max:
        raise c.fail(node, graph, f"activation state zero point {zp_st} is outside the {state_dtype} range")
    f32 = np.float32
    # TFLM: float products and quotients of the float scales, then widened to double.
    eff1 = float(f32(f32(s_in) * f32(s_wf)) / f32(s_st))
    eff2 = float(f32(f32(s_st) * f32(s_wt)) / f32(s_out))
    if abs(float(s_b) - float(f32(f32(s_st) * f32(s_wt)))) >= 1e-5:
        raise c.fail(node, graph, f"bias scale {s_b:.9g} must equal activation state scale x weights_time scale "
                                  f"({float(f32(s_st) * f32(s_wt)):.9g}) within 1e-5, as TFLite Micro checks")
    rnd = _quant.kernel_rounding(rounding, "svdf")
    m1, sh1 = _quant.quantize_multiplier(eff1, rnd)
    m2, sh2 = _quant.quantize_multiplier(eff2, rnd)
    store = zp_st if state_dtype == "int8" else 0
    return SvdfParams("int8", b, i, f, u, m, rank, True, act, state_dtype, zp_in, zp_out, zp_st, int(info.min),
                      int(info.max), store, zp_st - store, m1, sh1, m2, sh2, rnd)


def state_spec(p: SvdfParams | LstmParams) -> list[tuple[tuple[int, ...], str]]:
    if isinstance(p, LstmParams):
        dt = "float32" if p.dtype == "float32" else "int16"
        return [((p.batch, p.units), dt), ((p.batch, p.units), dt)]
    return [((p.batch, p.filters, p.memory), "float32" if p.dtype == "float32" else "int16")]


def _float_act(y: np.ndarray, act: str) -> np.ndarray:
    if act == "relu":
        return np.maximum(y, np.float32(0))
    if act == "relu6":
        return np.minimum(np.maximum(y, np.float32(0)), np.float32(6))
    if act == "relu_n1_to_1":
        return np.minimum(np.maximum(y, np.float32(-1)), np.float32(1))
    if act == "tanh":
        return np.tanh(y).astype(np.float32)
    return y


def reference(p: SvdfParams | LstmParams, x: np.ndarray, *w: np.ndarray, state: list[np.ndarray]) -> np.ndarray:
    if isinstance(p, LstmParams):
        return _lstm_reference(p, x, *w, state=state)
    return _svdf_reference(p, x, *w, state=state)


def _svdf_reference(p: SvdfParams, x: np.ndarray, wf: np.ndarray, wt: np.ndarray, bias: np.ndarray | None = None, *,
                    state: list[np.ndarray]) -> np.ndarray:
    (st,) = state
    st[:, :, :-1] = st[:, :, 1:].copy()
    if p.dtype == "float32":
        f32 = np.float32
        acc = np.zeros((p.batch, p.filters), f32)
        for k in range(p.input_size):  # in order, in float32, as the C loop
            acc = (acc + wf[None, :, k] * x[:, k, None]).astype(f32)
        st[:, :, -1] = acc
        t = np.zeros((p.batch, p.filters), f32)
        for j in range(p.memory):
            t = (t + wt[None, :, j] * st[:, :, j]).astype(f32)
        y = np.broadcast_to(bias if bias is not None else np.zeros(p.units, f32), (p.batch, p.units)).astype(f32)
        t = t.reshape(p.batch, p.units, p.rank)
        for r in range(p.rank):
            y = (y + t[:, :, r]).astype(f32)
        return _float_act(y, p.activation).astype(f32)
    dot = (x.astype(np.int64) - p.input_zero_point) @ wf.astype(np.int64).T  # [B, F]
    v = _quant.multiply_by_quantized_multiplier(_quant.wrap32(dot), p.multiplier_1, p.shift_1, p.rounding)
    # TFLM (the pinned version) clamps to the state type, then adds the zero point, wrapping into the state
    v = np.clip(v, p.state_min, p.state_max) + p.state_zero_point
    v = ((v - p.state_min) % (p.state_max - p.state_min + 1)) + p.state_min
    st[:, :, -1] = (v - p.store_offset).astype(np.int16)
    t = np.einsum("bfm,fm->bf", st.astype(np.int64) - p.time_offset, wt.astype(np.int64))
    acc = _quant.wrap32(t.reshape(p.batch, p.units, p.rank).sum(axis=2) + bias.astype(np.int64)[None, :])
    out = _quant.multiply_by_quantized_multiplier(acc, p.multiplier_2, p.shift_2, p.rounding) + p.output_zero_point
    return np.clip(out, -128, 127).astype(np.int8)


# --- lstm ---------------------------------------------------------------------------------------------------

#: TFLite's combined sigmoid/tanh table (tanh(x) = 2 sigmoid(2x) - 1), read by TFLM's int16 Logistic and Tanh
#: with linear interpolation: one table, kept in utvm.ops.activation.
SIGMOID_LUT_U16: tuple[int, ...] = SIGMOID_TABLE_U16

#: TFLite input indices of UNIDIRECTIONAL_SEQUENCE_LSTM's weights and biases, in the canonical op's order
LSTM_TENSORS = ("input_to_input_weights", "input_to_forget_weights", "input_to_cell_weights",
                "input_to_output_weights", "recurrent_to_input_weights", "recurrent_to_forget_weights",
                "recurrent_to_cell_weights", "recurrent_to_output_weights", "input_gate_bias", "forget_gate_bias",
                "cell_gate_bias", "output_gate_bias")
GATES = ("input", "forget", "cell", "output")


@dataclass(frozen=True)
class LstmParams:
    dtype: str  # activations: "float32" | "int8" | "int16"
    batch: int
    time: int
    input_size: int
    units: int
    time_major: bool
    cell_clip: float  # float32 (0: none)
    # integer only (per gate, in GATES order: input-FC and recurrent-FC multipliers, shifts)
    input_zero_point: int = 0
    hidden_zero_point: int = 0
    hidden_store_offset: int = 0  # an int8 hidden state is stored minus its zero point (0 = TFLM's reset)
    hidden_min: int = 0
    hidden_max: int = 0
    in_multiplier: tuple[int, ...] = ()
    in_shift: tuple[int, ...] = ()
    rec_multiplier: tuple[int, ...] = ()
    rec_shift: tuple[int, ...] = ()
    forget_cell_multiplier: int = 0
    forget_cell_shift: int = 0
    input_cell_multiplier: int = 0
    input_cell_shift: int = 0
    hidden_multiplier: int = 0
    hidden_shift: int = 0
    tanh_multiplier: int = 3  # int16 tanh of the cell state: ((c * multiplier + round) >> shift)
    tanh_shift: int = 0
    quantized_cell_clip: int = 0
    rounding: str = "double"


def _lstm_check(node: Node, graph: Graph) -> tuple[c.OutType, int, int, int, int, bool]:
    c.check_count(node, graph, 13)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    if len(x.shape) != 3:
        raise c.fail(node, graph, f"input {x.name!r} must be rank 3 ([batch, time, features] or time-major "
                                  f"[time, batch, features]), got {list(x.shape)}")
    time_major = bool(c.attr(node, graph, "time_major"))
    t_steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    n_in = x.shape[2]
    w = [c.req(node, graph, k) for k in range(1, 13)]
    units = w[0].shape[0] if len(w[0].shape) == 2 else -1
    wdt = "float32" if x.dtype == "float32" else "int8"
    bdt = {"float32": "float32", "int8": "int32", "int16": "int64"}[x.dtype]
    for k, t in enumerate(w):
        role = LSTM_TENSORS[k]
        if not t.is_constant:
            raise c.fail(node, graph, f"{role} {t.name!r} must be a constant")
        want = (units, n_in) if k < 4 else ((units, units) if k < 8 else (units,))
        if t.shape != want:
            raise c.fail(node, graph, f"{role} {t.name!r} has shape {list(t.shape)}, expected {list(want)}")
        c.check_dtype(node, graph, t, (wdt if k < 8 else bdt,), role)
    state = {"float32": "float32", "int8": "int8", "int16": "int16"}[x.dtype]
    if str(c.attr(node, graph, "hidden_dtype")) != state:
        raise c.fail(node, graph, f"the output state is {c.attr(node, graph, 'hidden_dtype')}, the input "
                                  f"{x.dtype}: TFLM needs them of one type")
    cell = "float32" if x.dtype == "float32" else "int16"
    if str(c.attr(node, graph, "cell_dtype")) != cell:
        raise c.fail(node, graph, f"the cell state is {c.attr(node, graph, 'cell_dtype')}; a {x.dtype} LSTM "
                                  f"needs a {cell} cell state (TFLM)")
    act = str(c.attr(node, graph, "activation"))
    if act != "tanh":
        raise c.fail(node, graph, f"cell activation {act!r} is not supported: TFLM's LSTM applies TANH (or "
                                  "SIGMOID, which TFLite's schema cannot express)")
    if float(c.attr(node, graph, "cell_clip")) < 0:
        raise c.fail(node, graph, "cell_clip must be >= 0")
    out_shape = (*x.shape[:2], units)
    return (out_shape, x.dtype), batch, t_steps, n_in, units, time_major


def _checked_log2(x: float) -> int:
    """TFLite's CheckedLog2 result: log2(x) rounded half away from zero."""
    v = math.log(x) * (1.0 / math.log(2.0))
    return int(_quant.round_half_away(np.float64(v)))


def _lstm_prepare(node: Node, graph: Graph, rounding: str) -> LstmParams:
    (_shape, dtype), batch, t_steps, n_in, units, time_major = _lstm_check(node, graph)
    clip = float(np.float32(c.attr(node, graph, "cell_clip")))
    if dtype == "float32":
        return LstmParams(dtype, batch, t_steps, n_in, units, time_major, clip)
    x = c.req(node, graph, 0)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_h = float(c.attr(node, graph, "hidden_scale"))
    zp_h = int(c.attr(node, graph, "hidden_zero_point"))
    s_c = float(c.attr(node, graph, "cell_scale"))
    if not (s_h > 0 and s_c > 0 and np.isfinite(s_h) and np.isfinite(s_c)):
        raise c.fail(node, graph, f"the output state scale ({s_h!r}) and cell state scale ({s_c!r}) must be > 0")
    f32 = np.float32
    rnd = _quant.kernel_rounding(rounding, "lstm")
    gate_scale = f32(2.0 ** -12)  # the gates' pre-activation scale (Q3.12)
    in_m, in_s, rec_m, rec_s = [], [], [], []
    for g in range(4):
        w_in, w_rec = c.req(node, graph, 1 + g), c.req(node, graph, 5 + g)
        sw_in, zw_in = c.per_tensor(node, graph, w_in, LSTM_TENSORS[g])
        sw_rec, zw_rec = c.per_tensor(node, graph, w_rec, LSTM_TENSORS[4 + g])
        for t, z, role in ((w_in, zw_in, LSTM_TENSORS[g]), (w_rec, zw_rec, LSTM_TENSORS[4 + g])):
            if z != 0:
                raise c.fail(node, graph, f"{role} {t.name!r} has zero point {z}: int8 LSTM weights must be "
                                          "symmetric (zero point 0)")
        # TFLM: double(float(input scale x weight scale)) / double(2^-12)
        m, sh = _quant.quantize_multiplier(float(f32(s_in) * f32(sw_in)) / float(gate_scale), rnd)
        in_m.append(m)
        in_s.append(sh)
        m, sh = _quant.quantize_multiplier(float(f32(s_h) * f32(sw_rec)) / float(gate_scale), rnd)
        rec_m.append(m)
        rec_s.append(sh)
    q15 = float(f32(2.0 ** -15))
    s_c32, s_h32 = float(f32(s_c)), float(f32(s_h))
    m_fc, s_fc = _quant.quantize_multiplier(q15 * s_c32 / s_c32, rnd)
    m_ic, s_ic = _quant.quantize_multiplier(q15 * q15 / s_c32, rnd)
    m_h, s_h_ = _quant.quantize_multiplier(q15 * q15 / s_h32, rnd)
    power = _checked_log2(s_c32)
    left = 15 + power - 3
    t_mult, t_shift = (3, -left) if left < 0 else (3 << left, 0)
    qclip = 0
    if clip > 0:
        qclip = int(min(max(float(clip) / s_c32, -32768.0), 32767.0))  # static_cast<int16_t>: truncation
    info = np.iinfo(np.dtype(dtype))
    store = zp_h if dtype == "int8" else 0
    return LstmParams(dtype, batch, t_steps, n_in, units, time_major, clip, zp_in, zp_h, store, int(info.min),
                      int(info.max), tuple(in_m), tuple(in_s), tuple(rec_m), tuple(rec_s), m_fc, s_fc, m_ic, s_ic,
                      m_h, s_h_, t_mult, t_shift, qclip, rnd)


def _lut() -> np.ndarray:
    return np.asarray(SIGMOID_LUT_U16, dtype=np.int64)


def sigmoid16(x: np.ndarray) -> np.ndarray:
    """TFLM's int16 Logistic for a Q3.12 input (input multiplier 0 -> x3): Q0.15 output."""
    lut = _lut()
    v = np.asarray(x, np.int64) * 3
    a = np.abs(v)
    uh = a >> 9
    i = np.minimum(uh, 254)
    r = np.where(uh >= 255, 0x7FFF << 10, (lut[i] << 9) + (a & 0x1FF) * (lut[i + 1] - lut[i]))
    r = np.where(v >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return (r >> 10).astype(np.int16)


def tanh16(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLM's int16 Tanh with its input multiplier and right shift: Q0.15 output."""
    lut = _lut()
    rnd = (1 << (shift - 1)) if shift > 0 else 0
    v = (np.asarray(x, np.int64) * multiplier + rnd) >> shift
    a = np.abs(v)
    uh = a >> 8
    i = np.minimum(uh, 254)
    r = np.where(uh >= 255, 0xFFFF << 8, (lut[i] << 8) + (a & 0xFF) * (lut[i + 1] - lut[i]))
    r = np.where(v >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return (r >> 8).astype(np.int16)


def _sat16(v: np.ndarray) -> np.ndarray:
    return np.clip(v, -32768, 32767)


def _mbqm64(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier for an int64 accumulator (16x8 kernels): a 16-bit multiplier,
    one rounding."""
    reduced = ((multiplier + (1 << 15)) >> 16) if multiplier < 0x7FFF0000 else 0x7FFF
    total = 15 - shift
    return (np.asarray(x, np.int64) * reduced + (1 << (total - 1))) >> total


def _float_sigmoid(v: np.ndarray) -> np.ndarray:
    f32 = np.float32
    with np.errstate(over="ignore"):
        mid = (f32(1) / (f32(1) + np.exp(-v).astype(f32))).astype(f32)
    return np.where(v > f32(16.619047164916992188), f32(1), np.where(v < f32(-9), np.exp(v).astype(f32), mid))


def _lstm_reference(p: LstmParams, x: np.ndarray, *w: np.ndarray, state: list[np.ndarray]) -> np.ndarray:
    h, cst = state
    xs = x if p.time_major else np.swapaxes(x, 0, 1)  # [T, B, I]
    out = np.zeros((p.time, p.batch, p.units), x.dtype)
    w_in, w_rec, bias = w[0:4], w[4:8], w[8:12]
    f32 = np.float32
    for t in range(p.time):
        xt = xs[t]
        gates = []
        if p.dtype == "float32":
            for g in range(4):
                a = np.zeros((p.batch, p.units), f32)
                for k in range(p.input_size):
                    a = (a + xt[:, k, None] * w_in[g][None, :, k]).astype(f32)
                a = (a + bias[g][None, :]).astype(f32)
                r = np.zeros((p.batch, p.units), f32)
                for k in range(p.units):
                    r = (r + h[:, k, None] * w_rec[g][None, :, k]).astype(f32)
                v = (a + r).astype(f32)
                gates.append(np.tanh(v).astype(f32) if g == 2 else _float_sigmoid(v))
            ig, fg, cg, og = gates
            cnew = ((fg * cst).astype(f32) + (ig * cg).astype(f32)).astype(f32)
            if p.cell_clip > 0:
                cnew = np.clip(cnew, f32(-p.cell_clip), f32(p.cell_clip))
            cst[...] = cnew
            hv = (np.tanh(cnew).astype(f32) * og).astype(f32)
            h[...] = hv
            out[t] = hv
            continue
        hq = h.astype(np.int64) - (p.hidden_zero_point - p.hidden_store_offset)  # h - zp
        xq = xt.astype(np.int64) - p.input_zero_point
        for g in range(4):
            acc_in = xq @ w_in[g].astype(np.int64).T + bias[g].astype(np.int64)[None, :]
            acc_rec = hq @ w_rec[g].astype(np.int64).T
            if p.dtype == "int8":
                a = _quant.multiply_by_quantized_multiplier(_quant.wrap32(acc_in), p.in_multiplier[g],
                                                            p.in_shift[g], p.rounding)
                r = _quant.multiply_by_quantized_multiplier(_quant.wrap32(acc_rec), p.rec_multiplier[g],
                                                            p.rec_shift[g], p.rounding)
            else:
                a = _mbqm64(acc_in, p.in_multiplier[g], p.in_shift[g])
                r = _mbqm64(acc_rec, p.rec_multiplier[g], p.rec_shift[g])
            v = _sat16(_sat16(a) + _sat16(r))
            gates.append(tanh16(v, 3, 0) if g == 2 else sigmoid16(v))
        ig, fg, cg, og = (g.astype(np.int64) for g in gates)

        def mul(a: np.ndarray, b: np.ndarray, m: int, s: int) -> np.ndarray:
            return _quant.multiply_by_quantized_multiplier(a * b, m, s, p.rounding)

        cnew = _sat16(_sat16(mul(fg, cst.astype(np.int64), p.forget_cell_multiplier, p.forget_cell_shift))
                      + _sat16(mul(ig, cg, p.input_cell_multiplier, p.input_cell_shift)))
        if p.quantized_cell_clip > 0:
            cnew = np.clip(cnew, -p.quantized_cell_clip, p.quantized_cell_clip)
        cst[...] = cnew
        tc = tanh16(cnew, p.tanh_multiplier, p.tanh_shift).astype(np.int64)
        hv = np.clip(mul(tc, og, p.hidden_multiplier, p.hidden_shift) + p.hidden_zero_point, p.hidden_min,
                     p.hidden_max)
        h[...] = (hv - p.hidden_store_offset).astype(np.int16)
        out[t] = hv.astype(x.dtype)
    return out if p.time_major else np.swapaxes(out, 0, 1).copy()
